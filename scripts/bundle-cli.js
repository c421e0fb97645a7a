// Part of `npm run build`: bundles the compiled CLI (dist/cli/main.js and the modules it imports)
// into dist/bin/, the `kms-sync` executable. Node resolves, reads and links every ES module
// separately; the ~110 modules of a `validate` cost ~50 ms of each run, the bundle a few files.
// Each command module (imported only when its command runs, src/cli/commands.ts) and each lazily
// imported layer (secret backends, emulator, report publishers, provider) stays its own chunk, so
// start-up still loads only what the command needs. Packages stay outside, except commander (small,
// always loaded, and split in six CommonJS files) and age with the curve code under it (AGE_PACKAGES). Files read at run time are found from the
// package root (src/model/package-files.ts), since a chunk's depth differs from its source's.
// dist/bin/modules.json lists the modules of each chunk: test/bench/startup.test.ts checks with it
// which modules a command loaded.
import { rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';
import { bundledProtobuf, withoutLong } from './provider-bundle.js';

const root = path.join(path.dirname(fileURLToPath(import.meta.url)), '..');
const outDir = path.join(root, 'dist', 'bin');
// age-encryption's ~40 modules import whole curve modules of @noble (P-384, P-521, FROST, OPRF...),
// each building its curves at import: ~100 ms CPU of every run that opens a store or the journal.
// Bundled into one chunk of their own, loaded when age is (secrets/age-keys.ts), with what age
// never reaches left out: ~30 ms (bench scenario 8, rotate: ~0.1 CPU-s less per run).
const AGE_PACKAGES = ['age-encryption', '@noble', '@scure'];
const BUNDLED_PACKAGES = ['commander', ...AGE_PACKAGES];
// Without groups, rolldown splits the modules shared by the dynamic imports into ~20 small chunks;
// one chunk for the modules the commands share saves ~15 ms more. Left out of it: what start-up
// loads (so `--version` stays small) and what only some runs load (secret backends, report
// publishers, the emulator, the provider, the other commands). test/bench/startup.test.ts keeps
// `--version` and `--help` free of command modules.
const START_UP =
  /^dist\/(cli\/(main|early-signals|interrupts|errors|run|compile-cache|commands|help|node-version|fs-errors|habits|profile|exit-codes|output|read-progress)|engine\/(errors|front-end)|secrets\/(errors|ci-local-store)|model\/(redact|printable|compile-cache))\.js$/;
const ON_DEMAND =
  /^dist\/((secrets\/backends|report\/publish|emulator|provider|agent)\/|cli\/(demo-command|emulator-command|secrets-command|completion|agent-command|agent-remote-command)\.js$|engine\/plan-worker\.js$)/;
/** Rolldown's `external` rule: our own modules are bundled, and of the packages only those listed. */
const externalExcept = (bundled) => (id) => {
  if (id.startsWith('.') || path.isAbsolute(id)) return false;
  return !bundled.some((p) => id === p || id.startsWith(`${p}/`));
};
const fromRoot = (id) => path.relative(root, id).split(path.sep).join('/');
const agePackage = (id) => AGE_PACKAGES.some((p) => fromRoot(id).includes(`node_modules/${p}/`));
const shared = (id) =>
  fromRoot(id).startsWith('dist/') && !START_UP.test(fromRoot(id)) && !ON_DEMAND.test(fromRoot(id));

// Each chunk is plain ASCII (non-ASCII characters of strings and regular expressions escaped) and
// carries no comments (the source maps point at the TypeScript): Node reads a module's file into a
// string before V8 compiles it (or checks its compile cache), and one character beyond ASCII makes
// it a two-byte string, decoded on a slower path: ~10-20 ms of every start for the ~840 KB chunk
// the commands share, which 231 such characters (arrows, ellipses, mostly in comments) had made so.
// Without comments that chunk is ~700 KB. (The provider's bundle, alike, started no cheaper to its
// handshake: 0.26 CPU-s either way, 20 starts each, alternated; left as it was.)
const LEAN_OUTPUT = { charset: 'ascii', comments: false };

rmSync(outDir, { recursive: true, force: true });
const { output } = await build({
  // The plan's worker thread (engine/plan-threads.ts) starts from its own entry, found beside the chunks.
  input: {
    'kms-sync': path.join(root, 'dist', 'cli', 'main.js'),
    'plan-worker': path.join(root, 'dist', 'engine', 'plan-worker.js'),
  },
  platform: 'node',
  preserveEntrySignatures: 'allow-extension',
  external: externalExcept(BUNDLED_PACKAGES),
  output: {
    dir: outDir,
    format: 'esm',
    chunkFileNames: '[name]-[hash].js',
    sourcemap: true,
    ...LEAN_OUTPUT,
    codeSplitting: {
      includeDependenciesRecursively: false,
      groups: [
        { name: 'commands', test: shared },
        { name: 'age', test: agePackage },
      ],
    },
  },
  logLevel: 'warn',
});

const modules = Object.fromEntries(
  output.filter((o) => o.type === 'chunk').map((c) => [c.fileName, Object.keys(c.modules).map(fromRoot)]),
);
writeFileSync(path.join(outDir, 'modules.json'), `${JSON.stringify(modules, null, 1)}\n`);

// The Terraform provider's executable for Node.js (what `kms-sync provider install` and the tests'
// launchers run): Terraform starts it three or four times per command, and each start resolved,
// read and linked ~90 modules one by one, protobufjs's and msgpack's small CommonJS files among
// them (~60 ms of a ~130 ms start to the handshake). Bundled with those two packages into
// dist/provider-bin/; the secret backends and everything imported on demand stay chunks of their
// own, and the other packages stay outside. The release's Node-free executable is bundled apart
// (scripts/package-provider.js), from the same modules. protobufjs is evaluated on the first message
// that needs it and long.js is left out (scripts/provider-bundle.js).
const providerOut = path.join(root, 'dist', 'provider-bin');
const PROVIDER_BUNDLED = ['protobufjs', '@protobufjs', '@msgpack/msgpack', 'long', ...AGE_PACKAGES];
rmSync(providerOut, { recursive: true, force: true });
const provider = await build({
  input: { 'terraform-provider-kms': path.join(root, 'dist', 'provider', 'bin.js') },
  platform: 'node',
  external: externalExcept(PROVIDER_BUNDLED),
  plugins: [withoutLong, bundledProtobuf],
  output: { dir: providerOut, format: 'esm', chunkFileNames: '[name]-[hash].js', sourcemap: true },
  logLevel: 'warn',
});
// Which modules each chunk holds: test/provider/plugin-server.test.ts checks with it what a start loaded.
const providerModules = Object.fromEntries(
  provider.output.filter((o) => o.type === 'chunk').map((c) => [c.fileName, Object.keys(c.modules).map(fromRoot)]),
);
writeFileSync(path.join(providerOut, 'modules.json'), `${JSON.stringify(providerModules, null, 1)}\n`);
