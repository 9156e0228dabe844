/**
 * The diff of two stored layouts (layout-record.ts): the recorded one, which wrote the data, and the one a schema
 * about to be served would use — each change classified by what it takes on live data (docs/schema-changes.md):
 *
 * | class | examples | what happens |
 * | --- | --- | --- |
 * | `compatible` | a new type, a new nullable field, a widened field, a new change log | recorded, nothing else |
 * | `build` | a new index, unique index, summary or copy; a changed one | built online by the workers; reads through it answer `ACCESS_PATH_BUILDING` until it is ready |
 * | `rekey` | a type's table, PartitionKey or RowKey template changed | its entities copied to their new addresses online by `npm run migrate -- apply` (rekey-build.ts); a server never starts one |
 * | `retire` | an index, summary or copy removed | its entities stay where they are, unread |
 * | `refused` | a type's EntityType changed, a table per period re-keyed, a field's type narrowed, a non-null field added, a stored type or field removed | the server does not start; the change says what makes it possible |
 *
 * A refusal or a re-key that only matters while entities hold the data (`probe`) is lifted when none of the type is
 * stored.
 */
import type { ASTNode } from 'graphql';
import { rekeyPathId } from '../model/derived-paths';
import { canonicalJson, type RecordedField, type RecordedLayout, type RecordedPath, type RecordedType } from './layout-record';

export type ChangeClass = 'compatible' | 'build' | 'rekey' | 'retire' | 'refused';

/** One change between the recorded layout and the new one. */
export interface LayoutChange {
  class: ChangeClass;
  /** `Type`, `Type.field`, or a path id (`index:Order.byCustomer`). */
  coordinate: string;
  /** Set for a change of a derived path. */
  pathId?: string;
  /** What changed, in a sentence. */
  description: string;
  /** For a refusal: what makes the change possible; for a re-key: how it is carried out. */
  remedy?: string;
  /** A derived path whose definition changed (it was recorded before): its build must end with a repair pass. */
  changed?: boolean;
  /**
   * For a refusal that holds only while entities of a type are stored: the recorded type's table and EntityType,
   * probed by the deployment (deployment.ts); the change is compatible when none is stored.
   */
  probe?: { type: string; table: string; entityType: string };
  /** Where the change is in the new schema, for the error's file:line:column. */
  node?: ASTNode;
}

/** Widenings a stored value survives: what the old EDM type reads as under the new one. */
const WIDER: Record<string, string[]> = { Int32: ['Int64', 'Double'] };

/**
 * Classifies every difference between `before` (recorded) and `after` (the schema to serve).
 * @param locate the new schema's AST node of a `Type` or `Type.field` coordinate, when it has one
 * @returns the changes, types first, then derived paths, each list in coordinate order
 */
export function diffLayouts(
  before: RecordedLayout,
  after: RecordedLayout,
  locate: (coordinate: string) => ASTNode | undefined = () => undefined,
): LayoutChange[] {
  const changes: LayoutChange[] = [];
  for (const name of sortedUnion(before.types, after.types)) {
    changes.push(...typeChanges(name, before.types[name], after.types[name], locate));
  }
  for (const id of sortedUnion(before.paths, after.paths)) {
    const change = pathChange(id, before.paths[id], after.paths[id], locate);
    if (change) changes.push(change);
  }
  return changes;
}

function sortedUnion(a: Record<string, unknown>, b: Record<string, unknown>): string[] {
  return [...new Set([...Object.keys(a), ...Object.keys(b)])].sort();
}

function typeChanges(name: string, old: RecordedType | undefined, now: RecordedType | undefined, locate: (c: string) => ASTNode | undefined): LayoutChange[] {
  if (!old) return [{ class: 'compatible', coordinate: name, description: `new type ${name}`, node: locate(name) }];
  const probe = { type: name, table: old.table, entityType: old.entityType };
  if (!now) {
    return [
      {
        class: 'refused',
        coordinate: name,
        description: `type ${name} removed while its entities may be stored (table ${old.table})`,
        remedy: `delete its entities first (npm run migrate -- apply --drop ${name}), or keep the type`,
        probe,
      },
    ];
  }
  const changes: LayoutChange[] = [];
  const rekey = keyChange(name, old, now, probe, locate(name));
  if (rekey) changes.push(rekey);
  for (const field of sortedUnion(old.fields, now.fields)) {
    const change = fieldChange(`${name}.${field}`, old.fields[field], now.fields[field], probe, locate);
    if (change) changes.push(change);
  }
  return changes;
}

