/**
 * The custom scalars of schema/directives.graphql: Long (Edm.Int64, a decimal string in JSON, since a JSON
 * number loses precision past 2^53) and DateTime (Edm.DateTime, an ISO 8601 string in UTC).
 */
import { GraphQLError, Kind, type GraphQLScalarType, type ValueNode } from 'graphql';

function longFrom(value: unknown): bigint {
  if (typeof value === 'bigint') return value;
  if ((typeof value === 'string' && /^-?\d+$/.test(value)) || (typeof value === 'number' && Number.isSafeInteger(value))) return BigInt(value);
  throw new GraphQLError(`Long cannot represent ${JSON.stringify(value)}: expected an integer as a decimal string`, { extensions: { code: 'BAD_USER_INPUT' } });
}

function dateFrom(value: unknown): Date {
  const d = value instanceof Date ? value : typeof value === 'string' ? new Date(value) : undefined;
  if (!d || Number.isNaN(d.getTime())) {
    throw new GraphQLError(`DateTime cannot represent ${JSON.stringify(value)}: expected an ISO 8601 date-time`, { extensions: { code: 'BAD_USER_INPUT' } });
  }
  return d;
}

function literal(node: ValueNode): unknown {
  return node.kind === Kind.STRING || node.kind === Kind.INT ? node.value : undefined;
}

/** Gives the schema's `Long` and `DateTime` scalars (built from SDL, so without behaviour) their coercion. */
export function implementScalars(scalars: { Long?: GraphQLScalarType; DateTime?: GraphQLScalarType }): void {
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
