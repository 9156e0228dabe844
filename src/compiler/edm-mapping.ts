/**
 * GraphQL scalar → EDM type. Types are explicit so that a value always lands with one EDM type: untyped, the
 * SDK sends an integer-valued JS number as Int32, and a salary of 111444.00 would not be the Double that
 * 84054.50 is.
 */
import { isEnumType, type GraphQLNamedType } from 'graphql';
import type { EdmType } from '../storage/storage-types';

const SCALAR_EDM: Record<string, EdmType> = {
  Int: 'Int32',
  Float: 'Double',
  String: 'String',
  ID: 'String',
  Boolean: 'Boolean',
  Long: 'Int64',
  DateTime: 'DateTime',
  // Exact decimal text (src/model/decimal.ts): Edm.Double cannot hold 0.1, and Edm has no decimal type.
  Decimal: 'String',
};

/** The EDM type that stores values of `type`, or undefined when the type cannot be a property. Enums: String. */
export function edmTypeOf(type: GraphQLNamedType): EdmType | undefined {
  if (isEnumType(type)) return 'String';
  return SCALAR_EDM[type.name];
}
