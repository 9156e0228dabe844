/**
 * The folder of tablegraph's package.json, whether this code runs from its TypeScript sources (`src/`, under tsx or
 * jest) or compiled (`dist/src/`): files the package ships beside its code — `schema/directives.graphql` — are
 * found from it, never from a fixed depth below the running file.
 */
import fs from 'node:fs';
import path from 'node:path';

let root: string | undefined;

/** @returns the absolute path of the nearest folder above this file that holds a package.json */
export function packageRoot(): string {
  if (root) return root;
  let dir = __dirname;
  while (!fs.existsSync(path.join(dir, 'package.json'))) {
    const parent = path.dirname(dir);
    if (parent === dir) throw new Error(`no package.json above ${__dirname}`);
    dir = parent;
  }
  return (root = dir);
}
