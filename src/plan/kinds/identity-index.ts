/**
 * Resources by (environment, name) identity, in first-seen order, without building an address
 * or a joined key string per lookup (a no-op plan of 100,000 clients builds none): by
 * environment, then by name.
 */
export class IdentityIndex<T> {
  private readonly byEnv = new Map<string, Map<string, { value: T; wanted: boolean }>>();
  /** Entries in the order their identity was first set; `wanted` is set by the caller. */
  readonly entries: { value: T; wanted: boolean }[] = [];
  get(projectEnv: string, name: string) {
    return this.byEnv.get(projectEnv)?.get(name);
  }
  set(projectEnv: string, name: string, value: T) {
    let names = this.byEnv.get(projectEnv);
    if (names === undefined) this.byEnv.set(projectEnv, (names = new Map()));
    const entry = names.get(name);
    if (entry) entry.value = value;
    else {
      const e = { value, wanted: false };
      names.set(name, e);
      this.entries.push(e);
    }
  }
}
