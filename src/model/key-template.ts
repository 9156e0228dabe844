/**
 * Key templates: how a schema directive spells a PartitionKey or RowKey, e.g. `"{customerId}"`,
 * `"order_{id:08}"`, `"name_{surname}_{id:08}"`, `"event_{at:invertedTicks}"`, `"customer"`.
 *
 * Grammar: literal text and placeholders `{name}` (a string, escaped by src/storage/key-escape.ts),
 * `{name:0N}` (a non-negative integer zero-padded to N digits, 1 ≤ N ≤ 19, so numbers sort as strings do) and
 * `{name:desc0N}` (the same number counted down from 10^N − 1, zero-padded to N digits, so the largest number sorts
 * first: "newest year first"), `{name:invertedTicks}` (the guide's "Log tail pattern": newest first),
 * `{name:yyyyMMdd}` and `{name:yyyyMM}` (a date's UTC day or month in digits: a table per day, the guide's "High
 * volume delete pattern") and `{name:hashN}` (the value's hash
 * bucket among N, 2 ≤ N ≤ 10000, zero-padded: see hash-bucket.ts). `{{`/`}}` are not supported; literal text
 * is written unescaped, so it may not contain `{`, `}` or a character keys forbid. Separators follow the guide's
 * "Compound key pattern" (`empid_000123_2012`): a variable-width string is always followed by `_` or the end.
 * Keys sort by ordinal comparison (UTF-16 code units, as JS `<` does): "Sorting data in the Table service".
 */
import { ErrorCode, TablegraphError } from '../errors';
import { FORBIDDEN_KEY_CHARS, escapeKeyValue, unescapeKeyValue } from '../storage/key-escape';
import { bucketWidth, hashBucket } from './hash-bucket';

export type PlaceholderFormat =
  | { kind: 'string' }
  | { kind: 'padded'; width: number }
  | { kind: 'descending'; width: number }
  | { kind: 'invertedTicks' }
  | { kind: 'date'; pattern: DatePattern }
  | { kind: 'hashBucket'; buckets: number };
/** The calendar formats of a DateTime placeholder: its UTC day (`20261122`) or month (`202611`). */
export type DatePattern = 'yyyyMMdd' | 'yyyyMM';
export type TemplateSegment = { kind: 'literal'; text: string } | { kind: 'placeholder'; name: string; format: PlaceholderFormat };
/** A parsed key template. */
export interface KeyTemplate {
  source: string;
  segments: TemplateSegment[];
  /** placeholder names in order */
  fields: string[];
}

/** A key template that does not follow the grammar; `offset` is the char index in `source` of the problem. */
export class KeyTemplateSyntaxError extends Error {
  readonly offset: number;
  readonly source: string;
  constructor(source: string, offset: number, reason: string) {
    super(`Key template ${JSON.stringify(source)}, offset ${offset}: ${reason}`);
    this.name = 'KeyTemplateSyntaxError';
    this.source = source;
    this.offset = offset;
  }
}

const MAX_WIDTH = 19;
/** .NET DateTime.MaxValue.Ticks (9999-12-31T23:59:59.9999999Z) and the ticks of 1970-01-01T00:00:00Z. */
const [MAX_TICKS, EPOCH_TICKS, TICKS_PER_MS] = [3155378975999999999n, 621355968000000000n, 10000n];
/** 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z in ms since 1970. */
const [MIN_DATE_MS, MAX_DATE_MS] = [-62135596800000, 253402300799999];

/**
 * Parses a key template (see the file comment for the grammar). An empty template is refused too.
 * @throws KeyTemplateSyntaxError with the offset of: an unclosed `{` (the `{`), a stray `}` or a nested `{`
 *   (that brace), an empty or invalid placeholder name (its first bad char), an unknown format or a width outside
 *   1..19 (the format's first char), a forbidden key char in a literal (that char), a repeated placeholder (its `{`).
 */
