/**
 * Reads V8 heap snapshots (`node --heapsnapshot-signal`, `.heapsnapshot` JSON files) and compares two of them by
 * constructor: what the live heap holds more of in the second. A snapshot is taken after a full garbage collection,
 * so it counts live objects only — garbage waiting for the collector is not in it.
 */
import fs from 'node:fs';

interface HeapSnapshot {
  snapshot: { meta: { node_fields: string[]; node_types: [string[], ...unknown[]] } };
  nodes: number[];
  strings: string[];
}

/** Live bytes and object counts by `type:name` (constructor, or kind of native). */
export function heapByConstructor(file: string): Map<string, { bytes: number; count: number }> {
  const snap = JSON.parse(fs.readFileSync(file, 'utf8')) as HeapSnapshot;
  const fields = snap.snapshot.meta.node_fields;
  const [typeAt, nameAt, sizeAt] = ['type', 'name', 'self_size'].map((f) => fields.indexOf(f));
  const types = snap.snapshot.meta.node_types[0];
  const out = new Map<string, { bytes: number; count: number }>();
  for (let i = 0; i < snap.nodes.length; i += fields.length) {
    const type = types[snap.nodes[i + typeAt]];
    // Strings, code and arrays are named by their content: grouped by kind, not by name.
    const name = type === 'object' || type === 'closure' ? snap.strings[snap.nodes[i + nameAt]] : '';
    const key = `${type}${name ? `:${name}` : ''}`;
    const row = out.get(key) ?? { bytes: 0, count: 0 };
    row.bytes += snap.nodes[i + sizeAt];
    row.count += 1;
    out.set(key, row);
  }
  return out;
}

/**
 * @returns the total live bytes of each snapshot, and `limit` lines of the constructors that grew most (bytes):
 *   `name  bytes before → after  count before → after`
 */
export function compareHeaps(before: string, after: string, limit: number): { totals: [number, number]; rows: string[] } {
  const a = heapByConstructor(before);
  const b = heapByConstructor(after);
  const total = (m: Map<string, { bytes: number }>) => [...m.values()].reduce((s, r) => s + r.bytes, 0);
  const keys = new Set([...a.keys(), ...b.keys()]);
  const grown = [...keys]
    .map((k) => ({ k, a: a.get(k) ?? { bytes: 0, count: 0 }, b: b.get(k) ?? { bytes: 0, count: 0 } }))
    .sort((x, y) => y.b.bytes - y.a.bytes - (x.b.bytes - x.a.bytes))
    .slice(0, limit);
  const mb = (n: number) => `${(n / 1e6).toFixed(2)} MB`;
  return {
    totals: [total(a), total(b)],
    rows: grown.map(({ k, a: x, b: y }) => `${k.slice(0, 60).padEnd(60)} ${mb(x.bytes).padStart(10)} → ${mb(y.bytes).padStart(10)}   ${x.count} → ${y.count}`),
  };
}
