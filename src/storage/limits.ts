/**
 * The Table service's limits, per configured target, checked before a request leaves the process — the guide's
 * "Capacity considerations" table (entity ≤ 1 MB and 255 properties, keys ≤ 1 KB, EGT ≤ 100 entities and
 * 4 MB, one operation per entity). Azurite accepts what Azure refuses (1.2 MB entities, 300 properties) and
 * refuses what Azure accepts (keys over 512 characters), so relying on the service would let code that works
 * on a laptop fail in production, or the reverse.
 */
import { ErrorCode, TablegraphError } from '../errors';
import { checkTypedValue } from './edm';
import { FORBIDDEN_KEY_CHARS } from './key-escape';
import { EntityToWrite, StorageTarget, TransactionOperation, TypedValue } from './storage-types';

/** Size and count limits of one target. Bytes are UTF-8 bytes unless a field says otherwise. */
export interface TargetLimits {
  /** PartitionKey at most this many UTF-8 bytes. */
  partitionKeyBytes: number;
  /** RowKey at most this many UTF-8 bytes. */
  rowKeyBytes: number;
  /** 'chars': the target also caps each key at `maxKeyChars` UTF-16 characters (Azurite); 'bytes': no such cap. */
  keyLengthUnit: 'bytes' | 'chars';
  /** Characters (UTF-16 code units) per key when keyLengthUnit is 'chars'; Infinity otherwise. */
  maxKeyChars: number;
  /** Estimated entity size (see estimateEntityBytes) at most this many bytes: 1 MiB. */
  maxEntityBytes: number;
  /** Properties per entity including PartitionKey, RowKey and Timestamp: 255, so 252 user properties. */
  maxProperties: number;
  /** String and Binary values at most this many bytes (64 KiB; strings count 2 bytes per UTF-16 char). */
  maxValueBytes: number;
  /** Operations per EGT: 100. */
  maxTransactionOperations: number;
  /** Estimated EGT payload at most this many bytes: 4 MiB on Azure and Azurite, 2 MiB on Cosmos DB. */
  maxTransactionBytes: number;
}

const KIB = 1024;
const MIB = 1024 * KIB;
/** Properties the service adds to every entity; they count against maxProperties. */
const SYSTEM_PROPERTIES = 3;

const AZURE: TargetLimits = {
  partitionKeyBytes: KIB,
  rowKeyBytes: KIB,
  keyLengthUnit: 'bytes',
  maxKeyChars: Infinity,
  maxEntityBytes: MIB,
  maxProperties: 255,
  maxValueBytes: 64 * KIB,
  maxTransactionOperations: 100,
  maxTransactionBytes: 4 * MIB,
};

const LIMITS: Record<StorageTarget, TargetLimits> = {
  azure: AZURE,
  // Azurite 3.37 refuses keys over 512 characters (TableHandler.validateKey) although Azure accepts them.
  azurite: { ...AZURE, keyLengthUnit: 'chars', maxKeyChars: 512 },
  // Cosmos DB Table API: RowKey at most 255 bytes, EGT payload at most 2 MB.
  cosmos: { ...AZURE, rowKeyBytes: 255, maxTransactionBytes: 2 * MIB },
};

/** The limits of `target` (a shared, frozen-by-convention object: do not mutate). */
export function limitsFor(target: StorageTarget): TargetLimits {
  return LIMITS[target];
}

/** A property name: a C#-style identifier (letters, digits, underscore; not starting with a digit). */
const PROPERTY_NAME = /^[\p{L}_][\p{L}\p{Nd}_]*$/u;
const MAX_PROPERTY_NAME_CHARS = 255;
/** Names the service or the SDK owns: the SDK renames partitionKey/rowKey/timestamp/etag on the wire. */
const RESERVED_NAMES = new Set(['partitionkey', 'rowkey', 'timestamp', 'etag']);
/** Table names: 3–63 letters and digits, starting with a letter. */
const TABLE_NAME = /^[A-Za-z][A-Za-z0-9]{2,62}$/;

/**
 * Throws unless `key` is a valid PartitionKey/RowKey for `target`: no forbidden character (/ \ # ? control
 * characters), at most the target's UTF-8 bytes and, on Azurite, at most 512 characters. An empty key is valid.
 * @throws TablegraphError BAD_USER_INPUT (forbidden character, details { key: kind, position }) or
 *   LIMIT_EXCEEDED (too long, details { key: kind, length, limit, unit }); `details` also carries `extra`.
 */
