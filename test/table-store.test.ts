/**
 * TableStore against the real Azurite the test run starts: typed round trips, point and range queries,
 * continuation tokens, EGTs (atomicity, failing operation index, ETags), limits checked before sending,
 * observer records and error mapping.
 */
import { randomBytes } from 'node:crypto';
import { AzureNamedKeyCredential, generateAccountSas, odata, RestError, TableClient } from '@azure/data-tables';
import { ErrorCode, isTablegraphError, TablegraphError } from '../src/errors';
import { toTablegraphError } from '../src/storage/storage-errors';
import { TableStore } from '../src/storage/table-store';
import { RangeReader } from '../src/storage/range-reader';
import { AbortLatch } from '../src/storage/abort-latch';
import { SharedKeyRest } from '../src/storage/shared-key-rest';
import type { EntityToWrite, StorageCallRecord, StorageObserver, TransactionOperation, TypedValue } from '../src/storage/storage-types';
import { startStorageProxy } from './support/storage-proxy';

const connectionString = process.env.AZURE_STORAGE_CONNECTION_STRING ?? '';
const suffix = randomBytes(4).toString('hex');
const T = `tstore${suffix}`;
const store = new TableStore({ connectionString, target: 'azurite', retry: { maxRetries: 1, retryDelayInMs: 50 } });

const str = (value: string): TypedValue => ({ type: 'String', value });
const int = (value: number): TypedValue => ({ type: 'Int32', value });
const entity = (partitionKey: string, rowKey: string, properties: EntityToWrite['properties'] = {}): EntityToWrite => ({
  partitionKey,
  rowKey,
  properties,
});

async function rejection(p: Promise<unknown>): Promise<TablegraphError> {
  try {
    await p;
  } catch (e) {
    if (isTablegraphError(e)) return e;
    throw e;
  }
  throw new Error('expected a TablegraphError, the call succeeded');
}

function recorder(): StorageObserver & { records: StorageCallRecord[]; starts: number } {
  const r = {
    records: [] as StorageCallRecord[],
    starts: 0,
    onCallStart: () => void r.starts++,
    onCall: (rec: StorageCallRecord) => void r.records.push(rec),
  };
  return r;
}

/** Writes `n` entities `row00000…` into one partition with EGTs of 100. */
async function fill(partitionKey: string, n: number, properties = (i: number) => ({ n: int(i) })): Promise<void> {
  for (let start = 0; start < n; start += 100) {
    const ops: TransactionOperation[] = [];
    for (let i = start; i < Math.min(n, start + 100); i++) {
      const rowKey = `row${String(i).padStart(5, '0')}`;
      ops.push({ kind: 'upsertReplace', entity: entity(partitionKey, rowKey, properties(i)) });
    }
    await store.submitTransaction(T, ops);
  }
}

beforeAll(async () => {
  expect(connectionString).not.toBe('');
  await store.ensureTable(T);
});

afterAll(async () => {
  await store.deleteTable(T);
});

