/**
 * The types of `graphql-ws/use/ws`, which the package publishes through its `exports` map only: this project's
 * module resolution (node, for CommonJS) does not read that map, while Node.js and tsx do at run time.
 */
declare module 'graphql-ws/use/ws' {
  export { useServer, type Extra } from 'graphql-ws/dist/use/ws.cjs';
}
