/**
 * Blob storage for `@blob` fields (the guide's "Large entities pattern"): uploads, lists, copies and deletes blobs,
 * and signs the read and upload URLs (shared access signatures) clients use without the account key. Every call
 * runs under the per-call timeout with the SDK's retry policy; failures become TablegraphErrors by
 * storage-errors.ts's status rules.
 */
import { BlobSASPermissions, BlobServiceClient, generateBlobSASQueryParameters, StorageSharedKeyCredential } from '@azure/storage-blob';
import type { BlobSASSignatureValues, ContainerClient, UserDelegationKey } from '@azure/storage-blob';
import { ErrorCode, TablegraphError } from '../errors';
import { blobEndpoint, DEV_ACCOUNT_KEY, DEV_ACCOUNT_NAME, parseConnectionString } from './connection';
import { toTablegraphError } from './storage-errors';
import type { ServiceAccess } from './storage-types';

/**
 * A connection string with a Blob endpoint and an account key (TABLEGRAPH_BLOB_CONNECTION_STRING, or the storage
 * one), or the Blob endpoint and a token credential (Microsoft Entra ID: URLs are signed with a user delegation key).
 */
export type BlobStoreOptions = ServiceAccess & {
  /** Abort a call, SDK retries included, after this many ms (default 10000). */
  timeoutMs?: number;
};

/** Signs a blob SAS: with the account key (locally), or with a user delegation key (one call per key's life). */
type SasSigner = (values: BlobSASSignatureValues) => Promise<string>;

/** How long a user delegation key is asked for (ms): a day, or longer when a URL needs it (at most 7 days, the service's limit). */
const DELEGATION_KEY_MS = 24 * 3600_000;
const MAX_DELEGATION_KEY_MS = 7 * 24 * 3600_000 - 60_000;
/** Clock skew allowed between this process and the service (ms): keys and URLs start this much earlier. */
const CLOCK_SKEW_MS = 5 * 60_000;

/** A listed blob: its name, when it was last written (the service's clock), its size and content type. */
export interface ListedBlob {
  name: string;
  lastModified: Date;
  /** Its size (bytes). */
  bytes: number;
  /** Its Content-Type, as it was uploaded (absent when none was given). */
  contentType?: string;
}

/** A listed blob's lease (the service's clock decides when it lapses) and metadata. */
export interface LeasedBlob {
  name: string;
  /** Whether a lease holds it now: `leased`, as the service reports it (a lapsed one is `expired`). */
  leased: boolean;
  metadata: Record<string, string>;
}

/** One storage account's blobs. The SDK client is made on first use, so a server with no `@blob` field needs none. */
export class BlobStore {
  private made?: { service: BlobServiceClient; sign: SasSigner };
  private delegationKey?: Promise<UserDelegationKey>;
  private readonly containers = new Map<string, Promise<void>>();
  private readonly timeoutMs: number;

  constructor(private readonly opts: BlobStoreOptions) {
    this.timeoutMs = opts.timeoutMs ?? 10_000;
  }

  /** Creates the container if missing (private: blobs are read through SAS URLs only). */
  ensureContainer(container: string): Promise<void> {
    let created = this.containers.get(container);
    if (!created) {
      created = this.call('ensureContainer', container, (abortSignal) => this.container(container).createIfNotExists({ abortSignal })).then(() => undefined);
      created.catch(() => this.containers.delete(container));
      this.containers.set(container, created);
    }
    return created;
  }

  /**
   * Writes a block blob (one Put Blob): `bytes` with its Content-Type.
   * @returns when the service says it wrote it (its Last-Modified: the service's clock), when it says so
   */
  async upload(container: string, name: string, bytes: Buffer, contentType: string): Promise<Date | undefined> {
    const r = await this.call('upload', container, (abortSignal) =>
      this.container(container)
        .getBlockBlobClient(name)
        .uploadData(bytes, { abortSignal, blobHTTPHeaders: { blobContentType: contentType } }),
    );
    return r.lastModified;
  }

  /**
   * Copies a blob to a new name in a container of the same account (a move's copy, src/write/blob-writes.ts).
   * @returns false when the source does not exist (nothing to copy)
   */
  async copy(from: { container: string; name: string }, to: { container: string; name: string }): Promise<boolean> {
    if (!(await this.exists(from.container, from.name))) return false;
    await this.call('copy', to.container, async (abortSignal) => {
      const poller = await this.container(to.container)
        .getBlobClient(to.name)
        .beginCopyFromURL(await this.signedUrl(from.container, from.name, 'r', new Date(Date.now() + 3600_000)), { abortSignal });
      await poller.pollUntilDone();
    });
    return true;
  }

  /**
   * A blob's bytes and Content-Type (one Get Blob), or null when it (or its container) does not exist.
   * @throws TablegraphError STORAGE_UNAVAILABLE and others by storage-errors.ts's rules
   */
  async download(container: string, name: string): Promise<{ bytes: Buffer; contentType?: string } | null> {
    try {
      return await this.call('download', container, async (abortSignal) => {
        const res = await this.container(container).getBlobClient(name).download(0, undefined, { abortSignal });
        const chunks: Buffer[] = [];
        for await (const chunk of res.readableStreamBody as AsyncIterable<Buffer>) chunks.push(chunk);
        return { bytes: Buffer.concat(chunks), ...(res.contentType && { contentType: res.contentType }) };
      });
    } catch (e) {
      if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return null;
      throw e;
    }
  }

