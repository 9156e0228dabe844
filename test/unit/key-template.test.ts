/** Key templates (src/model/key-template.ts): parsing, rendering, parsing keys back, ordering. Pure, no storage. */
import fc from 'fast-check';
import { ErrorCode, TablegraphError } from '../../src/errors';
import {
  KeyTemplateSyntaxError,
  checkTemplateSeparators,
  fromInvertedTicks,
  invertedTicks,
  parseKey,
  parseKeyTemplate,
  prefixUpperBound,
  renderKey,
  renderKeyPrefix,
} from '../../src/model/key-template';

const MAX_MS = Date.parse('9999-12-31T23:59:59.999Z');
const MIN_MS = Date.parse('0001-01-01T00:00:00.000Z');
/** Any Date an inverted-ticks key can hold (0001..9999), in ms. */
const keyDate = fc.integer({ min: MIN_MS, max: MAX_MS }).map((ms) => new Date(ms));
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n));
const text = fc.oneof(fc.string({ unit: 'binary' }), fc.string({ unit: fc.constantFrom('_', '/', '%', 'a', 'É', '\u0085') }));

function errorOf(f: () => unknown): Error {
  try {
    f();
  } catch (e) {
    return e as Error;
  }
  throw new Error('expected an error');
}

describe('parseKeyTemplate', () => {
  it('splits literals and placeholders with their formats', () => {
    expect(parseKeyTemplate('lastname_{lastName}_{id:08}')).toEqual({
      source: 'lastname_{lastName}_{id:08}',
      segments: [
        { kind: 'literal', text: 'lastname_' },
        { kind: 'placeholder', name: 'lastName', format: { kind: 'string' } },
        { kind: 'literal', text: '_' },
        { kind: 'placeholder', name: 'id', format: { kind: 'padded', width: 8 } },
      ],
      fields: ['lastName', 'id'],
    });
    expect(parseKeyTemplate('department')).toEqual({ source: 'department', segments: [{ kind: 'literal', text: 'department' }], fields: [] });
    expect(parseKeyTemplate('claim_{submittedAt:invertedTicks}').segments[1]).toEqual({
      kind: 'placeholder',
      name: 'submittedAt',
      format: { kind: 'invertedTicks' },
    });
    expect(parseKeyTemplate('{_x9:01}{y:019}').fields).toEqual(['_x9', 'y']);
  });

  it.each([
    ['', 0, 'empty'],
    ['a}', 1, 'stray }'],
    ['a}}', 1, '}} escape'],
    ['x_{id', 2, 'unclosed {'],
    ['{a{b}}', 2, 'nested {'],
    ['{{a}}', 1, '{{ escape'],
    ['x{}', 2, 'empty name'],
    ['{1a}', 1, 'name starts with a digit'],
    ['{ab-c}', 3, 'bad char in name'],
    ['{ a}', 1, 'space in name'],
    ['x{a:}', 4, 'empty format'],
    ['{a:8}', 3, 'width without leading 0'],
    ['{a:00}', 3, 'width 0'],
    ['{a:020}', 3, 'width 20'],
    ['{a:invertedticks}', 3, 'format case'],
    ['a/b', 1, '/ in literal'],
    ['x?{a}', 1, '? in literal'],
    ['{a}#', 3, '# in literal'],
    ['a\\b', 1, '\\ in literal'],
    ['a\u0001', 1, 'control char in literal'],
    ['ok\u0085', 2, 'C1 control char in literal'],
    ['{a}_{a:08}', 4, 'repeated placeholder'],
  ])('rejects %j at offset %d (%s)', (source, offset) => {
    const e = errorOf(() => parseKeyTemplate(source));
    expect(e).toBeInstanceOf(KeyTemplateSyntaxError);
    expect((e as KeyTemplateSyntaxError).offset).toBe(offset);
    expect(e.message).toContain(JSON.stringify(source));
  });
});

describe('checkTemplateSeparators', () => {
  it.each(['{a}{b}', '{a}-{b}', '{a}{b:08}', 'x_{a}x', '{a}_{b}{c:08}'])('flags %j', (source) => {
    const problems = checkTemplateSeparators(parseKeyTemplate(source));
    expect(problems).toHaveLength(1);
    expect(problems[0]).toContain(source);
  });

  it('reports each offending placeholder', () => {
    expect(checkTemplateSeparators(parseKeyTemplate('{a}{b}-{c}'))).toHaveLength(2);
  });

  it.each(['{a}_{b:08}', 'x_{a}', '{a}', 'department', '{a:08}{b:invertedTicks}{c}', 'lastname_{lastName}_{id:08}', '{a}__{b}'])('accepts %j', (source) =>
    expect(checkTemplateSeparators(parseKeyTemplate(source))).toEqual([]),
  );
});

