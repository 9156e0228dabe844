/**
 * Inheritance relationships (the guide's "Inheritance relationships" under "Modelling relationships"): a GraphQL
 * interface whose implementations are entity types stored under one layout — the same table, PartitionKey and
 * RowKey templates — is the guide's abstract `Person` with its concrete classes in one table. One address holds an
 * entity of one of them, told apart by its `EntityType` property ("Working with heterogeneous entity types", its
 * second option), so a field returning the interface is one point query, and a connection of it one range query
 * that returns each entity as its own type.
 */
import type { EntityModel } from './types';

/**
 * The concrete entity type of a stored entity read through `target`: the type whose EntityType it carries, if
 * `target` reads it — `target` itself, or for an interface one of its implementations. Undefined for an entity of
 * any other type (another type sharing the partition, or a sibling read through a concrete type).
 */
export function concreteType(target: EntityModel, entityType: unknown): EntityModel | undefined {
  if (target.implementations) return target.implementations.find((e) => e.entityType === entityType);
  return target.entityType === entityType ? target : undefined;
}

/** The interfaces `entity` implements that are stored: its siblings share its address space. */
export function storedInterfacesOf(entity: EntityModel, interfaces: Map<string, EntityModel>): EntityModel[] {
  return [...interfaces.values()].filter((i) => i.implementations!.includes(entity));
}