  /** Whether a blob exists. */
  async exists(container: string, name: string): Promise<boolean> {
    return this.call('exists', container, (abortSignal) => this.container(container).getBlobClient(name).exists({ abortSignal }));
  }

  /**
   * The blobs whose names start with `prefix` and sort before `stop`, in name order: the listing ends at the first
   * name at or after `stop`, so it costs what it returns (and one page of up to 5,000 names past it at most), not
   * every blob under the prefix. A missing container lists as empty.
   * @example blobs.listBefore('backup', 'changes/', 'changes/20261201T000000Z') // the passes begun before that second
   */
  async listBefore(container: string, prefix: string, stop: string): Promise<ListedBlob[]> {
    return this.listing(container, prefix, stop);
  }

  /** Every blob whose name starts with `prefix` (all pages). A missing container lists as empty. */
  async list(container: string, prefix: string): Promise<ListedBlob[]> {
    return this.listing(container, prefix);
  }

  private async listing(container: string, prefix: string, stop?: string): Promise<ListedBlob[]> {
    const out: ListedBlob[] = [];
    try {
      await this.call('list', container, async (abortSignal) => {
        for await (const b of this.container(container).listBlobsFlat({ prefix, abortSignal })) {
          if (stop !== undefined && b.name >= stop) break;
          const { lastModified, contentLength, contentType } = b.properties;
          out.push({ name: b.name, lastModified, bytes: contentLength ?? 0, ...(contentType && { contentType }) });
        }
      });
    } catch (e) {
      if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return [];
      throw e;
    }
    return out;
  }

  /**
   * Whether a Blob endpoint is configured (a connection string with one and an account key, or an Entra ID URL):
   * false for a Cosmos DB Table API account with no storage account beside it. No call is made.
   */
  available(): boolean {
    try {
      this.client();
      return true;
    } catch (e) {
      if (e instanceof TablegraphError && e.code === ErrorCode.CONFIG_INVALID) return false;
      throw e;
    }
  }

  /**
   * Writes an empty blob with `metadata` and takes a lease on it for `seconds` (15 to 60, the service's range): one Put
   * Blob and one Lease Blob. @returns the lease id, which renews and releases it
   */
  async leaseNew(container: string, name: string, opts: { metadata: Record<string, string>; seconds: number }): Promise<string> {
    const blob = this.container(container).getBlockBlobClient(name);
    await this.call('upload', container, (abortSignal) => blob.upload('', 0, { abortSignal, metadata: opts.metadata }));
    const lease = await this.call('acquireLease', container, (abortSignal) => blob.getBlobLeaseClient().acquireLease(opts.seconds, { abortSignal }));
    return lease.leaseId!;
  }

  /** Renews a lease for its duration again. @throws TablegraphError (CONFLICT, NOT_FOUND) when it lapsed and is another's, or the blob is gone */
  async renewLease(container: string, name: string, leaseId: string): Promise<void> {
    const blob = this.container(container).getBlobClient(name);
    await this.call('renewLease', container, (abortSignal) => blob.getBlobLeaseClient(leaseId).renewLease({ abortSignal }));
  }

  /** Deletes a blob under its lease (released with it); one already gone is fine. */
  async deleteLeased(container: string, name: string, leaseId: string): Promise<void> {
    await this.call('delete', container, (abortSignal) =>
      this.container(container).getBlobClient(name).deleteIfExists({ abortSignal, conditions: { leaseId } }),
    );
  }

  /** Every blob of a container with its lease and metadata (all pages). A missing container lists as empty. */
  async listLeases(container: string): Promise<LeasedBlob[]> {
    const out: LeasedBlob[] = [];
    try {
      await this.call('list', container, async (abortSignal) => {
        for await (const b of this.container(container).listBlobsFlat({ includeMetadata: true, abortSignal })) {
          out.push({ name: b.name, leased: b.properties.leaseState === 'leased', metadata: b.metadata ?? {} });
        }
      });
    } catch (e) {
      if (e instanceof TablegraphError && e.code === ErrorCode.NOT_FOUND) return [];
      throw e;
    }
    return out;
  }

  /** Deletes a blob no lease holds (one whose lease lapsed); a blob leased again meanwhile is left. */
  async deleteUnleased(container: string, name: string): Promise<void> {
    try {
      await this.call('delete', container, (abortSignal) => this.container(container).getBlobClient(name).deleteIfExists({ abortSignal }));
    } catch (e) {
      if (e instanceof TablegraphError && (e.code === ErrorCode.CONFLICT || e.code === ErrorCode.BAD_USER_INPUT || e.code === ErrorCode.STORAGE_BAD_REQUEST))
        return;
      throw e;
    }
  }

  /** Deletes a blob; one already gone is fine. @returns whether it existed */
  async delete(container: string, name: string): Promise<boolean> {
    const r = await this.call('delete', container, (abortSignal) => this.container(container).getBlobClient(name).deleteIfExists({ abortSignal }));
    return r.succeeded;
  }

