/**
 * Shared access signatures (the guide's "Shared access signatures"): a time-limited, read-only URL for one
 * partition of one table, signed with the account key of the connection string, that a client can use with any
 * Table client — without tablegraph, and without the account key. Generated with the SDK's `generateTableSas`.
 */
import { AzureNamedKeyCredential, generateTableSas } from '@azure/data-tables';
import { ErrorCode, TablegraphError } from '../errors';
import { DEV_ACCOUNT_KEY, DEV_ACCOUNT_NAME, parseConnectionString, tableEndpoint } from './connection';

/** Signs partition SAS URLs for one storage account. */
export type PartitionSasSigner = (table: string, partitionKey: string, expiresInSeconds: number) => { url: string; expiresOn: Date };

/**
 * @param connectionString a connection string with AccountName and AccountKey (or `UseDevelopmentStorage=true`)
 * @returns a signer, or a function that throws CONFIG_INVALID when the connection string holds no account key (a
 *   SAS connection string cannot sign another SAS)
 */
export function partitionSasSigner(connectionString: string): PartitionSasSigner {
  const p = parseConnectionString(connectionString);
  const dev = p.usedevelopmentstorage?.toLowerCase() === 'true';
  const name = dev ? DEV_ACCOUNT_NAME : p.accountname;
  const key = dev ? DEV_ACCOUNT_KEY : p.accountkey;
  const endpoint = tableEndpoint(connectionString);
  if (!name || !key) {
    return () => {
      throw new TablegraphError(ErrorCode.CONFIG_INVALID, 'The storage connection string holds no account key, so no shared access signature can be signed.');
    };
  }
  const credential = new AzureNamedKeyCredential(name, key);
  return (table, partitionKey, expiresInSeconds) => {
    const expiresOn = new Date(Date.now() + expiresInSeconds * 1000);
    const sas = generateTableSas(table, credential, {
      permissions: { query: true },
      startPartitionKey: partitionKey,
      endPartitionKey: partitionKey,
      expiresOn,
    });
    return { url: `${endpoint}/${table}?${sas}`, expiresOn };
  };
}
