/**
 * EDM typing at the storage boundary: project entities (every value carries its EDM type) to and from the
 * `@azure/data-tables` wire shapes (egt-request.ts writes an EGT's entities with toSdkValue too). The SDK guesses
 * types from JS values (an integer number becomes Int32, so a whole Double such as 111444 would silently turn
 * Int32); this module never lets it guess.
 */
import { TableEntity } from '@azure/data-tables';
import { ErrorCode, TablegraphError } from '../errors';
import { EntityToWrite, StoredEntity, TypedValue } from './storage-types';

const INT32_MIN = -(2 ** 31);
const INT32_MAX = 2 ** 31 - 1;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;
/** The Table service's DateTime range: 1601-01-01T00:00:00Z to 9999-12-31T23:59:59.999Z (ms since epoch). */
const DATETIME_MIN_MS = Date.UTC(1601, 0, 1);
const DATETIME_MAX_MS = Date.UTC(9999, 11, 31, 23, 59, 59, 999);
const GUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The wire form the SDK passes through untouched: `{ value, type }` is sent with an `@odata.type` annotation. */
interface SdkTyped {
  value: unknown;
  type: string;
}

/**
 * Throws unless `v.value` is a valid JS value for `v.type` (see TypedValue): Int32 an integer in
 * [-2^31, 2^31), Int64 a bigint in [-2^63, 2^63), Double a number (NaN and ±Infinity allowed), DateTime a
 * valid Date in the service's range, Boolean a boolean, String a string, Guid a canonical GUID string,
 * Binary a Uint8Array.
 * @throws TablegraphError BAD_USER_INPUT with details { property, type }, plus `extra`.
 */
