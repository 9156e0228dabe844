/** Reversible escaping of key values (src/storage/key-escape.ts): pure unit and property tests, no storage. */
import fc from 'fast-check';
import { ErrorCode, TablegraphError } from '../../src/errors';
import { FORBIDDEN_KEY_CHARS, escapeKeyValue, hasForbiddenKeyChar, unescapeKeyValue } from '../../src/storage/key-escape';

/** Characters that exercise every branch: forbidden, escaped-but-allowed, control, non-ASCII, plain. */
const tricky = fc.constantFrom('/', '\\', '#', '?', '%', '_', '\u0000', '\u001f', '\u007f', '\u0085', '\u009f', ' ', '&', "'", 'É', '😀', 'A', '2');
/** Any UTF-16 code unit, lone surrogates included: keys are JS strings, not necessarily well-formed. */
const codeUnit = fc.integer({ min: 0, max: 0xffff }).map((n) => String.fromCharCode(n));
const anyValue = fc.oneof(
  fc.string({ unit: 'binary' }),
  fc.string({ unit: codeUnit }),
  fc.string({ unit: fc.oneof(tricky, fc.string({ unit: 'binary', minLength: 1, maxLength: 1 })) }),
);

function errorOf(f: () => unknown): TablegraphError {
  try {
    f();
  } catch (e) {
    if (e instanceof TablegraphError) return e;
    throw e;
  }
  throw new Error('expected a TablegraphError');
}

describe('escapeKeyValue', () => {
  it.each([
    ['ASBESTOS WORKER / PIPE INSULATOR', 'ASBESTOS WORKER %2F PIPE INSULATOR'],
    ['SMITH_JONES', 'SMITH%5FJONES'],
    ['100%', '100%25'],
    ['a\\b#c?d', 'a%5Cb%23c%3Fd'],
    ['tab\there\nnul\u0000', 'tab%09here%0Anul%00'],
    ['del\u007f nel\u0085 apc\u009f', 'del%7F nel%C2%85 apc%C2%9F'],
    ["O'BRIEN & SONS - É, Ñ. 😀", "O'BRIEN & SONS - É, Ñ. 😀"],
    ['', ''],
  ])('escapes %j as %j and back', (raw, escaped) => {
    expect(escapeKeyValue(raw)).toBe(escaped);
    expect(unescapeKeyValue(escaped)).toBe(raw);
  });

  it('round-trips any string, lone surrogates included', () => {
    fc.assert(
      fc.property(anyValue, (s) => unescapeKeyValue(escapeKeyValue(s)) === s),
      { numRuns: 2000 },
    );
  });

  it('never leaves a forbidden character or a bare _ in the result', () => {
    fc.assert(
      fc.property(anyValue, (s) => {
        const e = escapeKeyValue(s);
        return !hasForbiddenKeyChar(e) && !e.includes('_');
      }),
      { numRuns: 2000 },
    );
  });

  it('leaves strings without escaped characters unchanged', () => {
    const plain = fc.string({ unit: 'binary' }).filter((s) => !/[/\\#?%_\u0000-\u001f\u007f-\u009f]/.test(s));
    fc.assert(fc.property(plain, (s) => escapeKeyValue(s) === s));
  });
});

describe('unescapeKeyValue', () => {
  it.each([
    ['%', 0],
    ['ab%2', 2],
    ['%2f', 0], // lowercase hex is not the canonical form
    ['x%G0', 1],
    ['%41', 0], // 'A' is never escaped
    ['ok%C3%89', 2], // 'É' is never escaped
    ['%C2%A0', 0], // U+00A0 is not a control character
    ['%C2', 0],
    ['%C2%', 3], // the second byte's '%' has no digits
    ['%FF', 0],
    ['a_b', 1], // a bare separator cannot come from escapeKeyValue
    ['a/b', 1],
    ['50%%25', 2],
  ])('refuses %j with BAD_USER_INPUT at offset %d', (encoded, offset) => {
    const e = errorOf(() => unescapeKeyValue(encoded));
    expect(e.code).toBe(ErrorCode.BAD_USER_INPUT);
    expect(e.details).toEqual({ offset });
  });

  it('accepts exactly the canonical encodings (escape(unescape(s)) === s)', () => {
    const alphabet = fc.constantFrom('%', '2', '5', 'F', 'f', 'C', '8', '9', 'A', '0', '_', 'x', '/');
    fc.assert(
      fc.property(fc.string({ unit: alphabet, maxLength: 12 }), (s) => {
        let decoded: string;
        try {
          decoded = unescapeKeyValue(s);
        } catch (e) {
          return e instanceof TablegraphError && e.code === ErrorCode.BAD_USER_INPUT;
        }
        return escapeKeyValue(decoded) === s;
      }),
      { numRuns: 5000 },
    );
  });
});

describe('FORBIDDEN_KEY_CHARS', () => {
  const hex = (ch: string) => 'U+' + ch.charCodeAt(0).toString(16).toUpperCase().padStart(4, '0');
  it.each(['/', '\\', '#', '?', '\u0000', '\u001f', '\u007f', '\u0080', '\u009f'].map((ch) => [hex(ch), ch]))('matches %s', (_name, ch) => {
    expect(FORBIDDEN_KEY_CHARS.test(`a${ch}b`)).toBe(true);
    expect(hasForbiddenKeyChar(`a${ch}b`)).toBe(true);
  });

  it.each([' ', '~', '\u00a0', '%', '_', 'É', '&', "'"].map((ch) => [hex(ch), ch]))('does not match %s', (_name, ch) => {
    expect(hasForbiddenKeyChar(`a${ch}b`)).toBe(false);
  });

  it('gives the same answer on repeated calls (no global-regex state)', () => {
    expect([1, 2, 3].map(() => hasForbiddenKeyChar('x/'))).toEqual([true, true, true]);
  });
});
