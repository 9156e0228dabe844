/**
 * How a process reaches a tenant's own storage account (tier `ACCOUNT`, docs/tenancy.md), from the reference its
 * catalogue row holds — never a secret in clear:
 * - `env:<VARIABLE>`: an environment variable every server and worker has, holding the account's connection string;
 * - `keyvault:<secret URL>`: a Key Vault secret holding it, read with the process's Microsoft Entra ID identity
 *   (`DefaultAzureCredential`: a managed identity on Azure);
 * - `entra:<Table endpoint>`: the account's Table endpoint, reached with that identity (no key at all).
 */
import type { TokenCredential } from '@azure/core-auth';
import { DefaultAzureCredential } from '@azure/identity';
import { SecretClient } from '@azure/keyvault-secrets';
import { ErrorCode, TablegraphError } from '../errors';
import { resolveTarget, targetOfEndpoint } from './connection';
import type { ServiceAccess, StorageTarget } from './storage-types';

/**
 * How to reach a tenant's own account, never a secret in clear: an environment variable of every process that holds its
 * connection string (`env`), a Key Vault secret that does (`keyvault`, read with the process's Microsoft Entra ID
 * identity), or the account's Table endpoint reached with that identity (`entra`).
 */
export type TenantAccount = { kind: 'env'; variable: string } | { kind: 'keyvault'; secretUri: string } | { kind: 'entra'; tableUrl: string };

function invalid(text: string, why: string): TablegraphError {
  return new TablegraphError(ErrorCode.BAD_USER_INPUT, `${JSON.stringify(text)} is not an account reference: ${why}.`);
}

/**
 * The reference `npm run tenant -- create|move --account` is given.
 * @example parseTenantAccount('env:TENANT_ACME_STORAGE') // { kind: 'env', variable: 'TENANT_ACME_STORAGE' }
 * @example parseTenantAccount('keyvault:https://acme.vault.azure.net/secrets/storage') // { kind: 'keyvault', … }
 * @throws TablegraphError BAD_USER_INPUT for anything else — a connection string above all, which would be stored in clear
 */
export function parseTenantAccount(text: string): TenantAccount {
  const at = text.indexOf(':');
  const [kind, rest] = at < 0 ? [text, ''] : [text.slice(0, at), text.slice(at + 1)];
  if (kind === 'env') {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(rest)) throw invalid(text, 'env: names an environment variable (letters, digits, _)');
    return { kind: 'env', variable: rest };
  }
  if (kind === 'keyvault' || kind === 'entra') {
    let url: URL;
    try {
      url = new URL(rest);
    } catch {
      throw invalid(text, `${kind}: is followed by an https URL`);
    }
    if (url.protocol !== 'https:' || url.search !== '') throw invalid(text, `${kind}: is followed by an https URL without a query (no SAS)`);
    if (kind === 'keyvault' && !/^\/secrets\/[^/]+(\/[^/]+)?\/?$/.test(url.pathname)) throw invalid(text, 'a Key Vault secret URL ends in /secrets/<name>');
    return kind === 'keyvault' ? { kind, secretUri: url.href } : { kind, tableUrl: url.href.replace(/\/$/, '') };
  }
  throw invalid(text, 'write env:<VARIABLE>, keyvault:<secret URL> or entra:<Table endpoint> (a connection string is never stored)');
}

/** The reference as `parseTenantAccount` reads it. */
export function formatTenantAccount(account: TenantAccount): string {
  return account.kind === 'env' ? `env:${account.variable}` : account.kind === 'keyvault' ? `keyvault:${account.secretUri}` : `entra:${account.tableUrl}`;
}

/**
 * The access a reference gives, and the account's target.
 * @param credential the Entra ID credential (default: `DefaultAzureCredential`)
 * @throws TablegraphError CONFIG_INVALID when the variable is not set or the secret cannot be read
 */
export async function reachTenantAccount(account: TenantAccount, credential?: TokenCredential): Promise<ServiceAccess & { target: StorageTarget }> {
  if (account.kind === 'entra') {
    return { url: account.tableUrl, credential: credential ?? new DefaultAzureCredential(), target: targetOfEndpoint(account.tableUrl) };
  }
  let connectionString: string | undefined;
  if (account.kind === 'env') connectionString = process.env[account.variable];
  else {
    const url = new URL(account.secretUri);
    const [, , name, version] = url.pathname.split('/');
    try {
      const secret = await new SecretClient(url.origin, credential ?? new DefaultAzureCredential()).getSecret(name, { version });
      connectionString = secret.value;
    } catch (cause) {
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, `The Key Vault secret ${account.secretUri} could not be read.`, {}, { cause });
    }
  }
  if (!connectionString) {
    throw new TablegraphError(ErrorCode.CONFIG_INVALID, `The tenant account ${formatTenantAccount(account)} holds no connection string.`);
  }
  return { connectionString, target: resolveTarget(connectionString) };
}
