/**
 * The reservations of committed writes are confirmed together across a busy partition's groups — those of one index
 * partition in one EGT — once the partition has nothing else to do, and before any later write of their entity
 * (docs/architecture.md, "Group commit"): fewer calls than one confirmation per group, and no value held longer.
 */
import { WriteExecutor } from '../src/write/write-executor';
import type { TransactionOperation } from '../src/storage/storage-types';
import { uniquePrefix } from './support/harness';
import { handleMessage } from './support/handle-message';
import { expectConverged, hookedStore, hrWorld, RecordingSender, run, seededRng } from './support/fanout-fixtures';
import { startStorageProxy } from './support/storage-proxy';
import { TableStore } from '../src/storage/table-store';
import { emailAddress, employeeInput, rawEntity } from './support/write-fixtures';
import { testSeed } from './support/seed';
import { until } from './support/wait';

const world = hrWorld(uniquePrefix());
beforeAll(() => world.ensureTables());
afterAll(() => world.dropTables());

/** `count` e-mails whose index entities share one index partition (the index hashes e-mails into 16). */
function emailsInOnePartition(tag: string, count: number): string[] {
  const emails: string[] = [];
  for (let i = 0; emails.length < count; i++) {
    const email = `${tag}.${i}@confirm.example`;
    if (emails.length === 0 || emailAddress(world.model, email).partitionKey === emailAddress(world.model, emails[0]).partitionKey) emails.push(email);
  }
  return emails;
}

test('creates committed in several groups: their reservations confirmed in one EGT once the partition is idle', async () => {
  const { model, store, sender } = world;
  await run(world, 'createDepartment', { id: 'CONF', name: 'CONF' });
  const emails = emailsInOnePartition('burst', 30);
  const indexTable = emailAddress(model, emails[0]).table;
  const groups: number[] = [];
  const confirmations: TransactionOperation[][] = [];
  // The first group's EGT waits until every create is queued (a write is queued when execute returns): the others,
  // queued while it is in flight, make the groups after it.
  const queued = released();
  const slow = hookedStore(store, {
    before: {
      submitTransaction: async ([table, ops]) => {
        const operations = ops as TransactionOperation[];
        if (table === indexTable && operations.every((op) => op.kind === 'update')) confirmations.push(operations);
        if (table !== indexTable) {
          groups.push(operations.length);
          if (groups.length === 1) await queued.promise;
        }
      },
      updateEntity: async ([table]) => void (table === indexTable && confirmations.push([])),
    },
  });
  const writer = new WriteExecutor({ model, store: slow, workQueue: sender });
  const create = model.writes.get('Mutation.createEmployee')!;
  const writes = emails.map((email, i) => writer.execute(create, employeeInput('CONF', String(i + 1), { email })));
  queued.release();
  await Promise.all(writes);
  await confirmed(emails);

  // Several groups, one confirmation EGT for all of them (before: one per group).
  expect(groups.length).toBeGreaterThanOrEqual(2);
  expect(confirmations).toHaveLength(1);
  expect(confirmations[0]).toHaveLength(emails.length);
});

test('a write that arrives while the idle partition confirms is committed at once, not after the confirmation', async () => {
  const { model, store, sender } = world;
  await run(world, 'createDepartment', { id: 'WAKE', name: 'WAKE' });
  const [a, b] = emailsInOnePartition('wake', 2);
  const indexTable = emailAddress(model, a).table;
  // The first confirmation EGT is held until the second create has been acknowledged.
  const held = released();
  let confirming = 0;
  const slow = hookedStore(store, {
    before: {
      submitTransaction: async ([table, ops]) => {
        if (table === indexTable && (ops as TransactionOperation[]).every((op) => op.kind === 'update') && ++confirming === 1) await held.promise;
      },
      updateEntity: async ([table]) => {
        if (table === indexTable && ++confirming === 1) await held.promise;
      },
    },
  });
  const writer = new WriteExecutor({ model, store: slow, workQueue: sender });
  const create = model.writes.get('Mutation.createEmployee')!;
  await writer.execute(create, employeeInput('WAKE', '1', { email: a }));
  await until("the first create's confirmation sent", () => confirming === 1, { everyMs: 5 });
  let acknowledged = false;
  const second = writer.execute(create, employeeInput('WAKE', '2', { email: b })).then((r) => ((acknowledged = true), r));
  second.catch(() => undefined); // a failure is this test's to report, not an unhandled rejection after it
  try {
    await until('the second create acknowledged while the confirmation is held', () => acknowledged, { timeoutMs: 10_000, everyMs: 10 });
  } finally {
    held.release();
  }
  await expect(second).resolves.toMatchObject({ values: { email: b } });
  await confirmed([a, b]);
});

