/** Reads the SDL files of a schema folder (every `*.graphql`, in name order). */
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ErrorCode, TablegraphError } from '../errors';
import type { SdlSource } from './compile';

/**
 * @param dir the schema folder, e.g. `schema`
 * @returns one SdlSource per `*.graphql` file, named by its path relative to the working directory
 * @throws TablegraphError CONFIG_INVALID when the folder is missing or holds no `.graphql` file
 */
export function loadSchemaSources(dir: string): SdlSource[] {
  let files: string[];
  try {
    files = readdirSync(dir)
      .filter((f) => f.endsWith('.graphql'))
      .sort();
  } catch (e) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Cannot read the schema folder ${dir}: ${(e as Error).message}`);
  }
  if (files.length === 0) throw new TablegraphError(ErrorCode.CONFIG_INVALID, `The schema folder ${dir} holds no .graphql file`);
  return files.map((f) => ({ name: relative(process.cwd(), join(dir, f)) || f, body: readFileSync(join(dir, f), 'utf8') }));
}