export function parseKeyTemplate(source: string): KeyTemplate {
  if (source.length === 0) throw new KeyTemplateSyntaxError(source, 0, 'a key template may not be empty');
  const segments: TemplateSegment[] = [];
  const fields: string[] = [];
  let literal = '';
  let i = 0;
  while (i < source.length) {
    const ch = source[i];
    // A literal may not hold '}' or a forbidden char; '{' opens a placeholder that ends at the next '}'.
    if (ch === '}') throw new KeyTemplateSyntaxError(source, i, "'}' without a matching '{' ('}}' is not supported)");
    if (ch !== '{') {
      if (FORBIDDEN_KEY_CHARS.test(ch)) {
        throw new KeyTemplateSyntaxError(source, i, `${JSON.stringify(ch)} is not allowed in a key (/ \\ # ? and control characters)`);
      }
      literal += source[i++];
      continue;
    }
    const close = source.indexOf('}', i + 1);
    const nested = source.indexOf('{', i + 1);
    if (close < 0) throw new KeyTemplateSyntaxError(source, i, "'{' is never closed by '}'");
    if (nested >= 0 && nested < close) throw new KeyTemplateSyntaxError(source, nested, "'{' inside a placeholder ('{{' is not supported)");
    const body = source.slice(i + 1, close);
    const colon = body.indexOf(':');
    const name = colon < 0 ? body : body.slice(0, colon);
    const badAt = [...name].findIndex((c, k) => !(k === 0 ? /[_A-Za-z]/ : /[_0-9A-Za-z]/).test(c));
    if (name.length === 0 || badAt >= 0) {
      const reason = name ? `${JSON.stringify(name)} is not a field name ([_A-Za-z][_0-9A-Za-z]*)` : 'a placeholder needs a field name, as in {id}';
      throw new KeyTemplateSyntaxError(source, i + 1 + Math.max(badAt, 0), reason);
    }
    if (fields.includes(name)) throw new KeyTemplateSyntaxError(source, i, `placeholder {${name}} appears twice`);
    const format = colon < 0 ? ({ kind: 'string' } as const) : parseFormat(source, body.slice(colon + 1), i + 2 + colon);
    if (literal) segments.push({ kind: 'literal', text: literal });
    [literal, i] = ['', close + 1];
    segments.push({ kind: 'placeholder', name, format });
    fields.push(name);
  }
  if (literal) segments.push({ kind: 'literal', text: literal });
  return { source, segments, fields };
}

function parseFormat(source: string, spec: string, at: number): PlaceholderFormat {
  if (spec === 'invertedTicks') return { kind: 'invertedTicks' };
  if (spec === 'yyyyMMdd' || spec === 'yyyyMM') return { kind: 'date', pattern: spec };
  const hash = /^hash(\d+)$/.exec(spec);
  if (hash) {
    const buckets = Number(hash[1]);
    if (buckets >= 2 && buckets <= 10000) return { kind: 'hashBucket', buckets };
    throw new KeyTemplateSyntaxError(source, at, `hash buckets must be 2..10000, got ${JSON.stringify(spec)}`);
  }
  const descending = spec.startsWith('desc');
  const digits = descending ? spec.slice(4) : spec;
  const width = /^0\d+$/.test(digits) ? Number(digits) : NaN;
  if (width >= 1 && width <= MAX_WIDTH) return { kind: descending ? 'descending' : 'padded', width };
  if (!Number.isNaN(width)) throw new KeyTemplateSyntaxError(source, at, `padding width must be 1..${MAX_WIDTH}, got ${JSON.stringify(spec)}`);
  throw new KeyTemplateSyntaxError(
    source,
    at,
    `unknown format ${JSON.stringify(spec)}; use 0N (e.g. 08), desc0N (e.g. desc04), invertedTicks, yyyyMMdd, yyyyMM or hashN (e.g. hash64)`,
  );
}

/**
 * Checks that keys rendered from `t` parse back unambiguously and that prefixes cannot overlap: every `string`
 * placeholder must be followed by the end of the template or a literal starting with `_` (padded numbers and descending
 * numbers, invertedTicks and dates are fixed-width, so anything may follow them). Returns one message per problem;
 * empty = fine.
 */
export function checkTemplateSeparators(t: KeyTemplate): string[] {
  const problems: string[] = [];
  t.segments.forEach((seg, k) => {
    if (seg.kind !== 'placeholder' || seg.format.kind !== 'string') return;
    const next = t.segments[k + 1];
    if (next === undefined || (next.kind === 'literal' && next.text.startsWith('_'))) return;
    const follower = next.kind === 'literal' ? JSON.stringify(next.text) : `placeholder {${next.name}}`;
    const fix = `put '_' right after it (as in "{${seg.name}}_...") so keys parse back and prefixes do not overlap`;
    problems.push(`Key template ${JSON.stringify(t.source)}: string placeholder {${seg.name}} is followed by ${follower}; ${fix}.`);
  });
  return problems;
}

