/**
 * Reads the City of Chicago employee file (`examples/hr/data/chicago-employees.csv.gz`, see the README beside it) into
 * employee records, streaming, one row at a time. Every data row gets a stable id — its position among the
 * file's data rows, the first being 1 — and malformed rows keep their position, so fixing one later never shifts
 * the ids of the others. A malformed row is reported with its physical line number (header = line 1) and why.
 *
 * What counts as malformed (decided from the data, which has none of these in its published snapshot):
 * - a column count other than the header's;
 * - a Name without a comma, or with nothing before it (last name) or after it (first name);
 * - an empty Department;
 * - `Full or Part-Time` other than F/P, `Salary or Hourly` other than Salary/Hourly (both case-insensitive,
 *   trimmed; empty counts as other);
 * - a number column that is neither empty nor a plain non-negative decimal (`111444.00`, `40`);
 * - a Salary row without Annual Salary, an Hourly row without Hourly Rate or Typical Hours: the department's
 *   payroll could not be computed from it.
 * Blank (or whitespace-only) lines are not rows: they take no position.
 *
 * Names: `LAST,  FIRST M` — lastName is the text before the first comma, trimmed; the rest, trimmed and with
 * runs of whitespace made one space, is the first name, unless it has several words and the last is a single
 * letter: that letter is the middle initial (`COLEMAN,  D NIQUEA L` → `D NIQUEA` + `L`). A lone letter stays the
 * first name (`WOMBLES,  J` → `J`, no initial).
 */
import { access } from 'node:fs/promises';
import { ErrorCode, TablegraphError } from '../../../src/errors';
import { readCsvRecords } from '../../../src/load/csv-records';

/** The header, in the file's order. Matched trimmed and case-insensitively. */
export const CHICAGO_COLUMNS = [
  'Name',
  'Job Titles',
  'Department',
  'Full or Part-Time',
  'Salary or Hourly',
  'Typical Hours',
  'Annual Salary',
  'Hourly Rate',
] as const;

/** One employee as the HR schema's Employee type stores it (field name → value). Amounts in USD, hours per week. */
export interface EmployeeRecord {
  /** The row's position among the data rows, from 1. */
  id: number;
  departmentId: string;
  lastName: string;
  firstName: string;
  middleInitial: string | null;
  title: string | null;
  fullOrPartTime: 'FULL_TIME' | 'PART_TIME';
  salaryOrHourly: 'SALARY' | 'HOURLY';
  typicalHours: number | null;
  annualSalary: number | null;
  hourlyRate: number | null;
}

/** A row left out, with its physical line in the file (header = 1) and why. */
export interface SkippedRow {
  line: number;
  reason: string;
}

/** One data row as read: an employee, or the reason it is malformed. Both carry the row's id and line. */
export type ChicagoRow =
  { line: number; id: number; employee: EmployeeRecord; reason?: undefined } | { line: number; id: number; employee?: undefined; reason: string };

/** The parts of a `LAST,  FIRST M` name, or the reason it cannot be split. */
export function splitName(name: string): { lastName: string; firstName: string; middleInitial: string | null } | { reason: string } {
  const comma = name.indexOf(',');
  if (comma < 0) return { reason: `Name ${JSON.stringify(name)} has no comma (expected "LAST,  FIRST M")` };
  const lastName = name.slice(0, comma).trim();
  if (!lastName) return { reason: `Name ${JSON.stringify(name)} has no last name before the comma` };
  const words = name
    .slice(comma + 1)
    .trim()
    .split(/\s+/)
    .filter(Boolean);
  if (words.length === 0) return { reason: `Name ${JSON.stringify(name)} has no first name after the comma` };
  const last = words[words.length - 1];
  if (words.length > 1 && /^\p{L}$/u.test(last)) {
    return { lastName, firstName: words.slice(0, -1).join(' '), middleInitial: last };
  }
  return { lastName, firstName: words.join(' '), middleInitial: null };
}

const DECIMAL = /^\d+(\.\d+)?$/;

/** '' → null; a plain non-negative decimal → its number; anything else → undefined (unparsable). */
function amount(text: string): number | null | undefined {
  const t = text.trim();
  if (t === '') return null;
  return DECIMAL.test(t) ? Number(t) : undefined;
}

