// The agent's status page in a real browser (Debian's chromium driven by playwright-core): it
// renders the environments, the drift with its field-level before/after and the timeline of key
// expiries, shows a client whose name is an HTML payload (created in the emulator) as text, runs no
// script but its own, fits a 390 px phone screen without horizontal scroll, and keeps screenshots at both widths in test-artifacts/ (gitignored). Skipped loudly without chromium.
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { printedSecrets, repoRoot } from '../crash/lib.js';
import { agentConfig, fixture, startAgent, type AgentProc, type Fixture } from './lib.js';
import { skipWhen } from '../support/skip.js';
import { patient } from '../support/patience.js';

const CHROMIUM = '/usr/bin/chromium';
const ENV = 'agent-production';
const HOSTILE = '<img src=x onerror="document.title=\'pwned\'">';
const UI_TOKEN = 'ui-token-for-the-page-test-0123456789';
const present = existsSync(CHROMIUM);

describe.skipIf(skipWhen(!present, `the status page browser test needs ${CHROMIUM} (apt-get install chromium)`))(
  'the status page in chromium',
  () => {
    let f: Fixture;
    let agent: AgentProc;
    beforeAll(async () => {
      f = await fixture();
      f.repo.push(
        {
          'kms/kms-sync.yaml': agentConfig([
            { name: 'alpha', keys: ['{ name: primary, ttl: 20d }'], ip: '' },
            { name: 'billing', keys: ['{ name: primary, ttl: 90d }', '{ name: batch, ttl: 5d }'] },
          ]),
          // An empty file: the configuration's warning must reach the log as JSON too.
          'kms/empty.yaml': '',
        },
        'first',
      );
      agent = await startAgent(
        f,
        [
          '--path',
          'kms',
          '--interval',
          '1s',
          '--mode',
          'sync',
          '--ui-token',
          'env:KMS_SYNC_UI_TOKEN',
          '--log-format',
          'json',
        ],
        { KMS_SYNC_UI_TOKEN: UI_TOKEN },
      );
    }, patient(60_000));
    afterAll(async () => {
      agent?.child.kill('SIGTERM');
      await agent?.exit;
      expect(printedSecrets(f.outputs)).toEqual([]);
      expect(f.outputs.join('\n')).not.toContain(UI_TOKEN);
      await f.cleanup();
    });

    it(
      'renders environments, drift and the expiry timeline, escapes a hostile name, and writes a screenshot',
      async () => {
        const auth = { authorization: `Bearer ${UI_TOKEN}` };
        const status = async () => JSON.parse((await agent.get('/api/status', auth)).text);
        await waitStatus(async () => (await status()).revision.synced !== undefined);
        // The page, the API and the metrics need the token (no --expose); health does not.
        expect((await agent.get('/')).status).toBe(401);
        expect((await agent.get('/api/status')).status).toBe(401);
        expect(
          (await agent.get('/', { authorization: `Basic ${Buffer.from(`anyone:${UI_TOKEN}`).toString('base64')}` }))
            .status,
        ).toBe(200);
        expect((await agent.get('/healthz')).status).toBe(200);
        expect((await agent.get('/metrics')).status).toBe(401);
        expect((await agent.get('/metrics', auth)).status).toBe(200);

        // Drift by hand: alpha's allow-list changed, and a client with a hostile name created outside.
        const alpha = (await f.emu.clients(ENV)).find((c) => c.name === 'alpha')!;
        await f.emu.call('PUT', `/client/${alpha.id}?project_env=${ENV}`, { ipWhitelist: ['192.0.2.1/32'] });
        const templates = await f.emu.call('GET', `/client/templates?project_env=${ENV}`);
        const created = await f.emu.call('POST', `/client?project_env=${ENV}`, {
          name: HOSTILE,
          type: 'server',
          templateId: (templates.data ?? templates)[0].id,
          keys: [],
        });
        expect(created?.name ?? created?.[0]?.name, JSON.stringify(created)).toBe(HOSTILE);
        await waitStatus(async () => {
          const s = await status();
          return (
            s.drift.some((d: any) => d.category === 'unmanaged') &&
            s.drift.some((d: any) => d.category === 'changed_outside')
          );
        });

        const { chromium } = await import('playwright-core');
        const browser = await chromium.launch({
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
        try {
          const page = await browser.newPage({ viewport: { width: 1280, height: 1000 }, extraHTTPHeaders: auth });
          const errors: string[] = [];
          page.on('pageerror', (e) => errors.push(e.message));
          const res = await page.goto(agent.url, { waitUntil: 'load' });
          expect(res?.status()).toBe(200);
          expect(res?.headers()['content-security-policy']).toContain("default-src 'none'");
          // Environments with their sync state.
          const envRow = page.locator(`#environments tr[data-env="${ENV}"]`);
          // The page is static, server-rendered from the status that already showed the drift: its
          // row is counted once, never polled (CI 05:23: a poll with vitest's default 1 s failed with
          // "expect.poll() function didn't resolve in time", i.e. chromium had not answered the first
          // count on the loaded host; a page without the row would have failed with "expected 0 to be 1").
          expect(await envRow.count()).toBe(1);
          expect(await envRow.innerText()).toMatch(/OutOfSync/);
          // Drift, with the field-level before/after of the hand-made change.
          const drift = page.locator('#drift');
          expect(await drift.innerText()).toContain('ipWhitelist');
          expect(await drift.locator('.before').first().innerText()).toContain('192.0.2.1/32');
          // The hostile name is shown as text: no element made of it, no handler ran.
          expect(await drift.innerText()).toContain(HOSTILE);
          expect(await page.locator('img').count()).toBe(0);
          expect(await page.title()).toBe('kms-sync agent');
          // The timeline: one marker per key with an expiry (three keys with a ttl), issued keys as events.
          expect(await page.locator('#timeline .expiry').count()).toBe(3);
          expect(await page.locator('#timeline .event').count()).toBeGreaterThanOrEqual(2);
          expect(await page.locator('#timeline title').allTextContents()).toEqual(
            expect.arrayContaining([expect.stringContaining(`key.${ENV}/billing/batch expires`)]),
          );
          // Last revisions with their outcomes.
          expect(await page.locator('#history').innerText()).toMatch(/success/);
          expect(errors).toEqual([]);
          const dir = path.join(repoRoot, 'test-artifacts');
          mkdirSync(dir, { recursive: true });
          await page.screenshot({ path: path.join(dir, 'agent-status-page.png'), fullPage: true });
          expect(existsSync(path.join(dir, 'agent-status-page.png'))).toBe(true);
          // Desktop and phone widths: the page fits, no horizontal scroll (issue 36: at 390 px it was 575-889 px wide).
          expect(await page.evaluate<number>('document.documentElement.scrollWidth')).toBeLessThanOrEqual(1280);
          const phone = await browser.newPage({
            viewport: { width: 390, height: 844 },
            deviceScaleFactor: 2,
            isMobile: true,
            hasTouch: true,
            extraHTTPHeaders: auth,
          });
          expect((await phone.goto(agent.url, { waitUntil: 'load' }))?.status()).toBe(200);
          const widths = await phone.evaluate<{ doc: number; body: number; view: number }>(
            '({ doc: document.documentElement.scrollWidth, body: document.body.scrollWidth, view: window.innerWidth })',
          );
          expect(widths.view).toBe(390);
          expect(widths.doc, JSON.stringify(widths)).toBeLessThanOrEqual(390);
          expect(widths.body, JSON.stringify(widths)).toBeLessThanOrEqual(390);
          // Every element of the page lies inside the viewport's width (none cut off on the right).
          const outside = await phone.evaluate<string[]>(
            "[...document.querySelectorAll('body *')].filter((el) => el.getBoundingClientRect().right > window.innerWidth + 0.5).map((el) => el.tagName.toLowerCase() + '#' + el.id).slice(0, 10)",
          );
          expect(outside).toEqual([]);
          // Still usable: the drift's field and its values, the environment's state, the control.
          expect(await phone.locator('#drift').innerText()).toContain('ipWhitelist');
          expect(await phone.locator(`#environments tr[data-env="${ENV}"]`).innerText()).toMatch(/OutOfSync/);
          expect(await phone.locator('#control button').isVisible()).toBe(true);
          await phone.screenshot({ path: path.join(dir, 'agent-status-page-390px.png'), fullPage: true });
          // --log-format json: every line of the agent's output is one JSON object with time, level, msg
          // (its whole lines: the agent, reconciling every second, may be writing one as it is read).
          const out = agent.output();
          const lines = out.slice(0, out.lastIndexOf('\n')).split('\n');
          for (const line of lines)
            expect(Object.keys(JSON.parse(line)).slice(0, 3), line).toEqual(['time', 'level', 'msg']);
          expect(
            lines
              .map((l) => JSON.parse(l))
              .some((e) => e.level === 'warn' && /^configuration: .*empty\.yaml/.test(e.msg)),
          ).toBe(true);
        } finally {
          await browser.close();
        }
      },
      patient(90_000),
    );

    async function waitStatus(cond: () => Promise<boolean>) {
      const end = Date.now() + patient(30_000);
      while (Date.now() < end) {
        if (await cond()) return;
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error(`timed out; agent output:\n${agent.output().slice(-3000)}`);
    }
  },
);
