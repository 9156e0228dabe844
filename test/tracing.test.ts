/**
 * OpenTelemetry traces of a request, on a schema written for the test, with an in-memory exporter: the span tree of a
 * nested query — `graphql.request`, its DataLoader batches, one `table.*` span per storage call with the Azure SDK's
 * own spans under it — matches what `extensions.cost` says the request cost; a write's group commit and EGT are
 * spans of its request, and the worker's span for its fan-out message is linked to that write. With tracing off, no
 * span is made and messages carry no trace context.
 */
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace';
import { startTracing, type Tracing } from '../src/telemetry/tracing';
import { tracingOn } from '../src/telemetry/spans';
import { entityMessage } from '../src/queue/messages';
import { loadConfig } from '../src/runtime/config';
import { startSdlServer } from './support/harness';
import { until } from './support/wait';

const SDL = `
type Team @entity(table: "Teams", partitionKey: "{org}", rowKey: "team_{id}") {
  org: ID! id: ID! name: String!
  members(first: Int, after: String): MemberConnection! @range(partitionKey: "{org}", rowKeyPrefix: "member_{id}_")
}
type Member @entity(table: "Teams", partitionKey: "{org}", rowKey: "member_{teamId}_{id}") {
  org: ID! teamId: ID! id: ID! city: ID!
  person: Person @point(partitionKey: "{city}", rowKey: "{id}")
}
type Person @entity(table: "People", partitionKey: "{city}", rowKey: "{id}")
  @index(name: "byName", table: "PeopleByName", partitionKey: "{name}", rowKey: "{city}_{id}") {
  city: ID! id: ID! name: String!
}
type Query {
  team(org: ID!, id: ID!): Team @point
  peopleNamed(name: String!, first: Int, after: String): PersonConnection! @range(index: "byName", partitionKey: "{name}")
}
type Mutation {
  createTeam(input: CreateTeamInput!): TeamPayload! @write(entity: "Team", action: CREATE)
  createMember(input: CreateMemberInput!): MemberPayload! @write(entity: "Member", action: CREATE)
  createPerson(input: CreatePersonInput!): PersonPayload! @write(entity: "Person", action: CREATE)
}`;

const exporter = new InMemorySpanExporter();
let tracing: Tracing;
let world: Awaited<ReturnType<typeof startSdlServer>>;

beforeAll(async () => {
  tracing = startTracing({ exporter: 'otlp' }, 'tablegraph-test', exporter);
  world = await startSdlServer(SDL);
  const ok = async (q: string, input: Record<string, unknown>) => expect((await world.server.query(q, { input })).errors).toBeUndefined();
  await ok('mutation($input: CreateTeamInput!) { createTeam(input: $input) { team { id } } }', { org: 'o', id: 't', name: 'Blue' });
  for (const [id, city] of [
    ['1', 'Oslo'],
    ['2', 'Oslo'],
    ['3', 'Lima'],
  ]) {
    await ok('mutation($input: CreatePersonInput!) { createPerson(input: $input) { person { id } } }', { city, id, name: `P${id}` });
    await ok('mutation($input: CreateMemberInput!) { createMember(input: $input) { member { id } } }', { org: 'o', teamId: 't', id, city });
  }
}, 60_000);

afterAll(async () => {
  await world?.close();
  await tracing?.shutdown();
});

