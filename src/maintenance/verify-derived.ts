/**
 * `verify`: checks that every index entity equals what its primary entity derives (docs/architecture.md, "Maintenance")
 * — the intra-partition indexes kept in the entity's EGT and the inter-partition ones the message worker keeps ("Index
 * Entities Pattern", "Eventually consistent transactions pattern") — and that every summary value equals a recount of
 * what it summarises (summary-state.ts), every copy its target (copy-state.ts), and that no blob of a `@blob` field
 * outlived its cleanup unnamed (blob-state.ts). It reads whole tables on purpose (index-state.ts): a maintenance
 * command, never a request path.
 *
 * Inter-partition indexes lag behind their primaries by the work queue during normal operation, and verify
 * reports the state at the moment it reads each table: run it after the queue drained (no writes in flight),
 * or expect recent writes to show up as missing, different or orphaned.
 */
import { SingleBar } from 'cli-progress';
import type { Model } from '../model/types';
import type { StorageObserver } from '../storage/storage-types';
import type { TableStore } from '../storage/table-store';
import { problemCount, readIndexState, resolveEntity, type IndexDiff, type ScanProgress } from './index-state';
import { readReferenceState, type ReferenceDiff } from './reference-state';
import { readCopyState, type CopyDiff } from './copy-state';
import { readSummaryState, summaryProblems, type SummaryDiff } from './summary-state';
import { readBlobState, type BlobDiff } from './blob-state';
import type { BlobStore } from '../storage/blob-store';

export interface VerifyOptions {
  store: TableStore;
  model: Model;
  /** Entity types to check (default: all of the model's); each with all its indexes. */
  types?: string[];
  onProgress?(p: ScanProgress): void;
  observer?: StorageObserver;
  /** The blobs of `@blob` fields, checked for orphans when given (blob-state.ts). */
  blobs?: { store: BlobStore; cleanupDelaySeconds: number };
}

export interface VerifyReport {
  /** True when no index and no summary shows any problem. */
  ok: boolean;
  /** Problems in all indexes and summaries (entities): see problemCount and summaryProblems. */
  problems: number;
  /** Entities read by the scans, all tables (entities). */
  scanned: number;
  /** Wall time (seconds). */
  seconds: number;
  /** One entry per index, in schema order. */
  indexes: IndexDiff[];
  /** One entry per summary of the types checked (holder or summarised type), in schema order. */
  summaries: SummaryDiff[];
  /** One entry per copy (`@copy`) of the types checked. */
  copies: CopyDiff[];
  /** One entry per `@blob` field of the types checked (empty without a blob store): orphaned blobs are problems. */
  blobs: BlobDiff[];
  /** One entry per reference a write checks, of the types checked: a dangling one (a join entity's included) is a problem. */
  references: ReferenceDiff[];
}

/**
 * Compares every index of `types` (all entity types by default) with what the primary entities derive, and every
 * summary held by or summarising one of them with a recount.
 * @throws TablegraphError BAD_USER_INPUT for an unknown type (the message lists the known ones); storage
 *   errors from the scans (STORAGE_UNAVAILABLE, CONFIG_INVALID, …). A table that does not exist reads as empty.
 */
export async function verifyDerived(opts: VerifyOptions): Promise<VerifyReport> {
  const started = performance.now();
  const entities = (opts.types ?? [...opts.model.entities.keys()]).map((t) => resolveEntity(opts.model, t));
  const indexes = entities.flatMap((e) => [...e.indexes.values()]);
  let scanned = 0;
  const states = await readIndexState({
    store: opts.store,
    indexes,
    observer: opts.observer,
    onProgress: (p) => {
      scanned = p.scanned;
      opts.onProgress?.(p);
    },
  });
  const diffs = states.map((s) => s.diff);
  const checked = new Set(entities);
  const names = [...opts.model.summaries].filter(([, s]) => checked.has(s.holder) || checked.has(s.of)).map(([name]) => name);
  const before = scanned;
  const summaries =
    names.length === 0
      ? []
      : await readSummaryState({
          store: opts.store,
          model: opts.model,
          summaries: names,
          observer: opts.observer,
          onProgress: (p) => {
            scanned = before + p.scanned;
            opts.onProgress?.({ ...p, scanned });
          },
        });
  const copies = await readCopyState(
    opts.store,
    opts.model,
    entities.map((e) => e.name),
    opts.observer,
  );
  const blobs = opts.blobs
    ? await readBlobState({
        store: opts.store,
        blobs: opts.blobs.store,
        model: opts.model,
        types: entities.map((e) => e.name),
        cleanupDelaySeconds: opts.blobs.cleanupDelaySeconds,
        observer: opts.observer,
      })
    : [];
  const references = await readReferenceState(
    opts.store,
    opts.model,
    entities.map((e) => e.name),
    opts.observer,
  );
  const problems =
    diffs.reduce((n, d) => n + problemCount(d), 0) +
    summaries.reduce((n, d) => n + summaryProblems(d), 0) +
    copies.reduce((n, d) => n + d.different.length, 0) +
    blobs.reduce((n, d) => n + d.orphaned.length, 0) +
    references.reduce((n, d) => n + d.dangling.length, 0);
  return { ok: problems === 0, problems, scanned, seconds: (performance.now() - started) / 1000, indexes: diffs, summaries, copies, blobs, references };
}

