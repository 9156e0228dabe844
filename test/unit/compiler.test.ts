/**
 * The schema compiler: the shipped schema compiles to the access paths docs/architecture.md describes, and every kind
 * of schema that could not be served by point and range queries is refused at start-up with the type, the field and the
 * SDL location.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { compileSchema } from '../../src/compiler/compile';
import { ErrorCode, isTablegraphError, type TablegraphError } from '../../src/errors';
import { compileHr, DIRECTIVES_FILE, SCHEMA_DIR } from '../support/harness';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };

const BASE = `
type PageInfo { hasNextPage: Boolean! hasPreviousPage: Boolean! startCursor: String endCursor: String }
type Item @entity(table: "Items", partitionKey: "{group}", rowKey: "item_{id:06}") {
  group: ID!
  id: ID!
  name: String!
  tags: String
  owner: Owner! @point(partitionKey: "{group}", rowKey: "owner")
}
type Owner @entity(table: "Items", partitionKey: "{group}", rowKey: "owner") { group: ID! name: String! }
type ItemEdge { cursor: String! node: Item! }
type ItemConnection { edges: [ItemEdge!]! pageInfo: PageInfo! }
`;
/** A type with a table per day (the guide's "High volume delete pattern"), and its connection. */
const HITS = `
type Hit @entity(table: "Hits{at:yyyyMMdd}", partitionKey: "{page}", rowKey: "hit_{at:invertedTicks}") { page: ID! at: DateTime! note: String }
type HitEdge { cursor: String! node: Hit! }
type HitConnection { edges: [HitEdge!]! pageInfo: PageInfo! }
`;

function compile(sdl: string) {
  return compileSchema([DIRECTIVES, { name: 'test.graphql', body: sdl }]);
}

/** The SCHEMA_INVALID error compiling `sdl` gives. */
function rejection(sdl: string): TablegraphError {
  try {
    compile(sdl);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.SCHEMA_INVALID)) return e;
    throw e;
  }
  throw new Error('the schema compiled, but it should have been refused');
}

/** The 1-based line of the first line of `sdl` that contains `marker`. */
function lineOf(sdl: string, marker: string): number {
  return sdl.split('\n').findIndex((l) => l.includes(marker)) + 1;
}

describe('the shipped HR schema', () => {
  const { model } = compileHr('');

  test('every root field is a point or range query', () => {
    const paths = Object.fromEntries(
      [...model.accessPaths].map(([k, p]) => [k, `${p.kind} ${p.tableTemplate?.template.source ?? p.table} ${p.index?.name ?? ''}`.trim()]),
    );
    expect(paths).toEqual({
      'Query.department': 'point Directory',
      'Query.departments': 'range Departments all',
      'Query.employee': 'point Directory',
      'Query.archivedEmployee': 'point Archive',
      'Query.employeeByEmail': 'point EmployeesByEmail byEmail',
      'Query.employeesByLastName': 'range EmployeesByLastName byLastName',
      'Query.employeesByTitle': 'range EmployeesByTitle byTitle',
      'Department.employees': 'range Directory',
      'Department.head': 'point Directory',
      'Department.employeesByLastName': 'range Directory byLastNameInDepartment',
      'Employee.department': 'point Directory',
      'Employee.review': 'point Directory',
      'Employee.reviews': 'range Directory',
      'Employee.claims': 'range Directory',
      'Employee.expenseClaims': 'range Directory',
      'EmployeeReview.employee': 'point Directory',
      'ExpenseClaim.employee': 'point Directory',
      'Employee.messageDays': 'range Directory',
      'Employee.messageStats': 'point Directory',
      'Employee.dailyMessages': 'point Directory',
      'MessageStats.employee': 'point Directory',
      'DailyMessages.employee': 'point Directory',
      // a table per day, named from the field's own argument
      'Query.loginAttempts': 'range LoginAttempts{day:yyyyMMdd}',
      'Employee.loginAttempts': 'range LoginAttempts{day:yyyyMMdd}',
      // an interface whose implementations share one layout ("Inheritance relationships")
      'Query.worker': 'point Directory',
      'Query.contractor': 'point Directory',
      'Department.workers': 'range Directory',
    });
    expect(
      model.interfaces
        .get('Worker')!
        .implementations!.map((e) => e.name)
        .sort(),
    ).toEqual(['Contractor', 'Volunteer']);
  });

  test('indexes are classified by table and PartitionKey', () => {
    const employee = model.entities.get('Employee')!;
    expect(employee.indexes.get('byLastNameInDepartment')!.scope).toBe('intraPartition');
    for (const name of ['byEmail', 'byLastName', 'byTitle']) expect(employee.indexes.get(name)!.scope).toBe('interPartition');
    expect(employee.indexes.get('byEmail')!.unique).toBe(true);
    expect(model.entities.get('Department')!.indexes.get('all')!.scope).toBe('interPartition');
  });

  test('summaries are kept by the writes of the entities they summarise, in their partition', () => {
    const count = model.summaries.get('Department.employeeCount')!;
    const payroll = model.summaries.get('Department.payroll')!;
    expect(count.of.name).toBe('Employee');
    expect(count.count).toBe(true);
    expect(payroll.terms).toEqual([[{ field: 'annualSalary' }], [{ field: 'hourlyRate' }, { field: 'typicalHours' }, { constant: 52 }]]);
    expect([...model.entities.get('Department')!.summaryFields].sort()).toEqual(['employeeCount', 'payroll']);
  });

  test('every mutation names its entity, action and the payload field it returns', () => {
    const writes = Object.fromEntries([...model.writes].map(([k, w]) => [k, `${w.action} ${w.entity.name}.${w.payloadField}`]));
    expect(writes).toEqual({
      'Mutation.createEmployee': 'CREATE Employee.employee',
      'Mutation.updateEmployee': 'UPDATE Employee.employee',
      'Mutation.replaceEmployee': 'REPLACE Employee.employee',
      'Mutation.setEmployeePhoto': 'UPDATE Employee.employee',
      'Mutation.deleteEmployee': 'DELETE Employee.employee',
      'Mutation.moveEmployee': 'MOVE Employee.employee',
      'Mutation.archiveEmployee': 'MOVE Employee.employee',
      'Mutation.createDepartment': 'CREATE Department.department',
      'Mutation.updateDepartment': 'UPDATE Department.department',
      'Mutation.replaceDepartment': 'REPLACE Department.department',
      'Mutation.deleteDepartment': 'DELETE Department.department',
      'Mutation.createEmployeeReview': 'CREATE EmployeeReview.employeeReview',
      'Mutation.updateEmployeeReview': 'UPDATE EmployeeReview.employeeReview',
      'Mutation.submitExpenseClaim': 'CREATE ExpenseClaim.expenseClaim',
      'Mutation.recordMessages': 'INCREMENT MessageStats.messageStats',
      'Mutation.recordDailyMessages': 'INCREMENT DailyMessages.dailyMessages',
      'Mutation.deleteDailyMessages': 'DELETE DailyMessages.dailyMessages',
      'Mutation.recordLoginAttempt': 'CREATE LoginAttempt.loginAttempt',
      'Mutation.createContractor': 'CREATE Contractor.contractor',
      'Mutation.updateContractor': 'UPDATE Contractor.contractor',
      'Mutation.createVolunteer': 'CREATE Volunteer.volunteer',
      'Mutation.deleteVolunteer': 'DELETE Volunteer.volunteer',
    });
    expect(model.writes.get('Mutation.createDepartment')!.inputFields.has('employeeCount')).toBe(false);
  });

  test('index projections hold the key fields besides `include`', () => {
    const index = model.entities.get('Employee')!.indexes.get('byLastNameInDepartment')!;
    expect([...index.projection].sort()).toEqual(['departmentId', 'email', 'firstName', 'id', 'lastName', 'title']);
  });

  test('placeholders bind to arguments and parent fields', () => {
    const byLastName = model.accessPaths.get('Department.employeesByLastName')!;
    expect(byLastName.kind).toBe('range');
    expect([...byLastName.partitionKey.bindings.values()]).toEqual([{ source: 'parent', name: 'id' }]);
    const employee = model.accessPaths.get('Query.employee')!;
    expect(employee.kind === 'point' && [...employee.rowKey.bindings.values()]).toEqual([{ source: 'argument', name: 'id' }]);
  });

  test('a table prefix applies to every table', () => {
    expect(compileHr('abc').model.tables).toEqual([
      'abcArchive',
      'abcDepartments',
      'abcDirectory',
      'abcEmployeesByEmail',
      'abcEmployeesByLastName',
      'abcEmployeesByTitle',
    ]);
  });
});

