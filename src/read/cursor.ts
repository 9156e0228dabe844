/**
 * Opaque, tamper-evident Relay cursors. A cursor holds the position a page ended at (a RangePosition: the RowKey,
 * or where the service does not return ranges sorted, the service page and the offset in it) and is bound to the
 * range it came from (table, PartitionKey, RowKey range). It is sealed with AES-256-GCM, the range as its associated
 * data: any change, or its use on another list, is refused with BAD_USER_INPUT, and nothing of it can be read. A
 * position names an entity — a page of a reader whose `@auth` scope filtered every entity out still ends at one —
 * so a cursor must not tell the caller which.
 *
 * The nonce is synthetic (an HMAC of the range and the position, as in SIV): one position in one range always gives
 * the same cursor, so an answer's text — and its HTTP ETag — stays the same while the data does. That tells a caller
 * only that two cursors it holds are equal. A RowKey position keeps a cursor valid for as long as the secret is; a
 * page position for as long as the service honours its continuation token.
 */
import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';
import type { RangePosition } from '../storage/storage-types';

function isPosition(p: unknown): p is RangePosition {
  if (typeof p !== 'object' || p === null) return false;
  const x = p as Record<string, unknown>;
  if (Object.keys(x).length === 1 && typeof x.rowKey === 'string') return true;
  return Object.keys(x).length === 3 && typeof x.token === 'string' && Number.isSafeInteger(x.pageSize) && Number.isSafeInteger(x.skip);
}

/**
 * A sealed value's text is padded with spaces (which JSON.parse reads past) to a multiple of this many bytes: a
 * cursor's length would otherwise tell the length of the RowKey it holds — a department's name, say, on a page whose
 * every entity `@auth` left out. RowKeys of up to about 100 characters all give cursors of one length.
 */
const PAD_BYTES = 128;

function padded(plain: Buffer): Buffer {
  const length = Math.max(PAD_BYTES, Math.ceil(plain.length / PAD_BYTES) * PAD_BYTES);
  if (length === plain.length) return plain;
  const out = Buffer.alloc(length, 0x20);
  plain.copy(out);
  return out;
}

/** The first byte of every sealed cursor: its format. */
const FORMAT = 3;
const NONCE_BYTES = 12;
const TAG_BYTES = 16;

/** Seals and opens cursors with one secret. */
export class CursorCodec {
  private readonly sealKey: Buffer;
  private readonly nonceKey: Buffer;

  /** @param secret the key material; random when absent (cursors then last as long as the process). */
  constructor(secret?: string) {
    const material = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
    const keys = Buffer.from(hkdfSync('sha256', material, Buffer.alloc(0), 'tablegraph cursors', 64));
    this.sealKey = keys.subarray(0, 32);
    this.nonceKey = keys.subarray(32);
  }

  /**
   * @param scope identifies the range (table, PartitionKey, bounds): a cursor only resumes the range it came from
   * @param position where to resume: right after the entity the cursor points at
   * @returns a URL-safe string
   */
  encode(scope: string, position: RangePosition): string {
    return this.seal(scope, [2, position]);
  }

  /**
   * @returns the position the cursor holds
   * @throws TablegraphError BAD_USER_INPUT when the cursor is malformed, altered or from another list
   */
  decode(scope: string, cursor: string): RangePosition {
    const value = this.open(scope, cursor, 'after');
    if (Array.isArray(value) && value[0] === 2 && isPosition(value[1])) return value[1];
    throw invalidCursor('after');
  }

  /**
   * Seals any JSON value for `scope` (a subscription's change cursor, say): what `open` gives back.
   * @returns a URL-safe string
   */
  seal(scope: string, value: unknown): string {
    const plain = padded(Buffer.from(JSON.stringify(value), 'utf8'));
    const nonce = createHmac('sha256', this.nonceKey).update(scope).update('\u0000').update(plain).digest().subarray(0, NONCE_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.sealKey, nonce);
    cipher.setAAD(Buffer.from(scope, 'utf8'));
    const sealed = Buffer.concat([cipher.update(plain), cipher.final()]);
    return Buffer.concat([Buffer.from([FORMAT]), nonce, sealed, cipher.getAuthTag()]).toString('base64url');
  }

  /**
   * @param argument the argument the cursor came in, named by the error
   * @returns the value `seal` was given for the same scope
   * @throws TablegraphError BAD_USER_INPUT when the cursor is malformed, altered, sealed with another secret or for
   *   another scope
   */
  open(scope: string, cursor: string, argument: string): unknown {
    const bytes = /^[A-Za-z0-9_-]+$/.test(cursor) ? Buffer.from(cursor, 'base64url') : Buffer.alloc(0);
    if (bytes.length < 1 + NONCE_BYTES + TAG_BYTES || bytes[0] !== FORMAT || bytes.toString('base64url') !== cursor) throw invalidCursor(argument);
    try {
      const decipher = createDecipheriv('aes-256-gcm', this.sealKey, bytes.subarray(1, 1 + NONCE_BYTES));
      decipher.setAAD(Buffer.from(scope, 'utf8'));
      decipher.setAuthTag(bytes.subarray(bytes.length - TAG_BYTES));
      const plain = Buffer.concat([decipher.update(bytes.subarray(1 + NONCE_BYTES, bytes.length - TAG_BYTES)), decipher.final()]);
      return JSON.parse(plain.toString('utf8'));
    } catch {
      throw invalidCursor(argument);
    }
  }
}

function invalidCursor(argument: string): TablegraphError {
  return new TablegraphError(
    ErrorCode.BAD_USER_INPUT,
    'The cursor is not valid for this list: pass an endCursor or edge cursor this list returned, unchanged.',
    {
      argument,
    },
  );
}