describe('typed round trip', () => {
  const when = new Date(Date.UTC(2012, 4, 17, 9, 30, 15, 250));
  const bytes = new Uint8Array([0, 1, 2, 250, 255]);
  const typed = entity('types', 'one', {
    salaryWhole: { type: 'Double', value: 111444 },
    salary: { type: 'Double', value: 84054.5 },
    big: { type: 'Int64', value: 2n ** 40n },
    small: int(42),
    hired: { type: 'DateTime', value: when },
    fullTime: { type: 'Boolean', value: true },
    title: str('POLICE OFFICER / DETECTIVE'),
    id: { type: 'Guid', value: 'c9da6455-213d-42c9-9a79-3e9149a57833' },
    photo: { type: 'Binary', value: bytes },
    notANumber: { type: 'Double', value: NaN },
    missing: null,
  });

  beforeAll(async () => {
    await store.upsertEntity(T, typed, 'replace');
  });

  it('a point query without the SDK pipeline (point-reader.ts) reads what the SDK reads: every type, awkward keys, $select, absence', async () => {
    const sdk = new TableStore({ connectionString, target: 'azurite', leanReads: false });
    const keys = [
      { partitionKey: 'types', rowKey: 'one' },
      { partitionKey: "o'brien %25 ~(x)", rowKey: 'ünï ☃ +&=' },
    ];
    await store.upsertEntity(T, { ...typed, ...keys[1] }, 'replace');
    for (const k of keys) {
      const at = { table: T, ...k };
      const [lean, viaSdk] = await Promise.all([store.getEntity(at), sdk.getEntity(at)]);
      expect(lean).toEqual(viaSdk);
      expect(lean!.properties.big).toBe(2n ** 40n);
      const [leanSome, sdkSome] = await Promise.all([store.getEntity(at, { select: ['big', 'photo'] }), sdk.getEntity(at, { select: ['big', 'photo'] })]);
      expect(leanSome).toEqual(sdkSome);
      expect(Object.keys(leanSome!.properties).sort()).toEqual(['big', 'photo']);
    }
    expect(await store.getEntity({ table: T, partitionKey: 'types', rowKey: 'none' })).toBeNull();
    // A table that does not exist is the SDK's to say (its error, mapped): the lean query leaves it to it.
    await expect(store.getEntity({ table: `${T}Missing`, partitionKey: 'p', rowKey: 'r' })).rejects.toMatchObject({
      code: 'NOT_FOUND',
      details: { reason: 'TableNotFound' },
    });
  });

  it('a range query without the SDK pipeline (range-reader.ts) reads what the SDK reads: every type, awkward keys, $select, pages, positions', async () => {
    const sdk = new TableStore({ connectionString, target: 'azurite', leanReads: false });
    const partitionKey = "o'brien %25 ~(x) range";
    const rowKeys = Array.from({ length: 7 }, (_, i) => `r${i} ünï ☃ +&='`);
    for (const rowKey of rowKeys) await store.upsertEntity(T, { ...typed, partitionKey, rowKey }, 'replace');
    // The lean reader answers such a page itself (it does not leave it to the SDK), and its token reads on.
    const reader = new RangeReader(SharedKeyRest.fromConnectionString(connectionString)!);
    const filter = odata`PartitionKey eq ${partitionKey}`;
    const wire = await reader.page({ table: T, filter, top: 3 }, new AbortLatch());
    expect(wire?.entities.map((e) => e.RowKey)).toEqual(rowKeys.slice(0, 3));
    const wireNext = await reader.page({ table: T, filter, top: 3, continuationToken: wire!.continuationToken }, new AbortLatch());
    expect(wireNext?.entities.map((e) => e.RowKey)).toEqual(rowKeys.slice(3, 6));
    for (const select of [undefined, ['big', 'photo']]) {
      for (const limit of [0, 3, 7, 10]) {
        const q = { table: T, partitionKey, limit, select };
        const [lean, viaSdk] = await Promise.all([store.queryRange(q), sdk.queryRange(q)]);
        expect(lean).toEqual(viaSdk);
        expect(lean.entities.map((e) => e.rowKey)).toEqual(rowKeys.slice(0, limit));
        if (limit > 0) expect(lean.entities[0].properties.big).toBe(2n ** 40n);
        // Where one stopped, the other reads on.
        if (limit > 0 && lean.more) {
          const after = lean.positions.at(-1)!;
          const [leanNext, sdkNext] = await Promise.all([sdk.queryRange({ ...q, after }), store.queryRange({ ...q, after })]);
          expect(leanNext).toEqual(sdkNext);
          expect(leanNext.entities[0].rowKey).toBe(rowKeys[limit]);
        }
      }
    }
    // A range over more than one service page (the continuation, as the SDK's token) on a store that does not sort.
    const unsorted = new TableStore({ connectionString, target: 'azurite', sortedRanges: false });
    const unsortedSdk = new TableStore({ connectionString, target: 'azurite', sortedRanges: false, leanReads: false });
    const first = await unsorted.queryRange({ table: T, partitionKey, limit: 2 });
    const resumed = { table: T, partitionKey, limit: 3, after: first.positions.at(-1)! };
    expect(await unsorted.queryRange(resumed)).toEqual(await unsortedSdk.queryRange(resumed));
    // A table that does not exist is the SDK's to say (its error, mapped).
    await expect(store.queryRange({ table: `${T}Missing`, partitionKey: 'p', limit: 1 })).rejects.toMatchObject({ code: 'NOT_FOUND' });
  });

  it('point queries of one entity asked in one turn go as one query; each caller gets an entity of its own, a later one a query of its own', async () => {
    const gets: string[] = [];
    const proxy = await startStorageProxy(connectionString, {
      delayMs: (method, path) => {
        if (method !== 'GET' || !path.includes(`/${T}(`)) return 0;
        gets.push(path);
        return path.includes('slow') ? 400 : 0;
      },
    });
    try {
      const viaProxy = new TableStore({ connectionString: proxy.connectionString, target: 'azurite' });
      const at = { table: T, partitionKey: 'types', rowKey: 'one' };
      const [one, ...others] = await Promise.all(Array.from({ length: 20 }, () => viaProxy.getEntity(at)));
      expect(gets).toHaveLength(1);
      for (const other of others) expect(other).toEqual(one);
      one!.properties.name = 'changed by one caller';
      expect(others.every((o) => o!.properties.name !== 'changed by one caller')).toBe(true);
      // Another $select is another query; so is a read asked after the answer (it sees what was written since).
      const [all, some] = await Promise.all([viaProxy.getEntity(at), viaProxy.getEntity(at, { select: ['big'] })]);
      expect(gets).toHaveLength(3);
      expect(Object.keys(some!.properties)).toEqual(['big']);
      await store.updateEntity(T, { partitionKey: 'types', rowKey: 'one', properties: { note: str('written between') } }, 'merge');
      expect((await viaProxy.getEntity(at))!.properties.note).toBe('written between');
      expect(gets).toHaveLength(4);
      expect(all!.properties.note).toBeUndefined();
      // A caller whose own time is up leaves (its timeout, mapped as the SDK's); the others still get the answer.
      await store.upsertEntity(T, entity('slow', 'one', { v: int(1) }), 'replace');
      const slow = { table: T, partitionKey: 'slow', rowKey: 'one' };
      const [early, patient] = await Promise.allSettled([viaProxy.getEntity(slow, { timeoutMs: 100 }), viaProxy.getEntity(slow, { timeoutMs: 5000 })]);
      expect(early).toMatchObject({ status: 'rejected', reason: { code: 'STORAGE_UNAVAILABLE' } });
      expect(patient).toMatchObject({ status: 'fulfilled', value: { properties: { v: 1 } } });
      // A caller alone is sent with its own time limit (no latch of the shared read's own): it leaves when that is up.
      await expect(viaProxy.getEntity(slow, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
      expect(await viaProxy.getEntity(slow)).toMatchObject({ properties: { v: 1 } });
    } finally {
      await proxy.close();
    }
  });

  it('range queries of one page asked in one turn go as one query; each caller gets entities of its own, a later one a query of its own', async () => {
    const pages: string[] = [];
    const proxy = await startStorageProxy(connectionString, {
      delayMs: (method, path) => {
        if (method !== 'GET' || !path.includes(`/${T}()`)) return 0;
        pages.push(path);
        return path.includes('slowrange') ? 400 : 0;
      },
    });
    try {
      const viaProxy = new TableStore({ connectionString: proxy.connectionString, target: 'azurite' });
      const partitionKey = 'shared range';
      for (let i = 0; i < 5; i++) await store.upsertEntity(T, entity(partitionKey, `r${i}`, { v: int(i) }), 'replace');
      const q = { table: T, partitionKey, limit: 3 };
      const [one, ...others] = await Promise.all(Array.from({ length: 20 }, () => viaProxy.queryRange(q)));
      expect(pages).toHaveLength(1);
      expect(one.entities.map((e) => e.rowKey)).toEqual(['r0', 'r1', 'r2']);
      expect(one.more).toBe(true);
      for (const other of others) expect(other).toEqual(one);
      one.entities[0].properties.v = -1;
      expect(others.every((o) => o.entities[0].properties.v === 0)).toBe(true);
      // Another limit, bound or position is another query; so is a read asked after the answer (it sees the write).
      const after = one.positions.at(-1)!;
      const [same, more, next] = await Promise.all([viaProxy.queryRange(q), viaProxy.queryRange({ ...q, limit: 4 }), viaProxy.queryRange({ ...q, after })]);
      expect(pages).toHaveLength(4);
      expect(more.entities).toHaveLength(4);
      expect(next.entities.map((e) => e.rowKey)).toEqual(['r3', 'r4']);
      await store.upsertEntity(T, entity(partitionKey, 'r0', { v: int(100) }), 'replace');
      expect((await viaProxy.queryRange(q)).entities[0].properties.v).toBe(100);
      expect(same.entities[0].properties.v).toBe(0);
      expect(pages).toHaveLength(5);
      // A caller whose own time is up leaves (its timeout, mapped as the SDK's); the others still get the page.
      await store.upsertEntity(T, entity('slowrange', 'one', { v: int(1) }), 'replace');
      const slow = { table: T, partitionKey: 'slowrange', limit: 5 };
      const [early, patient] = await Promise.allSettled([viaProxy.queryRange(slow, { timeoutMs: 100 }), viaProxy.queryRange(slow, { timeoutMs: 5000 })]);
      expect(early).toMatchObject({ status: 'rejected', reason: { code: 'STORAGE_UNAVAILABLE' } });
      expect(patient).toMatchObject({ status: 'fulfilled', value: { entities: [{ properties: { v: 1 } }] } });
      await expect(viaProxy.queryRange(slow, { timeoutMs: 100 })).rejects.toMatchObject({ code: 'STORAGE_UNAVAILABLE' });
      expect((await viaProxy.queryRange(slow)).entities).toHaveLength(1);
    } finally {
      await proxy.close();
    }
  });

  it('reads every EDM type back as its JS type', async () => {
    const got = await store.getEntity({ table: T, partitionKey: 'types', rowKey: 'one' });
    expect(got).not.toBeNull();
    const p = got!.properties;
    expect(p.salaryWhole).toBe(111444);
    expect(p.salary).toBe(84054.5);
    expect(p.big).toBe(2n ** 40n);
    expect(p.small).toBe(42);
    expect(p.hired).toEqual(when);
    expect(p.fullTime).toBe(true);
    expect(p.title).toBe('POLICE OFFICER / DETECTIVE');
    expect(p.id).toBe('c9da6455-213d-42c9-9a79-3e9149a57833');
    expect(p.photo).toEqual(bytes);
    expect(p.notANumber).toBeNaN();
    expect('missing' in p).toBe(false);
    expect(got!.etag).toMatch(/^W\/"datetime'/);
    expect(Object.keys(p).some((k) => k.includes('odata') || k === 'timestamp')).toBe(false);
  });

  it('stores a whole Double as Edm.Double, not Int32 (the service writes it back as 111444.0)', async () => {
    let body = '';
    const raw = TableClient.fromConnectionString(connectionString, T, { allowInsecureConnection: true });
    await raw.getEntity('types', 'one', { onResponse: (r) => void (body = r.bodyAsText ?? '') });
    expect(body).toContain('"salaryWhole":111444.0');
    expect(body).toContain('"small":42,');
    expect(body).toMatch(/"big@odata.type":"Edm.Int64"/);
  });
});

describe('point and range queries', () => {
  const pk = "O'Brien's ''team''"; // quotes must survive the odata filter
  beforeAll(async () => {
    await fill(pk, 10, (i) => ({ n: int(i), a: str(`a${i}`), b: str(`b${i}`) }));
  });
  const rows = (r: { entities: { rowKey: string }[] }) => r.entities.map((e) => Number(e.rowKey.slice(3)));

  it('getEntity returns null for a missing entity, NOT_FOUND for a missing table', async () => {
    expect(await store.getEntity({ table: T, partitionKey: pk, rowKey: 'nope' })).toBeNull();
    const e = await rejection(store.getEntity({ table: `missing${suffix}`, partitionKey: 'p', rowKey: 'r' }));
    expect(e.code).toBe(ErrorCode.NOT_FOUND);
    expect(e.details.storageCode).toBe('TableNotFound');
  });

  it('getEntity refuses a forbidden key character before sending', async () => {
    const obs = recorder();
    const e = await rejection(store.getEntity({ table: T, partitionKey: 'a#b', rowKey: 'r' }, { observer: obs }));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(obs.starts).toBe(0);
  });

  it('honours from (inclusive), after (exclusive, wins over from) and to (exclusive)', async () => {
    const q = { table: T, partitionKey: pk, limit: 100 };
    expect(rows(await store.queryRange({ ...q, rowKeyFrom: 'row00003', rowKeyTo: 'row00006' }))).toEqual([3, 4, 5]);
    expect(rows(await store.queryRange({ ...q, rowKeyAfter: 'row00003', rowKeyTo: 'row00006' }))).toEqual([4, 5]);
    expect(rows(await store.queryRange({ ...q, rowKeyFrom: 'row00001', rowKeyAfter: 'row00007' }))).toEqual([8, 9]);
    expect(rows(await store.queryRange({ ...q, rowKeyTo: 'row00002' }))).toEqual([0, 1]);
    expect(rows(await store.queryRange(q))).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8, 9]);
  });

  it('stops at the limit and says whether more entities follow', async () => {
    const q = { table: T, partitionKey: pk };
    const three = await store.queryRange({ ...q, limit: 3 });
    expect(rows(three)).toEqual([0, 1, 2]);
    expect(three.more).toBe(true);
    const exact = await store.queryRange({ ...q, limit: 10 });
    expect(exact.entities).toHaveLength(10);
    expect(exact.more).toBe(false);
    const tail = await store.queryRange({ ...q, rowKeyAfter: 'row00007', limit: 2 });
    expect(rows(tail)).toEqual([8, 9]);
    expect(tail.more).toBe(false);
  });

  it('$select returns only the selected properties, with the keys and the ETag', async () => {
    const { entities } = await store.queryRange({ table: T, partitionKey: pk, select: ['a'], limit: 1 });
    expect(entities[0]).toMatchObject({ partitionKey: pk, rowKey: 'row00000', properties: { a: 'a0' } });
    expect(Object.keys(entities[0].properties)).toEqual(['a']);
    expect(entities[0].etag).not.toBe('');
    const point = await store.getEntity({ table: T, partitionKey: pk, rowKey: 'row00004' }, { select: ['b', 'n'] });
    expect(point!.properties).toEqual({ b: 'b4', n: 4 });
  });
});

describe('continuation tokens', () => {
  beforeAll(async () => {
    await fill('many', 1200);
  }, 60_000);

  it('follows them across pages of 1000 until the limit, and reports the round trips', async () => {
    const obs = recorder();
    const r = await store.queryRange({ table: T, partitionKey: 'many', limit: 1100 }, { observer: obs });
    expect(r.entities).toHaveLength(1100);
    expect(r.entities[1099].rowKey).toBe('row01099');
    expect(r.more).toBe(true);
    expect(obs.records).toHaveLength(1);
    expect(obs.records[0]).toMatchObject({ kind: 'rangeQuery', table: T, entities: 1100 });
    expect(obs.records[0].roundTrips).toBeGreaterThanOrEqual(2);
    const all = await store.queryRange({ table: T, partitionKey: 'many', limit: 5000 });
    expect(all.entities).toHaveLength(1200);
    expect(all.more).toBe(false);
  });

  it('scan pages through a partition for maintenance, reporting partitionScan', async () => {
    const obs = recorder();
    let total = 0;
    for await (const page of store.scan(T, { partitionKey: 'many', pageSize: 500, observer: obs })) {
      expect(page.length).toBeLessThanOrEqual(500);
      total += page.length;
    }
    expect(total).toBe(1200);
    expect(obs.records.every((r) => r.kind === 'partitionScan')).toBe(true);
    expect(obs.records.length).toBeGreaterThanOrEqual(3);
  });
});

describe('a placed table (tenants on tiers of their own: table-placement.ts)', () => {
  it("a whole-table scan reads each place, and makes none that is not there: a place's missing table holds nothing", async () => {
    const shared = `${T}placed`;
    const own = `${T}own`;
    const gone = `${T}gone`;
    await store.ensureTable(shared);
    await store.ensureTable(own);
    await store.upsertEntity(shared, entity('a_1', 'r', { n: int(1) }), 'replace');
    await store.upsertEntity(own, entity('b_1', 'r', { n: int(2) }), 'replace');
    const placed = new TableStore({ connectionString, target: 'azurite' });
    const at = (table: string) => ({ store: placed.sibling(), table });
    placed.usePlacement({
      placeOf: () => undefined,
      scanPlaces: (table) =>
        table === shared
          ? [
              { key: '', keep: (pk: string) => pk.startsWith('a_') },
              { key: 'b', place: at(own), keep: (pk: string) => pk.startsWith('b_') },
              // A tenant whose own table was dropped (its delete), as a process that has not yet read it is gone sees it.
              { key: 'c', place: at(gone), keep: (pk: string) => pk.startsWith('c_') },
            ]
          : undefined,
    });
    const rows: string[] = [];
    for await (const page of placed.scan(shared)) rows.push(...page.map((e) => e.partitionKey));
    expect(rows).toEqual(['a_1', 'b_1']);
    expect(await store.listTables(gone)).toEqual([]);
    await Promise.all([store.deleteTable(shared), store.deleteTable(own)]);
  });
});

describe('entity-group transactions', () => {
  it('applies all operations and returns each new ETag (none for deletes)', async () => {
    await store.upsertEntity(T, entity('egt', 'old'), 'replace');
    const obs = recorder();
    const etags = await store.submitTransaction(
      T,
      [
        { kind: 'create', entity: entity('egt', 'a', { n: int(1) }) },
        { kind: 'upsertMerge', entity: entity('egt', 'b', { n: int(2) }) },
        { kind: 'delete', partitionKey: 'egt', rowKey: 'old' },
      ],
      { observer: obs },
    );
    expect(etags[0]).toMatch(/^W\/"datetime'/);
    expect(etags[1]).toMatch(/^W\/"datetime'/);
    expect(etags[2]).toBeUndefined();
    const a = await store.getEntity({ table: T, partitionKey: 'egt', rowKey: 'a' });
    expect(a!.etag).toBe(etags[0]);
    expect(await store.getEntity({ table: T, partitionKey: 'egt', rowKey: 'old' })).toBeNull();
    expect(obs.records).toEqual([expect.objectContaining({ kind: 'transaction', entities: 3, roundTrips: 1 })]);
  });

  it('writes every EDM type and awkward keys as the SDK writes them, with every operation kind (egt-request.ts)', async () => {
    const partitionKey = "o'brien %25 ~(x) é";
    const typed = (rowKey: string, n: number): EntityToWrite =>
      entity(partitionKey, rowKey, {
        whole: { type: 'Double', value: 111444 },
        half: { type: 'Double', value: 0.5 },
        notANumber: { type: 'Double', value: NaN },
        big: { type: 'Int64', value: -(2n ** 62n) },
        n: int(n),
        at: { type: 'DateTime', value: new Date(Date.UTC(2026, 10, 27, 4, 5, 6, 789)) },
        yes: { type: 'Boolean', value: true },
        text: str('line\n"quoted" ☃'),
        id: { type: 'Guid', value: 'c9da6455-213d-42c9-9a79-3e9149a57833' },
        bytes: { type: 'Binary', value: new Uint8Array([0, 1, 254, 255]) },
        none: null,
      });
    const sdk = new TableStore({ connectionString, target: 'azurite', leanReads: false });
    const keys = ["it's ünï +&=", 'merged', 'replaced', 'upserted', 'gone'];
    for (const rowKey of keys.slice(1)) await store.upsertEntity(T, typed(rowKey, 0), 'replace');
    const merged = await store.getEntity({ table: T, partitionKey, rowKey: 'merged' });
    const gone = await store.getEntity({ table: T, partitionKey, rowKey: 'gone' });
    const etags = await store.submitTransaction(T, [
      { kind: 'create', entity: typed(keys[0], 1) },
      { kind: 'update', mode: 'merge', entity: entity(partitionKey, 'merged', { n: int(2) }), ifMatch: merged!.etag },
      { kind: 'update', mode: 'replace', entity: typed('replaced', 3) },
      { kind: 'upsertMerge', entity: entity(partitionKey, 'upserted', { n: int(4) }) },
      { kind: 'delete', partitionKey, rowKey: 'gone', ifMatch: gone!.etag },
    ]);
    for (const [i, rowKey] of keys.slice(0, 4).entries()) {
      const read = await sdk.getEntity({ table: T, partitionKey, rowKey });
      expect(read!.etag).toBe(etags[i]);
      const values = Object.entries(typed(rowKey, i + 1).properties).flatMap(([name, v]) => (v === null ? [] : [[name, v.value]]));
      expect(read!.properties).toEqual(Object.fromEntries(values));
    }
    expect(await store.getEntity({ table: T, partitionKey, rowKey: 'gone' })).toBeNull();
  });

  it('sends an EGT with a SAS connection string: the SAS goes after $batch, not into the operations', async () => {
    const account = /AccountName=([^;]+)/.exec(connectionString)![1];
    const key = /AccountKey=([^;]+)/.exec(connectionString)![1];
    const endpoint = /TableEndpoint=([^;]+)/.exec(connectionString)![1];
    const sas = generateAccountSas(new AzureNamedKeyCredential(account, key), {
      permissions: { query: true, add: true, update: true, delete: true, write: true },
      resourceTypes: 'o',
      expiresOn: new Date(Date.now() + 600_000),
    });
    const viaSas = new TableStore({ connectionString: `TableEndpoint=${endpoint};SharedAccessSignature=${sas}`, target: 'azurite' });
    await store.upsertEntity(T, entity('egtsas', 'old'), 'replace');
    const etags = await viaSas.submitTransaction(T, [
      { kind: 'create', entity: entity('egtsas', 'new', { n: int(1) }) },
      { kind: 'delete', partitionKey: 'egtsas', rowKey: 'old' },
    ]);
    expect((await store.getEntity({ table: T, partitionKey: 'egtsas', rowKey: 'new' }))!.etag).toBe(etags[0]);
    expect(await store.getEntity({ table: T, partitionKey: 'egtsas', rowKey: 'old' })).toBeNull();
    const e = await rejection(viaSas.submitTransaction(T, [{ kind: 'create', entity: entity('egtsas', 'new') }]));
    expect(e.details).toMatchObject({ reason: 'EntityAlreadyExists', operationIndex: 0 });
  });

  it('rolls back as a whole and names the failing operation', async () => {
    await store.upsertEntity(T, entity('egt2', 'exists'), 'replace');
    const obs = recorder();
    const e = await rejection(
      store.submitTransaction(
        T,
        [
          { kind: 'create', entity: entity('egt2', 'fresh') },
          { kind: 'create', entity: entity('egt2', 'exists') },
        ],
        { observer: obs },
      ),
    );
    expect(e.code).toBe(ErrorCode.CONFLICT);
    expect(e.details).toMatchObject({ operationIndex: 1, reason: 'EntityAlreadyExists', rowKey: 'exists' });
    expect(await store.getEntity({ table: T, partitionKey: 'egt2', rowKey: 'fresh' })).toBeNull();
    expect(obs.records).toEqual([expect.objectContaining({ kind: 'transaction', entities: 0 })]);
  });

  it('a stale ETag on an update inside a batch is a CONFLICT (ETagMismatch)', async () => {
    const first = await store.upsertEntity(T, entity('egt3', 'x', { n: int(1) }), 'replace');
    await store.upsertEntity(T, entity('egt3', 'x', { n: int(2) }), 'replace');
    const e = await rejection(
      store.submitTransaction(T, [
        { kind: 'create', entity: entity('egt3', 'y') },
        { kind: 'update', entity: entity('egt3', 'x', { n: int(3) }), mode: 'merge', ifMatch: first },
      ]),
    );
    expect(e.code).toBe(ErrorCode.CONFLICT);
    expect(e.details).toMatchObject({ reason: 'ETagMismatch', operationIndex: 1, rowKey: 'x' });
    expect((await store.getEntity({ table: T, partitionKey: 'egt3', rowKey: 'x' }))!.properties.n).toBe(2);
  });

  it('a delete inside a batch honours If-Match (stale → CONFLICT, current → deleted)', async () => {
    const stale = await store.upsertEntity(T, entity('egt4', 'd', { n: int(1) }), 'replace');
    const current = await store.upsertEntity(T, entity('egt4', 'd', { n: int(2) }), 'replace');
    const e = await rejection(store.submitTransaction(T, [{ kind: 'delete', partitionKey: 'egt4', rowKey: 'd', ifMatch: stale }]));
    expect(e.details).toMatchObject({ reason: 'ETagMismatch', operationIndex: 0 });
    expect(await store.getEntity({ table: T, partitionKey: 'egt4', rowKey: 'd' })).not.toBeNull();
    await store.submitTransaction(T, [{ kind: 'delete', partitionKey: 'egt4', rowKey: 'd', ifMatch: current }]);
    expect(await store.getEntity({ table: T, partitionKey: 'egt4', rowKey: 'd' })).toBeNull();
  });

  it('101 operations fail with LIMIT_EXCEEDED before anything is sent', async () => {
    const obs = recorder();
    const ops = Array.from({ length: 101 }, (_, i): TransactionOperation => ({
      kind: 'create',
      entity: entity('egt5', `r${i}`),
    }));
    const e = await rejection(store.submitTransaction(T, ops, { observer: obs }));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(obs.starts).toBe(0);
    expect(obs.records).toHaveLength(0);
    expect((await store.queryRange({ table: T, partitionKey: 'egt5', limit: 1 })).entities).toHaveLength(0);
  });

  it('two partitions in one batch are BAD_USER_INPUT, nothing sent', async () => {
    const obs = recorder();
    const e = await rejection(
      store.submitTransaction(
        T,
        [
          { kind: 'create', entity: entity('egt6', 'a') },
          { kind: 'create', entity: entity('egt7', 'b') },
        ],
        { observer: obs },
      ),
    );
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details.operationIndex).toBe(1);
    expect(obs.starts).toBe(0);
    expect(await store.getEntity({ table: T, partitionKey: 'egt6', rowKey: 'a' })).toBeNull();
  });
});

describe('single-entity writes', () => {
  it('create twice → CONFLICT EntityAlreadyExists, observed as a failed write', async () => {
    await store.createEntity(T, entity('w', 'c', { n: int(1) }));
    const obs = recorder();
    const e = await rejection(store.createEntity(T, entity('w', 'c'), { observer: obs }));
    expect(e.code).toBe(ErrorCode.CONFLICT);
    expect(e.details).toMatchObject({ reason: 'EntityAlreadyExists', storageCode: 'EntityAlreadyExists', rowKey: 'c' });
    expect(obs.starts).toBe(1);
    expect(obs.records).toEqual([expect.objectContaining({ kind: 'write', table: T, entities: 0, roundTrips: 1 })]);
  });

  it('upsert merge keeps other properties, replace drops them', async () => {
    await store.upsertEntity(T, entity('w', 'u', { a: str('1'), b: str('2') }), 'replace');
    await store.upsertEntity(T, entity('w', 'u', { b: str('3') }), 'merge');
    const addr = { table: T, partitionKey: 'w', rowKey: 'u' };
    expect((await store.getEntity(addr))!.properties).toEqual({ a: '1', b: '3' });
    await store.upsertEntity(T, entity('w', 'u', { c: str('4') }), 'replace');
    expect((await store.getEntity(addr))!.properties).toEqual({ c: '4' });
  });

  it('update with a stale ETag → CONFLICT ETagMismatch; with the current one it succeeds', async () => {
    const v1 = await store.upsertEntity(T, entity('w', 'e', { n: int(1) }), 'replace');
    const v2 = await store.updateEntity(T, entity('w', 'e', { n: int(2) }), 'merge', { ifMatch: v1 });
    expect(v2).not.toBe(v1);
    const e = await rejection(store.updateEntity(T, entity('w', 'e', { n: int(3) }), 'replace', { ifMatch: v1 }));
    expect(e.code).toBe(ErrorCode.CONFLICT);
    expect(e.details.reason).toBe('ETagMismatch');
    expect((await store.getEntity({ table: T, partitionKey: 'w', rowKey: 'e' }))!.properties.n).toBe(2);
  });

  it('update of a missing entity → NOT_FOUND', async () => {
    const e = await rejection(store.updateEntity(T, entity('w', 'ghost'), 'merge'));
    expect(e.code).toBe(ErrorCode.NOT_FOUND);
  });

  it('delete returns true, then false when already gone; a stale ETag is a CONFLICT', async () => {
    const v1 = await store.upsertEntity(T, entity('w', 'd', { n: int(1) }), 'replace');
    await store.upsertEntity(T, entity('w', 'd', { n: int(2) }), 'replace');
    const stale = await rejection(store.deleteEntity({ table: T, partitionKey: 'w', rowKey: 'd' }, { ifMatch: v1 }));
    expect(stale.details.reason).toBe('ETagMismatch');
    expect(await store.deleteEntity({ table: T, partitionKey: 'w', rowKey: 'd' })).toBe(true);
    expect(await store.deleteEntity({ table: T, partitionKey: 'w', rowKey: 'd' })).toBe(false);
  });

  it('an entity over 1 MiB is refused before sending (Azurite alone would store it)', async () => {
    const obs = recorder();
    const props = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`c${i}`, str('x'.repeat(30_000))]));
    const e = await rejection(store.upsertEntity(T, entity('w', 'huge', props), 'replace', { observer: obs }));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(obs.starts).toBe(0);
    expect(await store.getEntity({ table: T, partitionKey: 'w', rowKey: 'huge' })).toBeNull();
  });
});

