/**
 * The web client example for browser tests: its static server (`examples/web-client/serve.mjs`) as a process of
 * its own origin, an API server for it, and Chromium.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { SignJWT } from 'jose';
import type { Browser } from 'playwright-core';
import { launchChromium } from './chromium';
import { ROOT, startTestServer, type TestServer } from './harness';

/** Starts the web client's static server on a free port. @returns its URL and the process */
async function serveWebClient(): Promise<{ url: string; process: ChildProcess }> {
  const web = spawn(process.execPath, [path.join(ROOT, 'examples/web-client/serve.mjs')], {
    env: { ...process.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const url = await new Promise<string>((resolve, reject) => {
    web.stdout!.on('data', (chunk: Buffer) => {
      const m = /web client at (\S+)/.exec(chunk.toString());
      if (m) resolve(m[1]);
    });
    web.once('exit', (code) => reject(new Error(`the web client's server exited (${code})`)));
  });
  return { url, process: web };
}

/** What a browser test of the web client runs against. */
export interface WebClientRig {
  /** The page's URL (its own origin). */
  webUrl: string;
  /** A server that requires a token signed with the rig's secret and allows the page's origin. */
  server: TestServer;
  browser: Browser;
  /** A bearer token of the `hr-admin` role, signed with the rig's secret, valid 10 minutes. */
  token: string;
  close(): Promise<void>;
}

/** The web client's server, an API server for it (a subscription poll every 200 ms), and Chromium. */
export async function startWebClientRig(jwtSecret: string): Promise<WebClientRig> {
  const web = await serveWebClient();
  const server = await startTestServer({
    TABLEGRAPH_JWT_SECRET: jwtSecret,
    TABLEGRAPH_CORS_ORIGINS: new URL(web.url).origin,
    TABLEGRAPH_SUBSCRIPTION_POLL_MS: '200',
  });
  const browser = await launchChromium();
  const token = await new SignJWT({ sub: 'admin@example.test', roles: ['hr-admin'] })
    .setProtectedHeader({ alg: 'HS256' })
    .setExpirationTime('10m')
    .sign(new TextEncoder().encode(jwtSecret));
  return {
    webUrl: web.url,
    server,
    browser,
    token,
    async close() {
      await browser.close();
      await server.close();
      web.process.kill();
    },
  };
}
