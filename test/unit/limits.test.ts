/** Pure tests of the per-target limits checked before a request leaves the process (src/storage/limits.ts). */
import { ErrorCode, isTablegraphError, TablegraphError } from '../../src/errors';
import { checkEntity, checkKey, checkTableName, checkTransaction, estimateEntityBytes, limitsFor } from '../../src/storage/limits';
import { EntityToWrite, TransactionOperation, TypedValue } from '../../src/storage/storage-types';

function thrown(fn: () => void): TablegraphError {
  try {
    fn();
  } catch (e) {
    if (isTablegraphError(e)) return e;
    throw e;
  }
  throw new Error('expected a TablegraphError, nothing was thrown');
}

const str = (value: string): TypedValue => ({ type: 'String', value });
const entity = (properties: EntityToWrite['properties'] = {}, rowKey = 'r'): EntityToWrite => ({
  partitionKey: 'p',
  rowKey,
  properties,
});

describe('limitsFor', () => {
  it('gives Cosmos a 255-byte RowKey and a 2 MiB batch, Azure 1 KiB keys and 4 MiB', () => {
    const MiB = 1024 * 1024;
    expect(limitsFor('cosmos')).toMatchObject({ rowKeyBytes: 255, partitionKeyBytes: 1024, maxTransactionBytes: 2 * MiB });
    expect(limitsFor('azure')).toMatchObject({ rowKeyBytes: 1024, maxTransactionBytes: 4 * MiB, maxProperties: 255 });
    expect(limitsFor('azurite')).toMatchObject({ keyLengthUnit: 'chars', maxKeyChars: 512, rowKeyBytes: 1024 });
  });
});

