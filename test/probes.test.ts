/**
 * The orchestrator's probes (src/server/probes.ts) on a real server process over its embedded Azurite: with Azurite
 * frozen (SIGSTOP), `/livez` still answers 200 at once — a storage outage restarts no replica — and `/readyz` says 503
 * within seconds; both are 200 again once Azurite goes on (SIGCONT).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isProcessAlive } from '../src/storage/azurite';
import { azuriteState, freePort, killCommandProcesses, startServerProcess } from './support/processes';
import { until } from './support/wait';

jest.setTimeout(120_000);

let tmp: string;
let azuritePid: number | undefined;

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-probes-'));
});

afterAll(() => {
  if (azuritePid !== undefined && isProcessAlive(azuritePid)) process.kill(azuritePid, 'SIGCONT');
  killCommandProcesses();
  if (azuritePid !== undefined && isProcessAlive(azuritePid)) process.kill(azuritePid, 'SIGKILL');
  fs.rmSync(tmp, { recursive: true, force: true });
});

/** GET `path`: its status and how long it took (ms); status 0 when no answer came within `timeoutMs`. */
async function probe(port: number, probePath: string, timeoutMs: number): Promise<{ status: number; ms: number; body?: unknown }> {
  const started = performance.now();
  try {
    const res = await fetch(`http://127.0.0.1:${port}${probePath}`, { signal: AbortSignal.timeout(timeoutMs) });
    return { status: res.status, ms: performance.now() - started, body: await res.json() };
  } catch {
    return { status: 0, ms: performance.now() - started };
  }
}

test('Azurite frozen: /livez 200 within 1 s, /readyz 503 within 5 s; both 200 once it goes on', async () => {
  const port = await freePort();
  const dataDir = path.join(tmp, 'data');
  const server = await startServerProcess(dataDir, port);
  azuritePid = azuriteState(dataDir)!.pid;
  expect(await probe(port, '/livez', 1000)).toMatchObject({ status: 200, body: { status: 'live' } });
  expect(await probe(port, '/readyz', 5000)).toMatchObject({ status: 200, body: { status: 'ready' } });

  process.kill(azuritePid, 'SIGSTOP');
  const frozenAt = performance.now();
  try {
    const live = await probe(port, '/livez', 1000);
    expect(live).toMatchObject({ status: 200, body: { status: 'live' } });
    // Until the cached answer of the last check runs out, /readyz may still say ready; then 503, each probe answered.
    await until('/readyz to say 503', async () => (await probe(port, '/readyz', 3000)).status === 503, { timeoutMs: 5000 });
    expect(performance.now() - frozenAt).toBeLessThan(5000);
    const unready = await probe(port, '/readyz', 3000);
    expect(unready).toMatchObject({ status: 503, body: { status: 'unavailable', failed: 'storage' } });
    expect(await probe(port, '/livez', 1000)).toMatchObject({ status: 200 });
  } finally {
    process.kill(azuritePid, 'SIGCONT');
  }
  await until('/readyz to say 200 again', async () => (await probe(port, '/readyz', 3000)).status === 200, { timeoutMs: 30_000 });
  expect(await probe(port, '/livez', 1000)).toMatchObject({ status: 200 });
  server.child.kill('SIGTERM');
  await server.exited;
});
