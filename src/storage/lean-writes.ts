/**
 * Inserts and EGTs without the Azure SDK's pipeline: the Table service's REST calls "Insert Entity" (`POST /<table>`)
 * and "Performing entity group transactions" (`POST /$batch`, the guide's "Entity Group Transactions"), sent through
 * shared-key-rest.ts. On a partition's writes the SDK's policies, serializers and deserializers cost the writer more
 * CPU than the rest of a create (measured: `npm run bench -- partition`, writer ms per write).
 *
 * It tells only what it can be sure of: the ETags of a write the service applied, or the service's refusal — thrown as
 * the RestError the SDK throws for it, which storage-errors.ts maps. An answer that asks for the call to be sent again
 * (408, 429, 5xx) or no answer at all is `{ again }`: the caller sends the call again through the SDK after `again`
 * ms, and counts this attempt as its first, since a write whose answer was lost may have been applied (table-store.ts
 * `details.attempts`).
 *
 * Used for connection strings with an account key, with tracing off and the SDK allowed to retry; a SAS or Microsoft
 * Entra ID goes through the SDK alone.
 */
import type { Abortable } from './abort-latch';
import { egtEtags, entityJson, serviceError } from './egt-request';
import type { SharedKeyRest } from './shared-key-rest';
import type { EntityToWrite } from './storage-types';

/** What a lean write came to: done (its result), or to be sent again through the SDK after `again` ms. */
export type LeanOutcome<T> = { done: T } | { again: number };

/** The headers of an insert: the SDK's, the entity without metadata, no entity in the answer (204). */
const INSERT_HEADERS = [
  'content-type',
  'application/json;odata=nometadata',
  'accept',
  'application/json;odata=minimalmetadata',
  'dataserviceversion',
  '3.0',
  'prefer',
  'return-no-content',
];

/** The headers of a `$batch` request besides its Content-Type: the SDK's (13.x). */
const BATCH_HEADERS = ['accept', 'application/json', 'dataserviceversion', '3.0;', 'maxdataserviceversion', '3.0;NetFx', 'accept-charset', 'UTF-8'];

export class LeanWriter {
  /**
   * @param retryDelayMs how long the SDK's retry policy waits before its first retry (ms): the wait after an answer
   *   that asks for the call to be sent again without saying how long
   */
  constructor(
    private readonly rest: SharedKeyRest,
    private readonly retryDelayMs: number,
  ) {}

  /**
   * Inserts `entity` (already checked and sealed) into `table`.
   * @returns its ETag (undefined if the answer carried none), or when to send it again through the SDK
   * @throws RestError — the service's refusal: 409 EntityAlreadyExists, 404 TableNotFound, 400, 403, 413
   */
  async insert(table: string, entity: EntityToWrite, abort: Abortable): Promise<LeanOutcome<string | undefined>> {
    const answer = await this.rest.post(table, entityJson(entity), INSERT_HEADERS, abort);
    if (!answer) return { again: 0 };
    if (answer.status >= 200 && answer.status < 300) return { done: answer.headers.etag };
    if (this.sendAgain(answer.status)) return { again: this.waitOf(answer.headers) };
    throw serviceError(answer.text, answer.status);
  }

  /**
   * Sends an EGT's `$batch` request (egt-request.ts egtRequest).
   * @param count the EGT's operations
   * @returns each operation's ETag, in order, or when to send it again through the SDK
   * @throws RestError — the service's refusal of the batch or of one operation (egt-request.ts egtEtags)
   */
  async batch(body: string, contentType: string, count: number, abort: Abortable): Promise<LeanOutcome<Array<string | undefined>>> {
    const answer = await this.rest.post('$batch', body, ['content-type', contentType, ...BATCH_HEADERS], abort);
    if (!answer) return { again: 0 };
    if (this.sendAgain(answer.status)) return { again: this.waitOf(answer.headers) };
    return { done: egtEtags({ status: answer.status, bodyAsText: answer.text }, count) };
  }

  /** Whether the SDK's retry policy would send a call that got `status` again: a timeout, throttling, a failure. */
  private sendAgain(status: number): boolean {
    return status === 408 || status === 429 || (status >= 500 && status !== 501 && status !== 505);
  }

  /** How long to wait before sending it again (ms): what the service asked for, else the SDK's first retry delay. */
  private waitOf(headers: Partial<Record<'x-ms-retry-after-ms' | 'retry-after', string>>): number {
    const ms = Number(headers['x-ms-retry-after-ms']);
    if (Number.isFinite(ms) && ms >= 0) return ms;
    const seconds = Number(headers['retry-after']);
    if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
    // The SDK's exponential retry policy jitters its delay by ±20%.
    return this.retryDelayMs * (0.8 + Math.random() * 0.4);
  }
}
