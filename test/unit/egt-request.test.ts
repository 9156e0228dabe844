/**
 * Pure tests of the EGT request the store writes itself (src/storage/egt-request.ts): its text is the text the SDK's
 * own `submitTransaction` writes for the same operations — captured from the SDK's pipeline before it would leave the
 * process — and its answer is read as the SDK reads it. Against the real service: test/table-store.test.ts.
 */
import { TableClient, type TransactionAction } from '@azure/data-tables';
import { createHttpHeaders, createPipelineRequest, type PipelineResponse } from '@azure/core-rest-pipeline';
import { ErrorCode } from '../../src/errors';
import { toSdkEntity } from '../../src/storage/edm';
import { egtEtags, egtRequest, type EgtDialect } from '../../src/storage/egt-request';
import { toTablegraphError } from '../../src/storage/storage-errors';
import type { EntityToWrite, TransactionOperation } from '../../src/storage/storage-types';

const KEY = Buffer.from('not a real key, only for signing').toString('base64');

/** The body and Content-Type the SDK sends for `actions` on `endpoint`'s table `t`, captured and never sent. */
async function sdkRequest(endpoint: string, actions: TransactionAction[]): Promise<{ body: string; contentType: string }> {
  const client = TableClient.fromConnectionString(`DefaultEndpointsProtocol=https;AccountName=acct;AccountKey=${KEY};TableEndpoint=${endpoint};`, 't');
  let captured: { body: string; contentType: string } | undefined;
  client.pipeline.addPolicy({
    name: 'capture',
    sendRequest: (request) => {
      captured = { body: String(request.body), contentType: request.headers.get('Content-Type') ?? '' };
      return Promise.reject(new Error('captured'));
    },
  });
  await expect(client.submitTransaction(actions)).rejects.toThrow('captured');
  return captured!;
}

/** `text` with its batch and changeset boundaries (random UUIDs) named by their order of appearance. */
function normalized(text: string): string {
  const seen = new Map<string, string>();
  return text.replace(/(batch|changeset)_[0-9a-f-]{36}/g, (m, kind: string) => {
    if (!seen.has(m)) seen.set(m, `${kind}_${seen.size}`);
    return seen.get(m)!;
  });
}

const keys = { partitionKey: "dept 'A'/é", rowKey: 'row#1 ?&=' };
const everyType: EntityToWrite = {
  ...keys,
  properties: {
    s: { type: 'String', value: 'text "quoted"\n' },
    b: { type: 'Boolean', value: false },
    i: { type: 'Int32', value: -7 },
    d: { type: 'Double', value: 111444 },
    nan: { type: 'Double', value: Number.NaN },
    big: { type: 'Int64', value: 2n ** 62n },
    at: { type: 'DateTime', value: new Date(Date.UTC(2026, 10, 27, 4, 5, 6, 789)) },
    g: { type: 'Guid', value: '0f8fad5b-d9cb-469f-a165-70867728950e' },
    bytes: { type: 'Binary', value: new Uint8Array([0, 1, 254, 255]) },
    gone: null,
  },
};
const other = (rowKey: string): EntityToWrite => ({ partitionKey: keys.partitionKey, rowKey, properties: { s: { type: 'String', value: rowKey } } });

const ops: TransactionOperation[] = [
  { kind: 'create', entity: everyType },
  { kind: 'update', mode: 'merge', entity: other('m'), ifMatch: `W/"datetime'2026-11-27T04%3A05%3A06.789Z'"` },
  { kind: 'update', mode: 'replace', entity: other('r') },
  { kind: 'upsertMerge', entity: other('um') },
  { kind: 'upsertReplace', entity: other('ur') },
  { kind: 'delete', partitionKey: keys.partitionKey, rowKey: "it's gone" },
];
/** The same operations as the SDK takes them (a delete's If-Match cannot travel in its action: none is set above). */
const actions: TransactionAction[] = [
  ['create', toSdkEntity(everyType)],
  ['update', toSdkEntity(other('m')), 'Merge', { etag: `W/"datetime'2026-11-27T04%3A05%3A06.789Z'"` }],
  ['update', toSdkEntity(other('r')), 'Replace', { etag: '*' }],
  ['upsert', toSdkEntity(other('um')), 'Merge'],
  ['upsert', toSdkEntity(other('ur')), 'Replace'],
  ['delete', { partitionKey: keys.partitionKey, rowKey: "it's gone" }],
];

