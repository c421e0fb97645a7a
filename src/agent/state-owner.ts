// The agent owns its state folder, and that ownership cannot outlive it. It holds a kernel lock on
// STATE/agent.lock for its whole life: an open-file-description lock (fcntl F_OFD_SETLK, Linux's
// flock(2) with POSIX-lock reach over NFS), taken through fs-native-extensions since Node has no
// flock. The kernel drops it when the process dies, however it dies (SIGKILL, OOM, a node gone
// with its NFS lease), so a restarted PID 1 or a new pod on the same volume takes it at once, and
// a second agent started on the same folder waits instead of running beside the first.
//
// Pids and host names cannot say whether an earlier holder is alive: in a container the agent is
// pid 1 (or tini's child, with the same pid) on every start, and a new pod has a new host name. So
// the folder carries a state id (random, made once, STATE/state-id) and each start an instance id
// (random). The run lock records both, locally and in the service's lock record; one that names
// this folder and another instance was left by an earlier incarnation, which is dead because this
// one holds the kernel lock, and is broken at once (secrets/fsutil.ts earlierIncarnation).
import { randomUUID } from 'node:crypto';
import { closeSync, ftruncateSync, openSync, writeSync } from 'node:fs';
import { mkdir, readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { atomicWriteFile, type StateIncarnation } from '../secrets/fsutil.js';

const native = createRequire(import.meta.url)('fs-native-extensions') as {
  tryLock(fd: number): boolean;
  unlock(fd: number): void;
};

export interface StateOwnership {
  incarnation: StateIncarnation;
  release(): void;
}

export const STATE_LOCK = 'agent.lock';
const STATE_ID = 'state-id';

/** The folder's id: made on first use and kept (a copy of the folder is a second owner: never run one). */
async function stateId(stateDir: string): Promise<string> {
  const file = path.join(stateDir, STATE_ID);
  const known = (await readFile(file, 'utf8').catch(() => '')).trim();
  if (/^[0-9a-f-]{36}$/.test(known)) return known;
  const id = randomUUID();
  await atomicWriteFile(file, `${id}\n`);
  return id;
}

/**
 * Takes the state folder's kernel lock, waiting (polling every `pollMs`) while another live agent
 * holds it; `onWait` is told once. Rejects when `signal` aborts.
 */
export async function ownStateFolder(
  stateDir: string,
  o: { signal?: AbortSignal; onWait?: (msg: string) => void; pollMs?: number } = {},
): Promise<StateOwnership> {
  await mkdir(stateDir, { recursive: true, mode: 0o700 });
  const lockFile = path.join(stateDir, STATE_LOCK);
  const fd = openSync(lockFile, 'a+', 0o600);
  try {
    for (let told = false; !native.tryLock(fd); told = true) {
      if (!told)
        o.onWait?.(
          `another kms-sync agent holds the state folder ${stateDir} (${(await readFile(lockFile, 'utf8').catch(() => '')).trim() || 'no details'}); waiting for it to stop: two agents on one folder would issue the same keys`,
        );
      o.signal?.throwIfAborted();
      await new Promise((ok) => setTimeout(ok, o.pollMs ?? 1000));
    }
  } catch (e) {
    closeSync(fd);
    throw e;
  }
  const incarnation: StateIncarnation = { state: await stateId(stateDir), instance: randomUUID() };
  // For people: who holds it. The kernel lock, not this text, is what counts: a full disk that
  // refuses the text leaves the file empty ("no details") and the folder owned.
  try {
    ftruncateSync(fd, 0);
    writeSync(
      fd,
      `${JSON.stringify({ pid: process.pid, host: os.hostname(), instance: incarnation.instance, since: new Date().toISOString() })}\n`,
      0,
    );
  } catch {
    ftruncateSync(fd, 0);
  }
  let released = false;
  return {
    incarnation,
    release: () => {
      if (released) return;
      released = true;
      native.unlock(fd);
      closeSync(fd);
    },
  };
}
