/** Pure tests of the per-header-value memo of the request path (src/server/header-memo.ts). */
import { headerMemo } from '../../src/server/header-memo';

describe('headerMemo', () => {
  it('parses each distinct value once, undefined answers included', () => {
    const seen: string[] = [];
    const parse = headerMemo((v) => (seen.push(v), v === 'bad' ? undefined : v.toUpperCase()));
    expect([parse('a'), parse('bad'), parse('a'), parse('bad')]).toEqual(['A', undefined, 'A', undefined]);
    expect(seen).toEqual(['a', 'bad']);
  });

  it('keeps at most `max` values: past them it starts over, and still answers right', () => {
    const seen: string[] = [];
    const parse = headerMemo((v) => (seen.push(v), v.length), 2);
    expect([parse('a'), parse('bb'), parse('ccc'), parse('a')]).toEqual([1, 2, 3, 1]);
    expect(seen).toEqual(['a', 'bb', 'ccc', 'a']);
  });
});
