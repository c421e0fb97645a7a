// Issue 34 item 6, mounted against the built CLI: the service interface does not fix the format of
// raw keys, so a real service's keys may carry no prefix redaction knows (the emulator's kmsc_).
// A service (here a proxy in front of the emulator that rewrites every issued key to a bare
// random string) that echoes a raw key in a later error, spelled as is, upper-cased, base64,
// base64url and hex, must never get it printed: every raw key is redacted by value from the
// moment it is parsed from the answer.
import { randomBytes } from 'node:crypto';
import { readFileSync, rmSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RunningEmulator } from '../../src/emulator/index.js';
import { runCli } from '../support/cli.js';
import { setup } from './helpers.js';
import { patient } from '../support/patience.js';

const CONFIG = `apiVersion: kms-sync/v1
projects:
  - slug: shop
    name: Shop
    environments:
      - type: staging
        url: https://s.example
        templates: [{ name: std, rateLimitDay: 10 }]
        clients: [{ name: web, template: std, keys: [{ name: main }] }]
        endpoints: [{ method: GET, path: /v1/orders, name: Orders }]
`;

/** Every spelling of a raw key the echoing service uses. */
const spellings = (raw: string) => ({
  raw,
  upper: raw.toUpperCase(),
  base64: Buffer.from(raw).toString('base64'),
  base64url: Buffer.from(raw).toString('base64url'),
  hex: Buffer.from(raw).toString('hex'),
  HEX: Buffer.from(raw).toString('hex').toUpperCase(),
  basic: Buffer.from(`client:${raw}`).toString('base64'),
});

/**
 * A service whose raw keys have no known prefix, and which echoes the first one in the answer to
 * the next endpoint write (held back until a key was issued, so the order is certain).
 */
async function echoingService(upstream: string): Promise<{ url: string; raws: string[]; server: Server }> {
  const raws: string[] = [];
  let issued: () => void = () => {};
  const keyIssued = new Promise<void>((resolve) => {
    issued = resolve;
  });
  const target = new URL(upstream);
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = Buffer.concat(chunks);
      if (req.method === 'POST' && /\/endpoint(\?|$)/.test(req.url ?? '') && body.includes('/v1/orders')) {
        await Promise.race([keyIssued, new Promise((r) => setTimeout(r, patient(15_000)))]);
        const s = spellings(raws[0] ?? 'none');
        res.writeHead(422, { 'content-type': 'application/json' });
        res.end(
          JSON.stringify({
            code: 'INVALID_ENDPOINT',
            error: `endpoint collides with key ${s.raw} (${s.upper}; b64 ${s.base64}; b64url ${s.base64url}; hex ${s.hex} ${s.HEX}; auth Basic ${s.basic})`,
          }),
        );
        return;
      }
      const up = request(
        { host: target.hostname, port: target.port, path: req.url, method: req.method, headers: req.headers },
        (answer) => {
          const got: Buffer[] = [];
          answer.on('data', (c: Buffer) => got.push(c));
          answer.on('end', () => {
            let text = Buffer.concat(got).toString('utf8');
            if (req.method !== 'GET' && /\/client(\?|\/|$)/.test(req.url ?? '') && (answer.statusCode ?? 0) < 300) {
              // A key format without a prefix: 32 random bytes as base64url, nothing else.
              text = text.replace(/"key":\s*"kmsc_[A-Za-z0-9_-]+"/g, () => {
                const raw = randomBytes(32).toString('base64url');
                raws.push(raw);
                return `"key":"${raw}"`;
              });
              if (raws.length) issued();
            }
            const headers = { ...answer.headers };
            delete headers['content-length'];
            res.writeHead(answer.statusCode ?? 502, headers);
            res.end(text);
          });
        },
      );
      up.end(body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}${target.pathname}`, raws, server };
}

describe('raw keys without a known prefix are redacted by value (issue 34)', () => {
  let emu: RunningEmulator;
  let dir: string;
  let env: NodeJS.ProcessEnv;
  beforeAll(async () => {
    ({ emu, dir, env } = await setup({ 'kms-sync.yaml': CONFIG }));
  });
  afterAll(async () => {
    await emu.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it(
    'a raw key echoed in a later error is not printed in any spelling',
    async () => {
      const svc = await echoingService(emu.url);
      try {
        const r = await runCli(['apply', '--yes'], { cwd: dir, env: { ...env, KMS_API_URL: svc.url } });
        const printed = `${r.stdout}\n${r.stderr}`;
        expect(svc.raws.length, printed).toBe(1);
        expect(printed).not.toMatch(/kmsc_/);
        // The endpoint failed with the echoing error, and its text was printed, redacted.
        expect(r.code, printed).not.toBe(0);
        expect(printed).toContain('endpoint collides with key [REDACTED raw key]');
        for (const [spelling, value] of Object.entries(spellings(svc.raws[0]!)))
          expect(printed, spelling).not.toContain(value);
        // The key itself reached its store (the one place a raw key belongs).
        expect(readFileSync(path.join(dir, '.kms-sync', 'secrets.sops.yaml'), 'utf8')).toContain(
          'shop-staging/web/main',
        );
      } finally {
        svc.server.close();
      }
    },
    patient(60_000),
  );
});
