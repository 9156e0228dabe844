/**
 * A deleted tenant's messages taken out of a queue that no worker empties: the poison queue (docs/tenancy.md,
 * "Deleting a tenant"). Its entries carry the message text, and with it the tenant's keys and values. The work queue
 * needs no such pass: every worker drops a closed tenant's messages as they come up (message-worker.ts).
 *
 * Every message is received (hidden for `hideSeconds`) until none is visible; the tenant's are deleted, the others
 * made visible again at once. A message is the tenant's when it, or one of a batch's, is a write of a tenant-scoped
 * type whose PartitionKey is in the tenant's key range.
 */
import { ErrorCode, isTablegraphError } from '../errors';
import { decodeMessage, type EntityMessage } from '../queue/messages';
import { tenantOfPartitionKey } from '../model/tenancy';
import type { Model } from '../model/types';
import { MAX_RECEIVE, type QueueStore, type ReceivedMessage } from '../storage/queue-store';

/** How long each message is hidden while the purge runs (s): a message it did not make visible again reappears then. */
const HIDE_SECONDS = 300;

/**
 * The tenants a queue text names: a work queue message's, or a poison queue entry's (`{ message, … }`). Text that is
 * neither names none.
 */
export function tenantsOfMessage(model: Model, text: string): Set<string> {
  const tenants = new Set<string>();
  let inner = text;
  try {
    const entry = JSON.parse(text) as { message?: unknown };
    if (typeof entry?.message === 'string') inner = entry.message;
  } catch {
    return tenants;
  }
  let items: EntityMessage[];
  try {
    const m = decodeMessage(inner);
    items = m.kind === 'batch' ? m.messages : m.kind === 'blobCleanup' ? [] : [m];
  } catch {
    return tenants;
  }
  for (const item of items) {
    const tenant = model.entities.get(item.entity)?.tenantScoped ? tenantOfPartitionKey(item.primary.partitionKey) : undefined;
    if (tenant !== undefined) tenants.add(tenant);
  }
  return tenants;
}

/**
 * Deletes the tenant's messages from `queue` (a missing queue holds none).
 * @returns the messages deleted
 * @throws storage errors of the queue (a message left hidden reappears after HIDE_SECONDS)
 */
export async function purgeTenantMessages(queues: QueueStore, queue: string, model: Model, tenant: string): Promise<number> {
  const others: ReceivedMessage[] = [];
  let deleted = 0;
  try {
    for (;;) {
      const batch = await queues
        .receive(queue, { max: MAX_RECEIVE, visibilityTimeoutSeconds: HIDE_SECONDS })
        .catch((e: unknown) => (isTablegraphError(e, ErrorCode.NOT_FOUND) ? [] : Promise.reject(e)));
      if (batch.length === 0) break;
      for (const m of batch) {
        if (tenantsOfMessage(model, m.text).has(tenant)) {
          await queues.delete(queue, m);
          deleted++;
        } else others.push(m);
      }
    }
  } finally {
    for (const m of others) await queues.defer(queue, m, 0).catch(() => undefined); // reappears after HIDE_SECONDS
  }
  return deleted;
}
