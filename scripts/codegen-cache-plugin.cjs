// GraphQL Code Generator plugin: a normalising client cache's configuration (Apollo Client typePolicies, or urql
// Graphcache keys) from a tablegraph schema's entity keys — src/cli/codegen-cache-plugin.ts, run from its sources.
const { register } = require('tsx/cjs/api');

register();
const { plugin } = require('../src/cli/codegen-cache-plugin');

module.exports = { plugin };
