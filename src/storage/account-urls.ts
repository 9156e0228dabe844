/**
 * The service endpoints of a storage account reached with Microsoft Entra ID (no connection string): from one
 * account URL, or one URL per service. Pure: it checks and derives, and sends nothing.
 */
import { ErrorCode, TablegraphError } from '../errors';

/** The endpoints of the three services (no trailing slash); `blob` is absent when no Blob service is named. */
export interface AccountUrls {
  table: string;
  queue: string;
  blob?: string;
}

/** What the configuration says (TABLEGRAPH_STORAGE_ACCOUNT_URL, TABLEGRAPH_TABLE_URL, …_QUEUE_URL, …_BLOB_URL). */
export interface AccountUrlSettings {
  account?: string;
  table?: string;
  queue?: string;
  blob?: string;
}

/** `https://<account>.<service>.<suffix>`: Azure Storage's own host names (and Cosmos DB's `.table.cosmos.azure.com`). */
const SERVICE_HOST = /^([a-z0-9-]+)\.(table|queue|blob|file|dfs)\.(.+)$/i;

function invalid(variable: string, why: string): TablegraphError {
  return new TablegraphError(ErrorCode.CONFIG_INVALID, `Invalid configuration: ${variable} ${why}.`, { errors: { [variable]: why } });
}

/** An https URL with no query (a SAS does not belong here), without its trailing slash. */
function checked(variable: string, value: string): string {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    throw invalid(variable, `is not a URL ("${value}")`);
  }
  // The SDKs send a bearer token over https only: an http endpoint would fail at the first call, not here.
  if (url.protocol !== 'https:') throw invalid(variable, 'must be an https URL: a token is sent over https only');
  if (url.search || url.hash) throw invalid(variable, 'must have no query string (Entra ID needs no SAS)');
  return value.replace(/\/+$/, '');
}

/**
 * @returns the endpoints, or undefined when none of the settings is given (a connection string or the embedded
 *   Azurite is used then)
 * @throws TablegraphError CONFIG_INVALID for a URL that is not https, or when the table or queue endpoint can be
 *   neither read nor derived (an account URL whose host is not `<account>.<service>.<suffix>`, as Azurite's
 *   `https://127.0.0.1:10002/devstoreaccount1`, needs the per-service URLs)
 * @example
 * accountUrls({ account: 'https://contoso.blob.core.windows.net' })
 * // → { table: 'https://contoso.table.core.windows.net', queue: 'https://contoso.queue.core.windows.net',
 * //     blob: 'https://contoso.blob.core.windows.net' }
 */
export function accountUrls(settings: AccountUrlSettings): AccountUrls | undefined {
  const given = Object.values(settings).some((v) => v !== undefined);
  if (!given) return undefined;
  const derived: Partial<AccountUrls> = {};
  if (settings.account) {
    const base = new URL(checked('TABLEGRAPH_STORAGE_ACCOUNT_URL', settings.account));
    const m = SERVICE_HOST.exec(base.hostname);
    if (m && !m[3].startsWith('cosmos.')) {
      for (const service of ['table', 'queue', 'blob'] as const) derived[service] = `https://${m[1]}.${service}.${m[3]}${base.port ? `:${base.port}` : ''}`;
    } else if (!settings.table || !settings.queue) {
      throw invalid(
        'TABLEGRAPH_STORAGE_ACCOUNT_URL',
        `names no storage account by its host (<account>.<service>.core.windows.net): set TABLEGRAPH_TABLE_URL and TABLEGRAPH_QUEUE_URL too`,
      );
    }
  }
  const table = settings.table ? checked('TABLEGRAPH_TABLE_URL', settings.table) : derived.table;
  const queue = settings.queue ? checked('TABLEGRAPH_QUEUE_URL', settings.queue) : derived.queue;
  const blob = settings.blob ? checked('TABLEGRAPH_BLOB_URL', settings.blob) : derived.blob;
  if (!table) throw invalid('TABLEGRAPH_TABLE_URL', 'is needed: no account URL to derive it from (set TABLEGRAPH_STORAGE_ACCOUNT_URL)');
  if (!queue) throw invalid('TABLEGRAPH_QUEUE_URL', 'is needed: the work queue lives in a storage account (set TABLEGRAPH_STORAGE_ACCOUNT_URL)');
  return { table, queue, blob };
}
