import { startTestServer, compileHr } from './support/harness';
import { writeFixtures } from './support/read-fixtures';
test('explore', async () => {
  const server = await startTestServer();
  try {
    await writeFixtures(server.store, compileHr(server.config.tablePrefix).model);
    const qs = [
      `{ department(id:"ENGINEERING"){ employees(first:100){ edges{ node{ id department{ id name employeeCount } } } } } }`,
      `{ departments { edges { node { id name } } } }`,
      `{ departments { edges { node { id name employeeCount } } } }`,
      `{ department(id:"ENGINEERING"){ employeesByLastName(lastName:"WILLIAMS"){ edges{ node{ id firstName lastName title } } } } }`,
      `{ department(id:"ENGINEERING"){ employeesByLastName(lastName:"WILLIAMS"){ edges{ node{ id annualSalary } } } } }`,
      `{ employee(departmentId:"ENGINEERING", id:"abc"){ id } }`,
      `{ employee(departmentId:"A/B #1", id:"2001"){ id departmentId title department { id name employeeCount } } }`,
      `{ a: department(id:"ENGINEERING"){ employees(first:3){ edges{ node{ id } } } } b: department(id:"ENGINEERING"){ employees(first:3){ edges{ node{ id } } } } }`,
    ];
    for (const q of qs) {
      const r = await server.query(q);
      console.log(q, JSON.stringify(r.extensions), JSON.stringify(r.errors));
    }
  } finally { await server.close(); }
});