describe('renderKey', () => {
  const t = parseKeyTemplate('lastname_{lastName}_{id:08}');

  it('escapes strings and pads numbers', () => {
    expect(renderKey(t, { lastName: 'SMITH_JONES', id: 123 })).toBe('lastname_SMITH%5FJONES_00000123');
    expect(renderKey(t, { lastName: "O'BRIEN / É", id: '42' })).toBe("lastname_O'BRIEN %2F É_00000042");
    expect(renderKey(t, { lastName: '', id: 99999999n })).toBe('lastname__99999999');
    expect(renderKey(parseKeyTemplate('department'), {})).toBe('department');
    expect(renderKey(parseKeyTemplate('{id:019}'), { id: 9223372036854775807n })).toBe('9223372036854775807');
  });

  it('turns other scalar kinds into strings for a string placeholder', () => {
    const s = parseKeyTemplate('{v}');
    expect(renderKey(s, { v: 12.5 })).toBe('12.5');
    expect(renderKey(s, { v: 7n })).toBe('7');
    expect(renderKey(s, { v: false })).toBe('false');
    expect(renderKey(s, { v: new Date('2012-03-04T05:06:07Z') })).toBe('2012-03-04T05:06:07.000Z');
  });

  it('accepts a Date or an ISO string for invertedTicks', () => {
    const c = parseKeyTemplate('claim_{at:invertedTicks}');
    expect(renderKey(c, { at: new Date('2000-01-01T00:00:00Z') })).toBe('claim_2524556159999999999');
    expect(renderKey(c, { at: '2000-01-01T00:00:00Z' })).toBe('claim_2524556159999999999');
    expect(renderKey(c, { at: '2000-01-01T01:00:00.000+01:00' })).toBe('claim_2524556159999999999');
    expect(renderKey(c, { at: '2000-01-01' })).toBe('claim_2524556159999999999');
  });

  const p = parseKeyTemplate('{s}_{n:04}_{t:invertedTicks}');
  const ok = { s: 'x', n: 5, t: new Date(0) };
  it.each<[string, Record<string, unknown>, string]>([
    ['missing string', { n: 5, t: ok.t }, 's'],
    ['null string', { ...ok, s: null }, 's'],
    ['object for a string', { ...ok, s: { a: 1 } }, 's'],
    ['NaN for a string', { ...ok, s: NaN }, 's'],
    ['invalid Date for a string', { ...ok, s: new Date('x') }, 's'],
    ['missing number', { s: 'x', t: ok.t }, 'n'],
    ['negative number', { ...ok, n: -1 }, 'n'],
    ['negative bigint', { ...ok, n: -1n }, 'n'],
    ['fraction', { ...ok, n: 1.5 }, 'n'],
    ['unsafe integer', { ...ok, n: 2 ** 53 }, 'n'],
    ['too wide', { ...ok, n: 10000 }, 'n'],
    ['too wide string', { ...ok, n: '12345' }, 'n'],
    ['signed string', { ...ok, n: '-3' }, 'n'],
    ['non-digit string', { ...ok, n: '12a' }, 'n'],
    ['empty string for a number', { ...ok, n: '' }, 'n'],
    ['boolean for a number', { ...ok, n: true }, 'n'],
    ['number for invertedTicks', { ...ok, t: 0 }, 't'],
    ['local time without zone', { ...ok, t: '2021-01-01T00:00:00' }, 't'],
    ['not a calendar date', { ...ok, t: '2021-02-29T00:00:00Z' }, 't'],
    ['hour 24', { ...ok, t: '2021-02-01T24:00:00Z' }, 't'],
    ['offset 24:00', { ...ok, t: '2021-02-01T00:00:00+24:00' }, 't'],
    ['garbage date', { ...ok, t: 'yesterday' }, 't'],
    ['invalid Date', { ...ok, t: new Date('x') }, 't'],
    ['year 0', { ...ok, t: new Date(MIN_MS - 1) }, 't'],
    ['year 10000', { ...ok, t: new Date(MAX_MS + 1) }, 't'],
    ['year 10000 as a string', { ...ok, t: '+010000-01-01T00:00:00Z' }, 't'],
  ])('refuses %s with BAD_USER_INPUT naming the field', (_case, values, field) => {
    const e = errorOf(() => renderKey(p, values));
    expect(e).toBeInstanceOf(TablegraphError);
    expect((e as TablegraphError).code).toBe(ErrorCode.BAD_USER_INPUT);
    expect((e as TablegraphError).details).toEqual({ field });
  });

  it('keeps the numeric order of padded numbers', () => {
    const n = parseKeyTemplate('empid_{id:08}');
    const id = fc.integer({ min: 0, max: 99999999 });
    fc.assert(fc.property(id, id, (a, b) => a < b === renderKey(n, { id: a }) < renderKey(n, { id: b })));
  });
});

