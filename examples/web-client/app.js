/*
 * A department's employees, live: the list from one query, then every change from the `employeeChanged`
 * subscription (graphql-sse's own client over Server-Sent Events), and a form that creates an employee through a
 * mutation — which every page showing the department then sees arrive. Plain browser JavaScript, no build step.
 *
 * Page parameters: `api` (the GraphQL endpoint, default http://127.0.0.1:4000/graphql), `department` (default
 * Marketing), `token` (a bearer token, when the server requires one).
 */
const params = new URLSearchParams(location.search);
const api = params.get('api') || 'http://127.0.0.1:4000/graphql';
const department = params.get('department') || 'Marketing';
const token = params.get('token');
const headers = { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) };
const list = document.getElementById('employees');
const status = document.getElementById('status');
const errorLine = document.getElementById('error');
document.getElementById('department').textContent = department;

/** One GraphQL request over POST; its errors thrown as one Error with their codes. */
async function request(query, variables) {
  const res = await fetch(api, { method: 'POST', headers, body: JSON.stringify({ query, variables }) });
  const body = await res.json();
  if (body.errors) throw new Error(body.errors.map((e) => `${e.extensions?.code}: ${e.message}`).join('; '));
  return body.data;
}

/** Shows an employee, or changes the one shown with its id. */
function show(employee, fresh) {
  let item = list.querySelector(`[data-id="${CSS.escape(employee.id)}"]`);
  if (!item) {
    item = document.createElement('li');
    item.dataset.id = employee.id;
    list.append(item);
  }
  item.textContent = `${employee.firstName} ${employee.lastName}${employee.title ? ` — ${employee.title}` : ''}`;
  if (fresh) item.className = 'new';
}

const FIELDS = 'id firstName lastName title';

async function load() {
  const data = await request(`query ($id: ID!) { department(id: $id) { employees(first: 100) { edges { node { ${FIELDS} } } } } }`, { id: department });
  for (const edge of data.department?.employees.edges ?? []) show(edge.node, false);
}

/** Follows the department: a created or changed employee is shown, a deleted one removed; resumes by cursor. */
function follow() {
  const client = graphqlSse.createClient({ url: api.replace(/\/graphql$/, '/graphql/stream'), headers: token ? { authorization: `Bearer ${token}` } : {} });
  let after = null;
  const subscribe = () =>
    client.subscribe(
      {
        query: `subscription ($d: ID!, $after: String) { employeeChanged(departmentId: $d, after: $after) { kind id cursor node { ${FIELDS} } } }`,
        variables: { d: department, after },
      },
      {
        next({ data, errors }) {
          if (errors) return void (errorLine.textContent = errors.map((e) => e.message).join('; '));
          const change = data.employeeChanged;
          after = change.cursor;
          if (change.kind === 'DELETED' || !change.node) list.querySelector(`[data-id="${CSS.escape(change.id)}"]`)?.remove();
          else show(change.node, true);
        },
        error(e) {
          status.textContent = 'reconnecting…';
          // Resume after the last change seen: nothing written meanwhile is missed.
          setTimeout(subscribe, 1000);
          console.warn(e);
        },
        complete() {},
      },
    );
  subscribe();
  status.textContent = 'live';
}

document.getElementById('create').addEventListener('submit', async (event) => {
  event.preventDefault();
  const form = new FormData(event.target);
  errorLine.textContent = '';
  try {
    const input = { departmentId: department, ...Object.fromEntries(form) };
    await request('mutation ($input: CreateEmployeeInput!) { createEmployee(input: $input) { employee { id } } }', { input });
    event.target.reset();
  } catch (e) {
    errorLine.textContent = e.message;
  }
});

load()
  .then(follow)
  .catch((e) => {
    status.textContent = 'failed';
    errorLine.textContent = e.message;
  });
