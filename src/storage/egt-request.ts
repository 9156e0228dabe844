/**
 * An EGT as the Table service's REST call "Performing entity group transactions": the `$batch` request's body
 * (multipart/mixed, one changeset, one part per operation in order) written straight from the project's
 * operations, and its answer read back into each operation's ETag or the service's error. The request itself goes
 * through the TableClient's own pipeline (its credential, retry and tracing policies), so only the SDK's building
 * of the body is left out: for each EGT the SDK made a new TableClient and ran every operation through that
 * client's pipeline to capture its text — the most CPU a hot partition's writer spent in one place (measured:
 * `npm run bench -- partition`). The text is what the SDK (13.x) writes, header for header.
 *
 * Guide: "Entity Group Transactions" (https://learn.microsoft.com/azure/storage/tables/table-storage-design-guide).
 */
import { randomUUID } from 'node:crypto';
import { RestError, type PipelineRequest, type PipelineResponse } from '@azure/core-rest-pipeline';
import { toSdkValue } from './edm';
import type { EntityToWrite, TransactionOperation } from './storage-types';

const CRLF = '\r\n';

/** What a `$batch` request carries: its body and Content-Type (with the batch boundary). */
export interface EgtRequest {
  body: string;
  contentType: string;
}

/**
 * Whose EGT text to write: `azure` for Azure Table storage and Azurite (a merge is a `PATCH`); `cosmos` for the
 * Cosmos DB Table API (a merge is a `POST` with `X-HTTP-Method: MERGE`, and each operation names the service version).
 */
export type EgtDialect = 'azure' | 'cosmos';

/**
 * The entity as the JSON body of an insert, update or upsert: PartitionKey, RowKey, then every non-null property,
 * typed as edm.ts types it — a string or boolean plain, anything else with its `<name>@odata.type` annotation.
 * @throws TablegraphError BAD_USER_INPUT when a value does not fit its declared EDM type (edm.ts checkTypedValue)
 */
export function entityJson(entity: EntityToWrite): string {
  const out: Record<string, unknown> = { PartitionKey: entity.partitionKey, RowKey: entity.rowKey };
  for (const [name, v] of Object.entries(entity.properties)) {
    if (v === null) continue;
    const wire = toSdkValue(name, v);
    if (typeof wire === 'object' && wire !== null && 'type' in wire) {
      const typed = wire as { value: unknown; type: string };
      out[name] = typed.value;
      out[`${name}@odata.type`] = `Edm.${typed.type}`;
    } else {
      out[name] = wire;
    }
  }
  // U+2028 and U+2029 escaped (JSON reads `\u2028` as the same character): a multipart EGT body is split into lines,
  // and a parser that splits on every JavaScript line terminator (Azurite's) cuts a text holding one, and never answers.
  return JSON.stringify(out).replace(/[\u2028\u2029]/g, (c) => (c === '\u2028' ? '\\u2028' : '\\u2029'));
}

/** `<table>(PartitionKey='…',RowKey='…')`: quotes doubled, then percent-encoded, as the SDK writes an entity's path. */
function entityPath(tableUrl: string, partitionKey: string, rowKey: string): string {
  const quote = (s: string) => encodeURIComponent(s.replaceAll("'", "''"));
  return `${tableUrl}(PartitionKey='${quote(partitionKey)}',RowKey='${quote(rowKey)}')`;
}

/** One operation's request line, headers and body (after the part's own headers). */
function operationText(tableUrl: string, op: TransactionOperation, dialect: EgtDialect): string {
  const request = (method: string, url: string, headers: string[], body?: string) => {
    const lines = [`${method} ${url} HTTP/1.1`, ...headers, '', ''];
    return lines.join(CRLF) + (body === undefined ? '' : `${CRLF}${body}`);
  };
  // The SDK's sub-requests keep `x-ms-version` only for the Cosmos DB Table API, where a merge is a POST with
  // `X-HTTP-Method: MERGE`; the headers are in the SDK's order.
  const cosmos = dialect === 'cosmos';
  const version = cosmos ? ['x-ms-version: 2019-02-02'] : [];
  const write = (mode: 'merge' | 'replace', ifMatch: string | undefined, entity: EntityToWrite) => {
    const url = entityPath(tableUrl, entity.partitionKey, entity.rowKey);
    const method = mode === 'replace' ? 'PUT' : cosmos ? 'POST' : 'PATCH';
    const merge = mode === 'merge' && cosmos ? ['X-HTTP-Method: MERGE'] : [];
    const condition = ifMatch === undefined ? [] : [`If-Match: ${ifMatch}`];
    const headers = ['Content-Type: application/json', ...merge, ...version, 'DataServiceVersion: 3.0', 'Accept: application/json', ...condition];
    return request(method, url, headers, entityJson(entity));
  };
  switch (op.kind) {
    case 'create': {
      const headers = ['Content-Type: application/json;odata=nometadata', 'Accept: application/json;odata=minimalmetadata', ...version];
      return request('POST', tableUrl, [...headers, 'DataServiceVersion: 3.0', 'Prefer: return-no-content'], entityJson(op.entity));
    }
    case 'update':
      return write(op.mode, op.ifMatch ?? '*', op.entity);
    case 'upsertMerge':
      return write('merge', undefined, op.entity);
    case 'upsertReplace':
      return write('replace', undefined, op.entity);
    case 'delete': {
      const url = entityPath(tableUrl, op.partitionKey, op.rowKey);
      const headers = ['Accept: application/json;odata=minimalmetadata', ...version, 'DataServiceVersion: 3.0', `If-Match: ${op.ifMatch ?? '*'}`];
      return request('DELETE', url, headers);
    }
  }
}

