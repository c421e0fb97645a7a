// Values of Terraform input variables (`var.NAME`) the way Terraform finds them, lowest precedence
// first: the variable's default, TF_VAR_NAME, terraform.tfvars, terraform.tfvars.json, then
// *.auto.tfvars and *.auto.tfvars.json in lexical order. Files are read from the CDKTF project folder.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { JsonValue } from '../model/index.js';
import { evaluate, ExpressionError, parseAttributes, parseTemplate } from './expressions.js';

export interface VariableValue {
  value: JsonValue;
  /** Where it came from, for messages: `TF_VAR_x`, `terraform.tfvars`, ... */
  from: string;
}

/** Values set by the files and the environment (defaults come from the stack's variable blocks). */
export interface VariableValues {
  values: Map<string, VariableValue>;
  /** Problems reading the files (syntax, non-literal values), each naming its file. */
  problems: string[];
}

const noRefs = {
  resolve(ref: { text: string }): JsonValue {
    throw new ExpressionError(`variable values must be literals, not references (${ref.text})`);
  },
};

export async function readVariableValues(dir: string, env: NodeJS.ProcessEnv): Promise<VariableValues> {
  const values = new Map<string, VariableValue>();
  const problems: string[] = [];
  // TF_VAR_* stay strings here: they are converted to the variable's declared type on use.
  for (const [k, v] of Object.entries(env)) {
    if (k.startsWith('TF_VAR_') && v !== undefined) values.set(k.slice('TF_VAR_'.length), { value: v, from: k });
  }
  let names: string[] = [];
  try {
    names = await readdir(dir);
  } catch {
    return { values, problems };
  }
  const auto = names.filter((n) => n.endsWith('.auto.tfvars') || n.endsWith('.auto.tfvars.json')).sort();
  const files = [...['terraform.tfvars', 'terraform.tfvars.json'].filter((n) => names.includes(n)), ...auto];
  for (const name of files) {
    const file = path.join(dir, name);
    let text: string;
    try {
      text = await readFile(file, 'utf8');
    } catch (e) {
      problems.push(`${name}: cannot read: ${(e as Error).message}`);
      continue;
    }
    try {
      if (name.endsWith('.json')) {
        const parsed = JSON.parse(text) as unknown;
        if (!parsed || typeof parsed !== 'object' || Array.isArray(parsed))
          throw new Error('expected an object of variable values');
        for (const [k, v] of Object.entries(parsed)) values.set(k, { value: v as JsonValue, from: name });
      } else {
        for (const [k, expr] of parseAttributes(text)) values.set(k, { value: evaluate(expr, noRefs), from: name });
      }
    } catch (e) {
      problems.push(`${name}: ${(e as Error).message}`);
    }
  }
  return { values, problems };
}

/**
 * Converts a value to the declared type of a variable (`string`, `number`, `bool`, `list(string)`,
 * ...), as Terraform does; TF_VAR_ values of complex types are HCL literals.
 */
export function convertVariable(value: JsonValue, type: unknown, fromEnv: boolean): JsonValue {
  const t = typeof type === 'string' ? type.replace(/^\$\{(.*)\}$/, '$1').trim() : 'any';
  if (value === null) return null;
  if (t === 'string') {
    if (typeof value === 'string') return value;
    if (typeof value === 'number' || typeof value === 'boolean') return String(value);
    throw new ExpressionError(`expected a string, got ${JSON.stringify(value)}`);
  }
  if (t === 'number') {
    if (typeof value === 'number') return value;
    if (typeof value === 'string' && value.trim() !== '' && Number.isFinite(Number(value))) return Number(value);
    throw new ExpressionError(`expected a number, got ${JSON.stringify(value)}`);
  }
  if (t === 'bool') {
    if (typeof value === 'boolean') return value;
    if (value === 'true' || value === 'false') return value === 'true';
    throw new ExpressionError(`expected true or false, got ${JSON.stringify(value)}`);
  }
  if (fromEnv && typeof value === 'string' && t !== 'any') {
    // list(...), map(...), object(...): Terraform parses the environment value as an HCL literal.
    return evaluate(parseTemplate('${' + value + '}'), noRefs);
  }
  return value;
}
