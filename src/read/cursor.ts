/**
 * Opaque, tamper-evident Relay cursors. A cursor holds the RowKey a page ended at and is bound to the range it
 * came from (table, PartitionKey, RowKey range), signed with HMAC-SHA256; any change, or its use on another list,
 * is refused with BAD_USER_INPUT. Resuming after a RowKey, rather than keeping a continuation token, keeps a
 * cursor valid for as long as the secret is.
 */
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { ErrorCode, TablegraphError } from '../errors';

/** Signs and checks cursors with one secret. */
export class CursorCodec {
  private readonly secret: Buffer;

  /** @param secret the HMAC key; random when absent (cursors then last as long as the process). */
  constructor(secret?: string) {
    this.secret = secret ? Buffer.from(secret, 'utf8') : randomBytes(32);
  }

  /**
   * @param scope identifies the range (table, PartitionKey, bounds): a cursor only resumes the range it came from
   * @param rowKey the RowKey of the entity the cursor points at
   * @returns a URL-safe string
   */
  encode(scope: string, rowKey: string): string {
    const payload = Buffer.from(JSON.stringify([1, rowKey]), 'utf8').toString('base64url');
    return `${payload}.${this.sign(scope, payload)}`;
  }

  /**
   * @returns the RowKey the cursor holds
   * @throws TablegraphError BAD_USER_INPUT when the cursor is malformed, altered or from another list
   */
  decode(scope: string, cursor: string): string {
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
      if (Array.isArray(parsed) && parsed[0] === 1 && typeof parsed[1] === 'string') return parsed[1];
    } catch {
      // fall through: a signed but unreadable payload is as invalid as an unsigned one
    }
    throw invalid();
  }

  private sign(scope: string, payload: string): string {
    return createHmac('sha256', this.secret).update(scope).update('\n').update(payload).digest('base64url').slice(0, 22);
  }
}
