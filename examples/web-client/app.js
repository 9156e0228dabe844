/*
 * A department's employees, offline-first, with the sync package of packages/sync: the department is followed (read
 * once, then kept current from the `employeeChanged` subscription) into IndexedDB, and the list is always drawn from
 * that copy — so the page opens and lists the department offline too, after a reload (sw.js keeps its files). A
 * create and a title change go through the replica's outbox: shown at once (marked pending), sent when the API
 * answers, each update with the ETag it was based on. A change someone else made meanwhile comes back as a conflict,
 * with both versions and a choice. Plain browser modules, no build step; the operations (operations.js) are typed
 * from the schema, and this file is checked against their types in `npm test`.
 *
 * Page parameters (docs/frontend.md): `api` (the GraphQL endpoint, default http://127.0.0.1:4000/graphql),
 * `department` (default Marketing), `token` (a bearer token, when the server requires one).
 *
 * Where it is, it says: `live`, `loading…`, `offline` (with the writes waiting), `offline: reconnecting…` (the API does
 * not answer), or that the API refuses this page's origin (TABLEGRAPH_CORS_ORIGINS). An error the API answered for the
 * connection (its code and message) shows while the connection is down, and goes once it is back; a request that got
 * no answer adds nothing to the status line. An error of a write stays until the next write.
 */
// @ts-check
import { openReplica, reachability } from '@tablegraph/sync';
import { CREATE_EMPLOYEE, DEPARTMENT_EMPLOYEES, EMPLOYEE_CHANGED, READ_EMPLOYEE, UPDATE_EMPLOYEE } from './operations.js';

/**
 * The operations' types, generated from the schema (operations.js says how).
 * @typedef {import('./generated/operations').EmployeeFieldsFragment} Employee
 * @typedef {import('./generated/operations').DepartmentEmployeesQuery} DepartmentEmployeesQuery
 * @typedef {import('./generated/operations').EmployeeChangedSubscription} EmployeeChangedSubscription
 * @typedef {import('./generated/operations').ReadEmployeeQuery} ReadEmployeeQuery
 * @typedef {import('./generated/operations').CreateEmployeeMutation} CreateEmployeeMutation
 * @typedef {import('./generated/operations').UpdateEmployeeMutation} UpdateEmployeeMutation
 * @typedef {import('./generated/operations').CreateEmployeeInput} CreateEmployeeInput
 * @typedef {import('./generated/operations').UpdateEmployeeInput} UpdateEmployeeInput
 */

const params = new URLSearchParams(location.search);
const api = params.get('api') || 'http://127.0.0.1:4000/graphql';
const department = params.get('department') || 'Marketing';
const token = params.get('token');
/** @param {string} id @returns {any} */
const $ = (id) => document.getElementById(id);
$('department').textContent = department;
$('api').textContent = api;

const PARTITION = `Employee/${department}`;
const readEmployee = {
  query: READ_EMPLOYEE,
  /** @param {{ departmentId: string, id: string }} input */
  variables: (input) => ({ d: input.departmentId, id: input.id }),
  /** @param {ReadEmployeeQuery} data */
  pick: (data) => data.employee,
};

if ('serviceWorker' in navigator) await navigator.serviceWorker.register('sw.js').catch((e) => console.warn('no service worker', e));

const replica = await openReplica({
  name: `tablegraph-web-client ${api}`,
  url: api,
  /** @returns {Record<string, string>} */
  headers: () => (token ? { authorization: `Bearer ${token}` } : {}),
});
replica.define('createEmployee', {
  mutation: CREATE_EMPLOYEE,
  /** @param {CreateEmployeeMutation} data */
  payload: (data) => data.createEmployee.employee,
  read: readEmployee,
});
replica.define('updateEmployee', {
  mutation: UPDATE_EMPLOYEE,
  /** @param {UpdateEmployeeMutation} data */
  payload: (data) => data.updateEmployee.employee,
  read: readEmployee,
});

/** @type {Promise<unknown> | null} */
let drawing = null;
let redraw = false;
/**
 * Draws the page again from the local copy: one drawing at a time, and one more when the copy changed meanwhile —
 * two drawings at once could finish in the wrong order and leave an older copy on the page.
 */
