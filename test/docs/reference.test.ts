// docs/configuration.md's reference is generated from the JSON Schema (scripts/docs-reference.ts):
// the committed page must be exactly what a fresh generation writes, so the two cannot drift.
import { describe, expect, it } from 'vitest';
import { BEGIN, END, freshPage, renderReference } from '../../scripts/docs-reference.js';

describe('configuration reference', () => {
  it('docs/configuration.md holds exactly the reference generated from schemas/kms-sync.schema.json', () => {
    const { current, fresh } = freshPage();
    expect(current.includes(BEGIN) && current.includes(END), 'the generated section markers').toBe(true);
    expect(current, 'docs/configuration.md differs from the schema: run npm run docs:reference').toBe(fresh);
  });

  it('lists every field of every object with its description, and follows a changed description', () => {
    const schema = {
      title: 't',
      type: 'object',
      required: ['a'],
      properties: {
        a: { type: 'string', description: 'First <field>.', examples: ['x'] },
        things: { type: 'array', items: { $ref: '#/definitions/thing' } },
      },
      definitions: {
        thing: {
          title: 'Thing',
          type: 'object',
          description: 'A thing.',
          properties: { n: { type: 'integer', minimum: 1, description: 'How many.' } },
        },
      },
    };
    const out = renderReference(schema);
    expect(out).toContain('| `a` | string | yes | First &lt;field&gt;. Example: `x`. |');
    expect(out).toContain('| `things` | list of [Thing](#thing) |  |  |');
    expect(out).toContain('### Thing\n\n`things[]`. A thing.');
    expect(out).toContain('| `n` | integer |  | How many. At least 1. |');
    schema.definitions.thing.properties.n.description = 'How many, changed.';
    expect(renderReference(schema)).toContain('How many, changed.');
  });
});
