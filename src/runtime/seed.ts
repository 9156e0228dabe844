/**
 * The seed: example rows a server loads when it starts on an empty store, so the API answers something at once.
 * They are the schema's own — a load manifest at `<schema folder>/seed/manifest.json` (the HR schema's holds the
 * HR example's: the guide's own example rows) — loaded by the generic loader
 * (src/load), so any schema can have them. A schema folder without one is not seeded.
 */
import fs from 'node:fs';
import path from 'node:path';
import type { GraphQLSchema } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import { checkStepOrder, loadEntities } from '../load/load-entities';
import { readLoadRows } from '../load/load-rows';
import { readManifest } from '../load/manifest';
import type { Model } from '../model/types';
import type { TableStore } from '../storage/table-store';

/** Where a schema folder keeps its seed manifest. */
export function seedManifestPath(schemaDir: string): string {
  return path.join(schemaDir, 'seed', 'manifest.json');
}

/**
 * Whether no table of the model holds any entity: one call per table reading at most one entity (a table scan
 * with a page of 1 — at start-up, never on a request path).
 */
export async function storeIsEmpty(store: TableStore, model: Model): Promise<boolean> {
  for (const table of model.tables) {
    for await (const page of store.scan(table, { pageSize: 1, select: [] })) {
      if (page.length > 0) return false;
    }
  }
  return true;
}

/**
 * Loads the seed manifest into an empty store.
 * @returns the number of entities written (entities, index entities and summary holders), or 0 when there is no
 *   manifest or the store holds something
 * @throws TablegraphError CONFIG_INVALID when a seed row is refused or a seed EGT fails (a schema whose seed does
 *   not fit it is a broken schema folder)
 */
export async function seedIfEmpty(opts: { store: TableStore; model: Model; schema: GraphQLSchema; schemaDir: string }): Promise<number> {
  const manifest = seedManifestPath(opts.schemaDir);
  if (!fs.existsSync(manifest)) return 0;
  const steps = readManifest(manifest);
  checkStepOrder(
    opts.model,
    steps.map((s) => s.type),
  );
  if (!(await storeIsEmpty(opts.store, opts.model))) return 0;
  const summary = await loadEntities({
    store: opts.store,
    model: opts.model,
    steps: steps.map((s) => ({
      type: s.type,
      rows: readLoadRows(s.file, opts.model.entities.get(s.type)!, opts.schema),
      existing: s.existing,
      source: s.file,
    })),
    concurrency: 4,
  });
  const refused = summary.steps.flatMap((s) => s.skipped.map((k) => `${path.basename(s.source ?? s.type)}:${k.line}: ${k.reason}`));
  if (refused.length > 0 || summary.failed.length > 0) {
    throw new TablegraphError(
      ErrorCode.CONFIG_INVALID,
      `The seed rows of ${manifest} do not fit the schema: ${[...refused, ...summary.failed.map((f) => f.error)].join('; ')}`,
      { manifest },
    );
  }
  return summary.entities;
}
