/**
 * Key templates as the compiler reads them from directives: parsed, their separators checked, and what is wrong
 * recorded as a located schema problem rather than thrown.
 */
import type { ASTNode } from 'graphql';
import { checkTemplateSeparators, KeyTemplateSyntaxError, parseKeyTemplate, type KeyTemplate } from '../model/key-template';
import type { SchemaProblems } from './schema-errors';

/** Parses a template, recording a problem (with the directive's location) instead of throwing. */
export function parseTemplate(source: string, what: string, coordinate: string, node: ASTNode | undefined, problems: SchemaProblems): KeyTemplate | undefined {
  try {
    const t = parseKeyTemplate(source);
    for (const issue of checkTemplateSeparators(t)) problems.add(coordinate, `${what} template "${source}": ${issue}`, node);
    return t;
  } catch (e) {
    if (e instanceof KeyTemplateSyntaxError) {
      problems.add(coordinate, `${what} template "${source}" is malformed at offset ${e.offset}: ${e.message}`, node);
      return undefined;
    }
    throw e;
  }
}
