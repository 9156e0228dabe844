/**
 * Trusted documents (persisted operations): with a manifest configured (TABLEGRAPH_TRUSTED_DOCUMENTS), the server
 * runs the operations the manifest lists and nothing else — the operations a web app ships, not whatever a client
 * writes. Each listed document is parsed and validated once, at start-up, with the server's own rules and limits;
 * a manifest with a document that does not parse or validate stops the start with its id and the reason. Requests
 * then name an operation by id, and Apollo Server takes its parsed document from the store filled here: it never
 * parses or validates a trusted document again.
 *
 * What a request may send (the GraphQL-over-HTTP "persisted documents" forms, in a JSON body or a GET query string):
 * - `documentId`: the manifest's id, bare or `sha256:<hex>`;
 * - `extensions.persistedQuery.sha256Hash` (Apollo's automatic persisted queries, version 1): the SHA-256 of a
 *   listed document's text, or a listed id;
 * - `query`: a document's whole text, run only when its SHA-256 is that of a listed document.
 *
 * Refusals, before anything is parsed: PERSISTED_QUERY_NOT_ALLOWED (HTTP 400) for a document not in the manifest,
 * PERSISTED_QUERY_NOT_FOUND (HTTP 400) for an id that names none — a client built against another manifest.
 *
 * Manifest formats read: the JSON object of id → document text that GraphQL Code Generator's client preset writes
 * (`persisted-documents.json`), and Apollo's `apollo-persisted-query-manifest` (version 1).
 */
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { parse, specifiedRules, validate, type DocumentNode, type GraphQLSchema, type ValidationRule } from 'graphql';
import { ErrorCode, TablegraphError } from '../errors';

/** Stable codes of the refusals. */
export const PERSISTED_QUERY_NOT_ALLOWED = 'PERSISTED_QUERY_NOT_ALLOWED';
export const PERSISTED_QUERY_NOT_FOUND = 'PERSISTED_QUERY_NOT_FOUND';

/** One listed operation. */
export interface TrustedDocument {
  /** Its id in the manifest. */
  id: string;
  /** Its text, as listed. */
  text: string;
  /** SHA-256 of `text`, hex: Apollo's query hash, and the automatic persisted query's `sha256Hash`. */
  textHash: string;
  /** Parsed and validated at start-up. */
  document: DocumentNode;
}

/** A request's GraphQL parameters, as JSON (a POST body) or from a query string (a GET). */
export type GraphqlParams = Record<string, unknown>;

/** The gate's answer: the parameters to hand to Apollo (the document's text in `query`), or a refusal. */
export type TrustedResolution = { ok: true; params: GraphqlParams } | { ok: false; status: number; code: string; message: string };

/** Options of loading a manifest: the rules every request's document meets (Apollo's validation rules). */
export interface TrustedDocumentsOptions {
  /** Validation rules added to graphql-js's specified rules (the server's document limits). */
  validationRules?: readonly ValidationRule[];
  /** graphql-js parse options (the token limit). */
  parseOptions?: { maxTokens?: number };
}

/** The documents of one manifest, and the gate requests pass through. */
export class TrustedDocuments {
  private readonly byId = new Map<string, TrustedDocument>();
  private readonly byTextHash = new Map<string, TrustedDocument>();

  constructor(documents: readonly TrustedDocument[]) {
    for (const d of documents) {
      this.byId.set(d.id, d);
      this.byTextHash.set(d.textHash, d);
    }
  }

  /** How many documents are listed. */
  get size(): number {
    return this.byId.size;
  }

  /**
   * The listed document a request names, or its refusal. The parameters returned carry the document's text in
   * `query` and no longer carry `documentId` or `extensions.persistedQuery`: Apollo then finds the document parsed
   * in `documentStore()`.
   */
  resolve(params: GraphqlParams): TrustedResolution {
    const { documentId, query } = params;
    const extensions = isObject(params.extensions) ? params.extensions : undefined;
    const persisted = extensions && isObject(extensions.persistedQuery) ? extensions.persistedQuery : undefined;
    let found: TrustedDocument | undefined;
    if (typeof query === 'string') {
      // A text is run only when it is a listed one, whatever id comes with it.
      found = this.byTextHash.get(sha256(query));
      if (!found) return refusal(PERSISTED_QUERY_NOT_ALLOWED, 'This server runs only its trusted documents, and this document is not one of them.');
    } else if (typeof documentId === 'string') {
      found = this.byId.get(documentId) ?? this.byId.get(documentId.replace(/^sha256:/, '')) ?? this.byTextHash.get(documentId.replace(/^sha256:/, ''));
      if (!found) return refusal(PERSISTED_QUERY_NOT_FOUND, `No trusted document has the id "${truncate(documentId)}".`);
    } else if (persisted && typeof persisted.sha256Hash === 'string') {
      found = this.byTextHash.get(persisted.sha256Hash) ?? this.byId.get(persisted.sha256Hash);
      if (!found) return refusal(PERSISTED_QUERY_NOT_FOUND, `No trusted document has the hash "${truncate(persisted.sha256Hash)}".`);
    } else {
      return refusal(PERSISTED_QUERY_NOT_ALLOWED, 'This server runs only its trusted documents: send a `documentId` (or a persisted query hash).');
    }
    const { documentId: _id, extensions: _ext, ...rest } = params;
    const { persistedQuery: _pq, ...otherExtensions } = extensions ?? {};
    return { ok: true, params: { ...rest, query: found.text, ...(Object.keys(otherExtensions).length > 0 ? { extensions: otherExtensions } : {}) } };
  }

