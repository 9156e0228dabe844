/** The text `npm run migrate` prints: a plan (migration-plan.ts), and the paths' states (catalogue.ts). */
import type { PathRecord, ServerRecord } from './catalogue-records';
import type { MigrationPlan } from './migration-plan';
import { progressOf } from './path-states';

const n = (x: number) => x.toLocaleString('en-US');

/** The plan as text: one line per change, its cost under it. */
export function formatPlan(plan: MigrationPlan): string {
  if (plan.from === 0) return 'No deployment recorded: the first server or worker records this schema as version 1 (every path ready).\n';
  if (plan.same) return `The schema is the recorded version ${plan.from}: nothing to do.\n`;
  const lines = [`version ${plan.from} → ${plan.to}: ${plan.changes.length} change(s)`];
  for (const c of plan.changes) {
    lines.push(`  ${c.class.padEnd(10)} ${c.pathId ?? c.coordinate}: ${c.description}`);
    if (c.remedy && c.class === 'refused') lines.push(`             to make it possible: ${c.remedy}`);
    if (c.remedy && c.class === 'rekey') lines.push(`             ${c.remedy}`);
    if (c.cost) {
      const time = c.cost.secondsAtBudget === null ? 'no budget' : `${n(c.cost.secondsAtBudget)} s at the budget`;
      const copy = c.class === 'rekey' ? 'copy: ' : '';
      lines.push(
        `             ${copy}reads ${n(c.cost.entitiesRead)} entities, writes ${n(c.cost.entitiesWritten)}; ${n(c.cost.transactions)} transactions, ${n(c.cost.requestUnits)} RU; ${time}`,
      );
    }
    if (c.cost?.switch) {
      const sw = c.cost.switch;
      lines.push(
        `             switch, once no process of version ${plan.from} is left, ${c.coordinate} served by no server meanwhile: reads ${n(sw.entitiesRead)}, deletes ${n(sw.entitiesDeleted)}; ${n(sw.transactions)} transactions, ${n(sw.requestUnits)} RU`,
      );
    }
    if (c.cost?.rebuilt?.length) lines.push(`             then rebuilt (reads through them refused until each is ready): ${c.cost.rebuilt.join(', ')}`);
  }
  return `${lines.join('\n')}\n`;
}

/** What a build does once it has read everything: waits (for what, since when), switches, or finishes. */
function scannedText(p: PathRecord): string {
  const done = p.kind === 'rekey' ? 'copied' : 'all read';
  if (p.waitingSince === undefined) return p.kind === 'rekey' ? '; copied: switching' : '; all read: finishing';
  const since = `${new Date(p.waitingSince).toISOString().slice(0, 19)}Z, ${n(Math.max(0, Math.round((Date.now() - p.waitingSince) / 1000)))} s ago`;
  const then = p.kind === 'rekey' ? ', then switches' : ', then finishes';
  return `; ${done}: waiting since ${since} for ${p.waitingFor ?? 'the processes of an older version'} to stop${then}`;
}

/** The paths' states as text. */
export function formatStatus(version: number | undefined, paths: PathRecord[], servers: ServerRecord[]): string {
  const lines = [version === undefined ? 'No deployment recorded.' : `Deployed version ${version}.`];
  for (const s of servers) lines.push(`  process ${s.instance}: version ${s.version}, seen ${Math.round((Date.now() - s.seenAt) / 1000)} s ago`);
  for (const p of paths) {
    const { read, written, percent } = progressOf(p);
    const finishing = p.scanned ? scannedText(p) : '';
    const progress = p.state === 'building' ? ` — ${n(read)} read, ${n(written)} written${percent === null ? '' : `, ${percent}%`}${finishing}` : '';
    lines.push(`  ${p.state.padEnd(9)} ${p.id}${progress}${p.problem ? ` — ${p.problem.message}` : ''}`);
  }
  return `${lines.join('\n')}\n`;
}