export function checkTypedValue(property: string, v: TypedValue, extra: Record<string, unknown> = {}): void {
  const x = v.value;
  let ok: boolean;
  switch (v.type) {
    case 'Int32':
      ok = typeof x === 'number' && Number.isInteger(x) && x >= INT32_MIN && x <= INT32_MAX;
      break;
    case 'Int64':
      ok = typeof x === 'bigint' && x >= INT64_MIN && x <= INT64_MAX;
      break;
    case 'Double':
      ok = typeof x === 'number';
      break;
    case 'DateTime':
      ok = x instanceof Date && x.getTime() >= DATETIME_MIN_MS && x.getTime() <= DATETIME_MAX_MS;
      break;
    case 'Boolean':
      ok = typeof x === 'boolean';
      break;
    case 'String':
      ok = typeof x === 'string';
      break;
    case 'Guid':
      ok = typeof x === 'string' && GUID.test(x);
      break;
    case 'Binary':
      ok = x instanceof Uint8Array;
      break;
    default:
      ok = false;
  }
  if (!ok) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Property '${property}' does not hold a valid Edm.${String(v.type)} value.`, {
      ...extra,
      property,
      type: v.type,
    });
  }
}

/**
 * One typed value in the SDK's wire form. Strings and booleans go plain (JSON carries their type); every
 * number, Int64, DateTime, Guid and Binary goes as `{ value, type }` so the service stores exactly `v.type`.
 * Double NaN/±Infinity are sent as the strings "NaN", "Infinity", "-Infinity" (JSON has no literal for them).
 * @throws TablegraphError BAD_USER_INPUT when the value does not fit its type (see checkTypedValue).
 */
export function toSdkValue(property: string, v: TypedValue): unknown {
  checkTypedValue(property, v);
  switch (v.type) {
    case 'String':
    case 'Boolean':
      return v.value;
    case 'Int32':
      return { value: v.value, type: 'Int32' } satisfies SdkTyped;
    case 'Double': {
      const n = v.value as number;
      const value = Number.isFinite(n) ? n : Number.isNaN(n) ? 'NaN' : n > 0 ? 'Infinity' : '-Infinity';
      return { value, type: 'Double' } satisfies SdkTyped;
    }
    case 'Int64':
      return { value: (v.value as bigint).toString(), type: 'Int64' } satisfies SdkTyped;
    case 'DateTime':
      return { value: (v.value as Date).toISOString(), type: 'DateTime' } satisfies SdkTyped;
    case 'Guid':
      return { value: v.value, type: 'Guid' } satisfies SdkTyped;
    case 'Binary':
      return { value: Buffer.from(v.value as Uint8Array).toString('base64'), type: 'Binary' } satisfies SdkTyped;
  }
}

/**
 * EntityToWrite → the SDK's TableEntity: `partitionKey`, `rowKey` and every non-null property in wire form
 * (see toSdkValue); `null` properties are omitted, as the service does.
 * @throws TablegraphError BAD_USER_INPUT when a value does not fit its declared EDM type.
 */
export function toSdkEntity(e: EntityToWrite): TableEntity<Record<string, unknown>> {
  const out: TableEntity<Record<string, unknown>> = { partitionKey: e.partitionKey, rowKey: e.rowKey };
  for (const [name, v] of Object.entries(e.properties)) {
    if (v !== null) out[name] = toSdkValue(name, v);
  }
  return out;
}

function decodeDouble(s: string): number {
  if (s === 'INF' || s === 'Infinity') return Infinity;
  if (s === '-INF' || s === '-Infinity') return -Infinity;
  return Number(s);
}

/** Decodes one `{ value, type }` the SDK returns with `disableTypeConversion: true`. */
function decodeValue(raw: unknown): unknown {
  if (raw === null || typeof raw !== 'object' || !('type' in raw) || !('value' in raw)) return raw;
  const { value, type } = raw as SdkTyped;
  if (value === null || value === undefined) return undefined;
  switch (type) {
    case 'Int32':
    case 'Double':
      // Without full metadata the service sends Double 111444 as the JSON number 111444.0, which the SDK
      // then labels Int32: both decode to the same JS number, so the label does not matter here.
      return typeof value === 'number' ? value : decodeDouble(String(value));
    case 'Int64':
      return BigInt(String(value));
    case 'DateTime':
      return new Date(String(value));
    case 'Boolean':
      return value === true || value === 'true';
    case 'Binary':
      return new Uint8Array(Buffer.from(String(value), 'base64'));
    default: // String, Guid
      return String(value);
  }
}

/**
 * An entity as the SDK returns it with `disableTypeConversion: true` → StoredEntity. Int32/Double → number,
 * Int64 → bigint, DateTime → Date, Boolean → boolean, String/Guid → string, Binary → Uint8Array. `etag`
 * becomes StoredEntity.etag and the service's `timestamp` StoredEntity.timestamp (seven fractional digits); OData
 * metadata (`odata.*`, `*@odata.type`) is dropped; null properties (a `$select` of a missing property) are omitted.
 */
export function fromSdkEntity(raw: Record<string, unknown>): StoredEntity {
  const properties: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(raw)) {
    if (name === 'partitionKey' || name === 'rowKey' || name === 'etag' || name === 'timestamp') continue;
    if (name.startsWith('odata.') || name.includes('@odata.')) continue;
    const decoded = decodeValue(v);
    if (decoded !== undefined && decoded !== null) properties[name] = decoded;
  }
  const timestamp = serviceTimestamp(raw.timestamp);
  return {
    partitionKey: String(raw.partitionKey ?? ''),
    rowKey: String(raw.rowKey ?? ''),
    etag: String(raw.etag ?? ''),
    ...(timestamp === undefined ? {} : { timestamp }),
    properties,
  };
}

/**
 * An entity as the Table service's REST API returns it (JSON, OData minimal metadata: a property's EDM type in
 * `<name>@odata.type` where JSON does not carry it) → StoredEntity, decoded as fromSdkEntity decodes the SDK's form:
 * Int32/Double → number, Int64 → bigint, DateTime → Date, Boolean → boolean, String/Guid → string, Binary → Uint8Array;
 * OData metadata dropped; null properties omitted.
 * @param etag the answer's ETag header
 */
export function fromWireEntity(json: Record<string, unknown>, etag: string): StoredEntity {
  const properties: Record<string, unknown> = {};
  for (const [name, v] of Object.entries(json)) {
    if (name === 'PartitionKey' || name === 'RowKey' || name === 'Timestamp' || name.startsWith('odata.') || name.includes('@odata.')) continue;
    if (v === null || v === undefined) continue;
    const type = json[`${name}@odata.type`];
    properties[name] = typeof type === 'string' ? decodeValue({ value: v, type: type.slice('Edm.'.length) }) : v;
  }
  const timestamp = serviceTimestamp(json.Timestamp);
  return {
    partitionKey: String(json.PartitionKey ?? ''),
    rowKey: String(json.RowKey ?? ''),
    etag,
    ...(timestamp === undefined ? {} : { timestamp }),
    properties,
  };
}

/**
 * The service's Timestamp as text that sorts as it orders: `…:56.77Z` → `…:56.7700000Z` (Azure writes seven digits,
 * other services fewer). Undefined for anything else.
 */
function serviceTimestamp(value: unknown): string | undefined {
  const text = value instanceof Date ? value.toISOString() : value;
  if (typeof text !== 'string') return undefined;
  const m = /^(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2})(?:\.(\d{1,7}))?Z$/.exec(text);
  return m ? `${m[1]}.${(m[2] ?? '').padEnd(7, '0')}Z` : undefined;
}

/** A `$select` list (projection) that always includes the keys, which the service omits otherwise. */
export function selectWithKeys(select: string[] | undefined): string[] | undefined {
  return select === undefined ? undefined : [...new Set(['PartitionKey', 'RowKey', ...select])];
}
