/**
 * CSV records with their physical line numbers, streaming, parsed by csv-parse one record at a time — so that one
 * stray quote costs one row, not the rows after it. A CSV parser reading a whole file takes an opening quote
 * that is never closed as the start of a field spanning lines, and swallows every line up to the next quote.
 * Here a record that opens a quote on a line and does not close it may go on over the next line only when that
 * line cannot stand as a record of its own (it does not have the header's column count with balanced quotes);
 * otherwise the first line is reported alone as malformed and the next one is read as the record it is.
 */
import { openDataFile } from './file-stream';
import { parse } from 'csv-parse/sync';

/** One record: its first physical line (1-based) and its fields, or why it cannot be read. */
export type CsvRecord = { line: number; fields: string[]; error?: undefined } | { line: number; fields?: undefined; error: string };

/** A record never spans more than this many physical lines (a quoted field with line breaks in it). */
const MAX_RECORD_LINES = 50;

/** Whether `text` holds an even number of `"`: every quoted field it opens, it closes (`""` counts twice). */
function balanced(text: string): boolean {
  let n = 0;
  for (let i = text.indexOf('"'); i >= 0; i = text.indexOf('"', i + 1)) n++;
  return n % 2 === 0;
}

function parseRecord(text: string): string[] {
  const rows = parse(text, { relax_quotes: true, relax_column_count: true, bom: false }) as string[][];
  return rows[0] ?? [''];
}

/** Whether `line` reads as a record of `columns` fields on its own. */
function standsAlone(line: string, columns: number): boolean {
  if (!balanced(line)) return false;
  try {
    return parseRecord(line).length === columns;
  } catch {
    return false;
  }
}

/** The physical lines of a file, each without its line break, and the break that ended it ('' at the end). */
async function* physicalLines(file: string): AsyncGenerator<{ text: string; eol: string }> {
  let rest = '';
  for await (const chunk of openDataFile(file, 'utf8') as AsyncIterable<string>) {
    rest += chunk;
    let start = 0;
    for (let at = rest.indexOf('\n'); at >= 0; at = rest.indexOf('\n', start)) {
      const cr = at > start && rest[at - 1] === '\r';
      yield { text: rest.slice(start, cr ? at - 1 : at), eol: cr ? '\r\n' : '\n' };
      start = at + 1;
    }
    rest = rest.slice(start);
  }
  if (rest !== '') yield { text: rest, eol: '' };
}

/**
 * Streams `file`'s records. Blank lines come through as a record of one empty field (so that callers can account
 * for every line). The first record's column count is the one a following line must have to stand alone. A
 * quoted field spanning lines keeps its line breaks as the file has them.
 * @throws the fs error when the file cannot be read
 */
export async function* readCsvRecords(file: string): AsyncGenerator<CsvRecord> {
  let columns: number | undefined;
  let pending: { line: number; text: string; eol: string; lines: number } | undefined;
  let n = 0;
  const finish = (r: { line: number; text: string }): CsvRecord => {
    try {
      const fields = parseRecord(r.text);
      columns ??= fields.length;
      return { line: r.line, fields };
    } catch (e) {
      return { line: r.line, error: `cannot be read as CSV: ${(e as Error).message}` };
    }
  };
  for await (const physical of physicalLines(file)) {
    const text = n === 0 ? physical.text.replace(/^\uFEFF/, '') : physical.text;
    n++;
    if (pending) {
      if (columns !== undefined && standsAlone(text, columns)) {
        yield { line: pending.line, error: 'a quote opened on this line is never closed' };
        pending = undefined;
      } else {
        pending.text += `${pending.eol}${text}`;
        pending.eol = physical.eol;
        pending.lines++;
        if (balanced(pending.text)) {
          yield finish(pending);
          pending = undefined;
        } else if (pending.lines >= MAX_RECORD_LINES) {
          yield { line: pending.line, error: `a quote opened on this line is not closed within ${MAX_RECORD_LINES} lines` };
          pending = undefined;
        }
        continue;
      }
    }
    if (balanced(text)) yield finish({ line: n, text });
    else pending = { line: n, text, eol: physical.eol, lines: 1 };
  }
  if (pending) yield { line: pending.line, error: 'a quote opened on this line is never closed' };
}