  /**
   * A read-only URL for one blob, valid `expiresInSeconds` (s). Signed locally with an account key; with Entra ID,
   * with a user delegation key asked for once a day (one call).
   */
  readUrl(container: string, name: string, expiresInSeconds: number): Promise<string> {
    return this.signedUrl(container, name, 'r', new Date(Date.now() + expiresInSeconds * 1000));
  }

  /** A create-and-write URL for one blob (PUT with `x-ms-blob-type: BlockBlob`), valid until `expiresOn`; signed as readUrl. */
  uploadUrl(container: string, name: string, expiresOn: Date): Promise<string> {
    return this.signedUrl(container, name, 'cw', expiresOn);
  }

  private async signedUrl(container: string, name: string, permissions: string, expiresOn: Date): Promise<string> {
    const { sign } = this.client();
    const sas = await sign({ containerName: container, blobName: name, permissions: BlobSASPermissions.parse(permissions), expiresOn });
    return `${this.container(container).getBlobClient(name).url}?${sas}`;
  }

  /**
   * The user delegation key that signs URLs valid until `until` (Entra ID only): the one in hand while it lasts
   * that long, else a new one (the service's getUserDelegationKey: the role needs `generateUserDelegationKey`, which
   * Storage Blob Data Contributor has).
   */
  private async userDelegationKey(service: BlobServiceClient, until: Date): Promise<UserDelegationKey> {
    const held = this.delegationKey && (await this.delegationKey.catch(() => undefined));
    if (held && new Date(held.signedExpiresOn).getTime() >= until.getTime()) return held;
    const now = Date.now();
    const expiresOn = new Date(Math.min(now + MAX_DELEGATION_KEY_MS, Math.max(now + DELEGATION_KEY_MS, until.getTime() + 3600_000)));
    const request = this.call('getUserDelegationKey', '', (abortSignal) =>
      service.getUserDelegationKey(new Date(now - CLOCK_SKEW_MS), expiresOn, { abortSignal }),
    );
    this.delegationKey = request;
    return request;
  }

  private container(name: string): ContainerClient {
    return this.client().service.getContainerClient(name);
  }

  /**
   * @throws TablegraphError CONFIG_INVALID when the connection string has no Blob endpoint or no account key (a
   *   Cosmos DB Table API account: set TABLEGRAPH_BLOB_CONNECTION_STRING), or the Entra ID URL is '' (none configured)
   */
  private client(): { service: BlobServiceClient; sign: SasSigner } {
    if (this.made) return this.made;
    const retryOptions = { maxTries: 4, retryDelayInMs: 500, maxRetryDelayInMs: 4000 };
    if (this.opts.url === '') {
      throw new TablegraphError(
        ErrorCode.CONFIG_INVALID,
        'No Blob endpoint is configured (for @blob fields): set TABLEGRAPH_BLOB_URL, or a TABLEGRAPH_STORAGE_ACCOUNT_URL of a storage account.',
        { errors: { TABLEGRAPH_BLOB_URL: 'not set' } },
      );
    }
    if (this.opts.url !== undefined) {
      const service = new BlobServiceClient(this.opts.url, this.opts.credential, { retryOptions });
      const sign: SasSigner = async (values) => {
        const key = await this.userDelegationKey(service, values.expiresOn!);
        return generateBlobSASQueryParameters({ ...values, startsOn: new Date(Date.now() - CLOCK_SKEW_MS) }, key, service.accountName).toString();
      };
      this.made = { service, sign };
      return this.made;
    }
    const p = parseConnectionString(this.opts.connectionString);
    const dev = p.usedevelopmentstorage?.toLowerCase() === 'true';
    const name = dev ? DEV_ACCOUNT_NAME : p.accountname;
    const key = dev ? DEV_ACCOUNT_KEY : p.accountkey;
    const endpoint = blobEndpoint(this.opts.connectionString);
    if (!endpoint || !name || !key) {
      throw new TablegraphError(
        ErrorCode.CONFIG_INVALID,
        "The blob connection string needs a Blob endpoint and an account key (for @blob fields): set TABLEGRAPH_BLOB_CONNECTION_STRING to a storage account's connection string.",
      );
    }
    const credential = new StorageSharedKeyCredential(name, key);
    const service = new BlobServiceClient(endpoint, credential, { retryOptions });
    this.made = { service, sign: (values) => Promise.resolve(generateBlobSASQueryParameters(values, credential).toString()) };
    return this.made;
  }

  private async call<T>(operation: string, container: string, run: (signal: AbortSignal) => Promise<T>): Promise<T> {
    try {
      return await run(AbortSignal.timeout(this.timeoutMs));
    } catch (e) {
      if (e instanceof TablegraphError) throw e;
      const mapped = toTablegraphError(e, { operation, table: container });
      const details: Record<string, unknown> = { ...mapped.details, container };
      delete details.table;
      throw new TablegraphError(mapped.code, `${operation} on container '${container}': ${mapped.message}`, details, { cause: e });
    }
  }
}
