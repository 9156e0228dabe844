/*
 * The page's GraphQL operations, each named. GraphQL Code Generator reads them from this file (codegen.yml) and
 * writes their TypeScript types — variables and results, from the schema as tablegraph serves it — to
 * generated/operations.ts; app.js is type-checked against those (`tsc -p examples/web-client`, in `npm test`), so a
 * schema change that breaks one of the page's operations fails the tests, not the page.
 */

/** An employee as the page shows and edits it (the ETag included: an edit is based on it). */
const EMPLOYEE_FIELDS = /* GraphQL */ `
  fragment EmployeeFields on Employee {
    id
    departmentId
    etag
    firstName
    lastName
    email
    title
  }
`;

/** One page of a department's employees (a Relay connection): what the replica loads. */
export const DEPARTMENT_EMPLOYEES = /* GraphQL */ `
  query DepartmentEmployees($id: ID!, $after: String) {
    department(id: $id) {
      employees(first: 100, after: $after) {
        edges {
          node {
            ...EmployeeFields
          }
        }
        pageInfo {
          hasNextPage
          endCursor
        }
      }
    }
  }
  ${EMPLOYEE_FIELDS}
`;

/** The department's changes, from a cursor: what keeps the replica current. */
export const EMPLOYEE_CHANGED = /* GraphQL */ `
  subscription EmployeeChanged($d: ID!, $after: String) {
    employeeChanged(departmentId: $d, after: $after) {
      kind
      id
      cursor
      node {
        ...EmployeeFields
      }
    }
  }
  ${EMPLOYEE_FIELDS}
`;

/** One employee: what the outbox reads back when a write meets a changed entity. */
export const READ_EMPLOYEE = /* GraphQL */ `
  query ReadEmployee($d: ID!, $id: ID!) {
    employee(departmentId: $d, id: $id) {
      ...EmployeeFields
    }
  }
  ${EMPLOYEE_FIELDS}
`;

export const CREATE_EMPLOYEE = /* GraphQL */ `
  mutation CreateEmployee($input: CreateEmployeeInput!) {
    createEmployee(input: $input) {
      employee {
        ...EmployeeFields
      }
    }
  }
  ${EMPLOYEE_FIELDS}
`;

export const UPDATE_EMPLOYEE = /* GraphQL */ `
  mutation UpdateEmployee($input: UpdateEmployeeInput!) {
    updateEmployee(input: $input) {
      employee {
        ...EmployeeFields
      }
    }
  }
  ${EMPLOYEE_FIELDS}
`;
