/**
 * Which `@key` of a type a Federation `_entities` representation is answered by: the same choice for the resolver
 * (src/resolvers/federation-resolvers.ts) and the demand estimate (src/read/demand.ts), so that what is estimated is
 * what runs.
 */
import type { FederationKey } from './types';

/**
 * @param keys the type's keys, in declaration order (FederationModel.keys)
 * @param representation the representation's values, by field name
 * @returns the first resolvable key whose every field the representation carries (not null); undefined if none
 */
export function representationKey(keys: readonly FederationKey[], representation: Record<string, unknown>): FederationKey | undefined {
  return keys.find((k) => k.path && k.fields.every((f) => representation[f] !== undefined && representation[f] !== null));
}
