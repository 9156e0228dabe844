/**
 * An idle server costs its storage nothing that grows with the data: on the embedded Azurite with the 32,928 Chicago
 * employees imported (a table store of about 100 MB, which Azurite saves whole after any table write), an idle
 * server's Azurite writes under 10 MB to disk in 30 s, as /proc/<pid>/io counts it. A server's presence is a blob
 * lease renewed every few seconds (src/evolution/presence.ts), not a table row written every 5 s.
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CHICAGO_CSV } from './support/harness';
import { killCommandProcesses, runCommand } from './support/processes';
import { pause } from './support/wait';

afterAll(killCommandProcesses);

/** Bytes process `pid` has caused to be written to storage (/proc/<pid>/io `write_bytes`). */
function writeBytes(pid: number): number {
  const line = fs
    .readFileSync(`/proc/${pid}/io`, 'utf8')
    .split('\n')
    .find((l) => l.startsWith('write_bytes:'))!;
  return Number(line.split(':')[1]);
}

test('an idle server over the 32,928 employees: its Azurite writes under 10 MB in 30 s', async () => {
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'tablegraph-idle-'));
  try {
    const load = runCommand('import', ['--file', CHICAGO_CSV], dataDir);
    expect((await load.exited).code).toBe(0);
    const server = runCommand('start', [], dataDir, { PORT: '0' });
    await server.waitFor('tablegraph is serving');
    const azurite = (JSON.parse(fs.readFileSync(path.join(dataDir, 'azurite.json'), 'utf8')) as { pid: number }).pid;
    // The start's own writes (its schema recorded, its seed check) saved first: the window is idle time only.
    await pause(6000, 'clock'); // Azurite saves its store up to 5 s after a write, and says nothing when it has
    const before = writeBytes(azurite);
    await pause(30_000, 'quiet'); // the window the measure is of
    const written = writeBytes(azurite) - before;
    console.log(`idle server, 30 s: its embedded Azurite wrote ${(written / 1024).toFixed(0)} KB`);
    expect(written).toBeLessThan(10 * 1024 * 1024);
    server.child.kill('SIGTERM');
    expect((await server.exited).code).toBe(0);
  } finally {
    fs.rmSync(dataDir, { recursive: true, force: true });
  }
}, 240_000);
