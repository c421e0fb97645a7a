// The agent's token as the operator gives it: `env:NAME` or `file:PATH`, never the value on the
// command line, where `ps` shows it to every user of the machine. Shared by `kms-sync agent
// --ui-token` (the agent's side) and `kms-sync agent status|reconcile|… --token` (a caller's side).
import { readFileSync } from 'node:fs';
import { registerSecret } from '../model/redact.js';
import { UsageError } from './errors.js';

/** `env:NAME` or `file:PATH`: a token is never given on the command line itself. */
export function readToken(flag: string, spec: string, env: NodeJS.ProcessEnv): string {
  let token: string | undefined;
  if (spec.startsWith('env:')) token = env[spec.slice(4)];
  else if (spec.startsWith('file:')) {
    try {
      token = readFileSync(spec.slice(5), 'utf8').trim();
    } catch (e) {
      throw new UsageError(
        `${flag} ${spec}: cannot read the file (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
      );
    }
  } else
    throw new UsageError(
      `${flag}: give env:NAME or file:PATH; a token on the command line would be visible to every user of the machine (ps)`,
    );
  if (!token) throw new UsageError(`${flag} ${spec}: empty or not set`);
  if (token.length < 16)
    throw new UsageError(
      `${flag} ${spec}: the token is too short (${token.length} characters; at least 16, e.g. openssl rand -hex 32)`,
    );
  registerSecret(token, flag);
  return token;
}