describe('parseKey', () => {
  const templates = ['x_{s}_{n:08}_{t:invertedTicks}_{u}', 'r{n:05}{t:invertedTicks}{s}', '{s}', '{s}_{u}_{n:01}-{t:invertedTicks}'].map(parseKeyTemplate);

  it('inverts renderKey for strings, padded numbers and inverted ticks', () => {
    const values = fc.record({ s: text, u: text, n: fc.integer({ min: 0, max: 9 }), t: keyDate });
    fc.assert(
      fc.property(fc.constantFrom(...templates), values, (t, v) => {
        const back = parseKey(t, renderKey(t, v));
        expect(back).toEqual(Object.fromEntries(t.fields.map((f) => [f, f === 't' ? v.t.toISOString() : String(v[f as keyof typeof v])])));
      }),
      { numRuns: 1000 },
    );
  });

  it('returns padded numbers without padding and bigints exactly', () => {
    const t = parseKeyTemplate('empid_{id:019}');
    expect(parseKey(t, 'empid_0000000000000000042')).toEqual({ id: '42' });
    expect(parseKey(t, 'empid_9223372036854775807')).toEqual({ id: '9223372036854775807' });
    expect(parseKey(t, 'empid_0000000000000000000')).toEqual({ id: '0' });
  });

  it.each([
    ['wrong literal', 'lastname_{a}_{id:04}', 'firstname_X_0001'],
    ['too few digits', 'lastname_{a}_{id:04}', 'lastname_X_001'],
    ['letters in a number', 'lastname_{a}_{id:04}', 'lastname_X_00a1'],
    ['extra text', 'lastname_{a}_{id:04}', 'lastname_X_00011'],
    ['bare _ in a string', 'lastname_{a}', 'lastname_X_Y'],
    ['malformed escape', 'lastname_{a}', 'lastname_X%2'],
    ['ticks above DateTime.MaxValue', 'c_{t:invertedTicks}', 'c_3155378976000000000'],
  ])('returns null for %s', (_case, source, key) => {
    expect(parseKey(parseKeyTemplate(source), key)).toBeNull();
  });
});

describe('invertedTicks', () => {
  it('matches the value .NET computes (DateTime.MaxValue.Ticks - ticks)', () => {
    // new DateTime(2000, 1, 1, 0, 0, 0, DateTimeKind.Utc).Ticks == 630822816000000000
    expect(invertedTicks(new Date('2000-01-01T00:00:00Z'))).toBe('2524556159999999999');
    expect(invertedTicks(new Date('0001-01-01T00:00:00Z'))).toBe('3155378975999999999');
    expect(invertedTicks(new Date('9999-12-31T23:59:59.999Z'))).toBe('0000000000000009999');
  });

  it('sorts later dates first', () => {
    fc.assert(fc.property(keyDate, keyDate, (a, b) => a.getTime() < b.getTime() === invertedTicks(a) > invertedTicks(b)));
  });

  it('is always 19 digits and round-trips through fromInvertedTicks', () => {
    fc.assert(
      fc.property(keyDate, (d) => {
        const s = invertedTicks(d);
        return /^\d{19}$/.test(s) && fromInvertedTicks(s).getTime() === d.getTime();
      }),
    );
  });

  it('reads .NET values with 100 ns precision, rounding down to the ms', () => {
    expect(fromInvertedTicks('2524556159999999998').toISOString()).toBe('2000-01-01T00:00:00.000Z');
    expect(fromInvertedTicks('2524556159999990001').toISOString()).toBe('2000-01-01T00:00:00.000Z');
    expect(fromInvertedTicks('3155378975999999998').toISOString()).toBe('0001-01-01T00:00:00.000Z');
    expect(fromInvertedTicks('0000000000000000000').toISOString()).toBe('9999-12-31T23:59:59.999Z');
  });

  it.each(['123', '3155378976000000000', '25245561599999999x9'])('fromInvertedTicks refuses %j', (s) => {
    expect((errorOf(() => fromInvertedTicks(s)) as TablegraphError).code).toBe(ErrorCode.BAD_USER_INPUT);
  });
});

