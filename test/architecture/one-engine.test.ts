// One engine under every front end (issue 37): the Terraform provider and the agent open their
// connection to the service and the path of raw keys (stores, journal) through engine/
// (session.ts, key-path.ts), as the CLI's runs do, never with clients, registries or key captures
// of their own. A second construction would be a second place the service target or the
// journal → store order could differ.
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../support/cli.js';

function files(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) return files(p);
    return e.name.endsWith('.ts') ? [p] : [];
  });
}

const OWN = /new (KmsClient|StoreRegistry|JournaledKeyCapture)\(/g;

describe('front ends over one engine', () => {
  it('provider/ and agent/ construct no API client, store registry or key capture of their own', () => {
    const found: string[] = [];
    for (const layer of ['provider', 'agent']) {
      for (const file of files(path.join(repoRoot, 'src', layer))) {
        readFileSync(file, 'utf8')
          .split('\n')
          .forEach((line, i) => {
            if (OWN.test(line)) found.push(`${path.relative(repoRoot, file)}:${i + 1}: ${line.trim()}`);
            OWN.lastIndex = 0;
          });
      }
    }
    expect(found).toEqual([]);
  });

  it('the provider takes its connection and key path from engine/', () => {
    const source = readFileSync(path.join(repoRoot, 'src', 'provider', 'engine.ts'), 'utf8');
    expect(source).toMatch(/from '\.\.\/engine\/session\.js'/);
    expect(source).toMatch(/import\('\.\.\/engine\/key-path\.js'\)/);
  });
});
