/**
 * A load manifest: the files of several entity types, in dependency order, as JSON —
 * `{ "steps": [ { "type": "Customer", "file": "customers.ndjson" }, { "type": "Order", "file": "orders.csv",
 * "existing": "replace" } ] }` — file paths relative to the manifest's folder.
 */
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { ErrorCode, TablegraphError } from '../errors';

export interface ManifestStep {
  type: string;
  /** Absolute path of the file. */
  file: string;
  existing: 'replace' | 'keep';
}

/**
 * Reads and checks a manifest.
 * @throws TablegraphError BAD_USER_INPUT when it cannot be read or is not of the shape above (naming what is wrong)
 */
export function readManifest(path: string): ManifestStep[] {
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(path, 'utf8'));
  } catch (e) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Cannot read the manifest ${path}: ${(e as Error).message}`, { file: path });
  }
  const steps = (parsed as { steps?: unknown })?.steps;
  if (!Array.isArray(steps) || steps.length === 0) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${path}: expected { "steps": [ { "type": "…", "file": "…" }, … ] } with at least one step`, {
      file: path,
    });
  }
  return steps.map((s: unknown, i) => {
    const step = s as Record<string, unknown>;
    const where = `${path}: steps[${i}]`;
    if (typeof step?.type !== 'string' || typeof step.file !== 'string') {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${where} needs "type" and "file" strings`, { file: path, step: i });
    }
    const existing = step.existing ?? 'replace';
    if (existing !== 'replace' && existing !== 'keep') {
      throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${where}: "existing" is "replace" or "keep", not ${JSON.stringify(existing)}`, {
        file: path,
        step: i,
      });
    }
    return { type: step.type, file: resolve(dirname(path), step.file), existing };
  });
}
