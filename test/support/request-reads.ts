/**
 * A server reads its paths' states from the catalogue now and then (src/evolution/path-states.ts), whatever requests
 * come: a test that shows a request read nothing leaves those reads out.
 */
import { catalogueTable } from '../../src/evolution/catalogue';

/** A spy on TableStore.getEntity or queryRange: each call's first argument names its table. */
type ReadSpy = { mock: { calls: Array<[{ table: string }, ...unknown[]]> } };

/** The tables the spies' calls read, but the catalogue's. */
export function requestReads(spies: ReadSpy[], tablePrefix: string): string[] {
  const catalogue = catalogueTable(tablePrefix);
  return spies.flatMap((spy) => spy.mock.calls.map(([read]) => read.table)).filter((table) => table !== catalogue);
}

/** Asserts that no call of the spies was a request's read. */
export function expectNoRequestReads(spies: ReadSpy[], tablePrefix: string): void {
  expect(requestReads(spies, tablePrefix)).toEqual([]);
}
