/**
 * The custom scalars of schema/directives.graphql: Long (Edm.Int64, a decimal string in JSON, since a JSON
 * number loses precision past 2^53), DateTime (Edm.DateTime, an ISO 8601 string in UTC) and Decimal (exact
 * decimal text, src/model/decimal.ts).
 */
import { GraphQLError, Kind, type GraphQLScalarType, type ValueNode } from 'graphql';
import { isTablegraphError } from '../errors';
import { decimalText, storedDecimal, toDecimal } from '../model/decimal';
import { parseIsoDate } from '../model/key-template';

function longFrom(value: unknown): bigint {
  if (typeof value === 'bigint') return value;
  if ((typeof value === 'string' && /^-?\d+$/.test(value)) || (typeof value === 'number' && Number.isSafeInteger(value))) return BigInt(value);
  throw new GraphQLError(`Long cannot represent ${JSON.stringify(value)}: expected an integer as a decimal string`, { extensions: { code: 'BAD_USER_INPUT' } });
}

/** An ISO 8601 date or date-time with a zone, and a real calendar day: `new Date` would take `2026-02-30` or `March 3`. */
function dateFrom(value: unknown): Date {
  const d = value instanceof Date ? value : typeof value === 'string' ? parseIsoDate(value) : undefined;
  if (!d || Number.isNaN(d.getTime())) {
    throw new GraphQLError(`DateTime cannot represent ${JSON.stringify(value)}: expected an ISO 8601 date (YYYY-MM-DD) or date-time with Z or an offset`, {
      extensions: { code: 'BAD_USER_INPUT' },
    });
  }
  return d;
}

/** An input Decimal's canonical text. */
function decimalFrom(value: unknown): string {
  try {
    return decimalText(toDecimal(value));
  } catch (e) {
    if (!isTablegraphError(e)) throw e;
    throw new GraphQLError(`Decimal cannot represent ${JSON.stringify(value)}: ${e.message.replace(/ \(got .*\)$/, '')}`, {
      extensions: { code: 'BAD_USER_INPUT' },
    });
  }
}

function literal(node: ValueNode): unknown {
  return node.kind === Kind.STRING || node.kind === Kind.INT ? node.value : undefined;
}

/** Gives the schema's `Long`, `DateTime` and `Decimal` scalars (built from SDL, so without behaviour) their coercion. */
export function implementScalars(scalars: { Long?: GraphQLScalarType; DateTime?: GraphQLScalarType; Decimal?: GraphQLScalarType }): void {
  if (scalars.Decimal) {
    // Output: a stored value (canonical text, or a Double an older version wrote) as canonical text.
    scalars.Decimal.serialize = (v) => decimalText(storedDecimal(v));
    scalars.Decimal.parseValue = (v) => decimalFrom(v);
    scalars.Decimal.parseLiteral = (node) =>
      decimalFrom(node.kind === Kind.FLOAT || node.kind === Kind.INT || node.kind === Kind.STRING ? node.value : undefined);
  }
  if (scalars.Long) {
    scalars.Long.serialize = (v) => longFrom(v).toString();
    scalars.Long.parseValue = (v) => longFrom(v);
    scalars.Long.parseLiteral = (node) => longFrom(literal(node));
  }
  if (scalars.DateTime) {
    scalars.DateTime.serialize = (v) => dateFrom(v).toISOString();
    scalars.DateTime.parseValue = (v) => dateFrom(v);
    scalars.DateTime.parseLiteral = (node) => dateFrom(literal(node));
  }
}
