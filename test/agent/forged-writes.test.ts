// Forged writes in a real browser (Debian's chromium driven by playwright-core), issue 35: a page
// served from another site (http://localhost:PORT, the agent on http://127.0.0.1:PORT) auto-submits
// forms to /api/suspend and /api/resume and sends a no-cors fetch, against an agent without a token
// (loopback) and one with a token whose page the operator opened with basic auth (the browser
// answers the agent's challenges with the cached credentials). The agent stays as it was. Then the
// agent's own page suspends and resumes it (with a token: typed once, kept in sessionStorage).
// Skipped loudly without chromium.
import { existsSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets } from '../crash/lib.js';
import { skipWhen } from '../support/skip.js';
import { agentConfig, fixture, JSON_BODY, startAgent, until, type AgentProc, type Fixture } from './lib.js';
import { patient } from '../support/patience.js';

const CHROMIUM = '/usr/bin/chromium';
const UI_TOKEN = 'forged-writes-test-ui-token-0123456789';
const BEARER = { authorization: `Bearer ${UI_TOKEN}` };

/** The attacker's site: pages that make the browser write to the agent. */
function attackerPages(agentUrl: string): Record<string, string> {
  const form = (action: string, enctype: string, field: string) =>
    `<!doctype html><html><body><form id="f" method="POST" action="${agentUrl}/api/${action}" enctype="${enctype}">${field}</form><script>document.getElementById('f').submit()</script></body></html>`;
  return {
    // A text/plain form can send a body that parses as JSON: {"a":"=b"}.
    '/suspend-text': form('suspend', 'text/plain', `<input name='{"a":"' value='b"}'>`),
    '/resume-text': form('resume', 'text/plain', `<input name='{"a":"' value='b"}'>`),
    '/suspend-urlencoded': form('suspend', 'application/x-www-form-urlencoded', '<input name="a" value="b">'),
    '/resume-urlencoded': form('resume', 'application/x-www-form-urlencoded', '<input name="a" value="b">'),
    '/suspend-fetch': `<!doctype html><html><body><script>fetch('${agentUrl}/api/suspend', { method: 'POST', mode: 'no-cors', credentials: 'include', headers: { 'content-type': 'text/plain' }, body: '{}' })</script></body></html>`,
  };
}

