/**
 * What the compiler makes of `@nodeInterface` (src/compiler/node-interface.ts) on schemas written for this test: the
 * client schema Relay reads (`interface Node`, every entity type implementing it, `node` and `nodes`), nothing of it
 * stored or written, and each schema it cannot serve refused with the coordinate and the line of the SDL.
 */
import { readFileSync } from 'node:fs';
import { isInterfaceType, isObjectType, printType } from 'graphql';
import { compileSchema } from '../../src/compiler/compile';
import { clientSchema } from '../../src/compiler/client-schema';
import { DIRECTIVES_FILE } from '../support/harness';
import { lineOf, schemaProblems } from '../support/schema-problems';

const DIRECTIVES = { name: 'schema/directives.graphql', body: readFileSync(DIRECTIVES_FILE, 'utf8') };
const compile = (sdl: string) => compileSchema([DIRECTIVES, { name: 'rooms.graphql', body: sdl }]);
const problems = (sdl: string) => schemaProblems(() => compile(sdl));

const ROOMS = `
type Building @entity(table: "Buildings", partitionKey: "{code}", rowKey: "building") {
  code: ID!
  rooms(first: Int, after: String): RoomConnection! @range(partitionKey: "{code}", rowKeyPrefix: "room_")
}
type Room @entity(table: "Buildings", partitionKey: "{building}", rowKey: "room_{floor:02}_{number}") {
  building: ID!
  floor: Int!
  number: String!
  seats: Int!
}
type Query { building(code: ID!): Building @point }
type Mutation { createRoom(input: CreateRoomInput!): RoomPayload! @write(entity: "Room", action: CREATE) }
`;

test('every entity type implements Node with its nodeId; the query type gains node and nodes; nothing of it stored or written', () => {
  const { schema, model } = compile(`extend schema @nodeInterface\n${ROOMS}`);
  const client = clientSchema(schema);
  const node = client.getType('Node');
  expect(isInterfaceType(node) && printType(node)).toContain('interface Node {');
  for (const name of ['Building', 'Room']) {
    const type = client.getType(name);
    expect(isObjectType(type) && type.getInterfaces().map((i) => i.name)).toEqual(['Node']);
    expect(model.entities.get(name)!.fields.has('nodeId')).toBe(false);
  }
  const query = client.getQueryType()!.getFields();
  expect(String(query.node.type)).toBe('Node');
  expect(query.node.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['nodeId: ID!']);
  expect(String(query.nodes.type)).toBe('[Node]!');
  expect(query.nodes.args.map((a) => `${a.name}: ${String(a.type)}`)).toEqual(['nodeIds: [ID!]!']);
  // The write's input has the stored fields only.
  expect(Object.keys((client.getType('CreateRoomInput') as any).getFields()).sort()).toEqual(['building', 'floor', 'number', 'seats']);
  // Each type's id is the point query of its own keys.
  const room = model.nodes!.paths.get('Room')!;
  expect([room.kind, room.partitionKey.template.source, room.rowKey.template.source]).toEqual(['point', '{building}', 'room_{floor:02}_{number}']);
  expect([...room.rowKey.bindings.values()]).toEqual([
    { source: 'argument', name: 'floor' },
    { source: 'argument', name: 'number' },
  ]);
});

test('idField: "id" where no entity type has an id; without the directive, nothing changes', () => {
  const { schema, model } = compile(`extend schema @nodeInterface(idField: "id")\n${ROOMS}`);
  expect(String(schema.getQueryType()!.getFields().nodes.args[0].name)).toBe('ids');
  expect(model.nodes!.idField).toBe('id');
  const plain = compile(ROOMS);
  expect([plain.model.nodes, plain.schema.getType('Node'), plain.schema.getQueryType()!.getFields().node]).toEqual([undefined, undefined, undefined]);
});

test('refused: an entity type with a field of the id’s name, a type Node or a field node of the schema’s own, a bad name', () => {
  const withId = `extend schema @nodeInterface(idField: "number")\n${ROOMS}`;
  expect(problems(withId)).toContainEqual({
    coordinate: 'Room.number',
    message: expect.stringMatching(/is a field of the type's own; @nodeInterface's global id needs a field of its own name/),
    line: lineOf(withId, '  number: String!'),
  });
  const ownNode = `extend schema @nodeInterface\n${ROOMS}\ninterface Node { id: ID! }\n`;
  expect(problems(ownNode)).toContainEqual({
    coordinate: 'Node',
    message: expect.stringMatching(/declares a type Node of its own/),
    line: lineOf(ownNode, 'interface Node'),
  });
  const ownField = `extend schema @nodeInterface\n${ROOMS.replace('type Query {', 'type Query { node(code: ID!): Building @point')}`;
  expect(problems(ownField)).toContainEqual({
    coordinate: 'Query.node',
    message: expect.stringMatching(/is a field of the schema's own; @nodeInterface defines it/),
    line: lineOf(ownField, 'node(code: ID!)'),
  });
  expect(problems(`extend schema @nodeInterface(idField: "two words")\n${ROOMS}`)).toContainEqual({
    coordinate: 'schema',
    message: '@nodeInterface(idField: "two words") is not a GraphQL field name',
    line: 1,
  });
});