/**
 * Renders the full key. `values`: field name → string | number | bigint | Date | boolean.
 * - string placeholder: strings are escaped with `escapeKeyValue`; finite numbers, bigints and booleans via
 *   `String()`, Dates via `toISOString()`, then escaped.
 * - padded `{x:0N}`: a non-negative safe integer, a non-negative bigint or a decimal-integer string (digits only).
 * - descending `{x:desc0N}`: the same values, written as (10^N − 1 − x) zero-padded to N digits.
 * - invertedTicks: a Date or an ISO 8601 string (`YYYY-MM-DD` or a date-time with `Z` or `±hh:mm`).
 * - yyyyMMdd / yyyyMM: the same values, written as their UTC day (`20261122`) or month (`202611`).
 * @throws TablegraphError(BAD_USER_INPUT, details `{ field }`) for a missing/null value, a value of the wrong
 *   kind, a negative/non-integer/too-wide number, an invalid date or a date outside 0001..9999.
 */
export function renderKey(t: KeyTemplate, values: Record<string, unknown>): string {
  return t.segments.map((seg) => (seg.kind === 'literal' ? seg.text : renderPlaceholder(seg.name, seg.format, values[seg.name]))).join('');
}

/**
 * Renders the longest prefix of `t` whose placeholders all have values (not undefined/null): stops before the
 * first placeholder without one, literals before it included. E.g. `name_{surname}_{id:08}` with only
 * surname = SMITH gives `name_SMITH_`: the RowKey prefix of a range query. Present values are checked as in
 * `renderKey` (same errors).
 */
export function renderKeyPrefix(t: KeyTemplate, values: Record<string, unknown>): string {
  let out = '';
  for (const seg of t.segments) {
    if (seg.kind === 'placeholder' && (values[seg.name] === undefined || values[seg.name] === null)) break;
    out += seg.kind === 'literal' ? seg.text : renderPlaceholder(seg.name, seg.format, values[seg.name]);
  }
  return out;
}

function renderPlaceholder(field: string, format: PlaceholderFormat, value: unknown): string {
  if (value === undefined || value === null) throw badValue(field, `a value for ${field} is required to build the key`);
  if (format.kind === 'padded') return paddedValue(field, value, format.width);
  if (format.kind === 'descending') return descendingValue(paddedValue(field, value, format.width));
  if (format.kind === 'hashBucket') return hashBucket(stringValue(field, value), format.buckets);
  if (format.kind === 'date') return dateDigits(field, dateValue(field, value), format.pattern);
  return format.kind === 'string' ? escapeKeyValue(stringValue(field, value)) : ticksOf(dateValue(field, value), field);
}

/** A UTF-16 surrogate without its pair: not a character, and no service can store it. */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** Whether `s` is well-formed Unicode (no lone surrogate). */
export function isWellFormedText(s: string): boolean {
  return !LONE_SURROGATE.test(s);
}

function stringValue(field: string, value: unknown): string {
  if (typeof value === 'string') {
    if (!isWellFormedText(value)) throw badValue(field, `${field} is not well-formed Unicode (it holds a lone surrogate)`);
    return value;
  }
  const scalar = typeof value === 'bigint' || typeof value === 'boolean' || (typeof value === 'number' && Number.isFinite(value));
  if (scalar) return String(value);
  if (value instanceof Date && !Number.isNaN(value.getTime())) return value.toISOString();
  throw badValue(field, `${field} must be a string, a finite number, a bigint, a boolean or a valid Date`);
}

function paddedValue(field: string, value: unknown, width: number): string {
  let n: bigint;
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) n = BigInt(value);
  else if (typeof value === 'bigint' && value >= 0n) n = value;
  else if (typeof value === 'string' && /^[0-9]+$/.test(value)) n = BigInt(value);
  else throw badValue(field, `${field} must be a non-negative integer (number, bigint or digit string), got ${describe(value)}`);
  const digits = n.toString();
  if (digits.length > width) throw badValue(field, `${field} = ${digits} does not fit in ${width} digits`);
  return digits.padStart(width, '0');
}

/** The digits of 10^N − 1 − x for the N digits of x: each digit d becomes 9 − d, so the order is reversed. */
function descendingValue(padded: string): string {
  return padded.replace(/\d/g, (d) => String(9 - Number(d)));
}

