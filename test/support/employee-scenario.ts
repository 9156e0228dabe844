/**
 * A seeded random sequence of employee writes for the convergence test, and the expected state it leads to.
 * Operations change what the inter-partition indexes derive from (e-mail, last name, title — null included, so
 * the sparse byTitle index loses entities — first name, a projected field), delete and re-create employees, and
 * reuse e-mail addresses: an employee's own earlier one, or one another employee gave up before the last
 * checkpoint (after which the fan-out has released it). Every generated operation is one that must succeed;
 * `conflicts()` gives the ones that must be refused ("Inter-partition secondary index pattern", unique key).
 */
import type { Rng } from './fanout-fixtures';

/** An employee's stored field values (GraphQL names). */
export type EmployeeValues = Record<string, unknown> & { departmentId: string; id: string; email: string; lastName: string; title: string | null };

/** One mutation to run: `Mutation.<mutation>` with `input`; `quiet` when it changes nothing an index derives. */
export interface ScenarioOp {
  mutation: 'createEmployee' | 'updateEmployee' | 'replaceEmployee' | 'deleteEmployee';
  slot: string;
  input: Record<string, unknown>;
  quiet?: boolean;
}

const LAST_NAMES = ['SMITH', 'NGUYEN', "O'BRIEN", 'DE LA CRUZ', 'WILLIAMS', 'KOWALSKI'];
const TITLES = ['ENGINEER', 'ENGINEER I/II #2', 'CLERK', 'POLICE OFFICER', null];
const FIRST_NAMES = ['ANA', 'BO', 'CARLOS', 'DIANA'];

/** The generator and the expected state (live employees by slot `departmentId/id`). */
export class EmployeeScenario {
  readonly live = new Map<string, EmployeeValues>();
  private readonly lastHolder = new Map<string, string>();
  private free = new Set<string>();
  private fresh = 0;

  /**
   * @param slots `[departmentId, id]` pairs the scenario may use (the same id in two departments is allowed)
   * @param domain of the fresh e-mail addresses: scenarios running side by side need domains of their own
   */
  constructor(
    private readonly rng: Rng,
    readonly slots: Array<[string, string]>,
    private readonly domain = 'conv.example',
  ) {}

  /** A random operation that must succeed against the expected state. */
  next(): ScenarioOp {
    const [departmentId, id] = this.rng.pick(this.slots);
    const slot = `${departmentId}/${id}`;
    const current = this.live.get(slot);
    const keys = { departmentId, id };
    if (!current) {
      const title = this.rng.pick(TITLES);
      const input = { ...keys, email: this.email(slot), lastName: this.lastName(), firstName: this.rng.pick(FIRST_NAMES), ...(title && { title }) };
      return { mutation: 'createEmployee', slot, input: { ...input, fullOrPartTime: 'FULL_TIME', salaryOrHourly: 'SALARY', annualSalary: 60000 } };
    }
    const roll = this.rng.int(100);
    if (roll < 24) return { mutation: 'updateEmployee', slot, input: { ...keys, lastName: this.lastName() } };
    if (roll < 44) return { mutation: 'updateEmployee', slot, input: { ...keys, title: this.rng.pick(TITLES) } };
    if (roll < 64) return { mutation: 'updateEmployee', slot, input: { ...keys, email: this.email(slot) } };
    if (roll < 72)
      return { mutation: 'updateEmployee', slot, input: { ...keys, email: this.email(slot), lastName: this.lastName(), title: this.rng.pick(TITLES) } };
    if (roll < 77) return { mutation: 'updateEmployee', slot, input: { ...keys, firstName: this.rng.pick(FIRST_NAMES) } };
    if (roll < 82) return { mutation: 'updateEmployee', slot, input: { ...keys, middleInitial: 'Q', annualSalary: 60000 + this.rng.int(9000) }, quiet: true };
    if (roll < 88) {
      // Replace: fields not given become null — title among them, so the byTitle index entity goes away.
      const input = { ...keys, email: current.email, lastName: this.lastName(), firstName: current.firstName, fullOrPartTime: 'PART_TIME' };
      return { mutation: 'replaceEmployee', slot, input };
    }
    return { mutation: 'deleteEmployee', slot, input: keys };
  }

  /** Records an operation that succeeded. */
  applied(op: ScenarioOp): void {
    const before = this.live.get(op.slot);
    if (op.mutation === 'deleteEmployee') {
      this.live.delete(op.slot);
      return;
    }
    const base = op.mutation === 'updateEmployee' ? before! : { middleInitial: null, title: null };
    const after = { ...base, ...op.input } as EmployeeValues;
    this.live.set(op.slot, after);
    this.lastHolder.set(after.email, op.slot);
    this.free.delete(after.email);
  }

  /** After every message so far was reconciled: e-mails nobody holds are released and may go to anyone. */
  checkpoint(): void {
    const held = new Set([...this.live.values()].map((v) => v.email));
    this.free = new Set([...this.lastHolder.keys()].filter((e) => !held.has(e)));
  }

  /** E-mails released at the last checkpoint and still free (for assertions). */
  freeEmails(): string[] {
    return [...this.free];
  }

  /**
   * Writes that must be refused with CONFLICT (UniqueKeyTaken): a new employee, and an existing one, taking the
   * e-mail a live employee holds. Empty when the state does not allow them.
   */
  conflicts(): ScenarioOp[] {
    const live = [...this.live.entries()];
    if (live.length < 2) return [];
    const [holderSlot, holder] = this.rng.pick(live);
    const [otherSlot, other] = this.rng.pick(live.filter(([s]) => s !== holderSlot));
    const ops: ScenarioOp[] = [{ mutation: 'updateEmployee', slot: otherSlot, input: { departmentId: other.departmentId, id: other.id, email: holder.email } }];
    const absent = this.slots.find(([d, i]) => !this.live.has(`${d}/${i}`));
    if (absent) {
      const [departmentId, id] = absent;
      const input = { departmentId, id, email: holder.email, lastName: 'TAKEN', firstName: 'NO' };
      ops.push({ mutation: 'createEmployee', slot: `${departmentId}/${id}`, input });
    }
    return ops;
  }

  private lastName(): string {
    return this.rng.chance(0.8) ? this.rng.pick(LAST_NAMES) : `ZED${++this.fresh}`;
  }

  /** A fresh address, one this slot held before (and nobody took since), or one released at the last checkpoint. */
  private email(slot: string): string {
    const held = new Set([...this.live.values()].map((v) => v.email));
    const own = [...this.lastHolder].filter(([e, s]) => s === slot && !held.has(e)).map(([e]) => e);
    const free = [...this.free].filter((e) => !held.has(e));
    const roll = this.rng.int(100);
    if (roll < 30 && own.length > 0) return this.rng.pick(own);
    if (roll < 55 && free.length > 0) return this.rng.pick(free);
    return `p${++this.fresh}@${this.domain}`;
  }
}
