/**
 * Reads a V8 CPU profile (`node --cpu-prof`, a `.cpuprofile` JSON file) and sums each function's self time: the
 * samples in which it was the one running. Functions are named with their file (relative to node_modules or the
 * project) and line, so a row says where the time goes.
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  samples: number[];
  timeDeltas: number[];
  startTime: number;
  endTime: number;
}

function where(url: string): string {
  const nm = url.lastIndexOf('node_modules/');
  if (nm >= 0) return url.slice(nm + 'node_modules/'.length);
  const src = url.search(/\/(src|test)\//);
  return src >= 0 ? url.slice(src + 1) : url.replace(/^file:\/\//, '') || '(native)';
}

/**
 * @returns `limit` lines, most self time first: `percent  ms  function  file:line`, and a first line with the
 *   profile's total (ms) and the share of idle time
 */
export function topSelfTime(file: string, limit: number): string[] {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile;
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const selfUs = new Map<string, number>();
  let totalUs = 0;
  let idleUs = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    const frame = byNode.get(id)!.callFrame;
    totalUs += delta;
    if (frame.functionName === '(idle)') {
      idleUs += delta;
      return;
    }
    const key = `${frame.functionName || '(anonymous)'}  ${where(frame.url)}${frame.url ? `:${frame.lineNumber + 1}` : ''}`;
    selfUs.set(key, (selfUs.get(key) ?? 0) + delta);
  });
  const busyUs = totalUs - idleUs;
  const rows = [...selfUs.entries()].sort((a, b) => b[1] - a[1]).slice(0, limit);
  return [
    `profile: ${(totalUs / 1000).toFixed(0)} ms, of which idle ${((100 * idleUs) / totalUs).toFixed(1)}%; shares below are of the busy ${(busyUs / 1000).toFixed(0)} ms`,
    ...rows.map(([key, us]) => `${((100 * us) / busyUs).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`),
  ];
}

/**
 * Each function's total time: the samples in which it was on the stack (counted once per sample however deep the
 * recursion), for frames whose file matches `filter`.
 * @returns `limit` lines, most total time first: `percent  ms  function  file:line`, shares of the busy time
 */
export function topTotalTime(file: string, limit: number, filter: RegExp): string[] {
  const profile = JSON.parse(fs.readFileSync(file, 'utf8')) as CpuProfile & { nodes: Array<ProfileNode & { children?: number[] }> };
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const byNode = new Map(profile.nodes.map((n) => [n.id, n]));
  const totalUs = new Map<string, number>();
  let busyUs = 0;
  profile.samples.forEach((id, i) => {
    const delta = profile.timeDeltas[i] ?? 0;
    if (byNode.get(id)!.callFrame.functionName === '(idle)') return;
    busyUs += delta;
    const seen = new Set<string>();
    for (let n: number | undefined = id; n !== undefined; n = parent.get(n)) {
      const frame = byNode.get(n)!.callFrame;
      if (!filter.test(frame.url)) continue;
      const key = `${frame.functionName || '(anonymous)'}  ${where(frame.url)}:${frame.lineNumber + 1}`;
      if (seen.has(key)) continue;
      seen.add(key);
      totalUs.set(key, (totalUs.get(key) ?? 0) + delta);
    }
  });
  return [...totalUs.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, limit)
    .map(([key, us]) => `${((100 * us) / busyUs).toFixed(1).padStart(5)}%  ${(us / 1000).toFixed(0).padStart(6)} ms  ${key}`);
}
