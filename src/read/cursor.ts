/**
 * Opaque, tamper-evident Relay cursors. A cursor holds the position a page ended at (a RangePosition: the RowKey,
 * or where the service does not return ranges sorted, the service page and the offset in it) and is bound to the
 * range it came from (table, PartitionKey, RowKey range), signed with HMAC-SHA256; any change, or its use on
 * another list, is refused with BAD_USER_INPUT. A RowKey position keeps a cursor valid for as long as the secret
 * is; a page position for as long as the service honours its continuation token.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';
import type { RangePosition } from '../storage/types';

function isPosition(p: unknown): p is RangePosition {
  if (typeof p !== 'object' || p === null) return false;
  const x = p as Record<string, unknown>;
  if (Object.keys(x).length === 1 && typeof x.rowKey === 'string') return true;
  return Object.keys(x).length === 3 && typeof x.token === 'string' && Number.isSafeInteger(x.pageSize) && Number.isSafeInteger(x.skip);
}

/** Signs and checks cursors with one secret. */
export class CursorCodec {
  private readonly secret: Buffer;

  /** @param secret the HMAC key; random when absent (cursors then last as long as the process). */
  constructor(secret?: string) {
    this.secret = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  /**
   * @param scope identifies the range (table, PartitionKey, bounds): a cursor only resumes the range it came from
   * @param position where to resume: right after the entity the cursor points at
   * @returns a URL-safe string
   */
  encode(scope: string, position: RangePosition): string {
    const payload = Buffer.from(JSON.stringify([2, position]), 'utf8').toString('base64url');
    return `${payload}.${this.sign(scope, payload)}`;
  }

  /**
   * @returns the position the cursor holds
   * @throws TablegraphError BAD_USER_INPUT when the cursor is malformed, altered or from another list
   */
  decode(scope: string, cursor: string): RangePosition {
    const invalid = () =>
      new TablegraphError(ErrorCode.BAD_USER_INPUT, 'The cursor is not valid for this list: pass an endCursor or edge cursor this list returned, unchanged.', {
        argument: 'after',
      });
    const dot = cursor.indexOf('.');
    if (dot <= 0) throw invalid();
    const payload = cursor.slice(0, dot);
    // Compare the signature's text, not its decoded bytes: 22 base64url chars decode to 16 bytes, dropping the
    // last char's low 4 bits, so a byte comparison would accept 16 different spellings of one signature.
    const given = Buffer.from(cursor.slice(dot + 1), 'utf8');
    const expected = Buffer.from(this.sign(scope, payload), 'utf8');
    if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalid();
    try {
      const parsed: unknown = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
      if (Array.isArray(parsed) && parsed[0] === 2 && isPosition(parsed[1])) return parsed[1];
    } catch {
      // fall through: a signed but unreadable payload is as invalid as an unsigned one
    }
    throw invalid();
  }

  private sign(scope: string, payload: string): string {
    return createHmac('sha256', this.secret).update(scope).update('\n').update(payload).digest('base64url').slice(0, 22);
  }
}