test('a delete right after a create waits for its confirmation: the worker frees the value at once, not after the lease', async () => {
  const { model, store, sender } = world;
  await run(world, 'createDepartment', { id: 'FREE', name: 'FREE' });
  const [first, ...others] = emailsInOnePartition('free', 6);
  const departmentTable = model.entities.get('Department')!.layout.table;
  // The e-mail's index entity as it is when the delete's EGT is sent.
  let atDelete: Record<string, unknown> | undefined;
  let egts = 0;
  // The first create's EGT (its group alone) waits until the other creates and the delete are queued behind it: they
  // make the next group.
  const queued = released();
  const slow = hookedStore(store, {
    before: {
      submitTransaction: async ([table, ops]) => {
        if (table !== departmentTable) return;
        const deletes = (ops as TransactionOperation[]).some((op) => op.kind === 'delete' && op.rowKey === 'empid_00000001');
        if (deletes) atDelete = (await rawEntity(store, emailAddress(model, first)))?.properties;
        if (++egts === 1) await queued.promise;
      },
    },
  });
  const writer = new WriteExecutor({ model, store: slow, workQueue: sender });
  const write = (name: string, input: Record<string, unknown>) => writer.execute(model.writes.get(`Mutation.${name}`)!, input);
  // The create commits alone; other creates and the delete, sent during its EGT, make the next group: the partition
  // is busy when the create commits, so its reservation is still waiting to be confirmed when the delete is planned.
  const created = [write('createEmployee', employeeInput('FREE', '1', { email: first }))];
  await until("the first create's EGT sent", () => egts === 1, { everyMs: 5 });
  created.push(...others.map((email, i) => write('createEmployee', employeeInput('FREE', String(i + 2), { email }))));
  const deleted = write('deleteEmployee', { departmentId: 'FREE', id: '1' });
  queued.release();
  await Promise.all([...created, deleted]);
  // Confirmed before the delete's EGT: not a pending reservation of an absent entity, which the worker would have
  // to leave in place until its lease ended (a minute and more), the value held all that time.
  expect(atDelete).toMatchObject({ id: '1', email: first });
  expect([atDelete?.WriteId, atDelete?.ReservedUntil]).toEqual([undefined, undefined]);
  for (const m of sender.messages) expect(await handleMessage(m, { model, store, settleMs: 0 })).not.toMatchObject({ kind: 'retryLater' });
  expect(await rawEntity(store, emailAddress(model, first))).toBeNull();
  await expect(write('createEmployee', employeeInput('FREE', '99', { email: first }))).resolves.toMatchObject({ values: { email: first } });
  await confirmed([first, ...others]);
});