/** A request's spans: the one its `traceparent` header starts, and everything under it. */
async function traced(query: string, variables: Record<string, unknown> = {}) {
  exporter.reset();
  const traceId = [...crypto.getRandomValues(new Uint8Array(16))].map((b) => b.toString(16).padStart(2, '0')).join('');
  const res = await fetch(world.server.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', traceparent: `00-${traceId}-00f067aa0ba902b7-01` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await res.json()) as any;
  // The request span ends when the response is closed: wait for it.
  const ended = () => exporter.getFinishedSpans().some((s) => s.name === 'graphql.request' && s.spanContext().traceId === traceId);
  await until('the request span to end', ended, { timeoutMs: 10_000, everyMs: 10 });
  const spans = exporter.getFinishedSpans().filter((s) => s.spanContext().traceId === traceId);
  return { body, spans, traceId };
}

const parentOf = (span: ReadableSpan, spans: ReadableSpan[]) => spans.find((s) => s.spanContext().spanId === span.parentSpanContext?.spanId);

test('a nested query: one table span per storage call the cost counts, under its DataLoader batch, the SDK spans under each', async () => {
  expect(tracingOn()).toBe(true);
  const { body, spans } = await traced('{ team(org: "o", id: "t") { name members(first: 10) { edges { node { id person { name } } } } } }');
  expect(body.errors).toBeUndefined();
  expect(body.data.team.members.edges.map((e: any) => e.node.person.name)).toEqual(['P1', 'P2', 'P3']);
  const cost = body.extensions.cost;
  expect(cost).toMatchObject({ pointQueries: 4, rangeQueries: 1, waves: 3 });

  const request = spans.filter((s) => s.name === 'graphql.request');
  expect(request).toHaveLength(1);
  // The caller's traceparent made it the caller's child: same trace, its parent the caller's span.
  expect(request[0].parentSpanContext?.spanId).toBe('00f067aa0ba902b7');
  expect(request[0].attributes).toMatchObject({ 'tablegraph.cost.pointQueries': 4, 'tablegraph.cost.rangeQueries': 1, 'http.response.status_code': 200 });

  const calls = spans.filter((s) => s.name.startsWith('table.'));
  expect(calls.map((s) => s.name).sort()).toEqual(['table.getEntity', 'table.getEntity', 'table.getEntity', 'table.getEntity', 'table.queryRange']);
  expect(calls).toHaveLength(cost.pointQueries + cost.rangeQueries);
  expect(calls.reduce((n, s) => n + Number(s.attributes['tablegraph.round_trips']), 0)).toBe(cost.roundTrips);
  expect(calls.reduce((n, s) => n + Number(s.attributes['tablegraph.entities']), 0)).toBe(cost.entitiesRead);

  // Each call under its DataLoader batch, each batch under the request; three batches for three waves.
  const batches = spans.filter((s) => s.name.startsWith('dataloader.'));
  expect(batches).toHaveLength(cost.waves);
  for (const call of calls) expect(batches).toContain(parentOf(call, spans));
  for (const batch of batches) {
    let up = parentOf(batch, spans);
    while (up && up.name !== 'graphql.request') up = parentOf(up, spans);
    expect(up).toBe(request[0]);
  }
  const people = batches.find((b) => b.name === 'dataloader.point' && b.attributes['tablegraph.keys'] === 3);
  expect(people).toBeDefined();

  // The Azure SDK's own spans (its operation and its HTTP request) hang under each storage call.
  for (const call of calls) {
    const sdk = spans.filter((s) => parentOf(s, spans) === call);
    expect(sdk.length).toBeGreaterThanOrEqual(1);
    expect(sdk.some((s) => /^TableClient\./.test(s.name))).toBe(true);
  }
});

test('a write: its group commit and EGT in its trace, and the worker span of its fan-out message linked to it', async () => {
  const { body, spans, traceId } = await traced('mutation($input: CreatePersonInput!) { createPerson(input: $input) { person { id } } }', {
    input: { city: 'Oslo', id: '9', name: 'Nine' },
  });
  expect(body.errors).toBeUndefined();
  const commit = spans.find((s) => s.name === 'write.commit');
  expect(commit?.attributes).toMatchObject({ 'tablegraph.writes': 1, 'tablegraph.partition_key': 'Oslo' });
  const egt = spans.find((s) => s.name === 'table.submitTransaction');
  expect(parentOf(egt!, spans)).toBe(commit);
  // Its `$batch` request, which the store writes itself (egt-request.ts), is still the SDK pipeline's HTTP span under it.
  expect(spans.some((s) => s.name === 'HTTP POST' && parentOf(s, spans) === egt)).toBe(true);
  expect(body.extensions.cost.writes).toBe(spans.filter((s) => s.name === 'table.submitTransaction' || s.name === 'table.createEntity').length);
  expect(spans.some((s) => s.name === 'queue.send')).toBe(true);

  // The worker's message: a trace of its own, linked to the commit that sent it.
  const handled = () => exporter.getFinishedSpans().find((s) => s.name === 'worker.message' && s.links.some((l) => l.context.traceId === traceId));
  const worker: ReadableSpan | undefined = await until("the worker's span", handled, { timeoutMs: 10_000 }).catch(() => undefined);
  expect(worker).toBeDefined();
  expect(worker!.spanContext().traceId).not.toBe(traceId);
  expect(worker!.links[0].context.spanId).toBe(commit!.spanContext().spanId);
  expect(worker!.attributes).toMatchObject({ 'tablegraph.message.kind': 'fanout', 'tablegraph.entity': 'Person' });
  const index = (await world.server.query('{ peopleNamed(name: "Nine", first: 5) { edges { node { id } } } }')).data.peopleNamed.edges;
  expect(index).toEqual([{ node: { id: '9' } }]);
}, 30_000);

test('off unless the OTEL_* variables ask for it', async () => {
  expect(loadConfig({}).tracing).toBeUndefined();
  expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).tracing).toEqual({ exporter: 'otlp', serviceName: undefined });
  expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeUndefined();
  expect(loadConfig({ OTEL_TRACES_EXPORTER: 'console', OTEL_SERVICE_NAME: 'api' }).tracing).toEqual({ exporter: 'console', serviceName: 'api' });
  expect(loadConfig({ OTEL_TRACES_EXPORTER: 'none', OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318' }).tracing).toBeUndefined();
  await tracing.shutdown();
  expect(tracingOn()).toBe(false);
  const message = entityMessage({
    kind: 'fanout',
    v: 3,
    entity: 'Person',
    primary: { table: 't', partitionKey: 'p', rowKey: 'r' },
    writeId: 'w',
    basedOn: null,
    deleted: false,
    candidates: [],
  });
  expect(message.traceparent).toBeUndefined();
  exporter.reset();
  expect((await world.server.query('{ team(org: "o", id: "t") { name } }')).data.team.name).toBe('Blue');
  expect(exporter.getFinishedSpans()).toEqual([]);
});
