/**
 * What depends on a GraphQL document alone, computed once per document and kept: the document parsed and validated
 * (the schema's rules and the document limits), the variables its demand estimate depends on, the estimates already
 * made for their values, and — once it has run COMPILE_AFTER times — its operation compiled to a function
 * (graphql-jit). Until then graphql-js runs it, as Apollo would: a compile costs several runs' CPU, which a document
 * seen once (a query typed in an IDE, one that writes its arguments in its text) would pay and never get back. The
 * query lane (query-lane.ts) serves a request of a prepared operation without parsing, validating or planning anything
 * again; nothing of a request — its variables' other values, its token, its caller's scopes — is part of what is kept.
 *
 * Kept: up to 500 documents of at most 64 KiB of text each, the least recently used going first (lru-cache). The
 * cache belongs to one application, so to one schema: a server serving another schema has another.
 */
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { LRUCache } from 'lru-cache';
import {
  execute,
  Kind,
  parse,
  specifiedRules,
  visit,
  type DocumentNode,
  type ExecutionResult,
  type FragmentDefinitionNode,
  type GraphQLSchema,
  type OperationDefinitionNode,
  type ValidationRule,
} from 'graphql';
import type { Model } from '../model/types';
import { demandVariables, estimateDemand, type DemandEstimate } from '../read/demand';
import { ValidatedShapes } from './validated-shapes';
import { scalarVariablesCheck } from './scalar-variables';

/** A query operation ready to run, and what its demand estimate depends on. */
export interface PreparedOperation {
  document: DocumentNode;
  operation: OperationDefinitionNode;
  /** The operation's name, if it has one. */
  name?: string;
  /**
   * Runs the operation with a context and the variables (coerced by the caller or not: both coerce them): by graphql-js
   * for its first runs, then compiled by graphql-jit.
   */
  run(context: unknown, variables: Record<string, unknown>): ExecutionResult | Promise<ExecutionResult>;
  /**
   * The operation's worst case for `variables` (src/read/demand.ts), computed once per value of the variables it
   * depends on (those given as a connection's `first` or a `@skip`/`@include` condition).
   */
  estimate(variables: Record<string, unknown>): DemandEstimate;
  /**
   * True when `variables` certainly coerce, told without coercing them (scalar-variables.ts); false when not told
   * here: coerce them (graphql-js `getVariableValues`).
   */
  variablesCoerce(variables: Record<string, unknown>): boolean;
}

export interface PreparedDocumentsOptions {
  schema: GraphQLSchema;
  model: Model;
  /** Validation rules beside graphql-js's own (the document limits). */
  validationRules: readonly ValidationRule[];
  /** The parser's options (the token limit). */
  parseOptions: { maxTokens: number };
  /** Documents kept (documents). Default: 500. */
  maxDocuments?: number;
}

/** What a document of the lane is: its operations, each prepared; or not one for the lane (`null`). */
type Entry = { operations: Map<string | undefined, PreparedOperation> } | null;

/** Longest query text kept (characters): a longer one is prepared for each request, as Apollo would. */
const MAX_TEXT = 65_536;
/** Estimates kept per operation (values of its `first` variables). */
const MAX_ESTIMATES = 32;
/** The run (count) of an operation on which it is compiled, as Mercurius's `jit` option does: one that repeats. */
export const COMPILE_AFTER = 3;

export class PreparedDocuments {
  private readonly cache: LRUCache<string, { entry: Entry }>;
  private readonly shapes: ValidatedShapes;

  constructor(private readonly opts: PreparedDocumentsOptions) {
    this.cache = new LRUCache({ max: opts.maxDocuments ?? 500 });
    this.shapes = new ValidatedShapes(opts.schema, [...specifiedRules, ...opts.validationRules], opts.maxDocuments ?? 500);
  }

  /** The schema the documents are prepared against. */
  get schema(): GraphQLSchema {
    return this.opts.schema;
  }

