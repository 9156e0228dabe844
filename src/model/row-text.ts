/**
 * One stored row as a line of text, and back (the backup format, src/backup/backup-format.ts; a change entity's image,
 * change-log.ts): `{"t": table, "pk": PartitionKey, "rk": RowKey, "p": [[name, EDM type, value as text], …]}`. Values
 * are as stored — an `@encrypted` property is its sealed bytes (Edm.Binary, base64). A line that does not have this
 * shape is refused with DATA_INTEGRITY (reason BackupCorrupt): nothing is restored that cannot be vouched for.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { EdmType, EntityToWrite, TypedValue } from '../storage/storage-types';

/** One row: a table (its name after the table prefix) and the entity stored there. */
export interface BackupRow {
  table: string;
  entity: EntityToWrite;
}

const EDM_TYPES: ReadonlySet<string> = new Set<EdmType>(['String', 'Int32', 'Int64', 'Double', 'Boolean', 'DateTime', 'Guid', 'Binary']);

function valueText(v: TypedValue): string {
  if (v.value instanceof Date) return v.value.toISOString();
  if (v.value instanceof Uint8Array) return Buffer.from(v.value).toString('base64');
  return String(v.value);
}

function typedValue(type: EdmType, text: string): TypedValue {
  switch (type) {
    case 'Int32':
    case 'Double':
      return { type, value: Number(text) };
    case 'Int64':
      return { type, value: BigInt(text) };
    case 'Boolean':
      return { type, value: text === 'true' };
    case 'DateTime':
      return { type, value: new Date(text) };
    case 'Binary':
      return { type, value: new Uint8Array(Buffer.from(text, 'base64')) };
    default:
      return { type, value: text };
  }
}

/** One row as a segment line (no newline). */
export function encodeRow(row: BackupRow): string {
  const p = Object.entries(row.entity.properties).flatMap(([name, v]) => (v ? [[name, v.type, valueText(v)]] : []));
  return JSON.stringify({ t: row.table, pk: row.entity.partitionKey, rk: row.entity.rowKey, p });
}

export function corrupt(where: string, why: string): TablegraphError {
  return new TablegraphError(ErrorCode.DATA_INTEGRITY, `${where}: ${why}; the backup cannot be restored from it.`, { reason: 'BackupCorrupt', where });
}

/** A segment line back as a row. @throws TablegraphError DATA_INTEGRITY (reason BackupCorrupt) naming `where` */
export function decodeRow(line: string, where: string): BackupRow {
  let raw: unknown;
  try {
    raw = JSON.parse(line);
  } catch {
    throw corrupt(where, 'a line is not JSON');
  }
  const r = raw as { t?: unknown; pk?: unknown; rk?: unknown; p?: unknown };
  if (typeof r.t !== 'string' || typeof r.pk !== 'string' || typeof r.rk !== 'string' || !Array.isArray(r.p)) throw corrupt(where, 'a line is not a row');
  const properties: EntityToWrite['properties'] = {};
  for (const item of r.p as unknown[]) {
    const [name, type, text] = Array.isArray(item) ? item : [];
    if (typeof name !== 'string' || typeof type !== 'string' || !EDM_TYPES.has(type) || typeof text !== 'string')
      throw corrupt(where, 'a property is malformed');
    properties[name] = typedValue(type as EdmType, text);
  }
  return { table: r.t, entity: { partitionKey: r.pk, rowKey: r.rk, properties } };
}
