// A configuration given as CDKTF stacks (--cdktf [DIR], --cdktf-out DIR, --stack NAME): the app
// synthesized (or its output read) into documents the loader reads. The flags themselves are the
// CLI's (cli/cdktf-input.ts).
import { CdktfError, loadCdktf, type CdktfInput } from '../cdktf/index.js';
import { configLimits, type ConfigLimits } from '../config/limits.js';
import { printable } from '../model/printable.js';
import { UsageError } from './errors.js';
import { frontEnd } from './front-end.js';

export interface CdktfFlags {
  /** `--cdktf` alone is true: the current folder holds cdktf.json. */
  cdktf?: string | boolean;
  cdktfOut?: string;
  stack?: string[];
}

export function usesCdktf(o: CdktfFlags): boolean {
  return (o.cdktf !== undefined && o.cdktf !== false) || o.cdktfOut !== undefined;
}

/** Synthesizes (or reads) the CDKTF stacks the flags name; undefined when none are named. */
export async function readCdktfFlags(
  o: CdktfFlags,
  limits: ConfigLimits = configLimits(),
): Promise<CdktfInput | undefined> {
  if (!usesCdktf(o)) {
    if (o.stack?.length) throw new UsageError('--stack needs --cdktf [DIR] or --cdktf-out DIR');
    return undefined;
  }
  let input: CdktfInput;
  try {
    input = await loadCdktf({
      ...(typeof o.cdktf === 'string' ? { dir: o.cdktf } : o.cdktf === true ? { dir: '.' } : {}),
      ...(o.cdktfOut !== undefined ? { outDir: o.cdktfOut } : {}),
      stacks: o.stack ?? [],
      maxBytes: limits.totalBytes,
    });
  } catch (e) {
    if (e instanceof CdktfError) throw new UsageError(e.message);
    throw e;
  }
  showAppStderr(input.appStderr);
  return input;
}

/**
 * The app's warnings reach the user as cdktf synth shows them, also when the synth succeeds: each
 * line prefixed (so it is not taken for kms-sync's own) and escaped (the app is code from the
 * configuration's repository: no escape sequences or workflow commands reach the terminal or log).
 */
function showAppStderr(text: string): void {
  const lines = text.split(/\r?\n/).filter((l) => l.trim() !== '');
  if (!lines.length) return;
  frontEnd().clearProgress();
  for (const line of lines) frontEnd().notice(`cdktf app: ${printable(line.replace(/\x1b\[[0-9;]*m/g, ''))}\n`); // colours dropped, the rest escaped
}
