/**
 * Document limits, checked while a request is parsed and validated — before any resolver runs, so before any
 * storage call: tokens (graphql-js's own parser option: a 150,000-field document stops at the parser), depth
 * (fragments followed, a fragment cycle included), aliases and directives (@escape.tech/graphql-armor). Field
 * suggestions ("Did you mean …") are blocked whenever introspection is off, so the errors of a private schema do not
 * spell it out. What a document costs in storage is measured separately, from the access paths (demand control).
 */
import { ApolloArmor } from '@escape.tech/graphql-armor';
import type { ApolloServerPlugin } from '@apollo/server';
import type { ValidationRule } from 'graphql';

/** The limits, per document. */
export interface QueryLimits {
  /** Selection-set nesting levels, fragments followed (levels). */
  maxDepth: number;
  /** Aliased fields (fields). */
  maxAliases: number;
  /** Directives used (directives). */
  maxDirectives: number;
  /** Lexical tokens: names, punctuation, values (tokens). */
  maxTokens: number;
}

/** The defaults: every query of the docs passes; the documents of an attack do not. */
export const DEFAULT_QUERY_LIMITS: QueryLimits = { maxDepth: 12, maxAliases: 30, maxDirectives: 50, maxTokens: 5000 };

/**
 * Apollo options that enforce `limits`, and block field suggestions unless `suggestions`: a document over a limit
 * fails with GRAPHQL_PARSE_FAILED (tokens) or GRAPHQL_VALIDATION_FAILED (depth, aliases, directives), and a
 * message that names the limit.
 */
export function queryLimits(
  limits: QueryLimits,
  suggestions: boolean,
): { plugins: ApolloServerPlugin[]; validationRules: ValidationRule[]; parseOptions: { maxTokens: number } } {
  const armor = new ApolloArmor({
    maxDepth: { n: limits.maxDepth, flattenFragments: true, ignoreIntrospection: true },
    maxAliases: { n: limits.maxAliases },
    maxDirectives: { n: limits.maxDirectives },
    // graphql-js's parser counts tokens itself (parseOptions below); armor's Apollo plugin for it throws from a
    // plugin hook, which Apollo Server 5 answers with a 500.
    maxTokens: { enabled: false },
    blockFieldSuggestion: { enabled: !suggestions },
    costLimit: { enabled: false }, // demand control measures cost from the access paths instead
  });
  const { plugins, validationRules } = armor.protect();
  return { plugins, validationRules, parseOptions: { maxTokens: limits.maxTokens } };
}