function render() {
  if (drawing) {
    redraw = true;
    return;
  }
  drawing = draw()
    .catch((e) => showError('write', e.message))
    .finally(() => {
      drawing = null;
      if (redraw) {
        redraw = false;
        render();
      }
    });
}

/** Draws the list, the outbox's size and the conflicts from the local copy. */
async function draw() {
  const employees = /** @type {Array<Employee & { pending?: boolean }>} */ (await replica.nodes(PARTITION)).sort((a, b) => Number(a.id) - Number(b.id));
  $('employees').replaceChildren(
    ...employees.map((e) => {
      const item = document.createElement('li');
      item.dataset.id = e.id;
      item.textContent = `${e.firstName} ${e.lastName}${e.title ? ` — ${e.title}` : ''}${e.pending ? ' (pending)' : ''}`;
      if (e.pending) item.className = 'pending';
      return item;
    }),
  );
  where.pending = await replica.pending();
  $('pending').textContent = String(where.pending);
  showWhere();
  $('conflicts').replaceChildren(...(await replica.conflicts()).map(conflictItem));
}

/**
 * A conflict: what this page wrote, what is stored, and the two choices.
 * @param {{ seq: number, write: { key: string, node: Employee | null }, stored: Employee | null }} c
 */
function conflictItem(c) {
  const item = document.createElement('li');
  item.dataset.id = c.write.key;
  const show = (/** @type {Employee | null} */ e) => (e ? `${e.firstName} ${e.lastName} — ${e.title ?? ''}` : 'deleted');
  const text = document.createElement('span');
  text.textContent = `Conflict on ${c.write.key}: yours "${show(c.write.node)}", stored "${show(c.stored)}" `;
  const choose = (/** @type {string} */ label, /** @type {'mine' | 'stored'} */ choice) => {
    const button = document.createElement('button');
    button.textContent = label;
    button.dataset.choice = choice;
    button.onclick = () => replica.resolve(c.seq, choice).catch((e) => showError('write', writeError(e)));
    return button;
  };
  item.append(text, choose('Keep mine', 'mine'), choose('Keep stored', 'stored'));
  return item;
}

/** @type {Record<string, string>} */
const statuses = {
  loading: 'loading…',
  live: 'live',
  reconnecting: 'offline: reconnecting…',
  'signed-out': 'signed out: open the page again with a new token',
};
/**
 * Where the page is: the followed partition's status, the outbox's (a write could not be sent now), why the API does
 * not answer (reachability), and the writes waiting.
 */
const where = {
  follow: 'loading',
  outbox: /** @type {'empty' | 'waiting'} */ ('empty'),
  reach: /** @type {'offline' | 'origin-refused' | 'unreachable' | 'reachable'} */ ('reachable'),
  pending: 0,
  /** The connection's last error (shown while it is down), and a write's (shown until the next write). */
  errors: { connection: '', write: '' },
};

/** The status line and the error line, from `where`. */
function showWhere() {
  const waiting = where.pending > 0 ? `: ${where.pending} write${where.pending === 1 ? '' : 's'} waiting` : '';
  let status = statuses[where.follow];
  if (where.reach === 'origin-refused') status = `refused: the API at ${api} does not allow this page's origin`;
  // The browser offline, or writes that cannot be sent: not live, whatever an open stream says.
  else if (!navigator.onLine || where.reach === 'offline') status = `offline${waiting}`;
  else if (where.follow === 'live' && where.outbox === 'waiting' && where.pending > 0) status = `offline${waiting}: the API does not answer`;
  $('status').textContent = status;
  // The followed partition's own state, whatever the line says (offline, refused): for scripts and tests.
  $('status').dataset.follow = where.follow;
  const connected = where.follow === 'live' && where.reach === 'reachable' && (where.outbox === 'empty' || where.pending === 0);
  const refused =
    where.reach === 'origin-refused'
      ? `ORIGIN_NOT_ALLOWED: start the API with TABLEGRAPH_CORS_ORIGINS=${location.origin} (its log names the refused origin), or open this page from an origin it allows`
      : '';
  $('error').textContent = where.errors.write || refused || (connected ? '' : where.errors.connection);
}

