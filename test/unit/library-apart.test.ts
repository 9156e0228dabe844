/**
 * The library apart from its examples: no file of src/ names a type or field of an example schema (examples/hr,
 * examples/tracker) or the examples' data. A capability is a directive any schema can use; the examples show it.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse } from 'graphql';
import { ROOT } from '../support/harness';

/**
 * The object, interface and enum types an example's SDL declares, and its fields with a name of more than one word
 * (`departmentId`, not `id` or `name`, which any schema has).
 */
function exampleNames(dir: string): string[] {
  const names: string[] = [];
  for (const f of fs.readdirSync(dir).filter((x) => x.endsWith('.graphql'))) {
    for (const d of parse(fs.readFileSync(path.join(dir, f), 'utf8')).definitions) {
      if (d.kind === 'ObjectTypeDefinition') for (const field of d.fields ?? []) if (/[a-z][A-Z]/.test(field.name.value)) names.push(field.name.value);
      if (
        (d.kind === 'ObjectTypeDefinition' || d.kind === 'InterfaceTypeDefinition' || d.kind === 'EnumTypeDefinition') &&
        !['Query', 'Mutation', 'Subscription'].includes(d.name.value)
      ) {
        names.push(d.name.value);
      }
    }
  }
  return names;
}

function sourceFiles(dir: string): string[] {
  return fs
    .readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? sourceFiles(path.join(dir, e.name)) : e.name.endsWith('.ts') ? [path.join(dir, e.name)] : []));
}

test("no file of src/ names an example type or the examples' data", () => {
  const types = [...exampleNames(path.join(ROOT, 'examples/hr')), ...exampleNames(path.join(ROOT, 'examples/tracker'))];
  expect(types).toEqual(expect.arrayContaining(['Employee', 'Department', 'Issue', 'IssueLabel', 'departmentId', 'labelColor']));
  // The examples' data: the Chicago snapshot, the guide's seed rows.
  const words = [...types, 'Chicago', 'Marketing', 'POLICE'];
  const pattern = new RegExp(`\\b(${words.join('|')})\\b`);
  const found: string[] = [];
  for (const file of sourceFiles(path.join(ROOT, 'src'))) {
    fs.readFileSync(file, 'utf8')
      .split('\n')
      .forEach((line, i) => {
        const m = pattern.exec(line);
        if (m) found.push(`${path.relative(ROOT, file)}:${i + 1}: ${m[1]}`);
      });
  }
  expect(found).toEqual([]);
});

test('the compiler apart from what a running server needs: only start-up and the CLI import src/compiler/', () => {
  // (and the code generator's plugin, which compiles a schema to write a client's cache keys)
  const allowed = new Set(['src/runtime/configured-schema.ts', 'src/runtime/start-server.ts', 'src/cli/explain.ts', 'src/cli/codegen-cache-plugin.ts']);
  const importers: string[] = [];
  for (const file of sourceFiles(path.join(ROOT, 'src'))) {
    const rel = path.relative(ROOT, file);
    if (rel.startsWith('src/compiler/') || allowed.has(rel)) continue;
    if (/from '[./]*\/compiler\//.test(fs.readFileSync(file, 'utf8'))) importers.push(rel);
  }
  expect(importers).toEqual([]);
  // And the model's files: what a running server consults, none of them a compiler pass.
  expect(fs.readdirSync(path.join(ROOT, 'src/model')).filter((f) => /^(compile|access-paths|layouts|directives|explain)\.ts$/.test(f))).toEqual([]);
});
