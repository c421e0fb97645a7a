// The owner id of a configuration: declared (`owner:` in YAML, the CDKTF provider's `owner`), else
// derived from where it lives in version control (model/owner.ts).
import { deriveOwner, type DesiredState } from '../model/index.js';

export async function resolveOwner(desired: DesiredState, baseDir: string): Promise<{ owner: string; derived: boolean }> {
  if (desired.owner) return { owner: desired.owner, derived: false };
  return { owner: await deriveOwner(baseDir), derived: true };
}
