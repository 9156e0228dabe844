/**
 * Input files given as an address: `npm run import -- --file https://…` downloads the file first (streamed to disk,
 * never held in memory), into `<data folder>/downloads/`, then imports it like a local file. For the Chicago data
 * set, the data portal's CSV export of `xzkq-xp2w` (see examples/hr/data/README.md).
 */
import fs from 'node:fs';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { ErrorCode, TablegraphError } from '../../../src/errors';
import type { Logger } from '../../../src/log';

/** Whether `file` names an http(s) address rather than a path. */
export function isAddress(file: string): boolean {
  return /^https?:\/\//i.test(file);
}

/**
 * Downloads `address` to `<dir>/<name>` (the address's last path segment, `.csv` added when missing; written as
 * `.partial` and renamed when whole, so a broken download never passes for a file). Logs progress every 2 s.
 * @param opts.timeoutMs how long the server may take to start answering (ms, default 30000)
 * @returns the downloaded file's path
 * @throws TablegraphError BAD_USER_INPUT when the address cannot be fetched, does not answer 200, or answers an HTML
 *   page instead of the data (a portal's error or sign-in page)
 */
export async function downloadToFile(address: string, dir: string, opts: { log?: Logger; timeoutMs?: number } = {}): Promise<string> {
  const url = new URL(address);
  const base = path.basename(url.pathname).replace(/[^A-Za-z0-9._-]/g, '_') || 'download';
  const target = path.join(dir, /\.(csv|ndjson)$/i.test(base) ? base : `${base}.csv`);
  const fail = (why: string): never => {
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `Cannot download ${url.origin}${url.pathname}: ${why}`, { address: `${url.origin}${url.pathname}` });
  };
  const controller = new AbortController();
  const timer = setTimeout(() => controller.abort(), opts.timeoutMs ?? 30000);
  const res = await fetch(url, { signal: controller.signal, redirect: 'follow' })
    .catch((e: Error) => fail(e.name === 'AbortError' ? 'no answer in time' : ((e as { cause?: Error }).cause?.message ?? e.message)))
    .finally(() => clearTimeout(timer));
  if (res.status !== 200 || !res.body) fail(`HTTP ${res.status} ${res.statusText}`);
  if (/text\/html/i.test(res.headers.get('content-type') ?? ''))
    fail("it answered a web page, not a CSV file (check the address: the export link, not the data set's page)");
  await fs.promises.mkdir(dir, { recursive: true });
  const partial = `${target}.partial`;
  const total = Number(res.headers.get('content-length')) || undefined;
  let bytes = 0;
  const tick = setInterval(
    () => opts.log?.info({ bytes, totalBytes: total }, `downloading: ${(bytes / 1e6).toFixed(1)} MB${total ? ` of ${(total / 1e6).toFixed(1)} MB` : ''}`),
    2000,
  );
  try {
    const body = Readable.fromWeb(res.body as unknown as WebReadableStream<Uint8Array>);
    body.on('data', (chunk: Buffer) => (bytes += chunk.length));
    await pipeline(body, fs.createWriteStream(partial));
  } catch (e) {
    await fs.promises.rm(partial, { force: true });
    fail(`the download broke off after ${bytes} bytes (${(e as Error).message})`);
  } finally {
    clearInterval(tick);
  }
  if (total !== undefined && bytes !== total) {
    await fs.promises.rm(partial, { force: true });
    fail(`${bytes} bytes arrived of the ${total} announced`);
  }
  await fs.promises.rename(partial, target);
  opts.log?.info({ file: target, bytes }, 'downloaded');
  return target;
}
