/*
 * A department's employees, offline-first, with the sync package of packages/sync: the department is followed (read
 * once, then kept current from the `employeeChanged` subscription) into IndexedDB, and the list is always drawn from
 * that copy — so the page opens and lists the department offline too, after a reload (sw.js keeps its files). A
 * create and a title change go through the replica's outbox: shown at once (marked pending), sent when the API
 * answers, each update with the ETag it was based on. A change someone else made meanwhile comes back as a conflict,
 * with both versions and a choice. Plain browser modules, no build step.
 *
 * Page parameters: `api` (the GraphQL endpoint, default http://127.0.0.1:4000/graphql), `department` (default
 * Marketing), `token` (a bearer token, when the server requires one).
 */
import { openReplica } from './sync/index.js';

const params = new URLSearchParams(location.search);
const api = params.get('api') || 'http://127.0.0.1:4000/graphql';
const department = params.get('department') || 'Marketing';
const token = params.get('token');
const $ = (id) => document.getElementById(id);
$('department').textContent = department;

const FIELDS = 'id departmentId etag firstName lastName email title';
const PARTITION = `Employee/${department}`;
const readEmployee = {
  query: `query ($d: ID!, $id: ID!) { employee(departmentId: $d, id: $id) { ${FIELDS} } }`,
  variables: (input) => ({ d: input.departmentId, id: input.id }),
  pick: (data) => data.employee,
};

if ('serviceWorker' in navigator) await navigator.serviceWorker.register('sw.js').catch((e) => console.warn('no service worker', e));

const replica = await openReplica({
  name: `tablegraph-web-client ${api}`,
  url: api,
  headers: () => (token ? { authorization: `Bearer ${token}` } : {}),
});
replica.define('createEmployee', {
  mutation: `mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { ${FIELDS} } } }`,
  payload: (data) => data.createEmployee.employee,
  read: readEmployee,
});
replica.define('updateEmployee', {
  mutation: `mutation ($input: UpdateEmployeeInput!) { updateEmployee(input: $input) { employee { ${FIELDS} } } }`,
  payload: (data) => data.updateEmployee.employee,
  read: readEmployee,
});

/** Draws the list, the outbox's size and the conflicts from the local copy. */
async function render() {
  const employees = (await replica.nodes(PARTITION)).sort((a, b) => Number(a.id) - Number(b.id));
  $('employees').replaceChildren(
    ...employees.map((e) => {
      const item = document.createElement('li');
      item.dataset.id = e.id;
      item.textContent = `${e.firstName} ${e.lastName}${e.title ? ` — ${e.title}` : ''}${e.pending ? ' (pending)' : ''}`;
      if (e.pending) item.className = 'pending';
      return item;
    }),
  );
  $('pending').textContent = String(await replica.pending());
  $('conflicts').replaceChildren(...(await replica.conflicts()).map(conflictItem));
}

/** A conflict: what this page wrote, what is stored, and the two choices. */
function conflictItem(c) {
  const item = document.createElement('li');
  item.dataset.id = c.write.key;
  const show = (e) => (e ? `${e.firstName} ${e.lastName} — ${e.title ?? ''}` : 'deleted');
  const text = document.createElement('span');
  text.textContent = `Conflict on ${c.write.key}: yours "${show(c.write.node)}", stored "${show(c.stored)}" `;
  const choose = (label, choice) => {
    const button = document.createElement('button');
    button.textContent = label;
    button.dataset.choice = choice;
    button.onclick = () => replica.resolve(c.seq, choice).catch((e) => ($('error').textContent = e.message));
    return button;
  };
  item.append(text, choose('Keep mine', 'mine'), choose('Keep stored', 'stored'));
  return item;
}

const statuses = {
  loading: 'loading…',
  live: 'live',
  reconnecting: 'offline: reconnecting…',
  'signed-out': 'signed out: open the page again with a new token',
};
replica.on('change', () => void render());
replica.on('conflict', () => void render());
replica.on('status', (_, status, error) => {
  $('status').textContent = statuses[status];
  if (error && status !== 'live') $('error').textContent = error.message;
});
replica.on('rejected', (_, error) => ($('error').textContent = error.message));

replica.follow({
  partition: PARTITION,
  load: {
    query: `query ($id: ID!, $after: String) { department(id: $id) { employees(first: 100, after: $after) { edges { node { ${FIELDS} } } pageInfo { hasNextPage endCursor } } } }`,
    variables: { id: department },
    connection: (data) => data.department?.employees ?? { edges: [], pageInfo: { hasNextPage: false, endCursor: null } },
  },
  subscription: {
    query: `subscription ($d: ID!, $after: String) { employeeChanged(departmentId: $d, after: $after) { kind id cursor node { ${FIELDS} } } }`,
    variables: { d: department },
    event: (data) => data.employeeChanged,
  },
  key: (e) => e.id,
});

$('create').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('error').textContent = '';
  const input = { departmentId: department, ...Object.fromEntries(new FormData(event.target)) };
  await replica.write({
    definition: 'createEmployee',
    resendAs: { update: 'updateEmployee' },
    kind: 'create',
    partition: PARTITION,
    key: input.id,
    input,
    baseEtag: null,
    node: input,
  });
  event.target.reset();
});

$('edit').addEventListener('submit', async (event) => {
  event.preventDefault();
  $('error').textContent = '';
  const { id, title } = Object.fromEntries(new FormData(event.target));
  const shown = (await replica.nodes(PARTITION)).find((e) => e.id === id);
  if (!shown) return void ($('error').textContent = `no employee ${id} in ${department}`);
  const { pending: _, ...base } = shown;
  const input = { departmentId: department, id, title };
  // Based on the ETag the page saw: a change made meanwhile by someone else comes back as a conflict.
  await replica.write({
    definition: 'updateEmployee',
    resendAs: { create: 'createEmployee' },
    kind: 'update',
    partition: PARTITION,
    key: id,
    input,
    baseEtag: base.etag ?? null,
    node: { ...base, title },
  });
  event.target.reset();
});

await render();