/**
 * One data row's fields (in CHICAGO_COLUMNS order) → the employee it describes, or the reason it is malformed
 * (see the module comment for the rules). Pure: no I/O.
 */
export function parseChicagoFields(fields: readonly string[], id: number): { employee: EmployeeRecord } | { reason: string } {
  if (fields.length !== CHICAGO_COLUMNS.length) {
    return { reason: `expected ${CHICAGO_COLUMNS.length} columns, got ${fields.length}` };
  }
  const [name, title, department, fp, sh, hoursText, salaryText, rateText] = fields;
  const parts = splitName(name);
  if ('reason' in parts) return parts;
  if (department.trim() === '') return { reason: 'Department is empty' };
  const fullOrPartTime = ({ F: 'FULL_TIME', P: 'PART_TIME' } as const)[fp.trim().toUpperCase() as 'F' | 'P'];
  if (!fullOrPartTime) return { reason: `Full or Part-Time is ${JSON.stringify(fp)}, expected F or P` };
  const salaryOrHourly = ({ SALARY: 'SALARY', HOURLY: 'HOURLY' } as const)[sh.trim().toUpperCase() as 'SALARY' | 'HOURLY'];
  if (!salaryOrHourly) return { reason: `Salary or Hourly is ${JSON.stringify(sh)}, expected Salary or Hourly` };
  const numbers = { 'Typical Hours': hoursText, 'Annual Salary': salaryText, 'Hourly Rate': rateText };
  for (const [column, text] of Object.entries(numbers)) {
    if (amount(text) === undefined) return { reason: `${column} is ${JSON.stringify(text)}, not a non-negative number` };
  }
  const typicalHours = amount(hoursText) ?? null;
  const annualSalary = amount(salaryText) ?? null;
  const hourlyRate = amount(rateText) ?? null;
  if (salaryOrHourly === 'SALARY' && annualSalary === null) return { reason: 'a Salary row without Annual Salary' };
  if (salaryOrHourly === 'HOURLY' && (hourlyRate === null || typicalHours === null)) {
    return { reason: 'an Hourly row without Hourly Rate and Typical Hours' };
  }
  return {
    employee: {
      id,
      // As spelled: the department id is a key the rest of the city's data uses too.
      departmentId: department,
      ...parts,
      title: title.trim() === '' ? null : title,
      fullOrPartTime,
      salaryOrHourly,
      typicalHours,
      annualSalary,
      hourlyRate,
    },
  };
}

function checkHeader(header: readonly string[], file: string): void {
  const got = header.map((h) => h.trim().toLowerCase());
  const want = CHICAGO_COLUMNS.map((c) => c.toLowerCase());
  if (got.length !== want.length || got.some((h, i) => h !== want[i])) {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${file}:1: the header is ${JSON.stringify(header)}; expected ${JSON.stringify(CHICAGO_COLUMNS)}.`, {
      line: 1,
    });
  }
}

/**
 * Streams `file`'s data rows in file order: each with its id and line, parsed or with its malformed reason.
 * Records come from csv-records.ts, so a quote opened and never closed costs its own row only, reported at its
 * line, and never swallows the rows after it.
 * @throws TablegraphError BAD_USER_INPUT when the file cannot be read or when the header is not the
 *   Chicago header (details { line: 1 }) or the file is empty
 */
export async function* readChicagoCsv(file: string): AsyncGenerator<ChicagoRow> {
  await access(file).catch((e: Error) => {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Cannot read ${file}: ${e.message}`, { file });
  });
  let id = 0;
  let header: string[] | undefined;
  for await (const record of readCsvRecords(file)) {
    if (record.fields && record.fields.length === 1 && record.fields[0].trim() === '') continue;
    if (!header) {
      if (!record.fields) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${file}:1: the header ${record.error}.`, { line: 1 });
      checkHeader((header = record.fields), file);
      continue;
    }
    id++;
    if (!record.fields) {
      yield { line: record.line, id, reason: record.error };
      continue;
    }
    const parsed = parseChicagoFields(record.fields, id);
    yield 'employee' in parsed ? { line: record.line, id, employee: parsed.employee } : { line: record.line, id, reason: parsed.reason };
  }
  if (!header) throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `${file} is empty: no header line.`, { line: 1 });
}
