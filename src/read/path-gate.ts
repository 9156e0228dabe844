/**
 * The gate every read of a derived access path passes (docs/schema-changes.md): a path still being built, or whose
 * build failed, is refused with ACCESS_PATH_BUILDING, never answered with what it holds so far — an incomplete
 * list would be a silent wrong answer. The server's gate is src/evolution/path-states.ts, kept in step with the
 * catalogue.
 */
export interface PathGate {
  /**
   * @param pathId the derived path, e.g. `index:Order.byCustomer`, `summary:Customer.orderCount`
   * @param coordinate the field read through it, for the message
   * @throws TablegraphError ACCESS_PATH_BUILDING (details: `accessPath`, `state`, `progress`) when it is not ready
   */
  assertReadable(pathId: string, coordinate: string): void;
}
