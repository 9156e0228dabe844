/**
 * The gate every read of a derived access path, and every read or write of an entity type, passes
 * (docs/schema-changes.md): a path still being built, or whose build failed, is refused with ACCESS_PATH_BUILDING,
 * never answered with what it holds so far — an incomplete list would be a silent wrong answer; so is an entity type
 * this process does not serve while its entities move to a new table or new keys (a re-key). The server's gate is
 * src/evolution/path-states.ts, kept in step with the catalogue.
 */
export interface PathGate {
  /**
   * @param pathId the derived path, e.g. `index:Order.byCustomer`, `summary:Customer.orderCount`
   * @param coordinate the field read through it, for the message
   * @throws TablegraphError ACCESS_PATH_BUILDING (details: `reason`, `accessPath`, `state`, `progress`) when it is not
   *   ready, or a newer deployed schema changed it (reason `PathChanged`)
   */
  assertReadable(pathId: string, coordinate: string): void;
  /**
   * Whether this process serves entities of `type` now: not while a re-key moves them to the addresses of its schema
   * (reason `TypeRekeying`), nor once a re-key moved them away from its schema's (reason `PathRetired`).
   * @param type an entity type (an interface's implementations are asked one by one)
   * @param coordinate the field or mutation, for the message
   * @throws TablegraphError ACCESS_PATH_BUILDING (details: `reason`, `accessPath` `rekey:<Type>`, `state`, `progress`)
   */
  assertServed(type: string, coordinate: string): void;
  /**
   * Whether a range read of `type`'s own entities may meet copies a re-key made at another layout's addresses (in the
   * same table): such entities are not this process's to show, and are left out.
   */
  meetsCopies(type: string): boolean;
}