function dateValue(field: string, value: unknown): Date {
  let date: Date | undefined;
  if (value instanceof Date) date = value;
  else if (typeof value === 'string') date = parseIsoDate(value);
  if (date === undefined || Number.isNaN(date.getTime())) {
    throw badValue(field, `${field} must be a Date or an ISO 8601 date-time with Z or an offset, got ${describe(value)}`);
  }
  return date;
}

/** The UTC day (`20261122`) or month (`202611`) of `date`, years 0001..9999. */
function dateDigits(field: string, date: Date, pattern: DatePattern): string {
  const ms = date.getTime();
  if (ms < MIN_DATE_MS || ms > MAX_DATE_MS) throw badValue(field, `${field} must be a date in 0001-01-01..9999-12-31, got ${date.toISOString()}`);
  const digits = date.toISOString().slice(0, 10).replace(/-/g, '');
  return pattern === 'yyyyMMdd' ? digits : digits.slice(0, 6);
}

const ISO_DATE = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:\.\d{1,9})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

/**
 * Parses an ISO 8601 date (`YYYY-MM-DD`, midnight UTC) or date-time with a zone (`Z` or `±hh:mm`); undefined if
 * malformed or not a real calendar date (`2026-02-30`, which `new Date` would roll over to March 2nd).
 */
export function parseIsoDate(s: string): Date | undefined {
  const m = ISO_DATE.exec(s);
  if (!m) return undefined;
  const [y, mo, d, h = '00', mi = '00', sec = '00'] = m.slice(1);
  // Date() silently rolls 2021-02-30 over to March 2nd: rebuild the wall-clock fields and compare.
  const wall = new Date(0);
  wall.setUTCFullYear(Number(y), Number(mo) - 1, Number(d));
  wall.setUTCHours(Number(h), Number(mi), Number(sec));
  if (wall.toISOString().slice(0, 19) !== `${y}-${mo}-${d}T${h}:${mi}:${sec}`) return undefined;
  const date = new Date(s); // refuses offsets beyond ±23:59
  return Number.isNaN(date.getTime()) ? undefined : date;
}

function describe(value: unknown): string {
  return typeof value === 'string'
    ? JSON.stringify(value)
    : typeof value === 'object'
      ? Object.prototype.toString.call(value)
      : `${typeof value} ${String(value)}`;
}

function badValue(field: string, message: string): TablegraphError {
  return new TablegraphError(ErrorCode.BAD_USER_INPUT, message, { field });
}

const keyPatterns = new WeakMap<KeyTemplate, RegExp>();

function keyPattern(t: KeyTemplate): RegExp {
  const cached = keyPatterns.get(t);
  if (cached) return cached;
  // An escaped string never holds '_' (the separator), so it is the longest run without one.
  const parts = t.segments.map((seg) => {
    if (seg.kind === 'literal') return seg.text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    if (seg.format.kind === 'padded' || seg.format.kind === 'descending') return `(\\d{${seg.format.width}})`;
    if (seg.format.kind === 'hashBucket') return `(\\d{${bucketWidth(seg.format.buckets)}})`;
    if (seg.format.kind === 'date') return `(\\d{${seg.format.pattern.length}})`;
    return seg.format.kind === 'invertedTicks' ? '(\\d{19})' : '([^_]*)';
  });
  const re = new RegExp(`^${parts.join('')}$`);
  keyPatterns.set(t, re);
  return re;
}

/**
 * Inverse of `renderKey`: field → decoded string (string placeholders unescaped, padded and descending numbers as
 * decimal without padding, invertedTicks as an ISO date string truncated to ms, yyyyMMdd and yyyyMM as the ISO date
 * `YYYY-MM-DD` of the day, or of the month's first day). Returns null when `key` does not match `t`
 * (wrong literal, wrong width, malformed escape, ticks out of range). For a template that fails
 * `checkTemplateSeparators` the split may not be the only one (a string takes the longest `_`-free run).
 */
export function parseKey(t: KeyTemplate, key: string): Record<string, string> | null {
  const m = keyPattern(t).exec(key);
  if (!m) return null;
  const out: Record<string, string> = {};
  let group = 1; // capture groups follow the placeholders in order
  try {
    for (const seg of t.segments) {
      if (seg.kind === 'literal') continue;
      const raw = m[group++];
      if (seg.format.kind === 'hashBucket') continue; // a hash does not give its value back
      if (seg.format.kind === 'string') out[seg.name] = unescapeKeyValue(raw);
      else if (seg.format.kind === 'padded') out[seg.name] = BigInt(raw).toString();
      else if (seg.format.kind === 'descending') out[seg.name] = BigInt(descendingValue(raw)).toString();
      else if (seg.format.kind === 'date') out[seg.name] = isoDateOf(raw);
      else out[seg.name] = fromInvertedTicks(raw).toISOString();
    }
  } catch {
    return null;
  }
  return out;
}

