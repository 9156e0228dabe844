/**
 * Client-side encryption of entity properties (the guide's "Encrypting Table Data": encrypted strings are stored as
 * binary properties, and the service never sees the text). AES-256-GCM from node:crypto, a fresh 96-bit IV per
 * value, and the entity's PartitionKey, RowKey and the property's name as additional authenticated data — so a
 * value changed in storage, or copied to another entity or property, fails to decrypt instead of reading as
 * something else. Each value names the key that sealed it, so keys can rotate: the first key of the ring seals, any
 * key of the ring opens.
 *
 * Stored form (Edm.Binary): `TGE1` | key id length (1 byte) | key id (ASCII) | IV (12 bytes) | tag (16 bytes) |
 * ciphertext of the UTF-8 text.
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { ErrorCode, TablegraphError, type ReasonName } from '../errors';
import type { EntityToWrite, StoredEntity } from './storage-types';

/** One key of the ring: its id (1-32 of `A-Z a-z 0-9 _ -`) and its 32 bytes. */
export interface CipherKey {
  id: string;
  key: Buffer;
}

const MAGIC = Buffer.from('TGE1', 'ascii');
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;
/** The property that says which type an entity is (storage-types.ts ENTITY_TYPE_PROPERTY; the storage layer knows it by name). */
const ENTITY_TYPE = 'EntityType';

/**
 * Parses a key ring written as `id:base64,id:base64` (the first key seals new values).
 * @throws TablegraphError CONFIG_INVALID naming `variable`: an empty ring, a malformed entry or id, a key that is
 *   not 32 bytes, a repeated id
 */
export function parseKeyRing(text: string, variable: string): CipherKey[] {
  const keys: CipherKey[] = [];
  for (const entry of text
    .split(',')
    .map((e) => e.trim())
    .filter(Boolean)) {
    const colon = entry.indexOf(':');
    const id = entry.slice(0, colon);
    const key = Buffer.from(entry.slice(colon + 1), 'base64');
    const bad = (why: string) =>
      new TablegraphError(ErrorCode.CONFIG_INVALID, `${variable}: ${why}; write it as id:base64[,id:base64…], e.g. k1:${'A'.repeat(43)}=`);
    if (colon < 1 || !KEY_ID.test(id)) throw bad(`"${entry.slice(0, Math.max(colon, 0)) || entry.slice(0, 8)}…" is not a key id (1-32 of A-Z a-z 0-9 _ -)`);
    if (key.length !== 32) throw bad(`key ${id} is ${key.length} bytes, not 32 (AES-256)`);
    if (keys.some((k) => k.id === id)) throw bad(`key id ${id} appears twice`);
    keys.push({ id, key });
  }
  if (keys.length === 0) throw new TablegraphError(ErrorCode.CONFIG_INVALID, `${variable} holds no key`);
  return keys;
}

/** Seals and opens the encrypted properties of the entity types that have them. */
export class PropertyCipher {
  private readonly sealing: CipherKey;
  private readonly byId: Map<string, Buffer>;
  private readonly anyEncrypted: Set<string>;

  /**
   * @param keys the key ring, the sealing key first
   * @param encrypted entity type (the `EntityType` value) → the names of its encrypted properties
   */
  constructor(
    keys: CipherKey[],
    private readonly encrypted: ReadonlyMap<string, ReadonlySet<string>>,
  ) {
    this.sealing = keys[0];
    this.byId = new Map(keys.map((k) => [k.id, k.key]));
    this.anyEncrypted = new Set([...encrypted.values()].flatMap((s) => [...s]));
  }

