/**
 * Which schema versions the running servers and workers serve (docs/schema-changes.md): a build does not end while a
 * process of an older version runs — such a process writes without keeping the new path (build-runner.ts) — and
 * `npm run migrate -- status` lists them.
 *
 * Each process holds a lease on a blob of its own (`<prefix>tablegraph-presence/<instance>`, its version and layout
 * hash in the blob's metadata), renewed every few seconds: it runs while the Blob service says the lease holds, and a
 * process killed without a word is gone when its lease lapses (15 s), by the service's clock. Renewing a lease writes
 * nothing to the tables — on the embedded Azurite, a table write makes it save its whole table store (some 100 MB with
 * 30,000 entities and their indexes) — and costs one Blob transaction. Where no Blob endpoint is configured (a Cosmos DB
 * Table API account with none beside it), the catalogue's `server` rows say it instead, written every 5 s.
 */
import type { Logger } from '../log';
import type { BlobStore } from '../storage/blob-store';
import type { Catalogue } from './catalogue';
import type { ServerRecord } from './catalogue-records';

/** How long one saying lasts: a blob lease's duration (s; the Blob service's least finite lease). */
const LEASE_SECONDS = 15;
/** How often a process says it again (ms): three times a lease, so one renewal lost to a slow call is no lapse. */
export const PRESENCE_RENEW_MS = 5000;
/** A `server` row older than this is a process gone (ms): three renewals missed. */
const ROW_STALE_MS = 3 * PRESENCE_RENEW_MS + 5000;

/** A process as it says it runs. */
export type Member = Omit<ServerRecord, 'seenAt'>;

/** Where running processes say they run, and who does now. */
export interface PresenceBoard {
  /** Says `me` runs (again, when its last saying lapsed or was lost). */
  join(me: Member): Promise<void>;
  /** Says it again, before the last saying lapses; joins again when it lapsed. */
  renew(me: Member): Promise<void>;
  /** Says `me` stopped. */
  leave(me: Member): Promise<void>;
  /** The processes whose saying has not lapsed, each with when it was last known to run (ms since 1970). */
  servers(): Promise<ServerRecord[]>;
}

/** The board of a deployment: blob leases where a Blob endpoint is configured, else the catalogue's rows. */
export function presenceBoard(catalogue: Catalogue, blobs: BlobStore | undefined, tablePrefix: string): PresenceBoard {
  return blobs?.available() ? new BlobPresenceBoard(blobs, presenceContainer(tablePrefix)) : new CatalogueRowsBoard(catalogue);
}

/** The presence container of a table prefix (lower case: container names are). */
export function presenceContainer(tablePrefix: string): string {
  return `${tablePrefix.toLowerCase()}tablegraph-presence`;
}

/** Presence by blob leases (see the file comment). */
export class BlobPresenceBoard implements PresenceBoard {
  private leaseId?: string;

  constructor(
    private readonly blobs: BlobStore,
    private readonly container: string,
  ) {}

  async join(me: Member): Promise<void> {
    await this.blobs.ensureContainer(this.container);
    this.leaseId = await this.blobs.leaseNew(this.container, me.instance, { metadata: { version: String(me.version), hash: me.hash }, seconds: LEASE_SECONDS });
  }

  async renew(me: Member): Promise<void> {
    if (!this.leaseId) return this.join(me);
    try {
      await this.blobs.renewLease(this.container, me.instance, this.leaseId);
    } catch (e) {
      // Lapsed and taken away (a reader deleted the blob, or the lease is no longer this one): say it anew.
      const code = (e as { code?: string }).code;
      if (code !== 'NOT_FOUND' && code !== 'CONFLICT') throw e;
      await this.join(me);
    }
  }

  async leave(me: Member): Promise<void> {
    if (this.leaseId) await this.blobs.deleteLeased(this.container, me.instance, this.leaseId);
    this.leaseId = undefined;
  }

  async servers(): Promise<ServerRecord[]> {
    const now = Date.now();
    const listed = await this.blobs.listLeases(this.container);
    // A lapsed process's blob is removed on the way (unless leased again meanwhile: then it stays).
    await Promise.all(listed.filter((b) => !b.leased).map((b) => this.blobs.deleteUnleased(this.container, b.name)));
    return listed.filter((b) => b.leased).map((b) => ({ instance: b.name, version: Number(b.metadata.version), hash: b.metadata.hash ?? '', seenAt: now }));
  }
}

/** Presence by the catalogue's `server` rows (where no Blob endpoint is configured): a row written every renewal. */
export class CatalogueRowsBoard implements PresenceBoard {
  constructor(private readonly catalogue: Catalogue) {}

  join(me: Member): Promise<void> {
    return this.catalogue.heartbeat({ ...me, seenAt: Date.now() });
  }

  renew(me: Member): Promise<void> {
    return this.join(me);
  }

  leave(me: Member): Promise<void> {
    return this.catalogue.leave(me.instance);
  }

  async servers(): Promise<ServerRecord[]> {
    const now = Date.now();
    return (await this.catalogue.servers()).filter((s) => now - s.seenAt < ROW_STALE_MS);
  }
}

/** This process's presence on a board: said at start, again every PRESENCE_RENEW_MS, withdrawn at stop. */
export class Presence {
  private timer?: NodeJS.Timeout;
  /** The renewal under way: a stop waits for it, so that it cannot say again what the stop withdrew. */
  private renewing?: Promise<void>;

  constructor(
    private readonly board: PresenceBoard,
    private readonly me: Member,
    private readonly opts: { log?: Logger } = {},
  ) {}

  /** Says it now, then every PRESENCE_RENEW_MS. @throws from the board, for the first */
  async start(): Promise<void> {
    await this.board.join(this.me);
    this.timer = setInterval(() => {
      if (this.renewing) return;
      this.renewing = this.board
        .renew(this.me)
        .catch((e: unknown) => this.opts.log?.warn({ err: e }, 'presence: it could not be said again; trying at the next renewal'))
        .finally(() => (this.renewing = undefined));
    }, PRESENCE_RENEW_MS);
    this.timer.unref();
  }

  /** Stops saying it and withdraws it (a failure to is left: the saying lapses by itself). */
  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.renewing;
    await this.board.leave(this.me).catch(() => undefined);
  }
}
