/**
 * What the compiler makes of `@transaction` (src/compiler/transactions.ts), on schemas written for this test: a list of
 * writes proven to fall in one partition and to fit one EGT, and every list that could cross partitions, reach beyond
 * its EGT or exceed its limits refused, with the coordinate and the line of the SDL.
 */
import { readFileSync } from 'node:fs';
import { compileSchema } from '../../src/compiler/compile';
import { DIRECTIVES_FILE } from '../support/harness';
import { lineOf, schemaProblems } from '../support/schema-problems';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
const compile = (sdl: string) => compileSchema([DIRECTIVES, { name: 'kitchen.graphql', body: sdl }]);
const problems = (sdl: string) => schemaProblems(() => compile(sdl));

/** A recipe and its steps share a partition; a pantry item lives elsewhere. */
const KITCHEN = `
type Recipe @entity(table: "Kitchen", partitionKey: "recipe_{recipeId}", rowKey: "recipe") {
  recipeId: ID! @constraint(maxLength: 20)
  title: String! @constraint(maxLength: 80)
  stepCount: Int! @summary(of: "Step", via: "recipe", count: true)
}
type Step @entity(table: "Kitchen", partitionKey: "recipe_{recipeId}", rowKey: "step_{n:03}")
  @index(name: "byTool", rowKey: "tool_{tool}_{n:03}") {
  recipeId: ID! @constraint(maxLength: 20)
  n: Int!
  tool: String! @constraint(maxLength: 20)
  text: String! @constraint(maxLength: 200)
  recipe: Recipe! @point(partitionKey: "recipe_{recipeId}", rowKey: "recipe")
}
type Pantry @entity(table: "Pantry", partitionKey: "pantry", rowKey: "{item}")
  @index(name: "byShelf", table: "PantryByShelf", partitionKey: "{shelf}", rowKey: "{item}", unique: true) {
  item: ID! @constraint(maxLength: 20)
  shelf: String! @constraint(maxLength: 20)
}
type Query {
  recipe(recipeId: ID!): Recipe @point
}
type Mutation {
  createRecipe(input: CreateRecipeInput!): RecipePayload! @write(entity: "Recipe", action: CREATE)
  createStep(input: CreateStepInput!): StepPayload! @write(entity: "Step", action: CREATE)
  deleteStep(input: DeleteStepInput!): StepPayload! @write(entity: "Step", action: DELETE)
  moveStep(input: MoveStepInput!): StepPayload! @write(entity: "Step", action: MOVE)
  createPantry(input: CreatePantryInput!): PantryPayload! @write(entity: "Pantry", action: CREATE)
  TRANSACTION
}
input RecipeWrite {
  createRecipe: CreateRecipeInput
  createStep: CreateStepInput
  deleteStep: DeleteStepInput
}
union RecipeWritten = Recipe | Step
`;
const withTransaction = (field: string, extra = '') => KITCHEN.replace('TRANSACTION', field) + extra;
const PLAIN = 'writeRecipe(recipeId: ID!, writes: [RecipeWrite!]!): [RecipeWritten]! @transaction(maxItems: 10)';

test('a list of writes of one partition compiles: its items, its partition arguments, its table and PartitionKey', () => {
  const { model } = compile(withTransaction(PLAIN));
  const tx = model.transactions.get('Mutation.writeRecipe')!;
  expect([...tx.items.keys()]).toEqual(['createRecipe', 'createStep', 'deleteStep']);
  expect(tx).toMatchObject({ listArgument: 'writes', partitionArguments: ['recipeId'], maxItems: 10, table: 'Kitchen' });
  expect(tx.partitionKey.source).toBe('recipe_{recipeId}');
});

test('under @tenancy the partition starts with the tenant, from the token: never an argument', () => {
  const { model } = compile('extend schema @tenancy(claim: "org")\n' + withTransaction(PLAIN));
  const tx = model.transactions.get('Mutation.writeRecipe')!;
  expect(tx.partitionKey.source).toBe('{_tenant}_recipe_{recipeId}');
  expect(tx.partitionArguments).toEqual(['recipeId']);
});

