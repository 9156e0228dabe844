/** What a schema the compiler refuses is refused with, as the compiler tests compare it. */
import { isTablegraphError } from '../../src/errors';

/** One problem of a refused schema: its coordinate, its message, and the line of the SDL it cites (0: none). */
export interface SchemaProblem {
  coordinate: string;
  message: string;
  line: number;
}

/**
 * The problems `compile` is refused with (SCHEMA_INVALID's `details.problems`).
 * @throws Error when it compiles, or throws anything else
 */
export function schemaProblems(compile: () => unknown): SchemaProblem[] {
  try {
    compile();
  } catch (e) {
    if (!isTablegraphError(e)) throw e;
    const list = e.details.problems as Array<{ coordinate: string; message: string; locations?: Array<{ line: number }> }>;
    return list.map((p) => ({ coordinate: p.coordinate, message: p.message, line: p.locations?.[0]?.line ?? 0 }));
  }
  throw new Error('the schema compiled');
}

/** The 1-based line of `sdl` on which `text` first appears. */
export const lineOf = (sdl: string, text: string): number => sdl.slice(0, sdl.indexOf(text)).split('\n').length;
