// The owner id of a configuration: declared (`owner:` in YAML, the CDKTF provider's `owner`), else
// derived from where it lives in version control, and refused when it moved since the last apply
// (model/owner.ts: one rule for the CLI and the provider).
import { OwnerMovedError, resolveOwnerId, type DesiredState } from '../model/index.js';
import { UsageError } from './errors.js';

export async function resolveOwner(
  desired: DesiredState,
  baseDir: string,
): Promise<{ owner: string; derived: boolean }> {
  try {
    return await resolveOwnerId(desired.owner, baseDir);
  } catch (e) {
    if (e instanceof OwnerMovedError) throw new UsageError(e.message);
    throw e;
  }
}