test.each([
  [
    'a type stored in another partition',
    'writeAny(recipeId: ID!, writes: [AnyWrite!]!): [AnyWritten]! @transaction(maxItems: 2)',
    'input AnyWrite { createStep: CreateStepInput createPantry: CreatePantryInput }\nunion AnyWritten = Step | Pantry',
    /Pantry is stored at Pantry PartitionKey "pantry", Step at Kitchen "recipe_\{recipeId\}"/,
  ],
  [
    'more writes than one EGT holds',
    PLAIN.replace('maxItems: 10', 'maxItems: 30'),
    '',
    /maxItems: 30 writes may need 180 operations \(Mutation.createStep: 6 each.*one EGT holds 100: at most maxItems: 16/,
  ],
  [
    'a partition argument missing',
    'writeRecipe(writes: [RecipeWrite!]!): [RecipeWritten]! @transaction(maxItems: 10)',
    '',
    /the arguments beside the list must be the PartitionKey's fields \(recipeId\).*missing recipeId/,
  ],
  [
    'an item that is no @write mutation',
    'writeRecipe(recipeId: ID!, writes: [OddWrite!]!): [Step]! @transaction(maxItems: 10)',
    'input OddWrite { bakeStep: CreateStepInput }',
    /OddWrite.bakeStep names no @write mutation/,
  ],
  [
    'a MOVE, carried out across partitions',
    'writeRecipe(recipeId: ID!, writes: [MoveWrite!]!): [Step]! @transaction(maxItems: 10)',
    'input MoveWrite { moveStep: MoveStepInput }',
    /a MOVE is carried out by the worker, across partitions/,
  ],
  [
    'a result that is not one item per write',
    'writeRecipe(recipeId: ID!, writes: [RecipeWrite!]!): RecipePayload! @transaction(maxItems: 10)',
    '',
    /returns RecipePayload!: a transaction returns \[<Result>\]!.*a union of Recipe, Step/,
  ],
])('refused where written: %s', (_what, field, extra, message) => {
  const sdl = withTransaction(field, extra);
  expect(problems(sdl)).toEqual([
    { coordinate: expect.stringMatching(/^Mutation\.write/), message: expect.stringMatching(message), line: lineOf(sdl, '@transaction(') },
  ]);
});

test('an index in another partition and a summary held elsewhere compile: the worker keeps them after the EGT', () => {
  const sdl = withTransaction(
    'writeShelf(writes: [ShelfWrite!]!): [Pantry]! @transaction(maxItems: 40)',
    'input ShelfWrite { createPantry: CreatePantryInput }',
  ).replace(', unique: true', '');
  const tx = compile(sdl).model.transactions.get('Mutation.writeShelf')!;
  // Each write: its entity and change entity in the EGT (2 operations); its index entity is the worker's.
  expect(tx.maxItems).toBe(40);
  expect(problems(sdl.replace('maxItems: 40', 'maxItems: 51'))).toEqual([expect.objectContaining({ message: expect.stringMatching(/at most maxItems: 50/) })]);
});

test('a unique index compiles: its values are reserved before the EGT, not counted in it', () => {
  const sdl = withTransaction(
    'writePantry(writes: [PantryWrite!]!): [Pantry]! @transaction(maxItems: 50)',
    'input PantryWrite { createPantry: CreatePantryInput }',
  );
  expect(compile(sdl).model.transactions.get('Mutation.writePantry')!.maxItems).toBe(50);
});

test('a String without maxLength makes the worst case too large for one EGT', () => {
  const sdl = withTransaction(PLAIN.replace('maxItems: 10', 'maxItems: 16')).replace('text: String! @constraint(maxLength: 200)', 'text: String!');
  expect(problems(sdl)).toEqual([
    expect.objectContaining({ message: expect.stringMatching(/one EGT holds 4194304: give the String fields a @constraint\(maxLength:\), or lower maxItems/) }),
  ]);
});

/** An order keyed by its own id and its lines keyed by the order's: one partition, though the fields are named apart. */
const ORDERS = `
type Order @entity(table: "Orders", partitionKey: "order_{id:08}", rowKey: "order") {
  id: Int!
  lineCount: Int! @summary(of: "Line", via: "order", count: true)
}
type Line @entity(table: "Orders", partitionKey: "order_{orderId:08}", rowKey: "line_{n:03}") {
  orderId: Int!
  n: Int!
  order: Order! @point(partitionKey: "order_{orderId:08}", rowKey: "order")
}
type Query {
  order(id: Int!): Order @point
}
type Mutation {
  createOrder(input: CreateOrderInput!): OrderPayload! @write(entity: "Order", action: CREATE)
  createLine(input: CreateLineInput!): LinePayload! @write(entity: "Line", action: CREATE)
  TRANSACTION
}
input OrderWrite {
  createOrder: CreateOrderInput
  createLine: CreateLineInput
}
union OrderWritten = Order | Line
`;
const orderTransaction = (args: string) =>
  ORDERS.replace('TRANSACTION', `placeOrder(${args}writes: [OrderWrite!]!): [OrderWritten]! @transaction(maxItems: 20)`);

test.each([['orderId: Int!, '], ['id: Int!, ']])(
  'two templates that are one key with other field names share a partition: arguments %s give each type its own field',
  (args) => {
    const tx = compile(orderTransaction(args)).model.transactions.get('Mutation.placeOrder')!;
    expect(Object.fromEntries(tx.partitionFields)).toEqual({
      createOrder: { [args.split(':')[0]]: 'id' },
      createLine: { [args.split(':')[0]]: 'orderId' },
    });
  },
);

test.each([
  ['another format', 'partitionKey: "order_{orderId:08}", rowKey: "line', 'partitionKey: "order_{orderId:06}", rowKey: "line'],
  ['other text', 'partitionKey: "order_{orderId:08}", rowKey: "line', 'partitionKey: "orders_{orderId:08}", rowKey: "line'],
])('refused with the true reason: a PartitionKey of %s is another key', (_what, from, to) => {
  const sdl = orderTransaction('orderId: Int!, ').replace(from, to);
  expect(problems(sdl)).toEqual([
    expect.objectContaining({
      coordinate: 'Mutation.placeOrder',
      message: expect.stringMatching(/Line's PartitionKey "orders?_\{orderId:0[68]\}" and Order's "order_\{id:08\}" are not one key with other field names/),
    }),
  ]);
});

test('an argument that is neither type key field is refused, naming both choices', () => {
  expect(problems(orderTransaction('number: Int!, '))).toEqual([
    expect.objectContaining({ message: expect.stringMatching(/must be the PartitionKey's fields \(id; or orderId\)/) }),
  ]);
});