export function checkKey(kind: 'PartitionKey' | 'RowKey', key: string, target: StorageTarget, extra: Record<string, unknown> = {}): void {
  if (typeof key !== 'string') {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${kind} must be a string.`, { ...extra, key: kind });
  }
  const bad = FORBIDDEN_KEY_CHARS.exec(key);
  if (bad) {
    const code = bad[0].charCodeAt(0).toString(16).padStart(4, '0');
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${kind} contains U+${code} at position ${bad.index}; keys may not contain / \\ # ? or control characters.`,
      { ...extra, key: kind, position: bad.index },
    );
  }
  const limits = limitsFor(target);
  const maxBytes = kind === 'PartitionKey' ? limits.partitionKeyBytes : limits.rowKeyBytes;
  const bytes = Buffer.byteLength(key, 'utf8');
  if (bytes > maxBytes) {
    throw new TablegraphError(ErrorCode.LIMIT_EXCEEDED, `${kind} is ${bytes} bytes (UTF-8); the ${target} target allows at most ${maxBytes}.`, {
      ...extra,
      key: kind,
      length: bytes,
      limit: maxBytes,
      unit: 'bytes',
    });
  }
  if (key.length > limits.maxKeyChars) {
    throw new TablegraphError(ErrorCode.LIMIT_EXCEEDED, `${kind} is ${key.length} characters; the ${target} target allows at most ${limits.maxKeyChars}.`, {
      ...extra,
      key: kind,
      length: key.length,
      limit: limits.maxKeyChars,
      unit: 'chars',
    });
  }
}

/** Throws BAD_USER_INPUT unless `table` is a valid table name (3–63 letters and digits, starting with a letter). */
export function checkTableName(table: string): void {
  if (!TABLE_NAME.test(table)) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `'${table}' is not a valid table name: use 3 to 63 letters and digits, starting with a letter.`, {
      table,
    });
  }
}

/** Bytes one value occupies in the service's size formula (see estimateEntityBytes). */
function valueBytes(v: TypedValue): number {
  switch (v.type) {
    case 'String':
      return String(v.value).length * 2 + 4;
    case 'Binary':
      return (v.value as Uint8Array).byteLength + 4;
    case 'Guid':
      return 16;
    case 'Boolean':
      return 1;
    case 'Int32':
      return 4;
    default: // Int64, Double, DateTime
      return 8;
  }
}

/**
 * The entity's size in bytes by the Table service's formula, the one it checks the 1 MB limit against:
 * `4 + (len(PartitionKey) + len(RowKey)) * 2 + Σ over properties (8 + len(name) * 2 + sizeof(value))`, lengths
 * in UTF-16 characters; sizeof: String chars*2+4, Binary bytes+4, Guid 16, DateTime/Double/Int64 8, Int32 4,
 * Boolean 1. Null properties are not stored and cost nothing. Source: "How the size of an entity is calculated
 * in Windows Azure table storage" (MSDN blog, A. Chauhan, 2011), the formula behind the guide's "Capacity
 * considerations" entity limit.
 */
export function estimateEntityBytes(e: EntityToWrite): number {
  const known = sizes.get(e);
  if (known !== undefined) return known;
  let bytes = 4 + (e.partitionKey.length + e.rowKey.length) * 2;
  for (const [name, v] of Object.entries(e.properties)) {
    if (v !== null) bytes += 8 + name.length * 2 + valueBytes(v);
  }
  sizes.set(e, bytes);
  return bytes;
}

/**
 * What was found of entities already measured and checked. An entity to write is made whole and not changed after
 * (entity-codec.ts; a change is a new object), while one write's entity is measured and checked several times on its
 * way: by its plan, its group's EGT, and the store before it is sent.
 */
const sizes = new WeakMap<EntityToWrite, number>();
const checked = new WeakMap<EntityToWrite, StorageTarget>();

/**
 * Throws unless `e` can be written to `target`: valid keys (checkKey), property names that are identifiers of
 * at most 255 characters and not reserved (PartitionKey, RowKey, Timestamp, etag in any case), values that fit
 * their EDM type, String/Binary values ≤ 64 KiB, ≤ 252 user properties, estimated size ≤ 1 MiB.
 * @throws TablegraphError BAD_USER_INPUT (a bad name, character or value) or LIMIT_EXCEEDED (a size or count),
 *   details { partitionKey, rowKey, property? } plus the specifics.
 */
export function checkEntity(e: EntityToWrite, target: StorageTarget): void {
  if (checked.get(e) === target) return;
  const where = { partitionKey: e.partitionKey, rowKey: e.rowKey };
  checkKey('PartitionKey', e.partitionKey, target, where);
  checkKey('RowKey', e.rowKey, target, where);
  const limits = limitsFor(target);
  let count = 0;
  for (const [property, v] of Object.entries(e.properties)) {
    if (!PROPERTY_NAME.test(property) || property.length > MAX_PROPERTY_NAME_CHARS) {
      throw new TablegraphError(
        ErrorCode.BAD_USER_INPUT,
        `'${property.slice(0, 80)}' is not a valid property name: use 1 to ${MAX_PROPERTY_NAME_CHARS} letters, ` +
          'digits and underscores, not starting with a digit.',
        { ...where, property },
      );
    }
    if (RESERVED_NAMES.has(property.toLowerCase())) {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `'${property}' is a reserved property name.`, {
        ...where,
        property,
      });
    }
    if (v === null) continue;
    count++;
    checkTypedValue(property, v, where);
    if ((v.type === 'String' || v.type === 'Binary') && valueBytes(v) - 4 > limits.maxValueBytes) {
      throw new TablegraphError(
        ErrorCode.LIMIT_EXCEEDED,
        `Property '${property}' is ${valueBytes(v) - 4} bytes; a value may be at most ${limits.maxValueBytes}.`,
        { ...where, property, length: valueBytes(v) - 4, limit: limits.maxValueBytes },
      );
    }
  }
  const maxUser = limits.maxProperties - SYSTEM_PROPERTIES;
  if (count > maxUser) {
    throw new TablegraphError(
      ErrorCode.LIMIT_EXCEEDED,
      `The entity has ${count} properties; at most ${maxUser} are allowed besides PartitionKey, RowKey and Timestamp.`,
      { ...where, properties: count, limit: maxUser },
    );
  }
  const bytes = estimateEntityBytes(e);
  if (bytes > limits.maxEntityBytes) {
    throw new TablegraphError(
      ErrorCode.LIMIT_EXCEEDED,
      `The entity is about ${bytes} bytes; the limit is ${limits.maxEntityBytes} (see "Large entities pattern").`,
      { ...where, bytes, limit: limits.maxEntityBytes },
    );
  }
  checked.set(e, target);
}