describe('checkKey', () => {
  it('cosmos: a 255-byte RowKey passes, 256 bytes fails; PartitionKey still allows 1 KiB', () => {
    expect(() => checkKey('RowKey', 'a'.repeat(255), 'cosmos')).not.toThrow();
    const e = thrown(() => checkKey('RowKey', 'a'.repeat(256), 'cosmos'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details).toMatchObject({ key: 'RowKey', length: 256, limit: 255, unit: 'bytes' });
    expect(() => checkKey('PartitionKey', 'a'.repeat(1024), 'cosmos')).not.toThrow();
  });

  it('cosmos counts UTF-8 bytes, not characters', () => {
    // 128 × 'é' is 128 characters but 256 UTF-8 bytes.
    expect(thrown(() => checkKey('RowKey', 'é'.repeat(128), 'cosmos')).code).toBe(ErrorCode.LIMIT_EXCEEDED);
  });

  it('azurite: 512 characters pass, 513 fail (Azure would accept them)', () => {
    expect(() => checkKey('PartitionKey', 'k'.repeat(512), 'azurite')).not.toThrow();
    const e = thrown(() => checkKey('PartitionKey', 'k'.repeat(513), 'azurite'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details).toMatchObject({ unit: 'chars', limit: 512 });
    expect(() => checkKey('PartitionKey', 'k'.repeat(513), 'azure')).not.toThrow();
  });

  it('azurite also keeps the 1 KiB byte limit: 400 three-byte characters fail', () => {
    expect(thrown(() => checkKey('RowKey', '€'.repeat(400), 'azurite')).details).toMatchObject({ unit: 'bytes' });
  });

  it('azure: 1024 bytes pass, 1025 fail', () => {
    expect(() => checkKey('RowKey', 'x'.repeat(1024), 'azure')).not.toThrow();
    expect(thrown(() => checkKey('RowKey', 'x'.repeat(1025), 'azure')).code).toBe(ErrorCode.LIMIT_EXCEEDED);
  });

  it.each(['a/b', 'a\\b', 'a#b', 'a?b', 'a\u0000b', 'tab\there', 'a\u007fb', 'a\u0085b'])('refuses the forbidden character in %j as BAD_USER_INPUT', (key) => {
    const e = thrown(() => checkKey('RowKey', key, 'azure'));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details.position).toBe(key.search(/[/\\#?\u0000-\u001f\u007f-\u009f]/));
  });

  it('accepts the empty key, quotes, spaces and non-ASCII letters', () => {
    for (const key of ['', "O'Brien", 'a b', 'Zürich_東京', 'lastname_WILLIAMS_000123']) {
      expect(() => checkKey('PartitionKey', key, 'azure')).not.toThrow();
    }
  });
});

describe('estimateEntityBytes', () => {
  it('follows the service formula: 4 + keys×2 + Σ(8 + name×2 + value)', () => {
    const e: EntityToWrite = {
      partitionKey: 'pk', // 2 chars
      rowKey: 'rk1', //  3 chars
      properties: {
        s: str('abc'), // 8 + 2 + (3*2 + 4)  = 20
        i: { type: 'Int32', value: 1 }, // 8 + 2 + 4 = 14
        l: { type: 'Int64', value: 1n }, // 8 + 2 + 8 = 18
        d: { type: 'Double', value: 1.5 }, // 18
        t: { type: 'DateTime', value: new Date(0) }, // 18
        b: { type: 'Boolean', value: true }, // 8 + 2 + 1 = 11
        g: { type: 'Guid', value: 'c9da6455-213d-42c9-9a79-3e9149a57833' }, // 8 + 2 + 16 = 26
        x: { type: 'Binary', value: new Uint8Array(10) }, // 8 + 2 + 14 = 24
        gone: null, // not stored
      },
    };
    expect(estimateEntityBytes(e)).toBe(4 + 5 * 2 + 20 + 14 + 18 + 18 + 18 + 11 + 26 + 24);
  });
});

describe('checkEntity', () => {
  it('accepts 252 user properties and refuses 253 (255 with PartitionKey, RowKey, Timestamp)', () => {
    const props = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`p${i}`, str('v')]));
    expect(() => checkEntity(entity(props(252)), 'azure')).not.toThrow();
    const e = thrown(() => checkEntity(entity(props(253)), 'azurite'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details).toMatchObject({ partitionKey: 'p', rowKey: 'r', properties: 253, limit: 252 });
  });

  it('does not count null properties', () => {
    const props = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`p${i}`, i < 252 ? str('v') : null]));
    expect(() => checkEntity(entity(props), 'azure')).not.toThrow();
  });

  it('refuses an entity over 1 MiB by the formula (Azurite would store it)', () => {
    // 20 strings of 30,000 characters: each 60 KB, under the 64 KiB value limit; together ≈ 1.2 MB.
    const props = Object.fromEntries(Array.from({ length: 20 }, (_, i) => [`chunk${i}`, str('x'.repeat(30_000))]));
    const e = thrown(() => checkEntity(entity(props), 'azurite'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details.bytes).toBeGreaterThan(1024 * 1024);
  });

  it('refuses a string over 32K characters and a binary over 64 KiB, naming the property', () => {
    expect(() => checkEntity(entity({ s: str('x'.repeat(32 * 1024)) }), 'azure')).not.toThrow();
    const e = thrown(() => checkEntity(entity({ s: str('x'.repeat(32 * 1024 + 1)) }), 'azure'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details).toMatchObject({ property: 's', partitionKey: 'p', rowKey: 'r' });
    const bin = { type: 'Binary' as const, value: new Uint8Array(64 * 1024 + 1) };
    expect(thrown(() => checkEntity(entity({ b: bin }), 'azure')).details.property).toBe('b');
  });

  const badNames = ['1abc', 'a-b', 'a.b', 'odata.type', 'x@odata.type', '', 'a b', 'n'.repeat(256)];
  it.each(badNames.map((n) => [n.slice(0, 20), n]))('refuses the property name %j', (_label, name) => {
    const e = thrown(() => checkEntity(entity({ [name]: str('v') }), 'azure'));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details.property).toBe(name);
  });

  it.each(['PartitionKey', 'rowKey', 'Timestamp', 'etag'])('refuses the reserved name %s', (name) => {
    expect(thrown(() => checkEntity(entity({ [name]: str('v') }), 'azure')).code).toBe(ErrorCode.BAD_USER_INPUT);
  });

  it('accepts identifiers with underscores, digits and non-ASCII letters, up to 255 characters', () => {
    const names = entity({ _x1: str('v'), Prénom: str('v'), ['n'.repeat(255)]: str('v') });
    expect(() => checkEntity(names, 'azure')).not.toThrow();
  });

  it.each<[string, TypedValue]>([
    ['Int32 with a fraction', { type: 'Int32', value: 1.5 }],
    ['Int32 out of range', { type: 'Int32', value: 2 ** 31 }],
    ['Int64 as a number', { type: 'Int64', value: 5 }],
    ['Int64 out of range', { type: 'Int64', value: 2n ** 63n }],
    ['an invalid Date', { type: 'DateTime', value: new Date('nope') }],
    ['a DateTime before 1601', { type: 'DateTime', value: new Date(Date.UTC(1600, 0, 1)) }],
    ['a Guid that is not one', { type: 'Guid', value: 'not-a-guid' }],
    ['a Boolean as a string', { type: 'Boolean', value: 'true' }],
  ])('refuses %s as BAD_USER_INPUT', (_what, value) => {
    const e = thrown(() => checkEntity(entity({ v: value }), 'azure'));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details).toMatchObject({ property: 'v', type: value.type, partitionKey: 'p' });
  });

  it('checks the keys too, with the entity named in details', () => {
    const e = thrown(() => checkEntity({ partitionKey: 'a/b', rowKey: 'r', properties: {} }, 'azure'));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details).toMatchObject({ key: 'PartitionKey', partitionKey: 'a/b', rowKey: 'r' });
  });
});

