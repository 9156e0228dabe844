/**
 * The reference docs match the code they describe: every directive of `schema/directives.graphql` has its section
 * in docs/directives.md, whose table lists exactly its arguments with their types and defaults; every setting
 * src/runtime/config.ts reads has its row in docs/configuration.md; every reason of src/errors.ts's catalogue has
 * its row in docs/errors.md, and every reason src/ gives is in the catalogue; the worked example of
 * docs/orders-and-lines.md compiles, and explain says what it quotes.
 */
import fs from 'node:fs';
import path from 'node:path';
import { parse, print, validate, type DirectiveDefinitionNode } from 'graphql';
import { compileSchema } from '../../src/compiler/compile';
import { explainModel, formatExplanation } from '../../src/compiler/explanation';
import { Reason } from '../../src/errors';
import { CLIENT_DETAILS } from '../../src/server/format-error';
import { ROOT } from '../support/harness';

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
  const config = fs.readFileSync(path.join(ROOT, 'src/runtime/config.ts'), 'utf8');
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

/** Every `.ts` file under `dir`. */
function sourcesUnder(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const at = path.join(dir, e.name);
    return e.isDirectory() ? sourcesUnder(at) : e.name.endsWith('.ts') ? [at] : [];
  });
}

test('every reason in the catalogue has its row in docs/errors.md, with its code and meaning', () => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/errors.md'), 'utf8');
  const rows = new Map([...doc.matchAll(/^\| `(\w+)` \| `([A-Z_]+)` \| (.+) \|$/gm)].map((m) => [m[1], { code: m[2], meaning: m[3] }]));
  expect(Object.keys(Reason).length).toBeGreaterThan(40);
  expect(Object.fromEntries(Object.keys(Reason).map((name) => [name, rows.get(name)]))).toEqual(
    Object.fromEntries(Object.entries(Reason).map(([name, r]) => [name, { code: r.code, meaning: r.meaning }])),
  );
  // And nothing in the table that the catalogue does not have.
  expect([...rows.keys()].filter((name) => !(name in Reason))).toEqual([]);
});

test('every reason src/ gives is in the catalogue', () => {
  const given = new Set<string>();
  for (const file of sourcesUnder(path.join(ROOT, 'src'))) {
    const text = fs.readFileSync(file, 'utf8');
    // `reason: 'X'`, `details.reason === 'X'`, and the names a reason is chosen among (`const reason = a ? 'X' : 'Y'`);
    // not another library's `e.reason`.
    for (const m of text.matchAll(/(?:(?<![\w.])reason|details\.reason)(?::|\s*[!=]==)\s*'([A-Za-z]+)'/g)) given.add(m[1]);
    for (const m of text.matchAll(/(?<![\w.])reason\s*=(?!=)\s*([^;\n]*)/g))
      for (const name of m[1].matchAll(/(?:^|[?:])\s*'([A-Za-z]+)'/g)) given.add(name[1]);
    for (const m of text.matchAll(/\b(?:fail|stopped)\(\s*'([A-Za-z]+)'/g)) given.add(m[1]);
  }
  expect(given.size).toBeGreaterThan(40);
  expect([...given].filter((name) => !(name in Reason)).sort()).toEqual([]);
});

/** What a response's `extensions` carries besides an error's details: set by the server itself, or a request's own. */
const SERVER_EXTENSIONS = ['code', 'requestId', 'retryAfterSeconds', 'cost', 'consistency', 'estimate', 'budget', 'ftv1', 'persistedQuery'];

test('every error detail the docs promise in `extensions` is one a client is given', () => {
  const promised = new Set<string>();
  for (const file of fs.readdirSync(path.join(ROOT, 'docs'))) {
    const text = fs.readFileSync(path.join(ROOT, 'docs', file), 'utf8');
    for (const m of text.matchAll(/`extensions\.(\w+)`/g)) promised.add(m[1]);
  }
  expect(promised).toContain('reference');
  expect([...promised].filter((name) => !CLIENT_DETAILS.has(name) && !SERVER_EXTENSIONS.includes(name)).sort()).toEqual([]);
});

test('the worked transaction example compiles, its call is valid, and explain says what the page quotes', () => {
  const doc = fs.readFileSync(path.join(ROOT, 'docs/orders-and-lines.md'), 'utf8');
  const blocks = (lang: string) => [...doc.matchAll(new RegExp('```' + lang + '\\n([\\s\\S]*?)\\n```', 'g'))].map((m) => m[1]);
  const [sdl, call] = blocks('graphql');
  const { schema, model } = compileSchema([
    { name: 'directives.graphql', body: directivesSdl },
    { name: 'orders.graphql', body: sdl },
  ]);
  expect(validate(schema, parse(call)).map((e) => e.message)).toEqual([]);
  const explained = formatExplanation(explainModel(model)).split('\n');
  const quoted = blocks('text')[0].split('\n');
  expect(quoted.length).toBeGreaterThan(3);
  for (const line of quoted) expect(explained).toContain(line);
});
