// graphql-codegen's schema loader: the schema as tablegraph compiles it — the SDL files of schema/ plus the types
// generated for them (src/model/generated-sdl.ts) — so that src/generated/ has the generated inputs too.
const path = require('node:path');
const { register } = require('tsx/cjs/api');

register();
const { compileSchema } = require('../src/model/compile');
const { loadSchemaSources } = require('../src/model/load-schema');

module.exports = () => compileSchema(loadSchemaSources(path.resolve(__dirname, '../schema'))).schema;
