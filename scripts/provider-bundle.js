// Rolldown plugins for the provider's bundles (scripts/bundle-cli.js; scripts/package-provider.js
// uses withoutLong as well).

/**
 * protobufjs loads long.js when it finds it (util.Long), ~7 ms of each provider start, only to
 * decode 64-bit integers as Long objects that src/provider/plugin/protocol.ts then turns into
 * numbers (`longs: Number`). Without it protobufjs reads and writes them as numbers directly.
 */
export const withoutLong = {
  name: 'kms-sync-without-long',
  resolveId: (id) => (id === 'long' ? '\0without-long' : null),
  load: (id) => (id === '\0without-long' ? 'module.exports = null;\n' : null),
};

/**
 * src/provider/plugin/protocol.ts loads protobufjs with `requireHere(...)` (createRequire) on its
 * first message, which a bundler cannot see: made a plain require, it is bundled, and still
 * evaluated only when first called.
 */
export const bundledProtobuf = {
  name: 'kms-sync-bundled-protobuf',
  transform(code, id) {
    if (!id.endsWith('/dist/provider/plugin/protocol.js')) return null;
    const out = code.replace(/\brequireHere\((['"]protobufjs\/light\.js['"])\)/g, 'require($1)');
    if (out === code) throw new Error(`${id}: no requireHere('protobufjs/light.js') to bundle`);
    // Same lines, same places but for the call's name: the sourcemap of the file stays usable.
    return { code: out, map: null };
  },
};