/** `PartitionKey 'x' RowKey 'y'`, quoted as JSON so spaces and escapes stay visible. */
function keys(a: { partitionKey: string; rowKey: string }): string {
  return `PartitionKey ${JSON.stringify(a.partitionKey)} RowKey ${JSON.stringify(a.rowKey)}`;
}

/**
 * A readable report: one line of counts per index, then each problem entity's address and what differs, at most
 * `limit` per index (default 50) followed by how many more there are, then an overall line.
 */
export function formatVerifyReport(report: VerifyReport, limit = 50): string {
  const lines: string[] = [];
  for (const { head, details } of reportSections(report)) {
    lines.push(head);
    for (const line of details.slice(0, limit)) lines.push(`       ${line}`);
    if (details.length > limit) lines.push(`       … and ${details.length - limit} more`);
  }
  lines.push(overallLine(report));
  return lines.join('\n');
}

/** One line of counts per index, summary, copy, `@blob` field and reference, with a line per problem found. */
function reportSections(report: VerifyReport): Array<{ head: string; details: string[] }> {
  const ok = (fine: boolean) => (fine ? 'ok  ' : 'FAIL');
  return [
    ...report.indexes.map((d) => ({
      head:
        `${ok(problemCount(d) === 0)} ${d.type}.${d.index} (${d.scope}, table ${d.table}): ` +
        `${d.primaries} primaries, ${d.expected} expected, ${d.found} found; ` +
        `${d.missing.length} missing, ${d.different.length} different, ${d.orphaned.length} orphaned` +
        (d.duplicates.length ? `, ${d.duplicates.length} duplicate` : '') +
        (d.underivable.length ? `, ${d.underivable.length} underivable` : ''),
      details: [
        ...d.missing.map((a) => `missing    ${keys(a)}`),
        ...d.different.map((a) => `different  ${keys(a)}: ${a.properties.join(', ')}`),
        ...d.orphaned.map((a) => `orphaned   ${keys(a)}`),
        ...d.duplicates.map((a) => `duplicate  ${keys(a)}: derived by ${a.primaries.map(keys).join('; ')}`),
        ...d.underivable.map((u) => `underivable primary ${keys(u.primary)}: ${u.message}`),
      ],
    })),
    ...report.summaries.map((d) => ({
      head:
        `${ok(summaryProblems(d) === 0)} ${d.summary} (summary, table ${d.table}): ${d.holders} holders, ${d.counted} counted; ` +
        `${d.different.length} different, ${d.orphaned.length} without a holder`,
      details: [
        ...d.different.map((a) => `different  ${keys(a)}: stored ${a.stored}, recount ${a.expected}`),
        ...d.orphaned.map((a) => `no holder  ${keys(a)}`),
      ],
    })),
    ...report.copies.map((d) => ({
      head: `${ok(d.different.length === 0)} ${d.copy} (copy, table ${d.table}): ${d.checked} checked; ${d.different.length} different from their targets`,
      details: d.different.map((a) => `different  ${keys(a)}: stored ${a.stored}, target ${a.expected}`),
    })),
    ...report.blobs.map((d) => ({
      head: `${ok(d.orphaned.length === 0)} ${d.field} (@blob, container ${d.container}): ${d.named} named, ${d.listed} listed; ${d.orphaned.length} orphaned, ${d.pending} too recent to judge`,
      details: d.orphaned.map((b) => `orphaned   ${b.name} (last written ${b.lastModified})`),
    })),
    ...report.references.map((d) => ({
      head: `${ok(d.dangling.length === 0)} ${d.reference} (${d.join ? "join entities' reference" : 'reference'}, table ${d.table}): ${d.checked} checked; ${d.dangling.length} dangling`,
      details: d.dangling.map((a) => `dangling   ${keys(a)}: nothing at ${a.target.table} ${keys(a.target)}`),
    })),
  ];
}