  /**
   * The entity as it is to be stored: each encrypted property of its type sealed into Edm.Binary.
   * @throws TablegraphError BAD_USER_INPUT when an encrypted property is not text; CONFIG_INVALID (a bug) when an
   *   entity without an `EntityType` (a merge) carries a property some type encrypts
   */
  seal(entity: EntityToWrite): EntityToWrite {
    const type = entity.properties[ENTITY_TYPE]?.value;
    const names = typeof type === 'string' ? this.encrypted.get(type) : undefined;
    if (!names) {
      const unsure = Object.keys(entity.properties).find((p) => this.anyEncrypted.has(p) && entity.properties[p] !== null);
      if (unsure && typeof type !== 'string') {
        throw new TablegraphError(ErrorCode.CONFIG_INVALID, `a write without an EntityType carries "${unsure}", which is encrypted: it cannot be sealed`);
      }
      return entity;
    }
    const properties = { ...entity.properties };
    for (const name of names) {
      const typed = properties[name];
      if (!typed) continue;
      if (typed.type !== 'String' || typeof typed.value !== 'string') {
        throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${name} is encrypted: it holds text`, { field: name });
      }
      properties[name] = { type: 'Binary', value: this.sealValue(typed.value, aad(entity.partitionKey, entity.rowKey, name)) };
    }
    return { ...entity, properties };
  }

  /**
   * The entity as read, each encrypted property of its type opened back into its text.
   * @throws TablegraphError DATA_INTEGRITY (details: partitionKey, rowKey, property, reason) when a value is not
   *   a sealed value (written around tablegraph), fails authentication (changed, or moved from another entity or
   *   property), or names a key the ring does not hold
   */
  open(entity: StoredEntity): StoredEntity {
    const type = entity.properties[ENTITY_TYPE];
    const names = typeof type === 'string' ? this.encrypted.get(type) : undefined;
    if (!names || ![...names].some((n) => n in entity.properties)) return entity;
    const properties = { ...entity.properties };
    for (const name of names) {
      if (!(name in properties)) continue;
      properties[name] = this.openValue(properties[name], aad(entity.partitionKey, entity.rowKey, name), {
        partitionKey: entity.partitionKey,
        rowKey: entity.rowKey,
        property: name,
      });
    }
    return { ...entity, properties };
  }

  private sealValue(text: string, additional: Buffer): Uint8Array {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.sealing.key, iv);
    cipher.setAAD(additional);
    const body = Buffer.concat([cipher.update(text, 'utf8'), cipher.final()]);
    const id = Buffer.from(this.sealing.id, 'ascii');
    return new Uint8Array(Buffer.concat([MAGIC, Buffer.from([id.length]), id, iv, cipher.getAuthTag(), body]));
  }

  private openValue(value: unknown, additional: Buffer, where: Record<string, string>): string {
    const fail = (reason: ReasonName, message: string) =>
      new TablegraphError(ErrorCode.DATA_INTEGRITY, `The stored value of ${where.property} cannot be trusted: ${message}.`, { ...where, reason });
    if (!(value instanceof Uint8Array)) throw fail('NotSealed', 'it is not an encrypted value (it was written around tablegraph)');
    const bytes = Buffer.from(value);
    const idLength = bytes[MAGIC.length];
    const start = MAGIC.length + 1 + idLength;
    if (bytes.length < start + IV_BYTES + TAG_BYTES || !bytes.subarray(0, MAGIC.length).equals(MAGIC)) throw fail('NotSealed', 'it is not an encrypted value');
    const id = bytes.subarray(MAGIC.length + 1, start).toString('ascii');
    const key = this.byId.get(id);
    if (!key) throw fail('UnknownKey', `it was sealed with key "${id}", which TABLEGRAPH_ENCRYPTION_KEYS does not hold`);
    const decipher = createDecipheriv('aes-256-gcm', key, bytes.subarray(start, start + IV_BYTES));
    decipher.setAAD(additional);
    decipher.setAuthTag(bytes.subarray(start + IV_BYTES, start + IV_BYTES + TAG_BYTES));
    try {
      return Buffer.concat([decipher.update(bytes.subarray(start + IV_BYTES + TAG_BYTES)), decipher.final()]).toString('utf8');
    } catch {
      throw fail('TagMismatch', 'it was changed, or belongs to another entity or property');
    }
  }
}

/** What a sealed value is bound to: its entity's keys and its property. */
function aad(partitionKey: string, rowKey: string, property: string): Buffer {
  return Buffer.from(`tablegraph/1\u0000${partitionKey}\u0000${rowKey}\u0000${property}`, 'utf8');
}