/** @param {'connection' | 'write'} kind @param {string} message */
function showError(kind, message) {
  where.errors[kind] = message;
  showWhere();
}

/** Asks why the API does not answer, one question at a time; says so. */
let asking = false;
async function askWhy() {
  if (asking) return;
  asking = true;
  try {
    where.reach = await reachability(api);
  } finally {
    asking = false;
  }
  showWhere();
}

replica.on('change', render);
replica.on('conflict', render);
/**
 * What the page says of a write's error: the API's refusal as it gave it (its code and message); for a request that got
 * no answer, that it did not, never the browser's own words.
 * @param {Error} error
 */
function writeError(error) {
  return error.name === 'NetworkError' ? 'no answer from the API: try again once it answers' : error.message;
}

/**
 * What the page says of a connection's error: the API's own refusal, with its code (`OVERLOADED: …`); nothing for a
 * request that got no answer — the status line says offline or reconnecting — so never the browser's own words
 * ("Failed to fetch"). Either is written to the console, for whoever debugs the page.
 * @param {Error} error
 */
function connectionError(error) {
  console.info(`tablegraph web client: the connection ended: ${error.message}`);
  return /^[A-Z][A-Z_]+: /.test(error.message) ? error.message : '';
}

replica.on('status', (/** @type {string} */ _, /** @type {string} */ status, /** @type {Error | undefined} */ error) => {
  where.follow = status;
  if (status === 'live') {
    where.reach = 'reachable';
    where.errors.connection = '';
  } else if (error) {
    where.errors.connection = connectionError(error);
    void askWhy();
  }
  showWhere();
});
replica.on('outbox', (/** @type {'empty' | 'waiting'} */ state) => {
  where.outbox = state;
  if (state === 'waiting') void askWhy();
  else if (where.follow === 'live') where.reach = 'reachable';
  void replica.pending().then((n) => {
    where.pending = n;
    $('pending').textContent = String(n);
    showWhere();
  });
});
replica.on('rejected', (/** @type {unknown} */ _, /** @type {Error} */ error) => showError('write', error.message));
for (const event of ['online', 'offline']) globalThis.addEventListener(event, () => (navigator.onLine ? void askWhy() : showWhere()));

replica.follow({
  partition: PARTITION,
  load: {
    query: DEPARTMENT_EMPLOYEES,
    variables: { id: department },
    /** @param {DepartmentEmployeesQuery} data */
    connection: (data) => data.department?.employees ?? { edges: [], pageInfo: { hasNextPage: false, endCursor: null } },
  },
  subscription: {
    query: EMPLOYEE_CHANGED,
    variables: { d: department },
    /** @param {EmployeeChangedSubscription} data */
    event: (data) => data.employeeChanged,
  },
  /** @param {{ id: string }} e an employee, or a change (which carries the key fields) */
  key: (e) => e.id,
});

$('create').addEventListener('submit', async (/** @type {SubmitEvent & { target: HTMLFormElement }} */ event) => {
  event.preventDefault();
  where.errors.write = '';
  const form = Object.fromEntries(new FormData(event.target));
  /** @type {CreateEmployeeInput} */
  const input = {
    departmentId: department,
    id: String(form.id),
    firstName: String(form.firstName),
    lastName: String(form.lastName),
    email: String(form.email),
  };
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

$('edit').addEventListener('submit', async (/** @type {SubmitEvent & { target: HTMLFormElement }} */ event) => {
  event.preventDefault();
  where.errors.write = '';
  const form = Object.fromEntries(new FormData(event.target));
  const [id, title] = [String(form.id), String(form.title)];
  const shown = /** @type {Array<Employee & { pending?: boolean }>} */ (await replica.nodes(PARTITION)).find((e) => e.id === id);
  if (!shown) return void showError('write', `no employee ${id} in ${department}`);
  const { pending: _, ...base } = shown;
  /** @type {UpdateEmployeeInput} */
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

render();
