/**
 * The resolver of a `@transaction` mutation field (src/compiler/transactions.ts): its items become writes of the
 * partition its arguments name, each authorized as its own `@write` mutation would be, and run as one EGT
 * (src/write/transaction-runner.ts). It returns, per item, the entity as written (null for a delete).
 */
import type { GraphQLFieldResolver } from 'graphql';
import { ErrorCode, isTablegraphError, TablegraphError } from '../errors';
import type { TransactionModel } from '../model/types';
import type { RequestContext } from './context';
import type { EntityNode } from './entity-node';
import { authorizeWrite, writtenNode } from './write-resolvers';
import { itemError, type TransactionItem } from '../write/transaction-plan';

/**
 * @throws TablegraphError BAD_USER_INPUT (an item that gives not exactly one write, or a key of another partition; with
 *   `itemIndex`), LIMIT_EXCEEDED (more than `maxItems` items, reason TooManyItems), FORBIDDEN (`itemIndex`), and what
 *   WriteExecutor.executeTransaction throws — in every case nothing written
 */
export function transactionResolver(tx: TransactionModel): GraphQLFieldResolver<unknown, RequestContext, Record<string, unknown>> {
  return async (_root, args, ctx): Promise<Array<EntityNode | null>> => {
    if (!ctx.writer) throw new TablegraphError(ErrorCode.STORAGE_UNAVAILABLE, 'This server has no write path configured');
    const list = args[tx.listArgument] as Array<Record<string, unknown>>;
    if (list.length > tx.maxItems) {
      throw new TablegraphError(ErrorCode.LIMIT_EXCEEDED, `${tx.coordinate} takes at most ${tx.maxItems} writes; ${list.length} were given`, {
        reason: 'TooManyItems',
        maxItems: tx.maxItems,
      });
    }
    if (list.length === 0) return [];
    const items = list.map((item, i): TransactionItem => {
      try {
        return itemOf(tx, item, args, ctx);
      } catch (e) {
        throw isTablegraphError(e) ? itemError(i, e) : e;
      }
    });
    const results = await ctx.writer.executeTransaction(items, ctx.cost);
    return results.map((r, i) => (r.deleted ? null : writtenNode(items[i].write, r)));
  };
}

/** One item as a write: the one field it gives, its input with the partition's keys, its `@auth`. */
function itemOf(tx: TransactionModel, item: Record<string, unknown>, args: Record<string, unknown>, ctx: RequestContext): TransactionItem {
  const given = Object.keys(item).filter((k) => item[k] !== undefined && item[k] !== null);
  if (given.length !== 1)
    throw new TablegraphError(ErrorCode.BAD_USER_INPUT, `an item gives exactly one of ${[...tx.items.keys()].join(', ')}; this one gives ${given.length}`);
  const write = tx.items.get(given[0])!;
  const input = { ...(item[given[0]] as Record<string, unknown>) };
  const fields = tx.partitionFields.get(given[0])!;
  for (const key of tx.partitionArguments) {
    // The partition is the field's: an item may repeat its keys, not name another partition.
    const field = fields[key];
    if (input[field] !== undefined && input[field] !== null && String(input[field]) !== String(args[key])) {
      throw new TablegraphError(
        ErrorCode.BAD_USER_INPUT,
        `${given[0]}.${field} is ${JSON.stringify(input[field])}, not the transaction's ${key} ${JSON.stringify(args[key])}`,
        { field },
      );
    }
    input[field] = args[key];
  }
  const { input: authorized, check } = authorizeWrite(write, input, ctx);
  return { write, input: authorized, ...(check && { check }) };
}