describe('observer records and service health', () => {
  it('a point query reports one pointQuery round trip with its entity count and a duration', async () => {
    await store.upsertEntity(T, entity('obs', 'x'), 'replace');
    const obs = recorder();
    await store.getEntity({ table: T, partitionKey: 'obs', rowKey: 'x' }, { observer: obs });
    await store.getEntity({ table: T, partitionKey: 'obs', rowKey: 'missing' }, { observer: obs });
    expect(obs.starts).toBe(2);
    expect(obs.records).toEqual([
      expect.objectContaining({ kind: 'pointQuery', table: T, entities: 1, roundTrips: 1 }),
      expect.objectContaining({ kind: 'pointQuery', table: T, entities: 0, roundTrips: 1 }),
    ]);
    expect(obs.records[0].ms).toBeGreaterThanOrEqual(0);
  });

  it('ping answers with a latency; an unreachable service is STORAGE_UNAVAILABLE', async () => {
    expect(await store.ping()).toBeGreaterThanOrEqual(0);
    const deadConnection = connectionString.replace(/TableEndpoint=http:\/\/[^/;]+/, 'TableEndpoint=http://127.0.0.1:1');
    expect(deadConnection).not.toBe(connectionString);
    const dead = new TableStore({ connectionString: deadConnection, target: 'azurite', retry: { maxRetries: 0 } });
    const obs = recorder();
    const e = await rejection(dead.getEntity({ table: T, partitionKey: 'p', rowKey: 'r' }, { observer: obs }));
    expect(e.code).toBe(ErrorCode.STORAGE_UNAVAILABLE);
    expect(obs.records).toEqual([expect.objectContaining({ kind: 'pointQuery', entities: 0 })]);
    expect((await rejection(dead.ping())).code).toBe(ErrorCode.STORAGE_UNAVAILABLE);
  });

  it('ensureTable is idempotent; a malformed connection string is CONFIG_INVALID', async () => {
    await store.ensureTable(T);
    const other = new TableStore({ connectionString, target: 'azurite' });
    await other.ensureTable(T); // the table already exists: fine
    expect(() => new TableStore({ connectionString: 'not a connection string', target: 'azure' })).toThrow(
      expect.objectContaining({ code: ErrorCode.CONFIG_INVALID }),
    );
  });
});

