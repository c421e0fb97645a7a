// `npm run crash` runs the crash campaign (test/crash/run.ts) from the TypeScript sources (Node >=
// 22.18 strips types): the sources import each other with `.js` specifiers (module nodenext), so a
// missing `.js` is mapped to the `.ts` file beside it.
import { registerHooks } from 'node:module';

if (typeof registerHooks !== 'function') {
  throw new Error('test fixtures need Node >= 22.15 (module.registerHooks)');
}

registerHooks({
  resolve(specifier, context, nextResolve) {
    try {
      return nextResolve(specifier, context);
    } catch (err) {
      const relative = specifier.startsWith('./') || specifier.startsWith('../') || specifier.startsWith('file:');
      if (err && err.code === 'ERR_MODULE_NOT_FOUND' && relative && specifier.endsWith('.js')) {
        return nextResolve(`${specifier.slice(0, -3)}.ts`, context);
      }
      throw err;
    }
  },
});