/** Where a type's entities live, as a re-key records it (rekey-build.ts): its table, key templates and EntityType. */
export interface RecordedAddressing {
  table: string;
  partitionKey: string;
  rowKey: string;
  entityType: string;
}

/** The part of a recorded type that decides its entities' addresses. */
export function addressingOf(type: RecordedType): RecordedAddressing {
  return { table: type.table, partitionKey: type.partitionKey, rowKey: type.rowKey, entityType: type.entityType };
}

/**
 * A changed table, PartitionKey or RowKey template: a re-key, carried out online (rekey-build.ts) — except for an
 * EntityType changed (entities of the old one would be read as another type's) or a table per period (its tables
 * cannot be listed from the keys), which are refused.
 */
function keyChange(
  name: string,
  old: RecordedType,
  now: RecordedType,
  probe: NonNullable<LayoutChange['probe']>,
  node: ASTNode | undefined,
): LayoutChange | undefined {
  const parts = (['table', 'partitionKey', 'rowKey'] as const).filter((p) => old[p] !== now[p]);
  if (old.entityType !== now.entityType) {
    return {
      class: 'refused',
      coordinate: name,
      description: `${name}'s EntityType changed from ${JSON.stringify(old.entityType)} to ${JSON.stringify(now.entityType)}: stored ${name} entities would be read as another type`,
      remedy: `keep typeName ${JSON.stringify(old.entityType)}`,
      probe,
      node,
    };
  }
  if (parts.length === 0) return undefined;
  const what = parts.map((p) => `${p} from ${JSON.stringify(old[p])} to ${JSON.stringify(now[p])}`).join(', ');
  if (old.table.includes('{') || now.table.includes('{')) {
    return {
      class: 'refused',
      coordinate: name,
      description: `${name}'s ${what} changed, and it has a table per period: its stored entities cannot be listed to re-key them`,
      remedy: `keep ${name}'s table and keys; a new type with the new ones, written from then on, takes the new periods`,
      probe,
      node,
    };
  }
  return {
    class: 'rekey',
    coordinate: name,
    pathId: rekeyPathId(name),
    description: `${name}'s ${what} changed: every stored ${name} is copied to its new address online, then the old ones deleted`,
    remedy: `npm run migrate -- apply re-keys ${name} while the servers of the recorded version serve it; servers of this version serve ${name} once it is done`,
    probe,
    node,
  };
}

function fieldChange(
  coordinate: string,
  old: RecordedField | undefined,
  now: RecordedField | undefined,
  probe: NonNullable<LayoutChange['probe']>,
  locate: (c: string) => ASTNode | undefined,
): LayoutChange | undefined {
  const node = locate(coordinate);
  // A summary's or copy's field is written by its path's build, and read only once that is ready (path-states.ts).
  if ((!old && now?.derived) || (old?.derived && !now)) {
    return { class: 'compatible', coordinate, description: `${now ? 'new' : 'removed'} ${(now ?? old)!.derived} field ${coordinate}`, node };
  }
  if (!old && now) {
    if (!now.nonNull) return { class: 'compatible', coordinate, description: `new nullable field ${coordinate}`, node };
    return {
      class: 'refused',
      coordinate,
      description: `new non-null field ${coordinate}: stored entities hold no value for it`,
      remedy: 'add it nullable, give every stored entity a value (a mutation or npm run load), then make it non-null',
      probe,
      node,
    };
  }
  if (old && !now) {
    return {
      class: 'refused',
      coordinate,
      description: `stored field ${coordinate} removed while entities may hold it`,
      remedy: `say it may go (npm run migrate -- apply --drop ${coordinate}): its values stay in storage, unread, until each entity is next written`,
      probe,
    };
  }
  if (!old || !now) return undefined;
  const problems = storedTypeProblems(old, now, '');
  if (problems.length > 0) {
    return {
      class: 'refused',
      coordinate,
      description: `${coordinate}: ${problems.join('; ')}`,
      remedy: 'keep the stored type (a widening — Int to Long or Float, non-null to nullable, new enum values — is compatible), or add a new field and fill it',
      probe,
      node,
    };
  }
  if (
    old.type !== now.type ||
    old.nonNull !== now.nonNull ||
    old.edm !== now.edm ||
    canonicalJson(old.fields ?? {}) !== canonicalJson(now.fields ?? {}) ||
    (now.values?.length ?? 0) !== (old.values?.length ?? 0)
  )
    return {
      class: 'compatible',
      coordinate,
      description: `${coordinate} widened (${old.type}${old.nonNull ? '!' : ''} → ${now.type}${now.nonNull ? '!' : ''})`,
      node,
    };
  return undefined;
}

