// The CLI keeps V8's compiled code in the user's cache folder (src/cli/compile-cache.ts), never in
// the shared temporary folder, and Node's own switches turn it off or move it.
import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { compileCacheDir } from '../../src/cli/compile-cache.js';
import { cliPath, runCli, workspace } from '../support/cli.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

/** Every file under `dir`, relative to it. */
const filesUnder = (dir: string): string[] =>
  existsSync(dir)
    ? readdirSync(dir, { recursive: true, withFileTypes: true })
        .filter((e) => e.isFile())
        .map((e) => path.relative(dir, path.join(e.parentPath, e.name)))
    : [];

describe('compileCacheDir', () => {
  it('is the per-user cache folder of each platform, under kms-sync/', () => {
    expect(compileCacheDir({}, 'linux', '/home/ann')).toBe('/home/ann/.cache/kms-sync/node-compile-cache');
    expect(compileCacheDir({ XDG_CACHE_HOME: '/xdg' }, 'linux', '/home/ann')).toBe('/xdg/kms-sync/node-compile-cache');
    expect(compileCacheDir({}, 'darwin', '/Users/ann')).toBe('/Users/ann/Library/Caches/kms-sync/node-compile-cache');
    expect(compileCacheDir({ LOCALAPPDATA: 'C:/Users/ann/AppData/Local' }, 'win32', 'C:/Users/ann')).toBe(
      path.join('C:/Users/ann/AppData/Local', 'kms-sync', 'node-compile-cache'),
    );
  });

  it('is NODE_COMPILE_CACHE when set, and none without a home or a cache folder', () => {
    expect(compileCacheDir({ NODE_COMPILE_CACHE: '/elsewhere' }, 'linux', '/home/ann')).toBe('/elsewhere');
    expect(compileCacheDir({}, 'linux', '')).toBeUndefined();
    expect(compileCacheDir({}, 'win32', 'C:/Users/ann')).toBeUndefined();
  });
});

describe('the CLI process', () => {
  it('writes its compiled code under the home cache folder, nothing in the temporary folder', async () => {
    const home = workspace();
    const tmp = path.join(home, 'tmp');
    mkdirSync(tmp);
    const r = await runCli(['--version'], { env: { HOME: home, TMPDIR: tmp } });
    expect(r.code).toBe(0);
    const cached = filesUnder(path.join(home, '.cache', 'kms-sync', 'node-compile-cache'));
    expect(cached.length).toBeGreaterThan(0);
    expect(filesUnder(tmp)).toEqual([]);
    // A second run reads it and answers the same.
    const again = await runCli(['--version'], { env: { HOME: home, TMPDIR: tmp } });
    expect(again).toEqual(r);
  });

  // Node's recursive mkdir never returns under /proc (mkdir answers ENOENT there): the CLI must not
  // hand it such a folder. Killed after 10 s (scaled to the load) instead of spinning on if it does.
  it.skipIf(skipWhen(!existsSync('/proc/self'), 'no /proc on this system: the unwritable-HOME start is not tried'))(
    'starts and answers with a home where no folder can be made (HOME=/proc)',
    async () => {
      const r = await new Promise<{ code: number | null; stdout: string; killed: boolean }>((resolve) => {
        execFile(
          process.execPath,
          [cliPath, '--version'],
          { env: { PATH: process.env.PATH, HOME: '/proc' }, timeout: patient(10_000), killSignal: 'SIGKILL' },
          (error, stdout) => {
            resolve({
              code: error ? ((error as { code?: number }).code ?? null) : 0,
              stdout,
              killed: Boolean(error?.killed),
            });
          },
        );
      });
      expect(r.killed).toBe(false);
      expect(r.code).toBe(0);
      expect(r.stdout.trim()).toBe('0.1.0');
    },
    patient(15_000),
  );

  it('writes none with NODE_DISABLE_COMPILE_CACHE=1', async () => {
    const home = workspace();
    const r = await runCli(['--version'], { env: { HOME: home, NODE_DISABLE_COMPILE_CACHE: '1' } });
    expect(r.code).toBe(0);
    expect(filesUnder(path.join(home, '.cache'))).toEqual([]);
  });
});