  /**
   * Apollo Server's `documentStore`: the trusted documents, parsed and validated, by their query hash (Apollo
   * prefixes its keys with the schema's hash and a colon). Nothing else is stored: with a manifest, no other
   * document reaches Apollo.
   */
  documentStore(): {
    get(key: string): Promise<DocumentNode | undefined>;
    set(key: string, value: DocumentNode): Promise<void>;
    delete(key: string): Promise<boolean>;
  } {
    return {
      get: async (key) => this.byTextHash.get(key.slice(key.lastIndexOf(':') + 1))?.document,
      set: async () => {},
      delete: async () => false,
    };
  }
}

/**
 * Reads a manifest file and checks each document against `schema`.
 * @param file the manifest's path (JSON)
 * @throws TablegraphError CONFIG_INVALID when the file cannot be read, is not a manifest in a known format, is
 *   empty, or holds a document that does not parse or validate (details.errors: id → reason, every one listed)
 * @example
 * const trusted = loadTrustedDocuments('persisted-documents.json', schema, { validationRules, parseOptions });
 */
export function loadTrustedDocuments(file: string, schema: GraphQLSchema, options: TrustedDocumentsOptions = {}): TrustedDocuments {
  let json: unknown;
  try {
    json = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${file} could not be read as JSON (${(e as Error).message}).`, { file: (e as Error).message });
  }
  const entries = manifestEntries(json, file);
  if (entries.length === 0) throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${file} lists no document.`, { file: 'no document' });
  const rules = [...specifiedRules, ...(options.validationRules ?? [])];
  const documents: TrustedDocument[] = [];
  const errors: Record<string, string> = {};
  for (const [id, text] of entries) {
    try {
      const document = parse(text, { maxTokens: options.parseOptions?.maxTokens });
      const problems = validate(schema, document, rules);
      if (problems.length > 0) {
        errors[id] = problems.map((p) => p.message).join(' ');
        continue;
      }
      documents.push({ id, text, textHash: sha256(text), document });
    } catch (e) {
      errors[id] = (e as Error).message;
    }
  }
  const failed = Object.keys(errors);
  if (failed.length > 0) {
    const first = `${failed[0]}: ${errors[failed[0]]}`;
    const more = failed.length > 1 ? ` (and ${failed.length - 1} more)` : '';
    throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${failed.length} document(s) of ${file} do not run on this schema — ${first}${more}.`, errors);
  }
  return new TrustedDocuments(documents);
}

/** [id, text] pairs of a manifest in either format. */
function manifestEntries(json: unknown, file: string): Array<[string, string]> {
  if (isObject(json) && json.format === 'apollo-persisted-query-manifest') {
    if (json.version !== 1 || !Array.isArray(json.operations)) {
      throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${file} is an Apollo manifest of a version other than 1, or has no operations.`, { file: 'version' });
    }
    return json.operations.map((op: unknown, i: number) => {
      if (!isObject(op) || typeof op.id !== 'string' || typeof op.body !== 'string') {
        throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${file}: operation ${i} needs a string id and body.`, { [`operations[${i}]`]: 'id and body' });
      }
      return [op.id, op.body];
    });
  }
  if (!isObject(json)) throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${file} is not a JSON object of id → document.`, { file: 'not an object' });
  return Object.entries(json).map(([id, text]) => {
    if (typeof text !== 'string') throw invalid(`TABLEGRAPH_TRUSTED_DOCUMENTS: ${file}: "${id}" is not a document's text.`, { [id]: 'not a string' });
    return [id, text];
  });
}

/** SHA-256, hex: how Apollo Server hashes a query's text. */
export function sha256(text: string): string {
  return createHash('sha256').update(text).digest('hex');
}

function refusal(code: string, message: string): TrustedResolution {
  return { ok: false, status: 400, code, message };
}

function invalid(message: string, errors: Record<string, string>): TablegraphError {
  return new TablegraphError(ErrorCode.CONFIG_INVALID, message, { errors });
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** An id echoed in a message: never more than 80 characters of what a client sent. */
function truncate(s: string): string {
  return s.length > 80 ? `${s.slice(0, 80)}…` : s;
}