/** `20261122` → `2026-11-22`, `202611` → `2026-11-01`. @throws Error when that is not a real calendar day */
function isoDateOf(digits: string): string {
  const iso = `${digits.slice(0, 4)}-${digits.slice(4, 6)}-${digits.length === 8 ? digits.slice(6, 8) : '01'}`;
  if (!parseIsoDate(iso)) throw new Error(`not a date: ${digits}`);
  return iso;
}

/**
 * The guide's "Log tail pattern": `string.Format("{0:D19}", DateTime.MaxValue.Ticks - date.Ticks)`, i.e. a 19-digit
 * zero-padded (3155378975999999999 − ticks), ticks = 100 ns intervals since 0001-01-01T00:00:00Z. Later dates
 * give smaller strings, so a RowKey built from it lists the newest entity first. JS dates carry ms, so the last
 * four digits are always 9999.
 * @throws TablegraphError(BAD_USER_INPUT) for an invalid Date or one outside 0001-01-01..9999-12-31.
 */
export function invertedTicks(date: Date): string {
  return ticksOf(date);
}

function ticksOf(date: Date, field?: string): string {
  const ms = date.getTime();
  if (Number.isNaN(ms) || ms < MIN_DATE_MS || ms > MAX_DATE_MS) {
    const shown = Number.isNaN(ms) ? 'an invalid Date' : date.toISOString();
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `inverted ticks need a date in 0001-01-01..9999-12-31, got ${shown}`, field ? { field } : {});
  }
  return (MAX_TICKS - (EPOCH_TICKS + BigInt(ms) * TICKS_PER_MS)).toString().padStart(19, '0');
}

/**
 * Inverse of `invertedTicks`: `new DateTime(DateTime.MaxValue.Ticks - long.Parse(s))`. Keys written by .NET carry
 * 100 ns precision; the Date keeps whole ms (rounded down).
 * @throws TablegraphError(BAD_USER_INPUT) unless `s` is 19 digits not above 3155378975999999999.
 */
export function fromInvertedTicks(s: string): Date {
  if (!/^\d{19}$/.test(s) || BigInt(s) > MAX_TICKS) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${JSON.stringify(s)} is not a 19-digit inverted ticks value`);
  }
  const sinceEpoch = MAX_TICKS - BigInt(s) - EPOCH_TICKS;
  let ms = sinceEpoch / TICKS_PER_MS; // bigint division truncates toward zero; floor for pre-1970 dates
  if (sinceEpoch % TICKS_PER_MS < 0n) ms -= 1n;
  return new Date(Number(ms));
}

/**
 * The exclusive upper bound of a RowKey prefix range query (the guide's "Compound key pattern":
 * `RowKey ge 'empid_000123' and RowKey lt 'empid_000124'`): the smallest string greater than every string that
 * starts with `prefix`, found by incrementing the last UTF-16 code unit (a trailing U+FFFF is dropped and the one
 * before it incremented). Where that would leave a lone surrogate, the next well-formed string is returned instead.
 * `''` (or only U+FFFF) → undefined, meaning "to the end of the partition".
 */
export function prefixUpperBound(prefix: string): string | undefined {
  let s = prefix;
  while (s.length > 0 && s.charCodeAt(s.length - 1) === 0xffff) s = s.slice(0, -1);
  if (s.length === 0) return undefined;
  const [last, head] = [s.charCodeAt(s.length - 1), s.slice(0, -1)];
  const before = head.length > 0 ? head.charCodeAt(head.length - 1) : -1;
  if (last === 0xdfff && before >= 0xd800 && before <= 0xdbff) {
    // (H, U+DFFF) → (H+1, U+DC00); after U+10FFFF every surrogate pair is passed, so U+E000 comes next.
    return before === 0xdbff ? head.slice(0, -1) + '\ue000' : head.slice(0, -1) + String.fromCharCode(before + 1, 0xdc00);
  }
  if (last === 0xd7ff) return head + '\ud800\udc00';
  return head + String.fromCharCode(last + 1);
}
