/**
 * Reversible escaping of values placed inside a PartitionKey or RowKey.
 *
 * The Table service refuses `/ \ # ?` and control characters (U+0000–U+001F, U+007F–U+009F) in keys, and real
 * data contains them (37 job titles of the HR example's real data carry a `/`). Values are percent-encoded: each escaped
 * character becomes `%XX` per UTF-8 byte, uppercase hex. Besides the forbidden characters, `%` (the escape
 * character) and `_` (the separator key templates put between parts, as in the guide's "Compound key pattern",
 * `empid_000123_2012`) are escaped, so an escaped value never contains a bare `_`: the RowKey prefix
 * `lastname_SMITH_` can never match the key of a value `SMITH_JONES`. Everything else (spaces, `&`, `'`, `-`,
 * letters such as `É`, emoji) is kept as is, so keys stay readable in a storage explorer.
 *
 * The encoding is canonical: a value has exactly one encoded form and `unescapeKeyValue` accepts only that form,
 * so two different keys never decode to the same value.
 */
import { ErrorCode, TablegraphError } from '../errors';

/**
 * Matches one character the Table service forbids in a PartitionKey or RowKey: `/`, `\`, `#`, `?`, U+0000–U+001F,
 * U+007F–U+009F. No `g` flag on purpose: `.test` on a global regex is stateful (lastIndex).
 */
// eslint-disable-next-line no-control-regex -- the control characters are exactly what keys may not hold
export const FORBIDDEN_KEY_CHARS = /[/\\#?\u0000-\u001F\u007F-\u009F]/;

/** One character `escapeKeyValue` encodes: the forbidden ones, plus `%` and `_`. */
// eslint-disable-next-line no-control-regex -- the control characters are escaped like the other forbidden ones
const MUST_ESCAPE_CHAR = /[/\\#?%_\u0000-\u001F\u007F-\u009F]/;
const MUST_ESCAPE_ALL = new RegExp(MUST_ESCAPE_CHAR.source, 'g');
const UPPER_HEX_BYTE = /^[0-9A-F]{2}$/;

/** True when `key` (an already rendered PartitionKey or RowKey) holds a character the Table service refuses. */
export function hasForbiddenKeyChar(key: string): boolean {
  return FORBIDDEN_KEY_CHARS.test(key);
}

/**
 * Escapes one value for use inside a key: forbidden characters, control characters, `%` and `_` become `%XX`
 * (UTF-8 bytes, uppercase hex; U+0085 becomes `%C2%85`). Never throws; `''` stays `''`.
 * The result contains no forbidden character and no `_`.
 */
export function escapeKeyValue(value: string): string {
  return value.replace(MUST_ESCAPE_ALL, percentEncode);
}

function percentEncode(ch: string): string {
  let out = '';
  for (const byte of Buffer.from(ch, 'utf8')) out += '%' + byte.toString(16).toUpperCase().padStart(2, '0');
  return out;
}

/**
 * Inverse of `escapeKeyValue`. Accepts only the canonical encoding: `%XX` with uppercase hex that encodes a
 * character `escapeKeyValue` escapes (`%C2%80`–`%C2%9F` for U+0080–U+009F), and no bare `_`, `%` or forbidden
 * character.
 * @throws TablegraphError(BAD_USER_INPUT, details `{ offset }` = index in `encoded`) on a malformed `%`
 *   sequence (truncated, lowercase or non-hex digits, invalid UTF-8, an escape of a character that is never
 *   escaped) or a bare character that should have been escaped.
 */
export function unescapeKeyValue(encoded: string): string {
  let out = '';
  let i = 0;
  while (i < encoded.length) {
    const ch = encoded[i];
    if (ch !== '%') {
      if (MUST_ESCAPE_CHAR.test(ch)) {
        throw malformed(encoded, i, `a bare ${JSON.stringify(ch)} must be written as ${percentEncode(ch)}`);
      }
      out += ch;
      i += 1;
      continue;
    }
    const byte = readByte(encoded, i);
    if (byte < 0x80) {
      const decoded = String.fromCharCode(byte);
      if (!MUST_ESCAPE_CHAR.test(decoded)) {
        throw malformed(encoded, i, `${encoded.slice(i, i + 3)} encodes ${JSON.stringify(decoded)}, which is never escaped`);
      }
      out += decoded;
      i += 3;
    } else if (byte === 0xc2 && encoded[i + 3] === '%') {
      // U+0080–U+009F are the only non-ASCII characters escaped; in UTF-8 they are C2 80 – C2 9F.
      const second = readByte(encoded, i + 3);
      if (second < 0x80 || second > 0x9f) {
        throw malformed(encoded, i, `${encoded.slice(i, i + 6)} is not an escaped control character U+0080–U+009F`);
      }
      out += String.fromCharCode(second);
      i += 6;
    } else {
      throw malformed(encoded, i, `${encoded.slice(i, i + 3)} does not start an escaped character`);
    }
  }
  return out;
}

/** Reads the byte of the `%XX` at `at`; throws on a truncated or non-uppercase-hex sequence. */
function readByte(encoded: string, at: number): number {
  const hex = encoded.slice(at + 1, at + 3);
  if (!UPPER_HEX_BYTE.test(hex)) {
    throw malformed(encoded, at, `'%' must be followed by two uppercase hex digits, found ${JSON.stringify(hex)}`);
  }
  return parseInt(hex, 16);
}

function malformed(encoded: string, offset: number, reason: string): TablegraphError {
  const shown = encoded.length > 80 ? encoded.slice(0, 80) + '…' : encoded;
  return new TablegraphError(ErrorCode.BAD_USER_INPUT, `Malformed escaped key value ${JSON.stringify(shown)} at offset ${offset}: ${reason}.`, { offset });
}