describe('renderKeyPrefix and prefixUpperBound', () => {
  const t = parseKeyTemplate('lastname_{lastName}_{id:08}');

  it('stops before the first placeholder without a value', () => {
    expect(renderKeyPrefix(t, { lastName: 'SMITH' })).toBe('lastname_SMITH_');
    expect(renderKeyPrefix(t, { lastName: 'SMITH', id: null })).toBe('lastname_SMITH_');
    expect(renderKeyPrefix(t, { id: 7 })).toBe('lastname_');
    expect(renderKeyPrefix(t, { lastName: 'A/B', id: 7 })).toBe(renderKey(t, { lastName: 'A/B', id: 7 }));
    expect(renderKeyPrefix(parseKeyTemplate('{departmentId}'), {})).toBe('');
    expect(() => renderKeyPrefix(t, { lastName: 'SMITH', id: -1 })).toThrow(TablegraphError);
  });

  it.each<[string, string | undefined]>([
    ['empid_000123', 'empid_000124'],
    ['lastname_SMITH_', 'lastname_SMITH`'],
    ['a\uffff', 'b'],
    ['a\uffff\uffff', 'b'],
    ['\uffff', undefined],
    ['', undefined],
    ['x\u00e9', 'x\u00ea'],
    ['x\ud83d\ude00', 'x\ud83d\ude01'],
    ['x\ud83d\udfff', 'x\ud83e\udc00'],
    ['x\udbff\udfff', 'x\ue000'],
    ['x\ud7ff', 'x\ud800\udc00'],
  ])('bounds %j by %j', (prefix, bound) => expect(prefixUpperBound(prefix)).toBe(bound));

  it('bounds every string that starts with the prefix, and only those (well-formed strings)', () => {
    const edge = fc.constantFrom('\uffff', '\ud7ff', '\udbff\udfff', '\ud83d\udfff', 'z');
    const prefix = fc.tuple(fc.string({ unit: 'binary', maxLength: 4 }), fc.option(edge)).map(([a, b]) => a + (b ?? ''));
    const tail = fc.string({ unit: 'binary', maxLength: 3 });
    fc.assert(
      fc.property(prefix, tail, tail, fc.nat(4), (p, x, y, cut) => {
        const bound = prefixUpperBound(p);
        // cut by code points: a string cut inside a surrogate pair is not well-formed
        for (const s of [p + x, [...p].slice(0, cut).join('') + x, (bound ?? '') + y, x]) {
          const inRange = s >= p && (bound === undefined || s < bound);
          if (inRange !== s.startsWith(p)) return false;
        }
        return true;
      }),
      { numRuns: 3000 },
    );
  });

  it('holds for arbitrary UTF-16 prefixes: every extension sorts in [prefix, bound)', () => {
    fc.assert(
      fc.property(fc.string({ unit: codeUnit }), fc.string({ unit: codeUnit }), (p, x) => {
        const bound = prefixUpperBound(p);
        return p + x >= p && (bound === undefined || p + x < bound);
      }),
    );
  });

  it('a last-name prefix never matches a longer last name (SMITH vs SMITH_JONES)', () => {
    const other = fc.oneof(
      text,
      text.map((s) => `SMITH${s}`),
      text.map((s) => `SMITH_${s}`),
    );
    fc.assert(
      fc.property(fc.oneof(text, fc.constant('SMITH')), other, fc.integer({ min: 0, max: 99999999 }), (name, otherName, id) => {
        const prefix = renderKeyPrefix(t, { lastName: name });
        const bound = prefixUpperBound(prefix)!;
        const key = renderKey(t, { lastName: otherName, id });
        return (key >= prefix && key < bound) === (otherName === name);
      }),
      { numRuns: 2000 },
    );
  });
});

describe('hash-bucket placeholders ({field:hashN})', () => {
  // Imported here so the block stays self-contained at the end of this file.
  const { fnv1a32, hashBucket } = jest.requireActual('../../src/model/hash-bucket') as typeof import('../../src/model/hash-bucket');
  const {
    parseKeyTemplate: parse,
    renderKey: render,
    parseKey: parseBack,
  } = jest.requireActual('../../src/model/key-template') as typeof import('../../src/model/key-template');

  test('FNV-1a 32 matches the published test vectors', () => {
    expect(fnv1a32('')).toBe(0x811c9dc5);
    expect(fnv1a32('a')).toBe(0xe40c292c);
    expect(fnv1a32('foobar')).toBe(0xbf9cf968);
  });

  test('a bucket is stable, zero-padded and within range', () => {
    const t = parse('lastname_{lastName:hash64}');
    const key = render(t, { lastName: 'WILLIAMS' });
    expect(key).toBe(`lastname_${String(fnv1a32('WILLIAMS') % 64).padStart(2, '0')}`);
    expect(render(t, { lastName: 'WILLIAMS' })).toBe(key);
    for (const name of ['A', 'SMITH', "O'BRIEN", 'MÜLLER', 'JONES']) {
      expect(Number(hashBucket(name, 64))).toBeLessThan(64);
      expect(hashBucket(name, 64)).toHaveLength(2);
    }
    expect(hashBucket('x', 1000)).toHaveLength(3);
  });

  test('parseKey accepts the bucket digits but gives no value back for them', () => {
    const t = parse('email_{email:hash16}');
    expect(parseBack(t, render(t, { email: 'a@b.c' }))).toEqual({});
    expect(parseBack(t, 'email_x1')).toBeNull();
  });
});

