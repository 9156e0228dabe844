/**
 * Blob storage for `@blob` fields (the guide's "Large entities pattern"): uploads, lists, copies and deletes blobs,
 * and signs the read and upload URLs (shared access signatures) clients use without the account key. Every call
 * runs under the per-call timeout with the SDK's retry policy; failures become TablegraphErrors by
 * storage-errors.ts's status rules.
 */
import { BlobSASPermissions, BlobServiceClient, generateBlobSASQueryParameters, StorageSharedKeyCredential, type ContainerClient } from '@azure/storage-blob';
import { ErrorCode, TablegraphError } from '../errors';
import { blobEndpoint, DEV_ACCOUNT_KEY, DEV_ACCOUNT_NAME, parseConnectionString } from './connection';
import { toTablegraphError } from './storage-errors';

export interface BlobStoreOptions {
  /** A connection string with a Blob endpoint and an account key (TABLEGRAPH_BLOB_CONNECTION_STRING, or the storage one). */
  connectionString: string;
  /** Abort a call, SDK retries included, after this many ms (default 10000). */
  timeoutMs?: number;
}

/** A listed blob: its name, when it was last written (the service's clock), its size and content type. */
export interface ListedBlob {
  name: string;
  lastModified: Date;
  /** Its size (bytes). */
  bytes: number;
  /** Its Content-Type, as it was uploaded (absent when none was given). */
  contentType?: string;
}

/** One storage account's blobs. The SDK client is made on first use, so a server with no `@blob` field needs none. */
export class BlobStore {
  private made?: { service: BlobServiceClient; credential: StorageSharedKeyCredential };
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

  /** Writes a block blob (one Put Blob): `bytes` with its Content-Type. */
  async upload(container: string, name: string, bytes: Buffer, contentType: string): Promise<void> {
    await this.call('upload', container, (abortSignal) =>
      this.container(container)
        .getBlockBlobClient(name)
        .uploadData(bytes, { abortSignal, blobHTTPHeaders: { blobContentType: contentType } }),
    );
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
        .beginCopyFromURL(this.signedUrl(from.container, from.name, 'r', 3600), { abortSignal });
      await poller.pollUntilDone();
    });
    return true;
  }

  /** Whether a blob exists. */
  async exists(container: string, name: string): Promise<boolean> {
    return this.call('exists', container, (abortSignal) => this.container(container).getBlobClient(name).exists({ abortSignal }));
  }

  /** Every blob whose name starts with `prefix` (all pages). A missing container lists as empty. */
  async list(container: string, prefix: string): Promise<ListedBlob[]> {
    const out: ListedBlob[] = [];
    try {
      await this.call('list', container, async (abortSignal) => {
        for await (const b of this.container(container).listBlobsFlat({ prefix, abortSignal })) {
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

  /** Deletes a blob; one already gone is fine. @returns whether it existed */
  async delete(container: string, name: string): Promise<boolean> {
    const r = await this.call('delete', container, (abortSignal) => this.container(container).getBlobClient(name).deleteIfExists({ abortSignal }));
    return r.succeeded;
  }

  /** A read-only URL for one blob, valid `expiresInSeconds` (s). Signs locally: no call. */
  readUrl(container: string, name: string, expiresInSeconds: number): string {
    return this.signedUrl(container, name, 'r', expiresInSeconds);
  }

  /** A create-and-write URL for one blob (PUT with `x-ms-blob-type: BlockBlob`), valid until `expiresOn`. Signs locally. */
  uploadUrl(container: string, name: string, expiresOn: Date): string {
    return this.signedUrl(container, name, 'cw', (expiresOn.getTime() - Date.now()) / 1000);
  }

  private signedUrl(container: string, name: string, permissions: string, expiresInSeconds: number): string {
    const { credential } = this.client();
    const sas = generateBlobSASQueryParameters(
      {
        containerName: container,
        blobName: name,
        permissions: BlobSASPermissions.parse(permissions),
        expiresOn: new Date(Date.now() + expiresInSeconds * 1000),
      },
      credential,
    ).toString();
    return `${this.container(container).getBlobClient(name).url}?${sas}`;
  }

  private container(name: string): ContainerClient {
    return this.client().service.getContainerClient(name);
  }

  /**
   * @throws TablegraphError CONFIG_INVALID when the connection string has no Blob endpoint or no account key (a
   *   Cosmos DB Table API account: set TABLEGRAPH_BLOB_CONNECTION_STRING)
   */
  private client(): { service: BlobServiceClient; credential: StorageSharedKeyCredential } {
    if (this.made) return this.made;
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
    const service = new BlobServiceClient(endpoint, credential, { retryOptions: { maxTries: 4, retryDelayInMs: 500, maxRetryDelayInMs: 4000 } });
    this.made = { service, credential };
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
