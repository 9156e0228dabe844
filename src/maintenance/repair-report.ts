/**
 * The text `npm run repair-summaries` prints: per summary what the recount found, then what the repair wrote —
 * counted as written, in entities: holders rewritten (and the summary values in them), contribution entities written
 * or removed, and the holders left because they kept changing.
 */
import { addressKey } from '../storage/address-key';
import type { RepairResult, SummaryDiff } from './summary-state';

const plural = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;

/**
 * @param result what repairSummaries returned: its diffs are the recount's before the repair
 * @returns lines, the last one the total
 * @example
 * formatRepair(result) // ['Holder.total: 12 holders, 1 drifted, …', 'repaired 1 holder (1 summary value) and 1 contribution entity; 0 kept changing']
 */
export function formatRepair(result: RepairResult & { diffs: SummaryDiff[] }): string[] {
  const lines = result.diffs.map(
    (d) =>
      `${d.summary}: ${d.holders} holders, ${d.different.length} drifted, ${d.orphaned.length} counted entities without a holder, ${d.contributions.length} contribution entities amiss`,
  );
  const repaired = new Set(result.repaired.map(addressKey));
  // A holder of two drifted summaries is one holder rewritten, two values.
  const values = result.diffs.reduce((n, d) => n + d.different.filter((a) => repaired.has(addressKey(a))).length, 0);
  const busy = result.busy.length;
  lines.push(
    `repaired ${plural(repaired.size, 'holder', 'holders')} (${plural(values, 'summary value', 'summary values')}) and ` +
      `${plural(result.contributions, 'contribution entity', 'contribution entities')}; ${busy} kept changing${busy ? ' (run it again)' : ''}`,
  );
  return lines;
}