describe('checkTransaction', () => {
  const create = (rowKey: string, partitionKey = 'p', properties = {}): TransactionOperation => ({
    kind: 'create',
    entity: { partitionKey, rowKey, properties },
  });

  it('accepts 100 operations, refuses 101 and an empty batch', () => {
    const ops = (n: number) => Array.from({ length: n }, (_, i) => create(`r${i}`));
    expect(() => checkTransaction(ops(100), 'azure')).not.toThrow();
    const e = thrown(() => checkTransaction(ops(101), 'azure'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details).toMatchObject({ operations: 101, limit: 100 });
    expect(thrown(() => checkTransaction([], 'azure')).code).toBe(ErrorCode.BAD_USER_INPUT);
  });

  it('refuses two partitions and a repeated RowKey, naming the operation', () => {
    const twoPartitions = thrown(() => checkTransaction([create('a'), create('b', 'q')], 'azure'));
    expect(twoPartitions.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(twoPartitions.details).toMatchObject({ operationIndex: 1, partitionKey: 'q' });
    const repeated = thrown(() => checkTransaction([create('a'), { kind: 'delete', partitionKey: 'p', rowKey: 'a' }], 'azure'));
    expect(repeated.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(repeated.details).toMatchObject({ operationIndex: 1, rowKey: 'a' });
  });

  it('checks every entity and adds the operation index', () => {
    const e = thrown(() => checkTransaction([create('a'), create('b', 'p', { 'bad-name': str('v') })], 'azure'));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details).toMatchObject({ operationIndex: 1, property: 'bad-name' });
  });

  it('refuses a payload over the target limit: 3 MB passes on Azure, fails on Cosmos (2 MiB)', () => {
    // 6 entities of ≈ 500 KB each (16 strings of 16,000 characters).
    const big = Object.fromEntries(Array.from({ length: 16 }, (_, i) => [`c${i}`, str('y'.repeat(16_000))]));
    const ops = Array.from({ length: 6 }, (_, i) => create(`r${i}`, 'p', big));
    expect(() => checkTransaction(ops, 'azure')).not.toThrow();
    const e = thrown(() => checkTransaction(ops, 'cosmos'));
    expect(e.code).toBe(ErrorCode.LIMIT_EXCEEDED);
    expect(e.details.limit).toBe(2 * 1024 * 1024);
    const nine = Array.from({ length: 9 }, (_, i) => create(`r${i}`, 'p', big));
    expect(thrown(() => checkTransaction(nine, 'azure')).details.limit).toBe(4 * 1024 * 1024);
  });
});

describe('checkTableName', () => {
  it('accepts 3–63 alphanumerics starting with a letter, refuses the rest', () => {
    expect(() => checkTableName('Directory2')).not.toThrow();
    for (const bad of ['ab', '1abc', 'a-b-c', 'x'.repeat(64)]) {
      expect(thrown(() => checkTableName(bad)).code).toBe(ErrorCode.BAD_USER_INPUT);
    }
  });
});