/** The last line: all match, or what fails by kind and by name, each with the command that repairs it. */
function overallLine(report: VerifyReport): string {
  const what = `${report.indexes.length} ${report.indexes.length === 1 ? 'index' : 'indexes'}, ${report.summaries.length} ${report.summaries.length === 1 ? 'summary' : 'summaries'}, ${report.copies.length} ${report.copies.length === 1 ? 'copy' : 'copies'}, ${report.references.length} ${report.references.length === 1 ? 'reference' : 'references'} and ${report.blobs.length} @blob ${report.blobs.length === 1 ? 'field' : 'fields'}`;
  if (report.ok) return `verify: ok — ${what} match their primaries (${report.scanned} entities read in ${report.seconds.toFixed(1)} s)`;
  const kinds = failingKinds(report);
  const where = kinds.map((k) => `${k.failing.length} of ${k.of} ${k.of === 1 ? k.one : k.many} (${k.failing.join(', ')})`).join(', ');
  const repairs = kinds.map((k) => k.repair).join(', ');
  return `verify: ${report.problems} problems in ${where} (${report.scanned} entities read in ${report.seconds.toFixed(1)} s); repair with ${repairs}`;
}

/** Each kind with problems: the names failing, of how many, and the command that repairs them. */
function failingKinds(report: VerifyReport): Array<{ failing: string[]; of: number; one: string; many: string; repair: string }> {
  return [
    {
      failing: report.indexes.filter((d) => problemCount(d) > 0).map((d) => `${d.type}.${d.index}`),
      of: report.indexes.length,
      one: 'index',
      many: 'indexes',
      repair: 'rebuild-index <Type>',
    },
    {
      failing: report.summaries.filter((d) => summaryProblems(d) > 0).map((d) => d.summary),
      of: report.summaries.length,
      one: 'summary',
      many: 'summaries',
      repair: 'repair-summaries',
    },
    {
      failing: report.copies.filter((d) => d.different.length > 0).map((d) => d.copy),
      of: report.copies.length,
      one: 'copy',
      many: 'copies',
      repair: 'rebuild-index <Type> copies',
    },
    {
      failing: report.blobs.filter((d) => d.orphaned.length > 0).map((d) => d.field),
      of: report.blobs.length,
      one: '@blob field',
      many: '@blob fields',
      repair: 'the blob cleanup (or delete the orphans)',
    },
    {
      failing: report.references.filter((d) => d.dangling.length > 0).map((d) => d.reference),
      of: report.references.length,
      one: 'reference',
      many: 'references',
      repair: 'a delete of each dangling entity (the worker deletes join entities once their target is deleted)',
    },
  ].filter((k) => k.failing.length > 0);
}

/** Shows the progress of a maintenance scan; `stop` ends the bar (or logs the last line). */
export interface ScanReporter {
  update(p: ScanProgress & { upserted?: number; deleted?: number }): void;
  stop(): void;
}

/**
 * Progress of `verify` and `rebuild-index` on stderr: a cli-progress line when stderr is a terminal (a count, not
 * a bar: a table's size is unknown until it was read), otherwise a log line every `intervalMs` (default 2000).
 * @param opts.log where lines go when stderr is not a TTY; @param opts.tty force one or the other
 */
export function createScanReporter(opts: { label: string; log: { info(obj: object, msg: string): void }; intervalMs?: number; tty?: boolean }): ScanReporter {
  let latest: ScanProgress & { upserted?: number; deleted?: number } = { table: '', scanned: 0 };
  const writes = () => (latest.upserted === undefined ? '' : ` | ${latest.upserted} upserted, ${latest.deleted ?? 0} deleted`);
  if (opts.tty ?? Boolean(process.stderr.isTTY)) {
    const bar = new SingleBar({ stream: process.stderr, format: `${opts.label} | {value} entities read | {table}{writes}`, hideCursor: true });
    bar.start(0, 0, { table: '', writes: '' });
    return {
      update(p) {
        latest = p;
        bar.update(p.scanned, { table: p.table, writes: writes() });
      },
      stop: () => bar.stop(),
    };
  }
  const intervalMs = opts.intervalMs ?? 2000;
  let lastLogged = performance.now();
  const line = () => opts.log.info({ ...latest }, `${opts.label}: ${latest.scanned} entities read (table ${latest.table})${writes()}`);
  return {
    update(p) {
      latest = p;
      if (performance.now() - lastLogged < intervalMs) return;
      lastLogged = performance.now();
      line();
    },
    stop: line,
  };
}
