/**
 * Microsoft Entra ID on one machine, for tests: a self-signed certificate for 127.0.0.1 (Azurite's OAuth mode
 * serves https only), and a managed identity endpoint as App Service provides one (`IDENTITY_ENDPOINT` and
 * `IDENTITY_HEADER`, which `DefaultAzureCredential` finds), minting tokens Azurite accepts: the issuer, audience and
 * lifetime Azure's tokens have, an object id and tenant id (a user delegation key needs them). Azurite checks no
 * signature, so they are signed with a random key.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import fs from 'node:fs';
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { SignJWT } from 'jose';
import { generate } from 'selfsigned';

/** Writes `cert.pem` and `key.pem` for 127.0.0.1 and localhost into `dir`; returns their paths. */
export async function makeCertificate(dir: string): Promise<{ certPath: string; keyPath: string }> {
  const pem = await generate([{ name: 'commonName', value: '127.0.0.1' }], {
    keySize: 2048,
    extensions: [
      { name: 'basicConstraints', cA: true },
      { name: 'keyUsage', digitalSignature: true, keyEncipherment: true, keyCertSign: true },
      { name: 'extKeyUsage', serverAuth: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 7, ip: '127.0.0.1' },
          { type: 2, value: 'localhost' },
        ],
      },
    ],
  } as Parameters<typeof generate>[1]);
  const certPath = path.join(dir, 'cert.pem');
  const keyPath = path.join(dir, 'key.pem');
  fs.writeFileSync(certPath, pem.cert);
  fs.writeFileSync(keyPath, pem.private);
  return { certPath, keyPath };
}

export interface TokenService {
  /** The environment that makes `DefaultAzureCredential` ask this service (App Service's managed identity). */
  env: Record<string, string>;
  /** Token requests answered, by resource asked for. */
  requests: Map<string, number>;
  close(): Promise<void>;
}

/**
 * A managed identity endpoint on a free loopback port. `audience` overrides the token's audience (a wrong one
 * shows that the storage checks it); `lifetimeSeconds` is each token's (default 3600).
 */
export async function startTokenService(opts: { audience?: string; lifetimeSeconds?: number } = {}): Promise<TokenService> {
  const secret = randomUUID();
  const key = randomBytes(32);
  const tenant = randomUUID();
  const objectId = randomUUID();
  const requests = new Map<string, number>();
  const server: Server = http.createServer((req, res) => {
    void (async () => {
      const url = new URL(req.url ?? '/', 'http://127.0.0.1');
      if (req.headers['x-identity-header'] !== secret) {
        res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":"invalid_request"}');
        return;
      }
      const resource = url.searchParams.get('resource') ?? '';
      requests.set(resource, (requests.get(resource) ?? 0) + 1);
      const now = Math.floor(Date.now() / 1000);
      const expires = now + (opts.lifetimeSeconds ?? 3600);
      const token = await new SignJWT({ oid: objectId, tid: tenant })
        .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
        .setIssuer(`https://sts.windows.net/${tenant}/`)
        .setAudience(opts.audience ?? resource.replace(/\/\.default$/, ''))
        .setIssuedAt(now)
        .setNotBefore(now - 60)
        .setExpirationTime(expires)
        .sign(key);
      const body = { access_token: token, expires_on: String(expires), resource, token_type: 'Bearer', client_id: randomUUID() };
      res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    })();
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    env: { IDENTITY_ENDPOINT: `http://127.0.0.1:${port}/msi/token`, IDENTITY_HEADER: secret },
    requests,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
