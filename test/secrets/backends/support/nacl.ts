// Opens sealed boxes with C libsodium through Debian's python3-nacl (PyNaCl), in a child process:
// an independent implementation checks what the GitHub backend encrypted.
import { spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';

/** Debian's interpreter first (python3-nacl installs there), whatever python3 is on PATH otherwise. */
export const PYTHON = existsSync('/usr/bin/python3') ? '/usr/bin/python3' : 'python3';

export function naclAvailable(): boolean {
  const r = spawnSync(PYTHON, ['-c', 'import nacl.public'], { encoding: 'utf8' });
  return r.status === 0;
}

const SCRIPT = `
import base64, json, sys
from nacl.public import PrivateKey, SealedBox
out = []
for item in json.load(sys.stdin):
    box = SealedBox(PrivateKey(base64.b64decode(item["sk"])))
    out.append(box.decrypt(base64.b64decode(item["ct"])).decode("utf-8"))
json.dump(out, sys.stdout)
`;

/** Decrypts each `{sk, ct}` (base64 private key, base64 sealed box) with PyNaCl. */
export function naclOpenSealed(items: { sk: string; ct: string }[]): string[] {
  const r = spawnSync(PYTHON, ['-c', SCRIPT], { input: JSON.stringify(items), encoding: 'utf8', timeout: 15_000 });
  if (r.status !== 0) throw new Error(`python3-nacl could not open the sealed boxes (exit ${r.status})`);
  return JSON.parse(r.stdout) as string[];
}
