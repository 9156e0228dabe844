/**
 * The pure parts of tenant tiers (docs/tenancy.md, "Tiers"): a tenant's own table names, the account references a
 * tenant's row may hold (never a connection string), the continuation tokens of a scan that reads every place, and
 * the names of a tenant's blobs.
 */
import { tenantTable, TENANT_TABLE_KEY_LENGTH } from '../../src/model/tenancy';
import { checkTableName } from '../../src/storage/limits';
import { placeToken, readPlaceToken } from '../../src/storage/table-placement';
import { formatTenantAccount, parseTenantAccount } from '../../src/storage/tenant-accounts';
import { renamedBlob } from '../../src/backup/blob-copies';
import { blobPrefix, newBlobName, parseBlobName, tenantBlobPrefix } from '../../src/model/blob-fields';

test("a tenant's own table: the name, t and 12 letters and digits of a hash of the tenant id; one per tenant, the same every time", () => {
  const tenants = Array.from({ length: 2000 }, (_, i) => `tenant-${i}`);
  const names = tenants.map((t) => tenantTable('tgShop', t));
  expect(new Set(names).size).toBe(tenants.length);
  for (const name of names) {
    expect(name).toMatch(new RegExp(`^tgShopt[a-z2-7]{${TENANT_TABLE_KEY_LENGTH}}$`));
    expect(() => checkTableName(name)).not.toThrow();
  }
  expect(tenantTable('tgShop', 'tenant-7')).toBe(names[7]);
  // Hyphens are not in table names: two ids that differ only by one still get tables of their own.
  expect(tenantTable('tgShop', 'a-b')).not.toBe(tenantTable('tgShop', 'ab'));
});

test('an account reference is env:, keyvault: or entra:, and never a connection string or a SAS', () => {
  expect(parseTenantAccount('env:ACME_STORAGE')).toEqual({ kind: 'env', variable: 'ACME_STORAGE' });
  expect(parseTenantAccount('keyvault:https://acme.vault.azure.net/secrets/storage')).toEqual({
    kind: 'keyvault',
    secretUri: 'https://acme.vault.azure.net/secrets/storage',
  });
  expect(parseTenantAccount('entra:https://acme.table.core.windows.net/')).toEqual({ kind: 'entra', tableUrl: 'https://acme.table.core.windows.net' });
  for (const text of ['env:ACME_STORAGE', 'keyvault:https://acme.vault.azure.net/secrets/storage/v1', 'entra:https://acme.table.core.windows.net']) {
    expect(formatTenantAccount(parseTenantAccount(text))).toBe(text);
  }
  const refused: Array<[string, RegExp]> = [
    ['DefaultEndpointsProtocol=https;AccountName=acme;AccountKey=eA==', /a connection string is never stored/],
    ['env:1BAD', /names an environment variable/],
    ['entra:http://acme.table.core.windows.net', /https URL without a query/],
    ['entra:https://acme.table.core.windows.net?sv=2020&sig=x', /without a query \(no SAS\)/],
    ['keyvault:https://acme.vault.azure.net/keys/k', /ends in \/secrets\/<name>/],
    ['keyvault:not a url', /is followed by an https URL/],
  ];
  for (const [text, why] of refused) expect(() => parseTenantAccount(text)).toThrow(why);
});

test("a scan's token names its place and that place's own token; a token of no place is the first place's", () => {
  expect(readPlaceToken(placeToken('bravo', 'abc'))).toEqual({ key: 'bravo', inner: 'abc' });
  expect(readPlaceToken(placeToken('', undefined))).toEqual({ key: '', inner: undefined });
  expect(readPlaceToken(undefined)).toEqual({ inner: undefined });
  expect(readPlaceToken('a-service-token')).toEqual({ inner: 'a-service-token' });
});

test("a tenant-scoped entity's blobs are under its tenant's prefix; a global one's under its table; each read back", () => {
  const address = (partitionKey: string) => ({ table: 'tgShopItems', partitionKey, rowKey: 'item_1' });
  const mine = newBlobName({ tenantScoped: true }, address('acme_s1'), 'label');
  expect(mine.startsWith(tenantBlobPrefix('acme'))).toBe(true);
  expect(mine.startsWith(blobPrefix({ tenantScoped: true }, address('acme_s1'), 'label'))).toBe(true);
  expect(parseBlobName(mine)).toEqual({ tenant: 'acme', table: 'tgShopItems', field: 'label' });
  // Another tenant's entity of the same keys after its prefix: another name, under another prefix.
  const theirs = newBlobName({ tenantScoped: true }, address('acme-2_s1'), 'label');
  expect(theirs.startsWith(tenantBlobPrefix('acme'))).toBe(false);
  expect(parseBlobName(theirs)?.tenant).toBe('acme-2');
  // A global type's PartitionKey may hold `_` too: its blobs name no tenant.
  const global = newBlobName({}, address('acme_s1'), 'label');
  expect(global.startsWith('tgShopItems/')).toBe(true);
  expect(parseBlobName(global)).toEqual({ table: 'tgShopItems', field: 'label' });
  expect(parseBlobName('tgShopItems/stray')).toBeUndefined();
  // A restore under another table prefix renames the table part, after the tenant's prefix (src/backup/blob-copies.ts).
  expect(parseBlobName(renamedBlob(mine, 'tgShopItems', 'rsShopItems'))).toEqual({ tenant: 'acme', table: 'rsShopItems', field: 'label' });
  expect(renamedBlob(global, 'tgShopItems', 'rsShopItems').startsWith('rsShopItems/')).toBe(true);
  expect(renamedBlob('tenant=acme/elsewhere/x', 'tgShopItems', 'rsShopItems')).toBe('tenant=acme/elsewhere/x');
});
