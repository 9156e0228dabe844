/**
 * Validation kept by a document's shape: its text with every scalar literal (string, block string, int, float) made
 * a placeholder of its kind, names, punctuation, `true`, `false`, `null` and enum values kept. Documents that differ
 * only in such literals — a client that writes its arguments into the query text sends a new one per request — pass
 * the same rules, except the two that read a literal's value: ValuesOfCorrectTypeRule (an Int out of range, a value a
 * custom scalar's `parseLiteral` refuses) and OverlappingFieldsCanBeMergedRule (two fields under one response name
 * with different arguments). So a document whose shape passed every rule is validated by those two alone — by the
 * first alone when its shape cannot put two fields under one response name (no fragment, no response name twice in a
 * selection set) — and any other goes through every rule. Nothing is less strict: a document is valid here exactly
 * when graphql-js's `validate` with every rule finds no error.
 *
 * Kept: the last 500 shapes that passed (lru-cache). A document that fails is not kept: Apollo's path words its
 * errors.
 */
import { LRUCache } from 'lru-cache';
import {
  BREAK,
  Kind,
  Lexer,
  OverlappingFieldsCanBeMergedRule,
  Source,
  TokenKind,
  ValuesOfCorrectTypeRule,
  validate,
  visit,
  type DocumentNode,
  type GraphQLSchema,
  type ValidationRule,
} from 'graphql';

/** The rules whose outcome depends on a literal's value, not only on the document's shape. */
const VALUE_RULES: readonly ValidationRule[] = [ValuesOfCorrectTypeRule, OverlappingFieldsCanBeMergedRule];
/** The same for a shape that cannot put two fields under one response name. */
const VALUE_RULES_NO_OVERLAP: readonly ValidationRule[] = [ValuesOfCorrectTypeRule];

export class ValidatedShapes {
  /** Shapes that passed every rule → whether they may put two fields under one response name. */
  private readonly passed: LRUCache<string, { overlaps: boolean }>;

  /**
   * @param rules every rule a document must pass (graphql-js's specified rules and the document limits)
   * @param maxShapes shapes kept (shapes); default 500
   */
  constructor(
    private readonly schema: GraphQLSchema,
    private readonly rules: readonly ValidationRule[],
    maxShapes = 500,
  ) {
    this.passed = new LRUCache({ max: maxShapes });
  }

  /**
   * Whether `document` (parsed from `text`) passes every rule.
   * @param text the document's text, as parsed: its shape is read from it
   */
  valid(text: string, document: DocumentNode): boolean {
    const shape = shapeOf(text);
    const known = shape === undefined ? undefined : this.passed.get(shape);
    if (known) return validate(this.schema, document, known.overlaps ? VALUE_RULES : VALUE_RULES_NO_OVERLAP).length === 0;
    if (validate(this.schema, document, this.rules).length > 0) return false;
    if (shape !== undefined) this.passed.set(shape, { overlaps: mayOverlap(document) });
    return true;
  }
}

/**
 * Whether a document may put two fields under one response name in one selection set — the only case
 * OverlappingFieldsCanBeMergedRule reports — counting every fragment as a yes (its fields merge into another set).
 */
export function mayOverlap(document: DocumentNode): boolean {
  let overlaps = false;
  visit(document, {
    FragmentSpread() {
      overlaps = true;
      return BREAK;
    },
    InlineFragment() {
      overlaps = true;
      return BREAK;
    },
    SelectionSet(node) {
      const names = new Set<string>();
      for (const s of node.selections) {
        if (s.kind !== Kind.FIELD) continue;
        const name = (s.alias ?? s.name).value;
        if (names.has(name)) {
          overlaps = true;
          return BREAK;
        }
        names.add(name);
      }
      return undefined;
    },
  });
  return overlaps;
}

/**
 * The shape of a document's text (its tokens, each scalar literal a placeholder), or undefined when it has no scalar
 * literal (its text is then its shape, and a cache by text already holds it) or does not lex.
 */
export function shapeOf(text: string): string | undefined {
  const lexer = new Lexer(new Source(text));
  const parts: string[] = [];
  let literals = 0;
  try {
    for (let token = lexer.advance(); token.kind !== TokenKind.EOF; token = lexer.advance()) {
      switch (token.kind) {
        case TokenKind.STRING:
        case TokenKind.BLOCK_STRING:
        case TokenKind.INT:
        case TokenKind.FLOAT:
          literals++;
          parts.push(`\u0000${token.kind}`);
          break;
        case TokenKind.NAME:
          parts.push(token.value);
          break;
        default:
          parts.push(token.kind);
      }
    }
  } catch {
    return undefined;
  }
  return literals > 0 ? parts.join(' ') : undefined;
}
