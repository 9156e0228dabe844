/**
 * Which key ring seals a store's `@encrypted` properties (the guide's "Encrypting Table Data"):
 * TABLEGRAPH_ENCRYPTION_KEYS when set; on the storage emulator's development account (Azurite, embedded or not) a
 * well-known development key — as public as that account's own key, so nothing sealed with it is secret; anywhere
 * else, nothing: a schema that encrypts refuses to start without keys rather than store the text in the clear.
 */
import { createHash } from 'node:crypto';
import type { Config } from './config';
import { ErrorCode, TablegraphError } from '../errors';
import type { Logger } from '../log';
import type { Model } from '../model/types';
import { DEV_ACCOUNT_NAME, parseConnectionString } from '../storage/connection';
import { PropertyCipher, type CipherKey } from '../storage/property-cipher';
import type { TableStore } from '../storage/table-store';
import type { StorageAccess } from '../storage/storage-types';

/** The development key: SHA-256 of a public sentence. Never for data that matters. */
const DEVELOPMENT_KEY: CipherKey = { id: 'dev', key: createHash('sha256').update('tablegraph development key: not a secret').digest() };

/** Entity type (`EntityType`) → its `@encrypted` properties, for the types that have any. */
function encryptedProperties(model: Model): Map<string, Set<string>> {
  const out = new Map<string, Set<string>>();
  for (const entity of model.entities.values()) {
    const names = [...entity.fields.values()].filter((f) => f.encrypted).map((f) => f.name);
    if (names.length > 0) out.set(entity.entityType, new Set(names));
  }
  return out;
}

/**
 * Makes `store` seal and open the model's `@encrypted` properties; nothing when the model has none, or when the store
 * already has its cipher.
 * @throws TablegraphError CONFIG_INVALID when the model encrypts and no key is configured for storage other than
 *   the development account
 */
export function attachCipher(store: TableStore, model: Model, config: Config, access: StorageAccess, log: Logger): void {
  if (store.sealsProperties) return; // attached when the storage was opened (openStorage)
  const encrypted = encryptedProperties(model);
  if (encrypted.size === 0) return;
  let keys = config.encryptionKeys;
  if (!keys) {
    const fields = [...model.entities.values()].flatMap((e) => [...e.fields.values()].filter((f) => f.encrypted).map((f) => `${e.name}.${f.name}`));
    if (!isDevelopmentAccount(access)) {
      throw new TablegraphError(
        ErrorCode.CONFIG_INVALID,
        `Invalid configuration: the schema encrypts ${fields.join(', ')}, and TABLEGRAPH_ENCRYPTION_KEYS is not set; set it to id:base64 of 32 random bytes, e.g. k1:$(openssl rand -base64 32).`,
        { errors: { TABLEGRAPH_ENCRYPTION_KEYS: 'required by @encrypted fields' } },
      );
    }
    log.warn(
      { fields },
      'TABLEGRAPH_ENCRYPTION_KEYS is not set: @encrypted fields are sealed with the public development key, which protects nothing (development storage only)',
    );
    keys = [DEVELOPMENT_KEY];
  }
  store.useCipher(new PropertyCipher(keys, encrypted));
}

function isDevelopmentAccount(access: StorageAccess): boolean {
  // Entra ID is never the development account: Azurite's OAuth mode stands in for a real account there.
  if (access.kind !== 'connection-string') return false;
  const p = parseConnectionString(access.connectionString);
  return p.usedevelopmentstorage?.toLowerCase() === 'true' || p.accountname === DEV_ACCOUNT_NAME;
}
