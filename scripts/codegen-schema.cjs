// graphql-codegen's schema loader: the HR example's schema as tablegraph serves it — its SDL files plus the types
// generated for them (src/compiler/generated-sdl.ts), without the storage directives and their types
// (src/compiler/client-schema.ts) — so that the generated TypeScript types have the inputs too, and are a client's.
const path = require('node:path');
const { register } = require('tsx/cjs/api');

register();
const { compileSchema } = require('../src/compiler/compile');
const { loadSchemaSources } = require('../src/compiler/load-schema');
const { clientSchema } = require('../src/compiler/client-schema');

module.exports = () => clientSchema(compileSchema(loadSchemaSources(path.resolve(__dirname, '../examples/hr'))).schema);
