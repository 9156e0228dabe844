// graphql-codegen's schema loader: the HR example's schema as tablegraph compiles it — its SDL files plus the types
// generated for them (src/model/generated-sdl.ts) — so that the generated TypeScript types have the inputs too.
const path = require('node:path');
const { register } = require('tsx/cjs/api');

register();
const { compileSchema } = require('../src/compiler/compile');
const { loadSchemaSources } = require('../src/compiler/load-schema');

module.exports = () => compileSchema(loadSchemaSources(path.resolve(__dirname, '../examples/hr'))).schema;
