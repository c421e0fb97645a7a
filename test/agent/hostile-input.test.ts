// The agent's smaller doors (issue 35), against `kms-sync agent` as a real process: a --repo URL
// with user info (a token) is refused, except an ssh user name; a --state-dir another user owns
// or may write (or a folder above it, or an entry in it) is refused with one line before anything
// is written; names from the service reach Slack escaped (a tiny local server plays Slack: no
// `<!channel>`, no disguised link, no fake status line) and the page with their bidi controls shown
// as `\u202e`.
import { chmodSync, chownSync, mkdirSync, readdirSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { kmsSync, waitFor } from '../crash/lib.js';
import { API_KEY, sharedFixture, startAgent, until, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const ENV = 'agent-production';
const GIT_TOKEN = 'ghp_tokenintherepourl000000000000000000';

describe("the agent's smaller doors", () => {
  let f: Fixture;
  sharedFixture((x) => {
    f = x;
  });

  /** Runs the agent until it exits or listens (then stops it); its exit code (null when it listened) and output. */
  async function run(args: string[], stateDir = f.stateDir): Promise<{ code: number | null; out: string }> {
    const p = kmsSync(['agent', '--listen', '127.0.0.1:0', '--state-dir', stateDir, '--interval', '1h', ...args], {
      cwd: f.root,
      env: {
        PATH: process.env.PATH,
        HOME: f.root,
        KMS_API_URL: f.emu.url,
        KMS_API_KEY: API_KEY,
        GIT_SSH_COMMAND: 'false',
      },
      sink: f.outputs,
    });
    let code: number | null | undefined;
    void p.exit.then((c) => {
      code = c;
    });
    await waitFor(() => code !== undefined || /listening on/.test(p.output()), 20_000);
    if (code === undefined) {
      p.child.kill('SIGTERM');
      await p.exit;
      return { code: null, out: p.output() };
    }
    return { code, out: p.output() };
  }

  it(
    '--repo with user info is refused (the token never printed); an ssh user name is not user info',
    async () => {
      for (const repo of [
        `https://${GIT_TOKEN}@github.com/acme/platform.git`,
        `https://x-access-token:${GIT_TOKEN}@github.com/acme/platform.git`,
        `http://${GIT_TOKEN}@127.0.0.1:9/x.git`,
        `ssh://git:${GIT_TOKEN}@github.com/acme/platform.git`,
        `file://${GIT_TOKEN}@localhost${f.repo.origin}`,
      ]) {
        const r = await run(['--repo', repo]);
        expect(r.code, repo).toBe(1);
        expect(r.out).toMatch(/--repo .*the URL holds user info.*KMS_SYNC_GIT_TOKEN/);
        expect(r.out).not.toContain(GIT_TOKEN);
      }
      for (const repo of ['ssh://git@github.invalid/acme/platform.git', 'git@github.invalid:acme/platform.git']) {
        const r = await run(['--repo', repo]);
        expect(r.code, r.out).toBeNull(); // it started (the fetch fails later, offline)
      }
    },
    patient(120_000),
  );

  it(
    '--state-dir that others own or may write, or under such a folder, is refused before anything is written',
    async () => {
      const base = path.join(f.root, 'modes');
      mkdirSync(base, { mode: 0o700 });
      const made = (name: string, mode: number, uid?: number, gid?: number) => {
        const d = path.join(base, name);
        mkdirSync(d, { recursive: true });
        chmodSync(d, mode);
        if (uid !== undefined || gid !== undefined) chownSync(d, uid ?? process.getuid!(), gid ?? process.getgid!());
        return d;
      };
      const root = process.getuid!() === 0;
      const cases: Array<[string, RegExp]> = [
        [made('open', 0o777), /is writable by other users \(mode 0777\)/],
        [made('world-writable', 0o703), /is writable by other users \(mode 0703\)/],
        [path.join(made('parent-open', 0o777), 'state'), /parent-open is writable by other users \(mode 0777\)/],
      ];
      // Ownership and groups need another user: as root, hand the folder to nobody (65534).
      if (root)
        cases.push(
          [made('theirs', 0o700, 65534, 65534), /is owned by another user \(uid 65534\)/],
          [made('group', 0o770, 0, 65534), /is writable by its group \(gid 65534, mode 0770\)/],
        );
      const inner = made('inner', 0o700);
      made('inner/source', 0o777);
      cases.push([inner, /inner\/source is writable by other users \(mode 0777\)/]);
      for (const [dir, why] of cases) {
        const r = await run(['--repo', f.repo.url, '--path', 'kms'], dir);
        expect(r.code, `${dir}\n${r.out}`).toBe(1);
        expect(r.out).toMatch(why);
        expect(r.out).toMatch(/--state-dir .*check its content, then make it yours and private/);
        expect(r.out.trim().split('\n')).toHaveLength(1);
      }
      expect(readdirSync(path.join(base, 'open'))).toEqual([]);
      // A private folder (and one others may only read) is used.
      expect((await run(['--repo', f.repo.url, '--path', 'kms'], made('private', 0o700))).code).toBeNull();
      expect((await run(['--repo', f.repo.url, '--path', 'kms'], made('readable', 0o755))).code).toBeNull();
    },
    patient(120_000),
  );

  it(
    'a hostile client name reaches Slack escaped and the page with its bidi controls shown, not applied',
    async () => {
      const texts: string[] = [];
      const slack: Server = createServer((req, res) => {
        const chunks: Buffer[] = [];
        req.on('data', (c: Buffer) => chunks.push(c));
        req.on('end', () => {
          texts.push(JSON.parse(Buffer.concat(chunks).toString('utf8')).text);
          res.end('ok');
        });
      });
      await new Promise<void>((r) => slack.listen(0, '127.0.0.1', () => r()));
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1s', '--mode', 'sync'], {
        KMS_SYNC_NOTIFY_WEBHOOK: `http://127.0.0.1:${(slack.address() as AddressInfo).port}/services/T0/B0/x`,
      });
      try {
        await until(agent, 'the first reconcile', (s) => s.reconciles >= 1, 60_000);
        const hostile =
          '<!channel> <https://evil.example/login|Re-authenticate here> & \u202egnp.exe\n:white_check_mark: kms-sync agent: all clear';
        const templates = await f.emu.call('GET', `/client/templates?project_env=${ENV}`);
        await f.emu.call('POST', `/client?project_env=${ENV}`, {
          name: hostile,
          type: 'server',
          templateId: (templates.data ?? templates)[0].id,
          keys: [],
        });
        expect(await waitFor(() => texts.some((t) => t.includes('new drift')), 20_000)).toBe(true);
        const text = texts.find((t) => t.includes('new drift'))!;
        expect(text).toContain(
          '&lt;!channel&gt; &lt;https://evil.example/login|Re-authenticate here&gt; &amp; \\u202egnp.exe\\n:white_check_mark:',
        );
        expect(text).not.toMatch(/<!channel>|<https?:|[\u202a-\u202e\u2066-\u2069]/);
        // Every line of the message is one of the agent's own.
        for (const line of text.split('\n'))
          expect(line, text).toMatch(
            /^(:warning: kms-sync agent: new drift|:hourglass:|:x:|:white_check_mark: kms-sync agent: reconcile of [0-9a-f]{12} succeeded again$)/,
          );
        expect(text.split('\n').some((l) => l.startsWith(':white_check_mark:'))).toBe(false);

        const page = (await agent.get('/')).text;
        expect(page).toContain('\\u202egnp.exe');
        expect(page).not.toMatch(/[\u202a-\u202e\u2066-\u2069\u200e\u200f]/);
      } finally {
        agent.child.kill('SIGTERM');
        await agent.exit;
        await new Promise((r) => slack.close(() => r(undefined)));
      }
    },
    patient(120_000),
  );
});
