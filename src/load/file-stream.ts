/**
 * The bytes of a data file as a stream: the file itself, or, for a name ending in `.gz`, what it decompresses to
 * (gzip), so that the import and the loader read a compressed snapshot as they read a plain one.
 */
import { createReadStream } from 'node:fs';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';

/**
 * Opens `file` for reading, decompressing it when its name ends in `.gz`.
 * @param encoding text encoding of the chunks (default: Buffers)
 * @returns a stream that emits the fs error (ENOENT…) or zlib's (a file that is not gzip) on its first read
 * @example
 * for await (const chunk of openDataFile('examples/hr/data/chicago-employees.csv.gz', 'utf8')) …
 */
export function openDataFile(file: string, encoding?: BufferEncoding): Readable {
  const raw = createReadStream(file);
  if (!file.endsWith('.gz')) {
    if (encoding) raw.setEncoding(encoding);
    return raw;
  }
  const gunzip = createGunzip();
  // A read error of the file itself reaches the reader through the decompressed stream.
  raw.on('error', (e) => gunzip.destroy(e));
  const out = raw.pipe(gunzip);
  if (encoding) out.setEncoding(encoding);
  return out;
}
