/**
 * The rows of a load file, as field values of one entity type: CSV whose header names the fields (`.csv`), or NDJSON,
 * one JSON object per line (`.ndjson`, `.jsonl`), either one gzip-compressed too (`.csv.gz`). CSV cells are text: an
 * empty cell is null, `true` and `false` are Booleans, and the rest is typed by the field (entity-codec.ts's typedValue
 * reads numbers, Longs, Decimals and dates from text). Enum values are checked against the enum here, since a stored
 * enum is a String.
 *
 * A bad row is reported with its line and the reason, never thrown: the loader skips it and goes on. A bad header
 * (an unknown field, a summary field, a missing key field) is an error before anything is read further.
 */
import { TENANT_FIELD } from '../model/tenancy';
import { openDataFile } from './file-stream';
import { createInterface } from 'node:readline';
import { extname } from 'node:path';
import { isEnumType, type GraphQLSchema } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';
import type { EntityModel, StoredField } from '../model/types';
import { readCsvRecords } from './csv-records';

/** A row of a load file: its line (1-based, the header is line 1 of a CSV) and its values, or why it is skipped. */
export type LoadRow = { line: number; values: Record<string, unknown>; reason?: undefined } | { line: number; values?: undefined; reason: string };

/** The file formats the loader reads, by extension (after a `.gz`: gzip-compressed, file-stream.ts). */
export function fileFormat(file: string): 'csv' | 'ndjson' {
  const ext = extname(file.toLowerCase().replace(/\.gz$/, ''));
  if (ext === '.csv') return 'csv';
  if (ext === '.ndjson' || ext === '.jsonl') return 'ndjson';
  throw new TablegraphError(
    ErrorCode.BAD_USER_INPUT,
    `${file}: a load file is .csv (a header of field names) or .ndjson/.jsonl (one JSON object per line), each also gzip-compressed (.gz)`,
    { file },
  );
}

/**
 * Checks the fields a file gives: each a stored field of the entity, neither a summary nor a copy (the loader keeps
 * those) nor a `@blob` (a mutation uploads it), every key field present.
 * @throws TablegraphError BAD_USER_INPUT naming the fields
 */
export function checkColumns(entity: EntityModel, columns: string[], where: string): void {
  const unknown = columns.filter((c) => !entity.fields.has(c));
  if (unknown.length) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${where}: ${unknown.map((c) => `"${c}"`).join(', ')} ${unknown.length > 1 ? 'are not stored fields' : 'is not a stored field'} of ${entity.name} (its fields: ${[...entity.fields.keys()].join(', ')})`,
      { fields: unknown },
    );
  }
  const summaries = columns.filter((c) => entity.summaryFields.has(c));
  if (summaries.length) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${where}: ${summaries.join(', ')} ${summaries.length > 1 ? 'are summaries' : 'is a summary'}, kept by the loader from what it summarises`,
      { fields: summaries },
    );
  }
  const copies = columns.filter((c) => entity.copies.has(c));
  if (copies.length) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${where}: ${copies.join(', ')} ${copies.length > 1 ? 'are copies' : 'is a copy'} (@copy), taken by the loader from the target`,
      { fields: copies },
    );
  }
  const blobs = columns.filter((c) => entity.fields.get(c)?.blob);
  if (blobs.length) {
    throw new TablegraphError(
      ErrorCode.BAD_USER_INPUT,
      `${where}: ${blobs.join(', ')} ${blobs.length > 1 ? 'are @blob fields' : 'is a @blob field'}, set by a mutation that uploads the blob`,
      { fields: blobs },
    );
  }
  const missing = entity.keyFields.filter((k) => !columns.includes(k));
  const hint = missing.includes(TENANT_FIELD) ? ` (${entity.name} is tenant-scoped: load into one tenant with --tenant <id>)` : '';
  if (missing.length)
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${where}: the key field(s) ${missing.join(', ')} of ${entity.name} are missing${hint}`, {
      fields: missing,
    });
}

/**
 * Why `value` is not a value of the field's enum (undefined when it is, or the field holds no enum): each element of a
 * list and each field of a value object too, given as itself or as its JSON text (a CSV cell). A value of the wrong
 * shape is left to the codec, which refuses it.
 */
function enumProblem(schema: GraphQLSchema | undefined, entity: EntityModel, name: string, value: unknown): string | undefined {
  if (value === null || value === undefined || !schema) return undefined;
  const field = entity.fields.get(name)!;
  return wrongEnum(schema, field, (field.list || field.value) && typeof value === 'string' ? parsedJson(value) : value, name);
}