describe('a valid custom schema', () => {
  test('a summary whose holder lives in another partition is kept eventually', () => {
    const { model } = compile(
      `${BASE.replace('name: String! }', 'name: String! total: Int! @summary(of: "Item", via: "owner", count: true) }').replace('owner: Owner! @point(partitionKey: "{group}", rowKey: "owner")', 'owner: Owner! @point(partitionKey: "{name}", rowKey: "owner")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
    );
    expect(model.summaries.get('Owner.total')!.scope).toBe('eventual');
    expect(compileHr('').model.summaries.get('Department.payroll')!.scope).toBe('egt');
  });

  test('a derived RowKey prefix stops at the first placeholder no argument supplies', () => {
    const { model } = compile(`${BASE}
      type Query {
        items(group: ID!, first: Int, after: String): ItemConnection! @range
        item(group: ID!, id: ID!): Item @point
      }`);
    const items = model.accessPaths.get('Query.items')!;
    expect(items.kind === 'range' && items.rowKeyPrefix!.template.source).toBe('item_');
  });
});

describe('rejections name the type, the field and the SDL line', () => {
  const cases: Array<{ name: string; sdl: string; coordinate: string; message: RegExp; marker: string }> = [
    {
      name: 'an entity field without an access path',
      sdl: `${BASE} type Query { item(group: ID!, id: ID!): Item @point } extend type Owner { favourite: Item }`,
      coordinate: 'Owner.favourite',
      message: /has no @point or @range/,
      marker: 'favourite',
    },
    {
      name: 'a root field without an access path',
      sdl: `${BASE}\ntype Query {\n  allItems: [Item!]!\n}`,
      coordinate: 'Query.allItems',
      message: /tablegraph never scans/,
      marker: 'allItems',
    },
    {
      name: 'a point query returning a list',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, id: ID!): [Item] @point\n}`,
      coordinate: 'Query.items',
      message: /must return one @entity type/,
      marker: 'items(',
    },
    {
      name: 'a point query missing a key part',
      sdl: `${BASE}\ntype Query {\n  item(id: ID!): Item @point\n}`,
      coordinate: 'Query.item',
      message: /needs \{group\}/,
      marker: 'item(id',
    },
    {
      name: 'a nullable argument as a key part',
      sdl: `${BASE}\ntype Query {\n  item(group: ID, id: ID!): Item @point\n}`,
      coordinate: 'Query.item',
      message: /needs \{group\}: add a non-null argument/,
      marker: 'item(group',
    },
    {
      name: 'a non-null reference over a nullable stored field',
      sdl: `${BASE} type Query { item(group: ID!, id: ID!): Item @point } extend type Item { parentId: ID parent: Item! @point(rowKey: "item_{parentId:06}") }`,
      coordinate: 'Item.parent',
      message: /the stored field Item.parentId is nullable: make Item.parent nullable \(an optional reference/,
      marker: 'parentId',
    },
    {
      name: 'a many-to-many connection whose reference reaches another type than its nodes',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(rowKeyPrefix: "item_", through: "Item.owner")\n}`,
      coordinate: 'Query.items',
      message: /through: "Item.owner": Item.owner reaches Owner, but the connection's nodes are Item/,
      marker: 'items(',
    },
    {
      name: 'a many-to-many connection through an unknown type',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(through: "Nope.item")\n}`,
      coordinate: 'Query.items',
      message: /through: "Nope.item" must name a reference field of an @entity type/,
      marker: 'items(',
    },
    {
      name: 'a copy its target type cannot find again',
      sdl: `${BASE.replace('tags: String', 'tags: String\n  ownerName: String @copy(from: "owner", field: "name")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.ownerName',
      message: /the worker finds the copies of Owner.name through a @range of Owner over Item .* declare one/,
      marker: 'ownerName',
    },
    {
      name: "a unique index in the entity's own partition, where nothing would enforce it",
      sdl: `${BASE.replace('rowKey: "item_{id:06}") {', 'rowKey: "item_{id:06}")\n  @index(name: "byName", rowKey: "name_{name}", unique: true) {')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item@index(byName)',
      message: /@index\(name: "byName", unique: true\) shares Item's table and PartitionKey, where uniqueness is not enforced/,
      marker: '@index(name: "byName"',
    },
    {
      name: 'a copy of a field that is not a reference',
      sdl: `${BASE.replace('tags: String', 'tags: String\n  other: String @copy(from: "tags", field: "name")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.other',
      message: /@copy\(from: "tags"\): Item.tags must be a reference/,
      marker: 'other: String',
    },
    {
      name: 'a range query returning no connection',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): [Item!]! @range\n}`,
      coordinate: 'Query.items',
      message: /must return a Relay connection/,
      marker: 'items(',
    },
    {
      name: 'a connection without first/after',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!): ItemConnection! @range\n}`,
      coordinate: 'Query.items',
      message: /takes `first: Int` and `after: String`/,
      marker: 'items(',
    },
    {
      name: 'a range without a PartitionKey',
      sdl: `${BASE}\ntype Query {\n  items(first: Int, after: String): ItemConnection! @range\n}`,
      coordinate: 'Query.items',
      message: /PartitionKey template "\{group\}" needs \{group\}/,
      marker: 'items(',
    },
    {
      name: 'both a prefix and bounds',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(rowKeyPrefix: "item_", rowKeyTo: "item_9")\n}`,
      coordinate: 'Query.items',
      message: /either rowKeyPrefix or rowKeyFrom\/rowKeyTo/,
      marker: 'items(',
    },
    {
      name: 'a prefix that does not address the layout',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(rowKeyPrefix: "thing_")\n}`,
      coordinate: 'Query.items',
      message: /does not address "item_\{id:06\}"/,
      marker: 'items(',
    },
    {
      name: "bounds outside the type's RowKeys",
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(rowKeyFrom: "a", rowKeyTo: "z")\n}`,
      coordinate: 'Query.items',
      message: /must start with "item_"/,
      marker: 'items(',
    },
    {
      name: 'a prefix ending in a string placeholder',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{name}_{id:06}")')}\ntype Query {\n  items(group: ID!, name: String!, first: Int, after: String): ItemConnection! @range(rowKeyPrefix: "item_{name}")\n}`,
      coordinate: 'Query.items',
      message: /ends in \{name\}/,
      marker: 'items(',
    },
    {
      name: 'an unknown index',
      sdl: `${BASE}\ntype Query {\n  item(group: ID!, id: ID!): Item @point(index: "byName")\n}`,
      coordinate: 'Query.item',
      message: /no @index named "byName"/,
      marker: 'item(',
    },
    {
      name: 'both @point and @range',
      sdl: `${BASE}\ntype Query {\n  item(group: ID!, id: ID!, first: Int, after: String): ItemConnection! @point @range\n}`,
      coordinate: 'Query.item',
      message: /both @point and @range/,
      marker: 'item(',
    },
    {
      name: 'a malformed key template',
      sdl: `${BASE.replace('rowKey: "owner") {', 'rowKey: "owner_{name") {')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner',
      message: /"owner_\{name" is malformed at offset \d+/,
      marker: 'type Owner',
    },
    {
      name: 'a placeholder that is not a stored field',
      sdl: `${BASE.replace('rowKey: "owner") {', 'rowKey: "owner_{email}") {')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner',
      message: /\{email\}, which is not a stored field/,
      marker: 'type Owner',
    },
    {
      name: 'a nullable key field',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{tags}")')}\ntype Query { item(group: ID!, tags: String!): Item @point }`,
      coordinate: 'Item',
      message: /\{tags\}, which is nullable/,
      marker: 'type Item',
    },
    {
      name: 'padding a string field',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{name:06}")')}\ntype Query { item(group: ID!, name: String!): Item @point }`,
      coordinate: 'Item',
      message: /pads \{name\}, a String/,
      marker: 'type Item',
    },
    {
      name: 'two string placeholders without a separator',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{name}{id:06}")')}\ntype Query { item(group: ID!, name: String!, id: ID!): Item @point }`,
      coordinate: 'Item',
      message: /RowKey template "item_\{name\}\{id:06\}"/,
      marker: 'type Item',
    },
    {
      name: 'two types whose RowKeys can collide in one table',
      sdl: `${BASE.replace('rowKey: "owner") {', 'rowKey: "item_owner") {')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner',
      message: /can produce the same RowKey/,
      marker: 'type Owner',
    },
    {
      name: 'an object type that is not an entity',
      sdl: `${BASE}\ntype Address {\n  street: String\n}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Address',
      message: /neither an @entity/,
      marker: 'type Address',
    },
    {
      name: 'an invalid table name',
      sdl: `${BASE.replace('table: "Items", partitionKey: "{group}", rowKey: "owner"', 'table: "my-owners", partitionKey: "{group}", rowKey: "owner"')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner',
      message: /"my-owners" is not a valid table name/,
      marker: 'type Owner',
    },
    {
      name: "the catalogue's table: the project's own rows are no schema's to write",
      sdl: `${BASE.replace('table: "Items", partitionKey: "{group}", rowKey: "owner"', 'table: "TablegraphCatalogue", partitionKey: "{group}", rowKey: "owner"')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner',
      message: /table "TablegraphCatalogue": names starting with "Tablegraph" are tablegraph's own/,
      marker: 'type Owner',
    },
    {
      name: "an index in a table of the project's own, whatever its case",
      sdl: `${BASE.replace('type Item @entity(table: "Items", partitionKey: "{group}", rowKey: "item_{id:06}")', 'type Item @entity(table: "Items", partitionKey: "{group}", rowKey: "item_{id:06}") @index(name: "byName", table: "tablegraphNames", partitionKey: "{name}", rowKey: "{id:06}")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item@index(byName)',
      message: /table "tablegraphNames": names starting with "Tablegraph" are tablegraph's own/,
      marker: 'type Item',
    },
    {
      name: "a table per period named as the project's own",
      sdl: `${BASE}${HITS.replace('Hits{at:yyyyMMdd}', 'TablegraphHits{at:yyyyMMdd}')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Hit',
      message: /table "TablegraphHits\{at:yyyyMMdd\}": names starting with "Tablegraph"/,
      marker: 'type Hit',
    },
    {
      name: "a blob container named as the project's own",
      sdl: `${BASE.replace('tags: String', 'photo: String @blob(container: "tablegraph-photos")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.photo',
      message: /container "tablegraph-photos": names starting with "tablegraph" are tablegraph's own/,
      marker: 'photo:',
    },
    {
      name: 'a list of nullable values stored as one property',
      sdl: `${BASE.replace('tags: String', 'tags: [String]')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.tags',
      message: /a list kept in one property holds non-null values/,
      marker: 'tags:',
    },
    {
      name: 'a reserved property name',
      sdl: `${BASE.replace('tags: String', 'Timestamp: String')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.Timestamp',
      message: /reserved property name/,
      marker: 'Timestamp:',
    },
    {
      name: 'a page size above the maximum',
      sdl: `${BASE}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(pageSize: 50, maxPageSize: 10)\n}`,
      coordinate: 'Query.items',
      message: /1 <= pageSize <= maxPageSize/,
      marker: 'items(',
    },
    {
      name: 'an index including an unknown field',
      sdl: `${BASE.replace('type Item @entity(table: "Items", partitionKey: "{group}", rowKey: "item_{id:06}")', 'type Item @entity(table: "Items", partitionKey: "{group}", rowKey: "item_{id:06}") @index(name: "byName", rowKey: "name_{name}_{id:06}", include: ["colour"])')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item@index(byName)',
      message: /include names "colour"/,
      marker: 'type Item',
    },
    {
      name: 'a summed term naming a non-numeric field',
      sdl: `${BASE.replace('name: String! }', 'name: String! total: Decimal! @summary(of: "Item", via: "owner", sum: ["name * 2"]) }')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner.total',
      message: /"name" is neither a number nor an Int, Float or Decimal field/,
      marker: 'type Owner',
    },
    {
      name: 'a syntax error: SCHEMA_INVALID with its file and line, not a stack trace',
      sdl: `${BASE}\ntype Query {\n  item(group: ID!, id: ID! Item @point\n}`,
      coordinate: 'SDL',
      message: /Syntax Error/,
      marker: 'Item @point',
    },
    {
      name: 'a misspelled directive argument',
      sdl: `${BASE.replace('type Item @entity(table: "Items", partitionKey: "{group}"', 'type Item @entity(table: "Items", partitionKy: "{group}"')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'SDL',
      message: /Unknown argument "partitionKy"/,
      marker: 'type Item',
    },
    {
      name: 'a directive argument of the wrong type',
      sdl: `${BASE.replace('type Item @entity(table: "Items"', 'type Item @entity(table: 5')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'SDL',
      message: /@entity: Argument "table" has invalid value 5/,
      marker: 'type Item',
    },
    {
      name: 'a summary value in an index projection, which would never be kept there',
      sdl: `${BASE.replace('name: String! }', 'name: String! total: Int! @summary(of: "Item", via: "owner", count: true) }').replace('type Owner @entity(table: "Items", partitionKey: "{group}", rowKey: "owner")', 'type Owner @entity(table: "Items", partitionKey: "{group}", rowKey: "owner") @index(name: "all", table: "Owners", partitionKey: "owners", rowKey: "{group}", include: ["total"])')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner@index(all)',
      message: /includes "total", a summary value kept on the entity only/,
      marker: 'type Owner',
    },
    {
      name: 'a sum held in a Float, which would drift',
      sdl: `${BASE.replace('tags: String', 'tags: String price: Float').replace('name: String! }', 'name: String! total: Float! @summary(of: "Item", via: "owner", sum: ["price"]) }')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner.total',
      message: /a sum is held in a non-null Decimal \(or Int\) field, so that it stays exact/,
      marker: 'type Owner',
    },
    {
      name: 'an Int sum of a Float field',
      sdl: `${BASE.replace('tags: String', 'tags: String price: Float').replace('name: String! }', 'name: String! total: Int! @summary(of: "Item", via: "owner", sum: ["price"]) }')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner.total',
      message: /an Int sum adds up Int fields and whole constants only/,
      marker: 'type Owner',
    },
    {
      name: 'a length constraint on a number',
      sdl: `${BASE.replace('tags: String', 'tags: String price: Float @constraint(maxLength: 3)')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.price',
      message: /@constraint: minLength, maxLength and pattern apply to String and ID fields, not Float/,
      marker: 'price:',
    },
    {
      name: 'a constraint pattern that is not a regular expression',
      sdl: `${BASE.replace('tags: String', 'tags: String @constraint(pattern: "[a-")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.tags',
      message: /@constraint: pattern "\[a-" is not a regular expression/,
      marker: 'tags:',
    },
    {
      name: 'a constraint whose min is above its max',
      sdl: `${BASE.replace('tags: String', 'tags: String price: Decimal @constraint(min: 10, max: 1)')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.price',
      message: /@constraint: min \(10\) is above max \(1\)/,
      marker: 'price:',
    },
    {
      name: 'a mutation without @write',
      sdl: `${BASE}\ntype Query { item(group: ID!, id: ID!): Item @point }\ninput ItemInput { group: ID! id: ID! name: String! }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  saveItem(input: ItemInput!): ItemPayload!\n}`,
      coordinate: 'Mutation.saveItem',
      message: /has no @write/,
      marker: 'saveItem',
    },
    {
      name: 'a create input missing a required field',
      sdl: `${BASE}\ntype Query { item(group: ID!, id: ID!): Item @point }\ninput ItemInput { group: ID! id: ID! }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  createItem(input: ItemInput!): ItemPayload! @write(entity: "Item", action: CREATE)\n}`,
      coordinate: 'Mutation.createItem',
      message: /needs `name` as non-null/,
      marker: 'createItem',
    },
    {
      name: 'an update input that makes a field required',
      sdl: `${BASE}\ntype Query { item(group: ID!, id: ID!): Item @point }\ninput ItemInput { group: ID! id: ID! ifMatch: String name: String! }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  updateItem(input: ItemInput!): ItemPayload! @write(entity: "Item", action: UPDATE)\n}`,
      coordinate: 'Mutation.updateItem',
      message: /must be nullable: UPDATE changes only the fields given/,
      marker: 'updateItem',
    },
    {
      name: 'an input field the entity does not store',
      sdl: `${BASE}\ntype Query { item(group: ID!, id: ID!): Item @point }\ninput ItemInput { group: ID! id: ID! name: String! colour: String }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  createItem(input: ItemInput!): ItemPayload! @write(entity: "Item", action: CREATE)\n}`,
      coordinate: 'Mutation.createItem',
      message: /colour is not a stored field of Item/,
      marker: 'createItem',
    },
    {
      name: 'a @series of strings',
      sdl: `${BASE.replace('tags: String', 'tags: [String!]! @series(length: 4)')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.tags',
      message: /@series is for a non-null list of non-null Int or Float elements/,
      marker: 'tags:',
    },
    {
      name: 'a @series longer than a wide entity of 100 entities holds',
      sdl: `${BASE.replace('tags: String', 'counts: [Int!]! @series(length: 30000)')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.counts',
      message: /@series\(length: 30000\): a series holds 1 to 24900 elements \(100 entities of 249 properties/,
      marker: 'counts:',
    },
    {
      name: 'a wide entity (more properties than one entity holds) with an index',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{id:06}")\n  @index(name: "byName", rowKey: "name_{name}_{id:06}")').replace('tags: String', 'counts: [Int!]! @series(length: 250)')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item@index(byName)',
      message: /Item is a wide entity stored as 2 entities \(the guide's "Wide entities pattern"\): it cannot have index entities/,
      marker: '@index(name: "byName"',
    },
    {
      name: 'a range query of a wide entity (it would return its entities one by one)',
      sdl: `${BASE.replace('tags: String', 'counts: [Int!]! @series(length: 250)')}\ntype Query {\n  items(group: ID!, first: Int, after: String): ItemConnection! @range(partitionKey: "{group}", rowKeyPrefix: "item_")\n}`,
      coordinate: 'Query.items',
      message: /Item is a wide entity stored as 2 entities .*: it cannot be read by a range query/,
      marker: 'items(group',
    },
    {
      name: 'a reference checked on write to a wide entity',
      sdl: `${BASE.replace('name: String! }', 'name: String! counts: [Int!]! @series(length: 300) }')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.owner',
      message: /Owner is a wide entity stored as 2 entities .*: it cannot be the target of a reference checked on write/,
      marker: 'owner: Owner!',
    },
    {
      name: 'a @series property that is another field',
      sdl: `${BASE.replace('tags: String', 'h: [Int!]! @series(length: 3)\n  h1: Int')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.h',
      message: /@series property "h1" is also the name of the field Item.h1/,
      marker: 'h: [Int',
    },
    {
      name: 'a @series in a key template',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{id:06}_{tags}")').replace('tags: String', 'tags: [Int!]! @series(length: 2)')}\ntype Query { item(group: ID!, id: ID!, tags: ID!): Item @point }`,
      coordinate: 'Item',
      message: /names \{tags\}, a @series: a list cannot be part of a key/,
      marker: 'type Item',
    },
    {
      name: 'a @series set by a CREATE input',
      sdl: `${BASE.replace('tags: String', 'tags: [Int!]! @series(length: 2)')}\ntype Query { item(group: ID!, id: ID!): Item @point }\ninput ItemInput { group: ID! id: ID! name: String! tags: [Int!] }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  createItem(input: ItemInput!): ItemPayload! @write(entity: "Item", action: CREATE)\n}`,
      coordinate: 'Mutation.createItem',
      message: /ItemInput.tags: a @series is changed by INCREMENT only/,
      marker: 'createItem',
    },
    {
      name: 'an INCREMENT of a type without a @series',
      sdl: `${BASE}\ntype Query { item(group: ID!, id: ID!): Item @point }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  bumpItem(input: IncrementItemInput!): ItemPayload! @write(entity: "Item", action: INCREMENT)\n}`,
      coordinate: 'Mutation.bumpItem',
      message: /INCREMENT adds to @series fields, and Item has none/,
      marker: 'bumpItem',
    },
    {
      name: 'an @encrypted Int',
      sdl: `${BASE.replace('tags: String', 'tags: Int @encrypted')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item.tags',
      message: /@encrypted is for String fields/,
      marker: 'tags:',
    },
    {
      name: 'an @encrypted field in a key template',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{id:06}_{name}")').replace('name: String!', 'name: String! @encrypted')}\ntype Query { item(group: ID!, id: ID!, name: String!): Item @point }`,
      coordinate: 'Item',
      message: /names \{name\}, which is @encrypted: keys are stored in the clear/,
      marker: 'type Item',
    },
    {
      name: 'an @encrypted field in an index',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{id:06}")\n  @index(name: "byName", rowKey: "name_{id:06}", include: ["tags"])').replace('tags: String', 'tags: String @encrypted')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item@index(byName)',
      message: /include names "tags", which is @encrypted/,
      marker: '@index(name: "byName"',
    },
    {
      name: 'an archive target that cannot be made from the moved type',
      sdl: `${BASE}\ntype Archived @entity(table: "Old", partitionKey: "{group}", rowKey: "item_{id:06}") { group: ID! id: ID! name: Int! note: String! }\ntype Query { item(group: ID!, id: ID!): Item @point old(group: ID!, id: ID!): Archived @point }\ninput MoveItemInput { group: ID! id: ID! ifMatch: String toGroup: ID toId: ID }\ntype ItemPayload { item: Item! }\ntype Mutation {\n  archiveItem(input: MoveItemInput!): ItemPayload! @write(entity: "Item", action: MOVE, to: "Archived")\n}`,
      coordinate: 'Mutation.archiveItem',
      message: /Archived cannot be made from a Item: name is a Int, Item.name a String; note is non-null, and Item has no non-null note to fill it/,
      marker: 'archiveItem',
    },
    {
      name: 'a table template with a string placeholder (a table name holds letters and digits only)',
      sdl: `${BASE}\ntype Hit @entity(table: "Hits{page}", partitionKey: "{page}", rowKey: "hit_{at:invertedTicks}") { page: ID! at: DateTime! }\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Hit',
      message: /table template "Hits\{page\}" must be letters and digits followed by one DateTime key field written yyyyMMdd or yyyyMM/,
      marker: 'type Hit',
    },
    {
      name: 'a table template over a field that is not a key field',
      sdl: `${BASE}\ntype Hit @entity(table: "Hits{day:yyyyMMdd}", partitionKey: "{page}", rowKey: "hit_{at:invertedTicks}") { page: ID! at: DateTime! day: DateTime! }\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Hit',
      message: /names \{day\}, which is not in the PartitionKey or RowKey template/,
      marker: 'type Hit',
    },
    {
      name: 'a yyyyMMdd placeholder of a field that is not a DateTime',
      sdl: `${BASE.replace('rowKey: "item_{id:06}")', 'rowKey: "item_{id:06}_{name:yyyyMMdd}")')}\ntype Query { item(group: ID!, id: ID!, name: String!): Item @point }`,
      coordinate: 'Item',
      message: /writes \{name\} as yyyyMMdd, which needs a DateTime/,
      marker: 'type Item',
    },
    {
      name: 'an index of a type with a table per period',
      sdl: `${BASE}\ntype Hit @entity(table: "Hits{at:yyyyMMdd}", partitionKey: "{page}", rowKey: "hit_{at:invertedTicks}")\n  @index(name: "byNote", table: "HitsByNote", partitionKey: "{note}", rowKey: "{page}") { page: ID! at: DateTime! note: String }\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Hit@index(byNote)',
      message: /Hit has a table per period \("Hits\{at:yyyyMMdd\}"\): index entities would need one too/,
      marker: '@index(name: "byNote"',
    },
    {
      name: 'a range into a table per period whose table template has another shape',
      sdl: `${BASE}${HITS}\ntype Query {\n  hits(page: ID!, day: DateTime!, first: Int, after: String): HitConnection! @range(table: "Hits{day:yyyyMM}")\n}`,
      coordinate: 'Query.hits',
      message: /Table template "Hits\{day:yyyyMM\}" does not address "Hits\{at:yyyyMMdd\}": part 2 is \{day:yyyyMM\} where the layout has \{at:yyyyMMdd\}/,
      marker: 'hits(',
    },
    {
      name: 'a point query into a table per period that does not say which table',
      sdl: `${BASE}${HITS}\ntype Query {\n  hit(page: ID!, at: DateTime!): Hit @point\n  hitOf(page: ID!, stamp: DateTime!): Hit @point(rowKey: "hit_{stamp:invertedTicks}")\n}`,
      coordinate: 'Query.hitOf',
      message: /Table template "Hits\{at:yyyyMMdd\}" needs \{at\}: add a non-null argument "at"/,
      marker: 'hitOf(',
    },
    {
      name: 'table: on a point query into one table',
      sdl: `${BASE}\ntype Query {\n  item(group: ID!, id: ID!): Item @point(table: "Items{group:yyyyMMdd}")\n}`,
      coordinate: 'Query.item',
      message: /table: "Items\{group:yyyyMMdd\}" is for a type with a table per period; Items is one table/,
      marker: 'item(',
    },
    {
      name: 'a summary of a type with a table per period',
      sdl: `${BASE.replace('type Owner @entity(table: "Items", partitionKey: "{group}", rowKey: "owner") { group: ID! name: String! }', 'type Owner @entity(table: "Items", partitionKey: "{group}", rowKey: "owner") { group: ID! name: String!\n  hits: Int! @summary(of: "Hit", via: "owner", count: true) }')}${HITS.replace('note: String', 'note: String group: ID! owner: Owner! @point(partitionKey: "{group}", rowKey: "owner")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Owner.hits',
      message: /Hit has a table per period \("Hits\{at:yyyyMMdd\}"\): it cannot be summarised/,
      marker: 'hits: Int!',
    },
    {
      name: 'an interface whose implementations are stored apart (one field returning it could not be one query)',
      sdl: `${BASE}\ninterface Thing { group: ID! id: ID! }\ntype Gadget implements Thing @entity(table: "Items", partitionKey: "{group}", rowKey: "thing_{id:06}") { group: ID! id: ID! }\ntype Widget implements Thing @entity(table: "Items", partitionKey: "{group}", rowKey: "widget_{id:06}") { group: ID! id: ID! }\ntype Query { thing(group: ID!, id: ID!): Thing @point }`,
      coordinate: 'Thing',
      message:
        /Gadget is stored in table Items, PartitionKey "\{group\}", RowKey "thing_\{id:06\}" but Widget in table Items, PartitionKey "\{group\}", RowKey "widget_\{id:06\}"/,
      marker: 'interface Thing',
    },
    {
      name: "a range of one implementation of a stored interface, which would read its siblings' entities too",
      sdl: `${BASE}\ninterface Thing { group: ID! id: ID! }\ntype Gadget implements Thing @entity(table: "Items", partitionKey: "{group}", rowKey: "thing_{id:06}") { group: ID! id: ID! }\ntype Widget implements Thing @entity(table: "Items", partitionKey: "{group}", rowKey: "thing_{id:06}") { group: ID! id: ID! }\ntype Query {\n  gadgets(group: ID!, first: Int, after: String): GadgetConnection! @range(rowKeyPrefix: "thing_")\n}`,
      coordinate: 'Query.gadgets',
      message: /Gadget shares its keys with Widget \(interface Thing\): a range of Gadget alone would read theirs too; return ThingConnection/,
      marker: 'gadgets(',
    },
    {
      name: 'a hash bucket count out of range',
      sdl: `${BASE.replace('partitionKey: "{group}", rowKey: "item_{id:06}")', 'partitionKey: "{group:hash1}", rowKey: "item_{id:06}")')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
      coordinate: 'Item',
      message: /hash buckets must be 2\.\.10000/,
      marker: 'type Item',
    },
  ];

  test.each(cases)('$name', ({ sdl, coordinate, message, marker }) => {
    const error = rejection(sdl);
    const problems = error.details.problems as Array<{ coordinate: string; message: string; source: string; locations: Array<{ line: number }> }>;
    const problem = problems.find((p) => p.coordinate === coordinate && message.test(p.message));
    expect(problem).toBeDefined();
    expect(problem!.source).toBe('test.graphql');
    expect(problem!.locations[0]?.line).toBe(lineOf(sdl, marker));
    // The message a person reads at start-up names the coordinate and file:line:column.
    expect(error.message).toContain(`${coordinate} (test.graphql:${problem!.locations[0].line}:`);
  });

  test('the heading says what kind of problem it is: a typo in the GraphQL is not a storage design that would scan', () => {
    const typo = rejection(
      `${BASE.replace('partitionKey: "{group}", rowKey: "item_{id:06}"', 'partitionKy: "{group}", rowKey: "item_{id:06}"')}\ntype Query { item(group: ID!, id: ID!): Item @point }`,
    );
    expect(typo.message).toMatch(/^The schema is not valid GraphQL: fix these first \(2 problem\(s\)\)/); // the typo, and the argument it leaves out
    expect(typo.message).toMatch(/Did you mean "partitionKey"\?/);
    const design = rejection(`${BASE}\ntype Query {\n  a: [Item]\n}`);
    expect(design.message).toMatch(/^The schema cannot be served without scans or is inconsistent/);
  });

  test('a sum over a field that is itself a summary is a summary of a summary: kept by the worker; a cycle is refused', () => {
    const sdl = `
type Customer @entity(table: "Shop", partitionKey: "{customer}", rowKey: "customer") {
  customer: ID!
  totalSpent: Decimal! @summary(of: "Invoice", via: "owner", sum: ["total"])
  invoiceCount: Int! @summary(of: "Invoice", via: "owner", count: true)
}
type Invoice @entity(table: "Shop", partitionKey: "{customer}", rowKey: "invoice_{id}") {
  customer: ID! id: ID!
  owner: Customer! @point(partitionKey: "{customer}", rowKey: "customer")
  total: Decimal! @summary(of: "Line", via: "invoice", sum: ["amount"])
}
type Line @entity(table: "Shop", partitionKey: "{customer}", rowKey: "line_{invoiceId}_{n}") {
  customer: ID! invoiceId: ID! n: ID! amount: Decimal
  invoice: Invoice! @point(partitionKey: "{customer}", rowKey: "invoice_{invoiceId}")
}
type Query { customer(customer: ID!): Customer @point }`;
    const { model } = compile(sdl);
    const total = model.summaries.get('Invoice.total')!;
    const spent = model.summaries.get('Customer.totalSpent')!;
    // The invoice's total is kept in the lines' EGT; the customer's sum of totals, in the same partition too, by the
    // worker: a write of a line changes the total without a write of the invoice.
    expect(total.scope).toBe('egt');
    expect(total.feeds).toEqual([spent]);
    expect(spent.scope).toBe('eventual');
    expect(model.summaries.get('Customer.invoiceCount')!.scope).toBe('egt'); // a count of invoices is as it was
    // Two summaries that sum each other: refused, each with its location.
    const cycle = `
type A @entity(table: "Things", partitionKey: "p", rowKey: "a_{id}") {
  id: ID! bId: ID!
  b: B! @point(partitionKey: "p", rowKey: "b_{bId}")
  x: Int! @summary(of: "B", via: "a", sum: ["y"])
}
type B @entity(table: "Things", partitionKey: "p", rowKey: "b_{id}") {
  id: ID! aId: ID!
  a: A! @point(partitionKey: "p", rowKey: "a_{aId}")
  y: Int! @summary(of: "A", via: "b", sum: ["x"])
}
type Query { a(id: ID!): A @point(partitionKey: "p") }`;
    const problems = rejection(cycle).details.problems as Array<{ coordinate: string; message: string; locations: Array<{ line: number }> }>;
    expect(problems.map((p) => p.coordinate).sort()).toEqual(['A.x', 'B.y']);
    expect(problems[0].message).toMatch(/summed, through other summaries, into itself/);
    expect(problems.find((p) => p.coordinate === 'A.x')!.locations[0].line).toBe(lineOf(cycle, 'x: Int!'));
  });

  test('a refused summary is one problem: its field is never taken for an input of the generated mutations', () => {
    const sdl = `${BASE.replace('tags: String', 'tags: String price: Float').replace('name: String! }', 'name: String! total: Float! @summary(of: "Item", via: "owner", sum: ["price"]) }')}
type Query { item(group: ID!, id: ID!): Item @point }
type Mutation { createOwner(input: CreateOwnerInput!): OwnerPayload! @write(entity: "Owner", action: CREATE) }`;
    const problems = rejection(sdl).details.problems as Array<{ coordinate: string; message: string }>;
    expect(problems.map((p) => p.coordinate)).toEqual(['Owner.total']);
  });

  test('all problems of a schema are reported at once', () => {
    const error = rejection(`${BASE}\ntype Query {\n  a: [Item]\n  b(id: ID!): Item @point\n}`);
    expect((error.details.problems as Array<{ coordinate: string }>).map((p) => p.coordinate).sort()).toEqual(['Query.a', 'Query.b']);
  });
});

describe('generated SDL (Relay and CRUD types of @entity types)', () => {
  const MINIMAL = `
type Book @entity(table: "Books", partitionKey: "{shelf}", rowKey: "book_{id:06}") {
  etag: String!
  shelf: ID!
  id: ID!
  "The title as printed."
  title: String!
  pages: Int
  reviewCount: Int! @summary(of: "Review", via: "book", count: true)
}
type Review @entity(table: "Books", partitionKey: "{shelf}", rowKey: "review_{bookId:06}_{id}") {
  shelf: ID! bookId: ID! id: ID! book: Book! @point(rowKey: "book_{bookId:06}")
}
type Query { books(shelf: ID!, first: Int, after: String): BookConnection! @range(rowKeyPrefix: "book_") }
type Mutation {
  createBook(input: CreateBookInput!): BookPayload! @write(entity: "Book", action: CREATE)
  updateBook(input: UpdateBookInput!): BookPayload! @write(entity: "Book", action: UPDATE)
  deleteBook(input: DeleteBookInput!): BookPayload! @write(entity: "Book", action: DELETE)
}`;

  test('a schema of entity types and root fields compiles without the directive file or any helper type', () => {
    const compiled = compileSchema([{ name: 'books.graphql', body: MINIMAL }]);
    const types = compiled.schema.getTypeMap();
    for (const name of ['BookConnection', 'BookEdge', 'PageInfo', 'CreateBookInput', 'UpdateBookInput', 'DeleteBookInput', 'BookPayload'])
      expect(types[name]).toBeDefined();
    // Only what the schema refers to: no replace input.
    expect(types.ReplaceBookInput).toBeUndefined();
    const fields = (name: string) => Object.fromEntries(Object.values((types[name] as any).getFields()).map((f: any) => [f.name, String(f.type)]));
    expect(fields('CreateBookInput')).toEqual({ shelf: 'ID!', id: 'ID!', title: 'String!', pages: 'Int' });
    expect(fields('UpdateBookInput')).toEqual({ shelf: 'ID!', id: 'ID!', ifMatch: 'String', title: 'String', pages: 'Int' });
    expect(fields('DeleteBookInput')).toEqual({ shelf: 'ID!', id: 'ID!', ifMatch: 'String' });
    expect(fields('BookPayload')).toEqual({ book: 'Book!' });
    expect(fields('BookConnection')).toEqual({ edges: '[BookEdge!]!', pageInfo: 'PageInfo!' });
    expect((types.CreateBookInput as any).getFields().title.description).toBe('The title as printed.');
    expect(compiled.model.writes.get('Mutation.updateBook')!.inputFields).toEqual(new Set(['shelf', 'id', 'title', 'pages']));
  });

  test('summary fields are never input; a declared type wins over the generated one', () => {
    const declared = `${MINIMAL}\n"Mine."\ntype BookPayload { book: Book! }`;
    const compiled = compileSchema([DIRECTIVES, { name: 'books.graphql', body: declared }]);
    expect(compiled.schema.getType('BookPayload')!.description).toBe('Mine.');
    expect(Object.keys((compiled.schema.getType('CreateBookInput') as any).getFields())).not.toContain('reviewCount');
    expect(compiled.generatedSdl).not.toContain('type BookPayload');
    expect(compiled.generatedSdl).toContain('input CreateBookInput');
  });

  test('a type that is neither declared nor generated is still SCHEMA_INVALID with its location', () => {
    const e = rejection(`${BASE}\ntype Query {\n  item(group: ID!, id: ID!): Itme @point\n}`);
    const problems = e.details.problems as Array<{ message: string; source: string; locations: Array<{ line: number }> }>;
    expect(problems.map((p) => p.message)).toEqual([expect.stringContaining('Unknown type "Itme"')]);
    expect(problems[0].source).toBe('test.graphql');
  });

  test('the HR schema declares none of its connection, edge, input or payload types', () => {
    const sdl = readFileSync(path.join(SCHEMA_DIR, 'hr.graphql'), 'utf8');
    // Besides setEmployeePhoto's, which is no CRUD shape: an UPDATE of one @blob field, with an upload URL field.
    const declared = [...sdl.matchAll(/^(?:type|input) (\w*(?:Connection|Edge|PageInfo|Input|Payload))\b/gm)].map((m) => m[1]);
    expect(declared).toEqual(['SetEmployeePhotoInput', 'SetEmployeePhotoPayload']);
    const generated = compileHr('').generatedSdl;
    for (const name of ['EmployeeConnection', 'DepartmentConnection', 'PageInfo', 'CreateEmployeeInput', 'ReplaceDepartmentInput', 'EmployeePayload']) {
      expect(generated).toMatch(new RegExp(`^(type|input) ${name} `, 'm'));
    }
  });
});

test('one mistake, one error: a misspelled key field of the HR schema is reported once, with a suggestion', () => {
  const hr = readFileSync(path.join(SCHEMA_DIR, 'hr.graphql'), 'utf8');
  const typo = hr.replace('rowKey: "empid_{id:08}", typeName: "Employee"', 'rowKey: "empid_{idd:08}", typeName: "Employee"');
  expect(typo).not.toBe(hr);
  let error: TablegraphError | undefined;
  try {
    compileSchema([DIRECTIVES, { name: 'examples/hr/hr.graphql', body: typo }]);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.SCHEMA_INVALID)) error = e;
  }
  const problems = error!.details.problems as Array<{ coordinate: string; message: string; locations: Array<{ line: number }> }>;
  expect(problems).toEqual([
    expect.objectContaining({
      coordinate: 'Employee',
      message: 'RowKey template "empid_{idd:08}" names {idd}, which is not a stored field of the type. Did you mean "{id}"?',
    }),
  ]);
  expect(problems[0].locations[0].line).toBe(lineOf(typo, 'empid_{idd:08}'));
});

test('MOVE: its input is generated (keys, ifMatch, to<Key>); a type that holds summaries cannot move', () => {
  const { schema, model } = compileHr('');
  const input = schema.getType('MoveEmployeeInput') as any;
  expect(Object.fromEntries(Object.values(input.getFields()).map((f: any) => [f.name, String(f.type)]))).toEqual({
    departmentId: 'ID!',
    id: 'ID!',
    ifMatch: 'String',
    toDepartmentId: 'ID',
    toId: 'ID',
  });
  expect(model.writes.get('Mutation.moveEmployee')!.moveTo).toEqual(
    new Map([
      ['toDepartmentId', 'departmentId'],
      ['toId', 'id'],
    ]),
  );
  const hr = readFileSync(path.join(SCHEMA_DIR, 'hr.graphql'), 'utf8');
  const sdl = `${hr}\nextend type Mutation { moveDepartment(input: MoveDepartmentInput!): DepartmentPayload! @write(entity: "Department", action: MOVE) @auth(rules: [{ roles: ["hr-admin"] }]) }`;
  let error: TablegraphError | undefined;
  try {
    compileSchema([DIRECTIVES, { name: 'examples/hr/hr.graphql', body: sdl }]);
  } catch (e) {
    if (isTablegraphError(e, ErrorCode.SCHEMA_INVALID)) error = e;
  }
  expect(error!.details.problems as Array<{ coordinate: string; message: string }>).toEqual([
    expect.objectContaining({
      coordinate: 'Mutation.moveDepartment',
      message: expect.stringContaining('Department holds summaries (employeeCount, payroll): moving it would leave what they count behind'),
    }),
  ]);
});
