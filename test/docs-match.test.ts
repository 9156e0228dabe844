/**
 * The reference docs match the code they describe: every directive of `schema/directives.graphql` has its section
 * in docs/directives.md, whose table lists exactly its arguments with their types and defaults; every setting
 * src/config.ts reads has its row in docs/configuration.md.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse, print, type DirectiveDefinitionNode } from 'graphql';
import { compileSchema } from '../src/compiler/compile';
import { ROOT } from './support/harness';

const directivesSdl = fs.readFileSync(path.join(ROOT, 'schema/directives.graphql'), 'utf8');
const directivesDoc = fs.readFileSync(path.join(ROOT, 'docs/directives.md'), 'utf8');

/** A section's argument table, by argument: its type and default as the table gives them. */
function table(section: string): Map<string, { type: string; default: string }> {
  const rows = new Map<string, { type: string; default: string }>();
  for (const line of section.split('\n')) {
    const cells = line.match(/^\| `(\w+)` \| `([^`]+)` \| ([^|]+) \|/);
    if (cells) rows.set(cells[1], { type: cells[2], default: cells[3].trim() });
  }
  return rows;
}

test('every directive has a section with its arguments, types and defaults', () => {
  const definitions = parse(directivesSdl).definitions.filter((d): d is DirectiveDefinitionNode => d.kind === 'DirectiveDefinition');
  expect(definitions.length).toBeGreaterThan(10);
  const problems: string[] = [];
  for (const d of definitions) {
    const start = directivesDoc.indexOf(`\n## @${d.name.value}\n`);
    if (start < 0) {
      problems.push(`@${d.name.value}: no section`);
      continue;
    }
    const end = directivesDoc.indexOf('\n## ', start + 1);
    const rows = table(directivesDoc.slice(start, end < 0 ? undefined : end));
    const args = d.arguments ?? [];
    if (rows.size !== args.length) problems.push(`@${d.name.value}: ${rows.size} rows for ${args.length} arguments`);
    for (const a of args) {
      const row = rows.get(a.name.value);
      if (!row) {
        problems.push(`@${d.name.value}(${a.name.value}): no row`);
        continue;
      }
      if (row.type !== print(a.type)) problems.push(`@${d.name.value}(${a.name.value}): type ${row.type}, declared ${print(a.type)}`);
      // A declared default is the table's, word for word; an argument without one has none in the table either.
      if (a.defaultValue && row.default !== `\`${print(a.defaultValue)}\``)
        problems.push(`@${d.name.value}(${a.name.value}): default ${row.default}, declared ${print(a.defaultValue)}`);
    }
  }
  expect(problems).toEqual([]);
});

test('every setting the configuration reads is documented', () => {
  const config = fs.readFileSync(path.join(ROOT, 'src/config.ts'), 'utf8');
  const doc = fs.readFileSync(path.join(ROOT, 'docs/configuration.md'), 'utf8');
  const read = [...new Set(config.match(/\b(TABLEGRAPH_[A-Z_]+|AZURE_STORAGE_CONNECTION_STRING|PORT|HOST|LOG_LEVEL)\b/g))];
  expect(read.length).toBeGreaterThan(20);
  expect(read.filter((v) => !doc.includes(`\`${v}\``))).toEqual([]);
});

test("the README's own schema compiles as it is written", () => {
  const readme = fs.readFileSync(path.join(ROOT, 'README.md'), 'utf8');
  const blocks = [...readme.matchAll(/```graphql\n([\s\S]*?)```/g)].map((m) => m[1]).filter((b) => b.includes('@entity'));
  expect(blocks).toHaveLength(1);
  const { model } = compileSchema([
    { name: 'directives.graphql', body: directivesSdl },
    { name: 'README.md', body: blocks[0] },
  ]);
  expect([...model.accessPaths.keys()].sort()).toEqual(['Query.note', 'Query.notes']);
});