function wrongEnum(schema: GraphQLSchema, field: StoredField, value: unknown, path: string): string | undefined {
  if (value === null || value === undefined) return undefined;
  if (field.list) {
    if (!Array.isArray(value)) return undefined;
    const element = { ...field, list: undefined };
    for (const [i, v] of value.entries()) {
      const wrong = wrongEnum(schema, element, v, `${path}[${i}]`);
      if (wrong) return wrong;
    }
    return undefined;
  }
  if (field.value) {
    if (typeof value !== 'object') return undefined;
    for (const f of field.value.fields.values()) {
      const wrong = wrongEnum(schema, f, (value as Record<string, unknown>)[f.name], `${path}.${f.name}`);
      if (wrong) return wrong;
    }
    return undefined;
  }
  const type = schema.getType(field.graphqlType);
  if (!isEnumType(type) || type.getValue(String(value))) return undefined;
  return `${path}: ${JSON.stringify(value)} is not one of ${type
    .getValues()
    .map((v) => v.name)
    .join(', ')}`;
}

function parsedJson(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return undefined;
  }
}

/** A CSV cell as a field value: '' → null, `true`/`false` for a Boolean field, the text otherwise. */
function cellValue(entity: EntityModel, name: string, cell: string): unknown {
  if (cell === '') return null;
  if (entity.fields.get(name)!.edm === 'Boolean') return cell === 'true' ? true : cell === 'false' ? false : cell;
  return cell;
}

/**
 * Streams the rows of `file` for `entity`.
 * @param schema the compiled schema, to check enum values (without it they are not checked)
 * @param tenant under `@tenancy`, the tenant a tenant-scoped type's rows go to (`--tenant`): a row that names another
 *   is skipped with why; without it, each row gives its own `_tenant` (as `npm run tenant -- export` writes it)
 * @throws TablegraphError BAD_USER_INPUT for an unknown format, an unreadable file or a bad header
 */
export async function* readLoadRows(file: string, entity: EntityModel, schema?: GraphQLSchema, tenant?: string): AsyncGenerator<LoadRow> {
  const format = fileFormat(file);
  // Into one tenant (`--tenant`): every row is that tenant's, whether or not the file says so.
  const given = (columns: string[]) => (tenant !== undefined && entity.tenantScoped ? [...columns, TENANT_FIELD] : columns);
  const check = (line: number, values: Record<string, unknown>): LoadRow => {
    if (tenant !== undefined && entity.tenantScoped) {
      const own = values[TENANT_FIELD];
      if (own !== undefined && own !== null && own !== tenant)
        return { line, reason: `${TENANT_FIELD} is ${JSON.stringify(own)}, and the load is into ${tenant}` };
      values = { ...values, [TENANT_FIELD]: tenant };
    }
    for (const name of Object.keys(values)) {
      const problem = enumProblem(schema, entity, name, values[name]);
      if (problem) return { line, reason: problem };
    }
    return { line, values };
  };
  try {
    if (format === 'csv') {
      let header: string[] | undefined;
      for await (const record of readCsvRecords(file)) {
        if (!header) {
          if (record.error !== undefined) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${file}:1: the header ${record.error}`, { file });
          header = record.fields.map((f) => f.trim());
          checkColumns(entity, given(header), file);
          continue;
        }
        if (record.error !== undefined) yield { line: record.line, reason: record.error };
        else if (record.fields.length === 1 && record.fields[0] === '')
          continue; // a blank line
        else if (record.fields.length !== header.length) yield { line: record.line, reason: `has ${record.fields.length} fields, the header ${header.length}` };
        else yield check(record.line, Object.fromEntries(header.map((name, i) => [name, cellValue(entity, name, record.fields[i])])));
      }
      if (!header) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${file}: empty, not even a header`, { file });
      return;
    }
    let line = 0;
    const seen = new Set<string>();
    for await (const text of createInterface({ input: openDataFile(file, 'utf8'), crlfDelay: Infinity })) {
      line++;
      if (text.trim() === '') continue;
      let parsed: unknown;
      try {
        parsed = JSON.parse(text);
      } catch (e) {
        yield { line, reason: `not JSON: ${(e as Error).message}` };
        continue;
      }
      if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
        yield { line, reason: 'not a JSON object' };
        continue;
      }
      const columns = Object.keys(parsed);
      const fresh = columns.filter((c) => !seen.has(c));
      if (fresh.length) {
        // A field no earlier line gave: unknown and summary fields are errors of the file, not of the line.
        checkColumns(entity, given([...fresh, ...entity.keyFields]), `${file}:${line}`);
        fresh.forEach((c) => seen.add(c));
      }
      const missing = entity.keyFields.filter((k) => !(k in parsed) && !(k === TENANT_FIELD && tenant !== undefined));
      if (missing.length) yield { line, reason: `the key field(s) ${missing.join(', ')} are missing` };
      else yield check(line, parsed as Record<string, unknown>);
    }
  } catch (e) {
    if (e instanceof TablegraphError) throw e;
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Cannot read ${file}: ${(e as Error).message}`, { file });
  }
}
