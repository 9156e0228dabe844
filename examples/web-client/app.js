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

/**
 * Follows the department: a created or changed employee is shown, a deleted one removed. Whenever the subscription
 * ends — the connection lost, or the server ending it (a client that fell behind, an expired token) — it resumes from
 * the last change seen, so nothing written meanwhile is missed; when the server can no longer resume (the cursor too
 * old, too much changed), the list is read again and followed from now.
 */
function follow() {
  const client = graphqlSse.createClient({ url: api.replace(/\/graphql$/, '/graphql/stream'), headers: token ? { authorization: `Bearer ${token}` } : {} });
  let after = null;
  let ended = null; // the error the server ended the subscription with, if any
  const again = (delayMs) => {
    const why = ended;
    ended = null;
    if (why?.code === 'UNAUTHENTICATED') {
      status.textContent = 'signed out: open the page again with a new token';
      return;
    }
    status.textContent = 'reconnecting…';
    setTimeout(async () => {
      if (why?.reason === 'ChangesExpired' || why?.reason === 'ResumeTooLarge') {
        // Too far behind to catch up change by change: read the list again, then follow from now.
        after = null;
        list.replaceChildren();
        await load().catch((e) => (errorLine.textContent = e.message));
      }
      subscribe();
    }, delayMs);
  };
  const subscribe = () => {
    client.subscribe(
      {
        query: `subscription ($d: ID!, $after: String) { employeeChanged(departmentId: $d, after: $after) { kind id cursor node { ${FIELDS} } } }`,
        variables: { d: department, after },
      },
      {
        next({ data, errors }) {
          if (errors) {
            ended = errors[0]?.extensions ?? null;
            errorLine.textContent = errors.map((e) => e.message).join('; ');
            return;
          }
          const change = data.employeeChanged;
          after = change.cursor;
          if (change.kind === 'DELETED' || !change.node) list.querySelector(`[data-id="${CSS.escape(change.id)}"]`)?.remove();
          else show(change.node, true);
        },
        error(e) {
          console.warn(e);
          ended = e?.[0]?.extensions ?? null;
          again(1000);
        },
        // The server ended it (the client fell behind, the token expired): resume at once.
        complete() {
          again(0);
        },
      },
    );
    status.textContent = 'live';
  };
  subscribe();
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