describe('egtRequest', () => {
  it.each<[string, string, EgtDialect]>([
    ['Azure', 'https://acct.table.core.windows.net', 'azure'],
    ['the Cosmos DB Table API', 'https://acct.table.cosmos.azure.com', 'cosmos'],
  ])('writes, for %s, the text the SDK writes: every operation kind, every EDM type, quotes and reserved characters in keys', async (_, endpoint, dialect) => {
    const sdk = await sdkRequest(endpoint, actions);
    const ours = egtRequest(`${endpoint}/t`, ops, dialect);
    expect(normalized(ours.contentType)).toBe(normalized(sdk.contentType));
    expect(normalized(ours.body)).toBe(normalized(sdk.body));
  });

  it("writes a delete's If-Match, which the SDK's action cannot carry", () => {
    const { body } = egtRequest('https://acct.table.core.windows.net/t', [{ kind: 'delete', partitionKey: 'p', rowKey: 'r', ifMatch: 'W/"x"' }], 'azure');
    expect(body).toContain(`DELETE https://acct.table.core.windows.net/t(PartitionKey='p',RowKey='r') HTTP/1.1\r\n`);
    expect(body).toContain('\r\nIf-Match: W/"x"\r\n');
    expect(body).not.toContain('If-Match: *');
  });

  it('refuses a value that does not fit its EDM type, as the SDK path did (BAD_USER_INPUT)', () => {
    const bad: EntityToWrite = { partitionKey: 'p', rowKey: 'r', properties: { n: { type: 'Int32', value: 2 ** 31 } } };
    expect(() => egtRequest('https://a/t', [{ kind: 'create', entity: bad }], 'azure')).toThrow(expect.objectContaining({ code: ErrorCode.BAD_USER_INPUT }));
  });
});

/** An answer to a `$batch` request, as the pipeline returns it. */
function answer(status: number, bodyAsText: string): PipelineResponse {
  const request = createPipelineRequest({ url: 'https://acct.table.core.windows.net/$batch', method: 'POST' });
  return { status, bodyAsText, headers: createHttpHeaders(), request };
}

/** A multipart answer of the given parts (each a status line and its headers, then a body). */
function multipart(parts: string[]): string {
  const changeset = 'changesetresponse_5f4c9a3e-0000-4000-8000-000000000001';
  return [
    '--batchresponse_1\r\nContent-Type: multipart/mixed; boundary=' + changeset + '\r\n',
    ...parts.map((p) => `--${changeset}\r\nContent-Type: application/http\r\nContent-Transfer-Encoding: binary\r\n\r\n${p}\r\n`),
    `--${changeset}--\r\n--batchresponse_1--\r\n`,
  ].join('');
}

describe('egtEtags', () => {
  it("gives each operation its part's ETag, in order", () => {
    const ok = (etag: string) => `HTTP/1.1 204 No Content\r\nX-Content-Type-Options: nosniff\r\nETag: ${etag}\r\n`;
    const text = multipart([ok('W/"1"'), ok('W/"2"'), 'HTTP/1.1 204 No Content\r\n']);
    expect(egtEtags(answer(202, text), 3)).toEqual(['W/"1"', 'W/"2"', undefined]);
  });

  it("throws a refused operation's status, code and indexed message — which storage-errors.ts maps with its index", () => {
    const refused =
      'HTTP/1.1 409 Conflict\r\nContent-Type: application/json\r\n\r\n{"odata.error":{"code":"EntityAlreadyExists","message":{"lang":"en-US","value":"1:The specified entity already exists."}}}';
    let thrown: unknown;
    try {
      egtEtags(answer(202, multipart([refused])), 2);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ name: 'RestError', statusCode: 409, code: 'EntityAlreadyExists', message: '1:The specified entity already exists.' });
    const batch: TransactionOperation[] = [
      { kind: 'create', entity: other('a') },
      { kind: 'create', entity: other('b') },
    ];
    const mapped = toTablegraphError(thrown, { operation: 'submitTransaction', table: 't', batch });
    expect(mapped.code).toBe(ErrorCode.CONFLICT);
    expect(mapped.details).toMatchObject({ operationIndex: 1, rowKey: 'b', reason: 'EntityAlreadyExists' });
  });

  it('throws a refused request with its status (a throttled one maps to STORAGE_BUSY)', () => {
    const busy = '{"odata.error":{"code":"ServerBusy","message":{"value":"The server is busy."}}}';
    let thrown: unknown;
    try {
      egtEtags(answer(503, busy), 1);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ statusCode: 503, code: 'ServerBusy' });
    expect(toTablegraphError(thrown, { operation: 'submitTransaction', table: 't' }).code).toBe(ErrorCode.STORAGE_BUSY);
  });

  it('an answer it cannot read leaves the outcome unknown: no status, mapped as STORAGE_UNAVAILABLE, never as a refusal', () => {
    let thrown: unknown;
    try {
      egtEtags(answer(202, multipart(['garbled'])), 1);
    } catch (e) {
      thrown = e;
    }
    expect(thrown).toMatchObject({ name: 'RestError' });
    expect((thrown as { statusCode?: number }).statusCode).toBeUndefined();
    expect(toTablegraphError(thrown, { operation: 'submitTransaction', table: 't' }).code).toBe(ErrorCode.STORAGE_UNAVAILABLE);
  });
});
