// Imported first by main.ts: ES modules evaluate in import order, so this runs before any module
// that needs Node 22 (undici, fetch internals) and replaces their stack traces with one clear line.
// Written for old Node: no syntax or API newer than Node 14.

/** The oldest Node.js kms-sync runs on (package.json "engines"). */
export const MIN_NODE = [22, 19, 0] as const;

/** A message when `version` (process.versions.node) is older than MIN_NODE, else undefined. */
export function nodeVersionProblem(version: string): string | undefined {
  const parts = version.split('.').map((p) => Number.parseInt(p, 10) || 0);
  for (let i = 0; i < MIN_NODE.length; i++) {
    const have = parts[i] ?? 0;
    const need = MIN_NODE[i]!;
    if (have > need) return undefined;
    if (have < need) {
      return (
        `kms-sync needs Node.js >= ${MIN_NODE.join('.')} (found ${version}).\n` +
        'Install Node.js 22 (LTS) or newer: with nvm `nvm install 22 && nvm use 22`, with fnm `fnm use --install-if-missing 22`, ' +
        'or from https://nodejs.org/en/download. Then run kms-sync again.\n'
      );
    }
  }
  return undefined;
}

const problem = nodeVersionProblem(process.versions.node);
if (problem !== undefined) {
  process.stderr.write(`Error: ${problem}`);
  process.exit(1);
}
