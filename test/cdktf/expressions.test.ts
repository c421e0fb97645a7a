// The expression subset of synthesized stacks: what evaluates, and the reason for what does not.
import { describe, expect, it } from 'vitest';
import { evaluateJson, ExpressionError, parseAttributes, evaluate } from '../../src/cdktf/expressions.js';
import { convertVariable, readVariableValues } from '../../src/cdktf/variables.js';
import { workspace } from '../support/cli.js';

const refs: Record<string, unknown> = {
  'var.name': 'globex',
  'var.n': 3,
  'var.list': ['a', 'b'],
  'local.obj': { k: 'v' },
};
const ctx = {
  resolve(ref: { parts: Array<string | number>; text: string }) {
    const key = ref.parts.slice(0, 2).join('.');
    if (!(key in refs)) throw new ExpressionError(`${ref.text}: unknown`);
    let v = refs[key] as unknown;
    for (const p of ref.parts.slice(2)) v = (v as Record<string | number, unknown>)[p];
    return v as never;
  },
};
const ev = (v: unknown) => evaluateJson(v, ctx);
const fails = (v: unknown) => {
  try {
    ev(v);
  } catch (e) {
    expect(e).toBeInstanceOf(ExpressionError);
    return (e as Error).message;
  }
  throw new Error(`${JSON.stringify(v)} evaluated`);
};

describe('expressions', () => {
  it('evaluates templates, references, literals and the supported functions', () => {
    expect(ev('${var.name}')).toBe('globex');
    expect(ev('${var.n}')).toBe(3); // a sole interpolation keeps its type
    expect(ev('client-${var.name}-${var.n}')).toBe('client-globex-3');
    expect(ev('${var.list[1]}')).toBe('b');
    expect(ev('${local.obj.k}')).toBe('v');
    expect(ev('$${env:X} and %%{ not a directive')).toBe('${env:X} and %{ not a directive');
    expect(ev({ nested: ['${upper(var.name)}', { deep: '${join(",", var.list)}' }] })).toEqual({
      nested: ['GLOBEX', { deep: 'a,b' }],
    });
    expect(ev('${format("%s-%d%%", var.name, var.n)}')).toBe('globex-3%');
    expect(ev('${merge({a = 1}, {"b": [true, null]})}')).toEqual({ a: 1, b: [true, null] });
    expect(ev('${concat(var.list, ["c"])}')).toEqual(['a', 'b', 'c']);
    expect(ev('${jsondecode("{\\"x\\": 1}")}')).toEqual({ x: 1 });
    expect(ev('${tonumber("42")}')).toBe(42);
    expect(ev('${lower("A${var.name}")}')).toBe('aglobex');
  });

  it('refuses what it cannot evaluate, saying why', () => {
    expect(fails('${var.n + 1}')).toContain('operator "+" is not supported');
    expect(fails('${var.n == 1 ? "a" : "b"}')).toContain('operator "=="');
    expect(fails('${true ? "a" : "b"}')).toContain('conditional expressions');
    expect(fails('${[for x in var.list : x]}')).toContain('for expressions');
    expect(fails('${var.list[*]}')).toContain('splat');
    expect(fails('%{if true}x%{endif}')).toContain('template directives');
    expect(fails('${timestamp()}')).toContain('function timestamp() is not supported');
    expect(fails('${provider::x::f(1)}')).toContain('provider-defined functions');
    expect(fails('${var.missing}')).toContain('var.missing: unknown');
    expect(fails('${format("%q", 1)}')).toContain('verb %q is not supported');
  });

  it('reads variable values with Terraform precedence and converts them to the declared type', async () => {
    const dir = workspace({
      'terraform.tfvars':
        '# comment\nname = "from-tfvars"\nlist = ["x", "y"] // trailing\nobj = { a = 1, "b" = true }\n',
      'terraform.tfvars.json': '{ "n": 7 }',
      'b.auto.tfvars': 'name = "from-auto-b"\n',
      'a.auto.tfvars.json': '{ "name": "from-auto-a" }',
    });
    const { values, problems } = await readVariableValues(dir, { TF_VAR_name: 'from-env', TF_VAR_only_env: 'e' });
    expect(problems).toEqual([]);
    expect(values.get('name')).toEqual({ value: 'from-auto-b', from: 'b.auto.tfvars' }); // last in lexical order wins
    expect(values.get('list')?.value).toEqual(['x', 'y']);
    expect(values.get('obj')?.value).toEqual({ a: 1, b: true });
    expect(values.get('n')?.value).toBe(7);
    expect(values.get('only_env')).toEqual({ value: 'e', from: 'TF_VAR_only_env' });
    expect(convertVariable('12', 'number', true)).toBe(12);
    expect(convertVariable('true', 'bool', true)).toBe(true);
    expect(convertVariable('["a", "b"]', 'list(string)', true)).toEqual(['a', 'b']);
    expect(() => convertVariable('x', 'number', true)).toThrow('expected a number');
    const bad = await readVariableValues(workspace({ 'terraform.tfvars': 'name = var.other\n' }), {});
    expect(bad.problems).toEqual(['terraform.tfvars: variable values must be literals, not references (var.other)']);
    expect(parseAttributes('a = 1\nb = "two"\n').map(([k, e]) => [k, evaluate(e, ctx)])).toEqual([
      ['a', 1],
      ['b', 'two'],
    ]);
  });
});