function pathChange(
  id: string,
  old: RecordedPath | undefined,
  now: RecordedPath | undefined,
  locate: (c: string) => ASTNode | undefined,
): LayoutChange | undefined {
  const coordinate = (now ?? old)!.kind === 'changeLog' ? (now ?? old)!.type : `${(now ?? old)!.type}.${(now ?? old)!.name}`;
  const what = (p: RecordedPath) => (p.kind === 'changeLog' ? `change log of ${p.type}` : `${p.kind} ${p.type}.${p.name}`);
  if (!old && now) {
    if (now.kind === 'changeLog')
      return { class: 'compatible', coordinate, pathId: id, description: `new ${what(now)}: it holds the writes from now on`, node: locate(coordinate) };
    return { class: 'build', coordinate, pathId: id, description: `new ${what(now)}: built online from the stored entities`, node: locate(coordinate) };
  }
  if (old && !now) return { class: 'retire', coordinate, pathId: id, description: `${what(old)} removed: its entities stay where they are, unread` };
  if (!old || !now || JSON.stringify(old.definition) === JSON.stringify(now.definition)) return undefined;
  const rebuilt = now.kind === 'index' ? 'rebuilt online under the same name; the build ends by deleting its index entities at the old keys' : 'rebuilt online';
  return {
    class: 'build',
    coordinate,
    pathId: id,
    changed: true,
    description: `${what(now)} changed (${changedParts(old, now)}): ${rebuilt}`,
    node: locate(coordinate),
  };
}

function changedParts(old: RecordedPath, now: RecordedPath): string {
  return Object.keys({ ...old.definition, ...now.definition })
    .filter((k) => JSON.stringify(old.definition[k]) !== JSON.stringify(now.definition[k]))
    .map((k) => `${k}: ${JSON.stringify(old.definition[k])} → ${JSON.stringify(now.definition[k])}`)
    .join('; ');
}

/**
 * Why values stored under `old` may not read as `now` (empty: they all do). A value object's fields are compared one
 * by one (`at`: the field's path inside it): one removed stays unread in the JSON text, a new one must be nullable.
 */
function storedTypeProblems(old: RecordedField, now: RecordedField, at: string): string[] {
  const problems: string[] = [];
  const where = at ? `${at}: ` : '';
  if (old.edm !== now.edm && !(WIDER[old.edm] ?? []).includes(now.edm))
    problems.push(`${where}its stored type changed from ${old.type} (${old.edm}) to ${now.type} (${now.edm})`);
  if (!old.nonNull && now.nonNull) problems.push(`${where}it became non-null, and stored entities may hold no value`);
  if ((old.series ?? 0) !== (now.series ?? 0)) problems.push(`${where}its series length changed from ${old.series ?? 0} to ${now.series ?? 0}`);
  if (Boolean(old.list) !== Boolean(now.list))
    problems.push(`${where}it changed from ${old.list ? 'a list' : 'one value'} to ${now.list ? 'a list' : 'one value'}`);
  if (Boolean(old.fields) !== Boolean(now.fields))
    problems.push(`${where}it changed from ${old.fields ? 'a value object' : 'a scalar'} to ${now.fields ? 'a value object' : 'a scalar'}`);
  const removed = (old.values ?? []).filter((v) => now.values && !now.values.includes(v));
  if (removed.length > 0) problems.push(`${where}enum values ${removed.join(', ')} were removed, and stored entities may hold them`);
  if (!old.fields || !now.fields) return problems;
  for (const [name, f] of Object.entries(now.fields)) {
    const path = at ? `${at}.${name}` : name;
    const before = old.fields[name];
    if (!before) {
      if (f.nonNull) problems.push(`${path}: a new non-null field of a value object, and stored values hold none`);
    } else problems.push(...storedTypeProblems(before, f, path));
  }
  return problems;
}