describe('descending numbers {x:desc0N}', () => {
  const t = parseKeyTemplate('review_{employeeId:08}_{year:desc04}');

  it('parses, renders 10^N - 1 - x zero-padded, and parses back', () => {
    expect(t.segments[3]).toEqual({ kind: 'placeholder', name: 'year', format: { kind: 'descending', width: 4 } });
    expect(renderKey(t, { employeeId: '10', year: 2024 })).toBe('review_00000010_7975');
    expect(renderKey(t, { employeeId: '10', year: 0 })).toBe('review_00000010_9999');
    expect(renderKey(t, { employeeId: '10', year: '9999' })).toBe('review_00000010_0000');
    expect(parseKey(t, 'review_00000010_7975')).toEqual({ employeeId: '10', year: '2024' });
  });

  it('reverses the numeric order: the largest number sorts first', () => {
    const year = fc.integer({ min: 0, max: 9999 });
    fc.assert(fc.property(year, year, (a, b) => a < b === renderKey(t, { employeeId: 1, year: a }) > renderKey(t, { employeeId: 1, year: b })));
  });

  it('refuses what padding refuses: too wide, negative, not an integer; widths outside 1..19', () => {
    for (const year of [10000, -1, 2.5, 'MMXXIV']) {
      expect(() => renderKey(t, { employeeId: 1, year })).toThrow(TablegraphError);
    }
    expect(() => parseKeyTemplate('r_{y:desc020}')).toThrow(/padding width must be 1..19/);
    expect(() => parseKeyTemplate('r_{y:desc4}')).toThrow(/unknown format "desc4"/);
  });
});

describe('calendar placeholders {x:yyyyMMdd} and {x:yyyyMM} (a table per period)', () => {
  const day = parseKeyTemplate('Logins{at:yyyyMMdd}');
  const month = parseKeyTemplate('Logins{at:yyyyMM}');

  test("render a Date's or an ISO string's UTC day or month", () => {
    expect(renderKey(day, { at: new Date('2026-11-22T23:59:59.999Z') })).toBe('Logins20261122');
    expect(renderKey(day, { at: '2026-11-22T20:00:00-05:00' })).toBe('Logins20261123'); // 01:00 UTC the next day
    expect(renderKey(day, { at: '2026-01-05' })).toBe('Logins20260105');
    expect(renderKey(month, { at: '2026-12-31T23:00:00Z' })).toBe('Logins202612');
  });

  test("parse back to the ISO date of the day, or of the month's first day; a name that is no date does not parse", () => {
    expect(parseKey(day, 'Logins20261122')).toEqual({ at: '2026-11-22' });
    expect(parseKey(month, 'Logins202602')).toEqual({ at: '2026-02-01' });
    expect(parseKey(day, 'Logins20260230')).toBeNull();
    expect(parseKey(day, 'Logins2026112')).toBeNull();
    expect(parseKey(month, 'Logins202613')).toBeNull();
  });

  test('refuse what is not a real date, with BAD_USER_INPUT naming the field', () => {
    for (const at of ['2026-02-30', 'yesterday', 20261122, new Date(NaN), '0000-06-01T00:00:00Z']) {
      expect(() => renderKey(day, { at })).toThrow(expect.objectContaining({ code: ErrorCode.BAD_USER_INPUT, details: { field: 'at' } }));
    }
  });

  test('sort as the dates do', () => {
    fc.assert(
      fc.property(
        fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }),
        fc.date({ min: new Date('0001-01-01T00:00:00Z'), max: new Date('9999-12-31T23:59:59Z'), noInvalidDate: true }),
        (a, b) => {
          const [ka, kb] = [renderKey(day, { at: a }), renderKey(day, { at: b })];
          const [da, db] = [a.toISOString().slice(0, 10), b.toISOString().slice(0, 10)];
          expect(ka < kb ? -1 : ka > kb ? 1 : 0).toBe(da < db ? -1 : da > db ? 1 : 0);
        },
      ),
    );
  });
});
