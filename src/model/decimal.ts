/**
 * Exact decimal numbers for money and for the sums summaries keep (`scalar Decimal`). A binary double cannot hold
 * 0.1, so a sum of doubles drifts: add 1e20 and take it away again and 112 is left over. Decimal values are kept
 * as canonical decimal text (Edm.String) and added with decimal.js at a precision no sum of valid values reaches,
 * so any sequence of writes followed by their inverses returns a summary to its exact earlier value.
 */
import { Decimal as DecimalJs } from 'decimal.js';
import { ErrorCode, TablegraphError } from '../errors';

/**
 * Significant digits a Decimal value may have (34: IEEE 754 decimal128, what SQL Server's and .NET's decimal
 * types come close to). Keeps every product of three values and every sum of them exact at PRECISION.
 */
export const MAX_DECIMAL_DIGITS = 34;

/** Working precision (significant digits): far above what products and sums of valid values need. */
const PRECISION = 400;

/** decimal.js configured so that arithmetic on valid values never rounds. */
export const Decimal = DecimalJs.clone({ precision: PRECISION, rounding: DecimalJs.ROUND_HALF_EVEN, toExpNeg: -9e15, toExpPos: 9e15 });
export type Decimal = InstanceType<typeof Decimal>;

const DECIMAL_TEXT = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;

/**
 * A Decimal from a GraphQL input or a stored property: decimal text (`"111444.00"`, `"-1.5e3"`) or a finite JS
 * number (taken as the shortest text that reads back as it, `0.1` → 0.1 exactly).
 * @throws TablegraphError BAD_USER_INPUT when the value is neither, or has more than MAX_DECIMAL_DIGITS
 *   significant digits; details { field } when `field` is given
 */
export function toDecimal(value: unknown, field?: string): Decimal {
  const bad = (why: string) =>
    new TablegraphError(ErrorCode.BAD_USER_INPUT, `${field ? `${field}: ` : ''}${why} (got ${JSON.stringify(String(value))})`, field ? { field } : {});
  let d: Decimal;
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw bad('expected a finite decimal number');
    d = new Decimal(String(value));
  } else if (typeof value === 'string' && DECIMAL_TEXT.test(value.trim())) {
    d = new Decimal(value.trim());
  } else if (value instanceof DecimalJs) {
    d = new Decimal(value);
  } else {
    throw bad('expected a decimal number, e.g. "1234.56"');
  }
  if (d.isZero()) return new Decimal(0); // no negative zero
  if (d.precision() > MAX_DECIMAL_DIGITS) throw bad(`expected at most ${MAX_DECIMAL_DIGITS} significant digits`);
  return d;
}

/**
 * A Decimal as stored by tablegraph (canonical text) or by an older version (a Double), without the digit
 * limit of input values: a summary's running sum may hold more digits than any one value.
 * @throws TablegraphError BAD_USER_INPUT when the property holds neither
 */
export function storedDecimal(value: unknown): Decimal {
  if (value === null || value === undefined) return new Decimal(0);
  if ((typeof value === 'string' && DECIMAL_TEXT.test(value.trim())) || (typeof value === 'number' && Number.isFinite(value))) {
    return new Decimal(String(value).trim());
  }
  throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `a stored decimal holds ${JSON.stringify(String(value))}`);
}

/** The canonical text of a Decimal: no exponent, no trailing zeros after the point (`111444`, `0.5`, `-12.25`). */
export function decimalText(d: Decimal): string {
  return d.toFixed();
}