/**
 * The body of the `$batch` request of `ops`, all in `tableUrl` (the table's URL without a query: the account's
 * Table endpoint and the table's name) and in one partition (limits.ts checkTransaction checked that before).
 * An update or delete without `ifMatch` matches any ETag (`*`).
 * @throws TablegraphError BAD_USER_INPUT when a value does not fit its declared EDM type
 * @example
 *   egtRequest('https://acct.table.core.windows.net/Directory', [{ kind: 'create', entity }], 'azure')
 */
export function egtRequest(tableUrl: string, ops: TransactionOperation[], dialect: EgtDialect): EgtRequest {
  const batch = `batch_${randomUUID()}`;
  const changeset = `changeset_${randomUUID()}`;
  const parts = ops.map(
    (op) => `--${changeset}${CRLF}content-type: application/http${CRLF}content-transfer-encoding: binary${CRLF}${CRLF}${operationText(tableUrl, op, dialect)}`,
  );
  const head = `--${batch}${CRLF}content-type: multipart/mixed; boundary=${changeset}${CRLF}${CRLF}`;
  const body = [head, ...parts].join(CRLF) + `${CRLF}--${changeset}--${CRLF}--${batch}--${CRLF}`;
  return { body, contentType: `multipart/mixed; boundary=${batch}` };
}

/**
 * An answer to a `$batch` request: the pipeline's (PipelineResponse), or the status and text of one sent without it
 * (lean-writes.ts).
 */
export type BatchAnswer = Pick<PipelineResponse, 'status' | 'bodyAsText'> & { request?: PipelineRequest };

/**
 * The service's error in an answer's JSON (`odata.error`), as the RestError the SDK throws for it.
 * @param answer the answer it came in, kept on the error as the SDK keeps it (absent for one sent without the SDK)
 */
export function serviceError(text: string, status: number, answer?: BatchAnswer): RestError {
  let error: { code?: unknown; message?: { value?: unknown } } | undefined;
  try {
    error = (JSON.parse(text) as { 'odata.error'?: typeof error })['odata.error'];
  } catch {
    error = undefined;
  }
  const message = typeof error?.message?.value === 'string' ? error.message.value : 'Transaction Failed';
  const response = answer && 'headers' in answer ? (answer as PipelineResponse) : undefined;
  return new RestError(message, { code: typeof error?.code === 'string' ? error.code : undefined, statusCode: status, request: answer?.request, response });
}

/**
 * The ETag of each operation from the `$batch` answer, in order (undefined for a delete, and for any operation
 * whose part carries none).
 * @throws RestError — as the SDK throws it, for storage-errors.ts to map — when the answer's status is not 2xx
 *   (its JSON error, if any), or when an operation failed (a part whose status is not 2xx): the one part of a
 *   refused changeset carries that operation's status and the service's error, whose message starts with the
 *   operation's index (`2:The specified entity already exists.`); without a status when a part has no status
 *   line (the outcome is then unknown)
 */
export function egtEtags(response: BatchAnswer, count: number): Array<string | undefined> {
  const text = response.bodyAsText ?? '';
  if (response.status < 200 || response.status >= 300) throw serviceError(text, response.status, response);
  const parts = text.split('--changesetresponse_').slice(1, -1);
  const etags: Array<string | undefined> = new Array(count).fill(undefined);
  parts.forEach((part, i) => {
    const status = /HTTP\/1\.1 (\d{3})/.exec(part);
    // Unreadable: whether the EGT was applied is not known — no status, so it maps as an answer lost (STORAGE_UNAVAILABLE).
    if (!status) throw new RestError(`An EGT answer's part has no status line: ${part.slice(0, 200)}`, { request: response.request });
    const code = Number(status[1]);
    if (code < 200 || code >= 300) throw serviceError(/\{.*\}/.exec(part)?.[0] ?? '', code, response);
    if (i < count) etags[i] = /^ETag: (.*)$/im.exec(part)?.[1]?.trim();
  });
  return etags;
}