async function serveAttacker(agentUrl: string): Promise<{ url: string; close: () => Promise<void> }> {
  const pages = attackerPages(agentUrl);
  const server: Server = createServer((req, res) => {
    const page = pages[req.url ?? ''];
    res.writeHead(page ? 200 : 404, { 'content-type': 'text/html; charset=utf-8' });
    res.end(page ?? 'not found');
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  // Another site than the agent's 127.0.0.1: the browser knows this one as localhost.
  return {
    url: `http://localhost:${(server.address() as AddressInfo).port}`,
    close: () => new Promise((r) => server.close(() => r())),
  };
}

describe.skipIf(
  skipWhen(!existsSync(CHROMIUM), `the forged-write browser test needs ${CHROMIUM} (apt-get install chromium)`),
)('forged writes from another site, in chromium', () => {
  let f: Fixture;
  let browser: import('playwright-core').Browser;
  beforeAll(async () => {
    f = await fixture();
    f.repo.push({ 'kms/kms-sync.yaml': agentConfig([{ name: 'alpha', keys: ['primary'] }]) }, 'first');
    const { chromium } = await import('playwright-core');
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--headless',
        '--disable-gpu',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
        '--no-first-run',
      ],
    });
  }, patient(120_000));
  afterAll(async () => {
    await browser?.close();
    expect(printedSecrets(f.outputs)).toEqual([]);
    expect(f.outputs.join('\n')).not.toContain(UI_TOKEN);
    await f.cleanup();
  });

  /** Opens each attacker page in `context` and waits for the browser's request to the agent to be answered. */
  async function attack(
    context: import('playwright-core').BrowserContext,
    attacker: string,
    agent: AgentProc,
    paths: string[],
  ): Promise<number[]> {
    const statuses: number[] = [];
    for (const p of paths) {
      const page = await context.newPage();
      const answered = page.waitForResponse((r) => r.url().startsWith(`${agent.url}/api/`), {
        timeout: patient(20_000),
      });
      await page.goto(`${attacker}${p}`);
      statuses.push((await answered).status());
      await page.close();
    }
    return statuses;
  }

  it(
    'without a token (loopback): forms and a no-cors fetch from another site neither suspend nor resume the agent; its own page does',
    async () => {
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1h']);
      const attacker = await serveAttacker(agent.url);
      const context = await browser.newContext();
      try {
        await until(agent, 'the first reconcile', (s) => s.reconciles >= 1, 60_000);
        const statuses = await attack(context, attacker.url, agent, [
          '/suspend-text',
          '/suspend-urlencoded',
          '/suspend-fetch',
        ]);
        expect(
          statuses.every((s) => s >= 400),
          String(statuses),
        ).toBe(true);
        expect((await agent.status()).agent.suspended).toBe(false);
        // Suspended by the operator: the forged resumes leave it suspended.
        expect((await agent.post('/api/suspend', '{}', JSON_BODY)).status).toBe(200);
        await attack(context, attacker.url, agent, ['/resume-text', '/resume-urlencoded']);
        expect((await agent.status()).agent.suspended).toBe(true);
        // The agent's own page (no token to ask for on loopback): its button resumes and suspends.
        const page = await context.newPage();
        await page.goto(agent.url);
        expect(await page.locator('#token').count()).toBe(0);
        await Promise.all([page.waitForEvent('load'), page.click('button[value="resume"]')]);
        expect((await agent.status()).agent.suspended).toBe(false);
        await Promise.all([page.waitForEvent('load'), page.click('button[value="suspend"]')]);
        expect((await agent.status()).agent.suspended).toBe(true);
        // Suspension is kept in the state folder: resumed for the next test.
        expect((await agent.post('/api/resume', '{}', JSON_BODY)).status).toBe(200);
      } finally {
        await context.close();
        await attacker.close();
        agent.child.kill('SIGTERM');
        await agent.exit;
      }
    },
    patient(120_000),
  );

  it(
    "with a token and basic-auth credentials in the browser: the forged writes are refused; the agent's own page suspends and resumes with the token",
    async () => {
      const agent = await startAgent(f, ['--path', 'kms', '--interval', '1h', '--ui-token', 'env:KMS_SYNC_UI_TOKEN'], {
        KMS_SYNC_UI_TOKEN: UI_TOKEN,
      });
      const attacker = await serveAttacker(agent.url);
      // The operator's browser: it answers the agent's basic-auth challenges with the token as password.
      const context = await browser.newContext({ httpCredentials: { username: 'operator', password: UI_TOKEN } });
      const status = async () => JSON.parse((await agent.get('/api/status', BEARER)).text);
      try {
        await until({ ...agent, status } as AgentProc, 'the first reconcile', (s) => s.reconciles >= 1, 60_000);
        const own = await context.newPage();
        expect((await own.goto(agent.url))?.status()).toBe(200);
        await own.close();
        await attack(context, attacker.url, agent, ['/suspend-text', '/suspend-urlencoded', '/suspend-fetch']);
        expect((await status()).agent.suspended).toBe(false);
        expect((await agent.post('/api/suspend', '{}', { ...JSON_BODY, ...BEARER })).status).toBe(200);
        await attack(context, attacker.url, agent, ['/resume-text', '/resume-urlencoded']);
        expect((await status()).agent.suspended).toBe(true);
        expect((await agent.post('/api/resume', '{}', { ...JSON_BODY, ...BEARER })).status).toBe(200);

        // The agent's own page: a wrong token is refused and forgotten; the right one, typed once, suspends and then resumes.
        const page = await context.newPage();
        const errors: string[] = [];
        page.on('pageerror', (e) => errors.push(e.message));
        await page.goto(agent.url);
        await page.fill('#token', 'not-the-token-at-all-000000');
        await page.click('button[value="suspend"]');
        await expect
          .poll(() => page.locator('#control-note').innerText(), { timeout: patient(10_000) })
          .toMatch(/not accepted/);
        expect((await status()).agent.suspended).toBe(false);
        await page.fill('#token', UI_TOKEN);
        await Promise.all([page.waitForEvent('load'), page.click('button[value="suspend"]')]);
        expect((await status()).agent.suspended).toBe(true);
        // After the reload the token is still in the tab's sessionStorage: the field can stay empty.
        expect(await page.locator('#token').inputValue()).toBe('');
        await Promise.all([page.waitForEvent('load'), page.click('button[value="resume"]')]);
        expect((await status()).agent.suspended).toBe(false);
        expect(await page.evaluate(() => sessionStorage.getItem('kms-sync-agent-token'))).toBe(UI_TOKEN);
        expect(errors).toEqual([]);
      } finally {
        await context.close();
        await attacker.close();
        agent.child.kill('SIGTERM');
        await agent.exit;
      }
    },
    patient(120_000),
  );
});