describe('toTablegraphError', () => {
  const ctx = { operation: 'op', table: 'Tbl', partitionKey: 'p', rowKey: 'r' };
  const rest = (statusCode: number) => new RestError('boom', { statusCode }) as RestError & { details: unknown };

  it.each<[number, string | undefined, ErrorCode]>([
    [413, 'RequestBodyTooLarge', ErrorCode.LIMIT_EXCEEDED],
    [400, 'EntityTooLarge', ErrorCode.LIMIT_EXCEEDED],
    [400, 'InvalidInput', ErrorCode.STORAGE_BAD_REQUEST],
    [403, 'AuthenticationFailed', ErrorCode.CONFIG_INVALID],
    // Throttling, told apart from an outage: STORAGE_BUSY.
    [503, 'ServerBusy', ErrorCode.STORAGE_BUSY],
    [429, 'TooManyRequests', ErrorCode.STORAGE_BUSY],
    [500, 'OperationTimedOut', ErrorCode.STORAGE_BUSY],
    [500, undefined, ErrorCode.STORAGE_UNAVAILABLE],
    [502, undefined, ErrorCode.STORAGE_UNAVAILABLE],
  ])('maps %i %s to %s, keeping the storage code', (status, code, expected) => {
    const e = rest(status);
    e.details = code ? { errorCode: code } : undefined;
    const mapped = toTablegraphError(e, ctx);
    expect(mapped.code).toBe(expected);
    expect(mapped.details).toMatchObject({ operation: 'op', table: 'Tbl', status });
    expect(mapped.details.storageCode).toBe(code);
    expect(mapped.cause).toBe(e);
  });

  it('maps an abort to STORAGE_UNAVAILABLE and passes a TablegraphError through', () => {
    const abort = Object.assign(new Error('The operation was aborted.'), { name: 'AbortError' });
    expect(toTablegraphError(abort, ctx).details.reason).toBe('aborted');
    const own = new TablegraphError(ErrorCode.NOT_FOUND, 'mine');
    expect(toTablegraphError(own, ctx)).toBe(own);
  });
});
