/** A TCP proxy a browser test reaches the API through, to cut its connections as a network drop does. */
import net from 'node:net';

export interface SeverableLink {
  /** The proxy's loopback port. */
  port: number;
  /** Closes every connection through the proxy and refuses new ones until restore(). */
  sever(): void;
  restore(): void;
  close(): Promise<void>;
}

/**
 * A TCP proxy to `target`'s host and port: `sever()` closes every connection through it and refuses new ones until
 * `restore()`.
 */
export async function severableLink(target: URL): Promise<SeverableLink> {
  const sockets = new Set<net.Socket>();
  let open = true;
  const proxy = net.createServer((client) => {
    if (!open) return void client.destroy();
    const upstream = net.connect(Number(target.port), target.hostname);
    for (const s of [client, upstream]) {
      sockets.add(s);
      s.once('close', () => sockets.delete(s));
      s.on('error', () => undefined);
    }
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const link = {
    port: (proxy.address() as net.AddressInfo).port,
    sever() {
      open = false;
      for (const s of sockets) s.destroy();
    },
    restore() {
      open = true;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        proxy.close(() => resolve());
      }),
  };
  return link;
}