  /**
   * The prepared operation `operationName` names in `query` (the only one when none is named), or undefined when the
   * request is not one for the lane: a document that does not parse or validate (its errors are Apollo's to word), a
   * mutation or subscription, introspection, `@defer` or `@stream`, an operation name the document does not have.
   */
  get(query: string, operationName: string | undefined): PreparedOperation | undefined {
    if (query.length > MAX_TEXT) return undefined;
    let held = this.cache.get(query);
    if (!held) {
      held = { entry: this.prepare(query) };
      this.cache.set(query, held);
    }
    const operations = held.entry?.operations;
    if (!operations) return undefined;
    // Without a name, the document's only operation (kept under `undefined` too when the document has one).
    return operations.get(operationName);
  }

  private prepare(query: string): Entry {
    let document: DocumentNode;
    try {
      document = parse(query, this.opts.parseOptions);
    } catch {
      return null;
    }
    if (!laneable(query, document)) return null;
    if (!this.shapes.valid(query, document)) return null;
    const fragments: Record<string, FragmentDefinitionNode> = {};
    for (const d of document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments[d.name.value] = d;
    const operations = new Map<string | undefined, PreparedOperation>();
    const all = document.definitions.filter((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION);
    for (const operation of all) {
      if (operation.operation !== 'query') continue;
      const name = operation.name?.value;
      const run = this.runner(document, name);
      const variablesCoerce = scalarVariablesCheck(this.opts.schema, operation.variableDefinitions ?? []) ?? (() => false);
      operations.set(all.length === 1 ? undefined : name, { document, operation, name, run, estimate: this.estimator(operation, fragments), variablesCoerce });
      if (all.length === 1 && name !== undefined) operations.set(name, operations.get(undefined)!);
    }
    return operations.size > 0 ? { operations } : null;
  }

  /**
   * Runs the operation by graphql-js, and from its COMPILE_AFTER-th run on as graphql-jit compiled it (by graphql-js
   * still if graphql-jit cannot compile it).
   */
  private runner(document: DocumentNode, operationName: string | undefined): PreparedOperation['run'] {
    const { schema } = this.opts;
    let runs = 0;
    let compiled: CompiledQuery | null | undefined;
    return (contextValue, variableValues) => {
      if (compiled === undefined && ++runs >= COMPILE_AFTER) {
        const made = compileQuery(schema, document, operationName);
        compiled = isCompiledQuery(made) ? made : null;
      }
      if (compiled) return compiled.query(undefined, contextValue, variableValues);
      return execute({ schema, document, operationName, contextValue, variableValues });
    };
  }

  /**
   * The operation's estimate, memoised by the variables it depends on (demand.ts demandVariables: a connection's
   * `first`, a `@skip`/`@include` condition), as sent — so that it is always the estimate Apollo's path makes of the
   * same request.
   */
  private estimator(operation: OperationDefinitionNode, fragments: Record<string, FragmentDefinitionNode>): PreparedOperation['estimate'] {
    const { schema, model } = this.opts;
    const names = demandVariables(operation, fragments, model);
    const memo = new Map<string, DemandEstimate>();
    return (variables) => {
      // Each value as sent, and whether it was: an explicit null is not a variable left to its default.
      const key = names.length === 0 ? '' : JSON.stringify(names.map((n) => (Object.hasOwn(variables, n) ? [variables[n]] : [])));
      let estimate = memo.get(key);
      if (!estimate) {
        estimate = estimateDemand(schema, model, operation, fragments, variables);
        if (memo.size >= MAX_ESTIMATES) memo.delete(memo.keys().next().value!);
        memo.set(key, estimate);
      }
      return estimate;
    };
  }
}

/**
 * Text that may name an introspection field other than `__typename`, or `@defer` or `@stream` (a comment, which may
 * stand between `@` and the name, counts too): only such a document is visited.
 */
const MAY_NOT_BE_LANEABLE = /__(?!typename\b)|@[\s,]*(?:defer|stream)\b|#/;

/** A document the lane runs: no introspection field beyond `__typename`, no `@defer` or `@stream`. */
function laneable(text: string, document: DocumentNode): boolean {
  if (!MAY_NOT_BE_LANEABLE.test(text)) return true;
  let ok = true;
  visit(document, {
    Field(node) {
      if (node.name.value.startsWith('__') && node.name.value !== '__typename') ok = false;
    },
    Directive(node) {
      if (node.name.value === 'defer' || node.name.value === 'stream') ok = false;
    },
  });
  return ok;
}
