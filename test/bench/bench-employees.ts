/**
 * The HR example's employees a read benchmark serves: one department and `count` employees in it, written with EGTs
 * as the write path would store them, under a table prefix of the benchmark's own.
 */
import path from 'node:path';
import { compileSchema } from '../../src/compiler/compile';
import { loadSchemaSources } from '../../src/compiler/load-schema';
import { entityWrites } from '../../src/model/entity-codec';
import { TableStore } from '../../src/storage/table-store';
import { planEgtBatches, writeEgtBatches } from '../../src/write/egt-batches';
import { ROOT } from './bench-process';

/**
 * Creates the HR example's tables under `prefix` and stores department `department` with employees 1…`count`
 * (`First<i> Last<i>`, a CLERK each).
 */
export async function seedBenchEmployees(connectionString: string, prefix: string, department: string, count: number): Promise<void> {
  const store = new TableStore({ connectionString, target: 'azurite' });
  const { model } = compileSchema(loadSchemaSources(path.join(ROOT, 'examples/hr')), { tablePrefix: prefix });
  for (const table of model.tables) await store.ensureTable(table);
  const employee = model.entities.get('Employee')!;
  const dept = model.entities.get('Department')!;
  const writes = [entityWrites(dept, { id: department, name: department, employeeCount: count, payroll: '0' }).primary];
  for (let id = 1; id <= count; id++) {
    const values = { departmentId: department, id: String(id), email: `e${id}@bench.example`, firstName: `First${id}`, lastName: `Last${id}`, title: 'CLERK' };
    writes.push(entityWrites(employee, values).primary);
  }
  await writeEgtBatches(store, planEgtBatches(writes, 'azurite'), { concurrency: 4 });
}