/** Per-operation MIME framing in an EGT body (part headers, request line with the URL, sub-request headers). */
const OPERATION_OVERHEAD_BYTES = 512;

function operationKeys(op: TransactionOperation): { partitionKey: string; rowKey: string } {
  return op.kind === 'delete' ? op : op.entity;
}

/**
 * The estimated payload of one EGT operation in bytes: 512 bytes of framing, 3 × the keys' UTF-8 bytes (URL-encoded
 * keys), and estimateEntityBytes of the entity it writes. What checkTransaction adds up against the target's limit.
 */
export function operationBytes(op: TransactionOperation): number {
  const keys = operationKeys(op);
  const framing = OPERATION_OVERHEAD_BYTES + 3 * Buffer.byteLength(keys.partitionKey + keys.rowKey, 'utf8');
  return op.kind === 'delete' ? framing : framing + estimateEntityBytes(op.entity);
}

/**
 * Throws unless `ops` form a valid EGT on `target` (the guide's "Entity Group Transactions"): 1 to 100
 * operations, one PartitionKey, one operation per entity (no repeated RowKey), every entity valid
 * (checkEntity; delete keys by checkKey), and an estimated payload within the target's limit — per operation
 * 512 bytes of framing plus 3 × the keys' UTF-8 bytes (URL-encoded keys) plus estimateEntityBytes.
 * @throws TablegraphError BAD_USER_INPUT (empty, two partitions, a repeated entity, a bad entity) or
 *   LIMIT_EXCEEDED (too many operations, too many bytes, an entity over a limit); details.operationIndex
 *   names the offending operation where there is one.
 */
export function checkTransaction(ops: TransactionOperation[], target: StorageTarget): void {
  const limits = limitsFor(target);
  if (ops.length === 0) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, 'An entity-group transaction needs at least one operation.');
  }
  if (ops.length > limits.maxTransactionOperations) {
    throw new TablegraphError(
      ErrorCode.LIMIT_EXCEEDED,
      `An entity-group transaction holds at most ${limits.maxTransactionOperations} operations; got ${ops.length}.`,
      { operations: ops.length, limit: limits.maxTransactionOperations },
    );
  }
  const partitionKey = operationKeys(ops[0]).partitionKey;
  const rowKeys = new Set<string>();
  let bytes = 0;
  ops.forEach((op, operationIndex) => {
    const keys = operationKeys(op);
    const where = { operationIndex, partitionKey: keys.partitionKey, rowKey: keys.rowKey };
    if (keys.partitionKey !== partitionKey) {
      throw new TablegraphError(
        ErrorCode.BAD_USER_INPUT,
        `Operation ${operationIndex} targets PartitionKey '${keys.partitionKey}', not '${partitionKey}': ` + 'an EGT covers one partition.',
        where,
      );
    }
    if (rowKeys.has(keys.rowKey)) {
      throw new TablegraphError(
        ErrorCode.BAD_USER_INPUT,
        `Operation ${operationIndex} repeats RowKey '${keys.rowKey}'; an EGT may touch each entity once.`,
        where,
      );
    }
    rowKeys.add(keys.rowKey);
    try {
      if (op.kind === 'delete') {
        checkKey('PartitionKey', op.partitionKey, target, where);
        checkKey('RowKey', op.rowKey, target, where);
      } else {
        checkEntity(op.entity, target);
      }
    } catch (e) {
      if (e instanceof TablegraphError) e.details.operationIndex = operationIndex;
      throw e;
    }
    bytes += operationBytes(op);
  });
  if (bytes > limits.maxTransactionBytes) {
    throw new TablegraphError(
      ErrorCode.LIMIT_EXCEEDED,
      `The EGT is about ${bytes} bytes; the ${target} target allows at most ${limits.maxTransactionBytes}. Split it.`,
      { bytes, limit: limits.maxTransactionBytes, partitionKey },
    );
  }
}
