/**
 * Reads a standard Azure Storage connection string (the one setting for tables, queues and blobs) and decides
 * which target it points at, since key, entity and batch limits differ between Azure, Azurite and Cosmos DB.
 */
import { ErrorCode, TablegraphError } from '../errors';
import type { StorageTarget } from './storage-types';

/** The well-known Azurite / storage-emulator development account. */
export const DEV_ACCOUNT_NAME = 'devstoreaccount1';
/** The development account's published key (not a secret: every emulator ships it). */
export const DEV_ACCOUNT_KEY = 'Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw==';

const TARGETS: readonly StorageTarget[] = ['azure', 'azurite', 'cosmos'];

/**
 * Splits `Key=Value;Key=Value;` into a record whose keys are lower-cased (connection-string keys are
 * case-insensitive). Values keep everything after the first `=` (account keys end in `==`).
 * Throws TablegraphError(CONFIG_INVALID) when a segment has no `=` or the string has no segment at all.
 */
export function parseConnectionString(cs: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of cs.split(';')) {
    const part = raw.trim();
    if (part === '') continue;
    const eq = part.indexOf('=');
    if (eq <= 0) {
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, `The storage connection string has a segment without "Key=Value" form: "${part.slice(0, 40)}".`);
    }
    out[part.slice(0, eq).trim().toLowerCase()] = part.slice(eq + 1).trim();
  }
  if (Object.keys(out).length === 0) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'The storage connection string is empty.');
  }
  return out;
}

/**
 * The Table service endpoint a connection string addresses (no trailing slash): `TableEndpoint` when given,
 * the emulator's default for `UseDevelopmentStorage=true`, else
 * `{DefaultEndpointsProtocol}://{AccountName}.table.{EndpointSuffix}`.
 * Throws TablegraphError(CONFIG_INVALID) when none of these can be formed.
 */
export function tableEndpoint(cs: string): string {
  const p = parseConnectionString(cs);
  if (p.tableendpoint) return p.tableendpoint.replace(/\/+$/, '');
  if (p.usedevelopmentstorage?.toLowerCase() === 'true') return `http://127.0.0.1:10002/${DEV_ACCOUNT_NAME}`;
  if (p.accountname) {
    const protocol = p.defaultendpointsprotocol ?? 'https';
    const suffix = p.endpointsuffix ?? 'core.windows.net';
    return `${protocol}://${p.accountname}.table.${suffix}`;
  }
  throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'The storage connection string names neither a TableEndpoint nor an AccountName.');
}

/**
 * The Blob service endpoint a connection string addresses (no trailing slash), as tableEndpoint does for tables:
 * `BlobEndpoint`, the emulator's default, or `{protocol}://{AccountName}.blob.{EndpointSuffix}`; undefined when
 * none can be formed (a Cosmos DB Table API connection string).
 */
export function blobEndpoint(cs: string): string | undefined {
  const p = parseConnectionString(cs);
  if (p.blobendpoint) return p.blobendpoint.replace(/\/+$/, '');
  if (p.usedevelopmentstorage?.toLowerCase() === 'true') return `http://127.0.0.1:10000/${DEV_ACCOUNT_NAME}`;
  if (p.accountname && !p.tableendpoint?.includes('.cosmos.'))
    return `${p.defaultendpointsprotocol ?? 'https'}://${p.accountname}.blob.${p.endpointsuffix ?? 'core.windows.net'}`;
  return undefined;
}

function isLoopback(host: string): boolean {
  const h = host.replace(/^\[|\]$/g, '').toLowerCase();
  return h === 'localhost' || h === '::1' || /^127\.\d+\.\d+\.\d+$/.test(h);
}

/**
 * Which service `connectionString` points at. `override` (TABLEGRAPH_TARGET) wins; otherwise:
 * 'cosmos' when the table endpoint's host ends with `.cosmos.azure.com` (the Cosmos DB Table API);
 * 'azurite' for `UseDevelopmentStorage=true`, the `devstoreaccount1` account or a loopback host;
 * 'azure' otherwise. Throws TablegraphError(CONFIG_INVALID) for an unparsable string or an unknown override.
 */
export function resolveTarget(connectionString: string, override?: StorageTarget): StorageTarget {
  checkTarget(override);
  return override ?? targetOfConnectionString(connectionString);
}

/** @throws TablegraphError(CONFIG_INVALID) for a TABLEGRAPH_TARGET that names no target */
export function checkTarget(override?: StorageTarget): void {
  if (override !== undefined) {
    if (!TARGETS.includes(override)) {
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, `Unknown storage target "${String(override)}".`, {
        allowed: TARGETS,
      });
    }
  }
}

function targetOfConnectionString(connectionString: string): StorageTarget {
  const p = parseConnectionString(connectionString);
  if (p.usedevelopmentstorage?.toLowerCase() === 'true') return 'azurite';
  return targetOfEndpoint(tableEndpoint(connectionString), p.accountname);
}

/**
 * Which service a Table endpoint is: 'cosmos' for a `.cosmos.azure.com` host, 'azurite' for the development account
 * or a loopback host, else 'azure'. @throws TablegraphError(CONFIG_INVALID) when `endpoint` is not a URL
 */
export function targetOfEndpoint(endpoint: string, accountName?: string): StorageTarget {
  let host: string;
  try {
    host = new URL(endpoint).hostname.toLowerCase();
  } catch (cause) {
    const message = `The table endpoint "${endpoint}" is not a URL.`;
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, message, { endpoint }, { cause });
  }
  if (host.endsWith('.cosmos.azure.com')) return 'cosmos';
  if (accountName === DEV_ACCOUNT_NAME || isLoopback(host)) return 'azurite';
  return 'azure';
}

/** The connection string of the development account on a local Azurite listening on `ports` (loopback; http by default). */
export function devConnectionString(ports: { blob: number; queue: number; table: number }, host = '127.0.0.1', protocol: 'http' | 'https' = 'http'): string {
  return [
    `DefaultEndpointsProtocol=${protocol}`,
    `AccountName=${DEV_ACCOUNT_NAME}`,
    `AccountKey=${DEV_ACCOUNT_KEY}`,
    `BlobEndpoint=${protocol}://${host}:${ports.blob}/${DEV_ACCOUNT_NAME}`,
    `QueueEndpoint=${protocol}://${host}:${ports.queue}/${DEV_ACCOUNT_NAME}`,
    `TableEndpoint=${protocol}://${host}:${ports.table}/${DEV_ACCOUNT_NAME}`,
    '',
  ].join(';');
}
