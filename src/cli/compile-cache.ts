// Node's compile cache for the CLI: the helper lives in model/compile-cache.ts, shared with the
// provider's executable (which Terraform starts several times per command).
export {
  compileCacheDir,
  enableCliCompileCache,
  unsafeCacheReason,
  unsafeParentReason,
} from '../model/compile-cache.js';