test('concurrent creates, deletes and re-creates of one key through storage that throttles and loses replies; messages late, shuffled and twice: acknowledged if and only if stored, verify clean', async () => {
  const { model, store } = world;
  const seed = testSeed();
  const proxy = await startStorageProxy(process.env.AZURE_STORAGE_CONNECTION_STRING!, { seed });
  try {
    await run(world, 'createDepartment', { id: 'FLT', name: 'FLT' });
    const sender = new RecordingSender();
    const faulty = new TableStore({ connectionString: proxy.connectionString, target: 'azurite', timeoutMs: 10_000 });
    const writer = new WriteExecutor({ model, store: faulty, workQueue: sender });
    const write = (name: string, input: Record<string, unknown>) =>
      writer.execute(model.writes.get(`Mutation.${name}`)!, input).then(
        () => undefined,
        (e: unknown) => (e as { code?: string }).code ?? 'ERROR',
      );
    // Every reservation and every confirmation of one index partition: confirmations batched across groups, under faults.
    const emails = emailsInOnePartition(`faults${seed}`, 24);
    const create = (i: number) => write('createEmployee', employeeInput('FLT', String(i + 1), { email: emails[i] }));
    proxy.setFaults({ busy: 0.05, throttled: 0.05, timedOutAfterApply: 0.03, resetAfterApply: 0.03 });
    const first = await Promise.all(emails.map((_, i) => create(i)));
    // The first eight keys deleted and created again (same id, same e-mail) while the others are created a second time
    // (refused: they exist) — one partition, all at once.
    const again = await Promise.all([
      ...emails.slice(0, 8).map(async (_, i) => [await write('deleteEmployee', { departmentId: 'FLT', id: String(i + 1) }), await create(i)]),
      ...emails.slice(8).map(async (_, i) => [await create(i + 8)]),
    ]);
    proxy.setFaults({});
    console.log(`reservation confirmations under faults (seed ${seed}): injected ${JSON.stringify(proxy.injected())}`);

    // Acknowledged if and only if stored: a key is there when its last acknowledged write was a create.
    const stored = new Set(
      (await store.queryRange({ table: `${world.prefix}Directory`, partitionKey: 'FLT', rowKeyFrom: 'empid_', rowKeyTo: 'empid`', limit: 1000 })).entities.map(
        (e) => String(e.properties.id),
      ),
    );
    emails.forEach((_, i) => {
      const kinds = i < 8 ? ['create', 'delete', 'create'] : ['create', 'create'];
      const answers = [first[i], ...again[i]];
      const expected = kinds.reduce((there, kind, k) => (answers[k] === undefined ? kind === 'create' : there), false);
      expect({ id: i + 1, answers, stored: stored.has(String(i + 1)) }).toEqual({ id: i + 1, answers, stored: expected });
    });
    expect(stored.size).toBeGreaterThan(0);
    const department = await store.getEntity({ table: `${world.prefix}Directory`, partitionKey: 'FLT', rowKey: 'department' });
    expect(department?.properties.employeeCount).toBe(stored.size);

    // The worker: every message late, in shuffled order, and each delivered twice (with those of this file's other
    // writes, which verify reads too).
    const rng = seededRng(seed);
    const late = () => Date.now() + 60_000;
    const messages = [...world.sender.messages, ...sender.messages];
    for (const m of rng.shuffle([...messages, ...messages])) await handleMessage(m, { model, store, settleMs: 0, holdMs: 0, now: late });
    const report = await expectConverged(store, model);
    expect(report.indexes.flatMap((d) => d.duplicates)).toEqual([]);
    for (const [i, email] of emails.entries()) {
      const entry = await rawEntity(store, emailAddress(model, email));
      expect(entry ? String(entry.properties.id) : null).toBe(stored.has(String(i + 1)) ? String(i + 1) : null);
    }
  } finally {
    await proxy.close();
  }
}, 120_000);

/** A promise the test resolves when it is ready: a hook that awaits it holds its call until then. */
function released(): { promise: Promise<void>; release: () => void } {
  let release!: () => void;
  const promise = new Promise<void>((resolve) => (release = resolve));
  return { promise, release };
}

/** Waits (up to 5 s) until the index entity of each of `emails` is confirmed: no write id, no lease. */
async function confirmed(emails: string[]): Promise<void> {
  const pending = async () => {
    const stored = await Promise.all(emails.map((email) => rawEntity(world.store, emailAddress(world.model, email))));
    return stored.filter((e) => !e || e.properties.WriteId !== undefined || e.properties.ReservedUntil !== undefined).length;
  };
  await until('the reservations confirmed', async () => (await pending()) === 0, { timeoutMs: 5000, everyMs: 100 }).catch(() => undefined);
  expect(await pending()).toBe(0);
}
