/**
 * A SOPS YAML document: an ordered tree (the YAML mapping without its `sops` key) plus the `sops`
 * metadata mapping. Implements SOPS's rules for which leaves are encrypted
 * (unencrypted_suffix / encrypted_suffix / unencrypted_regex / encrypted_regex, any path
 * component), the additional data of each value (`a:b:c:` — path components joined by ':', list
 * indices omitted), and the MAC (SHA-512 over every non-null leaf's plaintext bytes in document
 * order, upper-case hex, stored AES-GCM-encrypted with `lastmodified` as additional data).
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createRequire } from 'node:module';
import type { Document, Node as YamlNode, Node, Scalar } from 'yaml';
import {
  SopsCipherError,
  decryptSopsValue,
  encryptBytes,
  encryptSopsString,
  isSopsEncrypted,
  macBytes,
  macText,
  reencryptSopsValue,
  type SopsPlain,
} from './cipher.js';
import { emitPair, readStoreYaml, type EntrySlices } from './fast-yaml.js';
import { map, scalar, type SMap, type SNode, type SScalar, type SSeq } from './tree.js';

/**
 * The `yaml` package, loaded when a store file is first read or written (naming secrets, as
 * `validate` does, needs none of it). Synchronous: Node's require of its CommonJS build.
 */
let yamlModule: typeof import('yaml') | undefined;
const Y = () => (yamlModule ??= createRequire(import.meta.url)('yaml') as typeof import('yaml'));
const isAlias = (n: unknown) => Y().isAlias(n);
const isMap = (n: unknown) => Y().isMap(n);
const isScalar = (n: unknown) => Y().isScalar(n);
const isSeq = (n: unknown) => Y().isSeq(n);

export { map, scalar, type ScalarValue, type SMap, type SNode, type SScalar, type SSeq } from './tree.js';

/**
 * Position of each key of a large map, built on first lookup. `entries` stays the source of
 * truth (callers may push to it): a stale index (length changed, or the slot holds another key)
 * is rebuilt, so a store of thousands of secrets is not scanned once per name.
 */
const positions = new WeakMap<SMap, { length: number; at: Map<string, number> }>();
const INDEX_FROM = 32;
/** Lookups of a large map answered by a scan before its index is built (a write looks up a few names). */
const scans = new WeakMap<SMap, number>();
const SCANS_BEFORE_INDEX = 8;

function indexOf(m: SMap, key: string): number {
  if (m.entries.length < INDEX_FROM) return m.entries.findIndex(([k]) => k === key);
  let idx = positions.get(m);
  if (!idx) {
    const n = scans.get(m) ?? 0;
    if (n < SCANS_BEFORE_INDEX) {
      scans.set(m, n + 1);
      return m.entries.findIndex(([k]) => k === key);
    }
  }
  if (!idx || idx.length !== m.entries.length) {
    idx = { length: m.entries.length, at: new Map(m.entries.map(([k], i) => [k, i])) };
    positions.set(m, idx);
  }
  const i = idx.at.get(key);
  if (i !== undefined && m.entries[i]?.[0] === key) return i;
  if (i === undefined) return -1;
  positions.delete(m); // slots moved under us: rebuild
  return indexOf(m, key);
}

export function getEntry(m: SMap, key: string): SNode | undefined {
  const i = indexOf(m, key);
  return i >= 0 ? m.entries[i]![1] : undefined;
}

export function setEntry(m: SMap, key: string, value: SNode): void {
  const i = indexOf(m, key);
  if (i >= 0) {
    m.entries[i] = [key, value];
    return;
  }
  m.entries.push([key, value]);
  const idx = positions.get(m);
  if (idx && idx.length === m.entries.length - 1) {
    idx.at.set(key, m.entries.length - 1); // keep the index in step with the append
    idx.length = m.entries.length;
  }
}

export function cloneNode<T extends SNode>(n: T): T {
  return structuredClone(n);
}

/** Raised for malformed documents; messages carry codes, paths and line numbers only. */
export class SopsFormatError extends Error {
  readonly kind: 'parse' | 'metadata' | 'integrity' | 'unsupported' | 'decrypt';
  constructor(kind: SopsFormatError['kind'], message: string) {
    super(message);
    this.name = 'SopsFormatError';
    this.kind = kind;
  }
}

// ---------------------------------------------------------------------------------------------
// YAML <-> tree

/**
 * With `slices`, the text of each entry of the usual `secrets` mapping is recorded by node; with
 * `image` too (the bytes `text` was decoded from), where each lies in it, so that a rewrite copies
 * those bytes instead of encoding the entry again.
 */
export function parseYamlTree(text: string, slices?: FragmentCache, image?: Uint8Array): SMap {
  // The usual layout is read without the yaml package (./fast-yaml.ts); anything else with it.
  const found: EntrySlices | undefined = slices ? [] : undefined;
  const fast = readStoreYaml(text, found);
  if (fast) {
    // The fast reader takes ASCII text only: a slice's length is its size in bytes.
    for (const [node, hit] of found ?? []) slices!.set(node, fragmentOf(hit, hit.text.length, text, image));
    return fast;
  }
  return parseWithYamlPackage(text, slices, image);
}

/** A slice of `text` as a fragment; placed in `image` when that is `text`'s bytes one for one (ASCII). */
function fragmentOf(
  hit: { name: string; text: string; start: number },
  size: number,
  text: string,
  image: Uint8Array | undefined,
): Fragment {
  const placed = image !== undefined && image.length === text.length;
  return { name: hit.name, text: hit.text, size, ...(placed ? { image, start: hit.start } : {}) };
}

/** parseYamlTree through the `yaml` package, for any YAML (and to check the fast reader against). */
export function parseWithYamlPackage(text: string, slices?: FragmentCache, image?: Uint8Array): SMap {
  const doc = Y().parseDocument(text, {
    schema: 'core',
    version: '1.2',
    // Duplicate keys are rejected in convert() with a Set: the parser's own check is quadratic.
    uniqueKeys: false,
    prettyErrors: false,
    strict: true,
    merge: false,
    intAsBigInt: false,
  });
  const err = doc.errors[0];
  if (err) {
    const pos = err.linePos?.[0];
    throw new SopsFormatError(
      'parse',
      `invalid YAML (${err.code}${pos ? ` at line ${pos.line}, column ${pos.col}` : ''})`,
    );
  }
  if (doc.contents === null) return map();
  const root = convert(doc.contents, doc, 0);
  if (root.kind !== 'map') throw new SopsFormatError('parse', 'the document must be a YAML mapping');
  if (slices) recordSecretSlices(text, doc, root, slices, image);
  return root;
}

/**
 * The source text of each entry under a top-level `secrets:` mapping, by its node, when every
 * entry's key starts at column 5 (4 spaces: our layout, and SOPS's): such a slice is a sibling
 * block of the entries a rewrite emits, so it can be written back as it is, and this parse is its
 * verification. A rewrite then emits only the entries that changed, even the first time.
 */
function recordSecretSlices(
  text: string,
  doc: Document,
  root: SMap,
  slices: FragmentCache,
  image: Uint8Array | undefined,
): void {
  if (!isMap(doc.contents)) return;
  const top = doc.contents.items;
  const at = top.findIndex((p) => isScalar(p.key) && p.key.value === 'secrets');
  const pair = top[at];
  const secrets = getEntry(root, 'secrets');
  if (!pair || !isMap(pair.value) || secrets?.kind !== 'map') return;
  const lineStart = (offset: number) => text.lastIndexOf('\n', offset - 1) + 1;
  const items = pair.value.items;
  if (items.length !== secrets.entries.length) return;
  const nextTop = top[at + 1]?.key as Node | undefined;
  const end = nextTop?.range ? lineStart(nextTop.range[0]) : text.length;
  const found: EntrySlices = [];
  for (let i = 0; i < items.length; i++) {
    const key = items[i]!.key as Node | undefined;
    const next = items[i + 1]?.key as Node | undefined;
    if (!key?.range) return;
    const from = lineStart(key.range[0]);
    if (key.range[0] - from !== 4) return; // another layout: emit everything the first time
    const to = next?.range ? lineStart(next.range[0]) : end;
    const [name, node] = secrets.entries[i]!;
    const slice = text.slice(from, to);
    // The last entry of a file without a final line break gets one: then it is not the file's bytes.
    found.push([
      node,
      { name, text: slice.endsWith('\n') ? slice : `${slice}\n`, start: slice.endsWith('\n') ? from : -1 },
    ]);
  }
  for (const [node, hit] of found)
    slices.set(node, fragmentOf(hit, Buffer.byteLength(hit.text, 'utf8'), text, hit.start < 0 ? undefined : image));
}

function convert(n: unknown, doc: Document, depth: number): SNode {
  if (depth > 64) throw new SopsFormatError('parse', 'YAML nesting too deep');
  if (n === null || n === undefined) return scalar(null);
  if (isAlias(n)) return convert(n.resolve(doc), doc, depth + 1);
  if (isMap(n)) {
    const out = map();
    const seen = new Set<string>();
    for (const pair of n.items) {
      const k = isAlias(pair.key) ? pair.key.resolve(doc) : pair.key;
      const kv = isScalar(k) ? k.value : k;
      if (typeof kv !== 'string') {
        throw new SopsFormatError(
          'parse',
          `non-string mapping key (${describeKey(kv)}); SOPS supports string keys only`,
        );
      }
      if (seen.has(kv)) throw new SopsFormatError('parse', `invalid YAML (duplicate key ${JSON.stringify(kv)})`);
      seen.add(kv);
      out.entries.push([kv, convert(pair.value, doc, depth + 1)]);
    }
    return out;
  }
  if (isSeq(n)) return { kind: 'seq', items: n.items.map((i) => convert(i, doc, depth + 1)) };
  if (isScalar(n)) {
    const v = n.value;
    if (v === null || typeof v === 'string' || typeof v === 'boolean') return scalar(v);
    if (typeof v === 'number') return scalar(v);
    throw new SopsFormatError('parse', `unsupported YAML scalar type ${typeof v}`);
  }
  throw new SopsFormatError('parse', 'unsupported YAML node');
}

function describeKey(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'object') return 'a collection';
  return `${typeof v} ${String(v)}`;
}

const SAFE_PLAIN_KEY = /^[A-Za-z_][A-Za-z0-9_.~%/-]*$/;
const YAML11_WORDS = /^(?:y|yes|n|no|true|false|on|off|null|~)$/i;

function keyNode(k: string): Scalar {
  const { Scalar } = Y();
  const s = new Scalar(k);
  if (!SAFE_PLAIN_KEY.test(k) || YAML11_WORDS.test(k)) s.type = Scalar.QUOTE_DOUBLE;
  return s;
}

type Region = 'data' | 'sops';

function toYaml(n: SNode, region: Region, key: string | undefined): YamlNode {
  const { Pair, Scalar, YAMLMap, YAMLSeq } = Y();
  if (n.kind === 'map') {
    const m = new YAMLMap();
    for (const [k, v] of n.entries) m.items.push(new Pair(keyNode(k), toYaml(v, region, k)));
    if (n.entries.length === 0) m.flow = true;
    return m;
  }
  if (n.kind === 'seq') {
    const s = new YAMLSeq();
    for (const item of n.items) s.items.push(toYaml(item, region, key));
    if (n.items.length === 0) s.flow = true;
    return s;
  }
  const s = new Scalar(n.value);
  if (typeof n.value === 'string') {
    if (n.value.includes('\n')) s.type = Scalar.BLOCK_LITERAL;
    else if (isSopsEncrypted(n.value)) s.type = Scalar.PLAIN;
    else if (region === 'data' || key === 'lastmodified' || n.value === '') s.type = Scalar.QUOTE_DOUBLE;
    else s.type = Scalar.PLAIN;
  }
  return s;
}

const EMIT_OPTIONS = { indent: 4, indentSeq: true, lineWidth: 0, minContentWidth: 0, nullStr: 'null' } as const;

function emitPairs(pairs: [string, SNode, Region][]): string {
  const { Document, Pair, YAMLMap } = Y();
  const doc = new Document(undefined, { version: '1.2' });
  const root = new YAMLMap();
  for (const [k, v, region] of pairs) root.items.push(new Pair(keyNode(k), toYaml(v, region, k)));
  doc.contents = root;
  return doc.toString(EMIT_OPTIONS);
}

/** Emits the document the way SOPS does: data first, then `sops:`, 4-space indent, sequences indented. */
export function emitSopsYaml(data: SMap, sops: SMap): string {
  const parts: (string | undefined)[] = [
    ...data.entries.map(([k, v]) => emitPair(k, v, 'data', 0)),
    emitPair('sops', sops, 'sops', 0),
  ];
  if (parts.every((p) => p !== undefined)) return parts.join('');
  return emitWithYamlPackage(data, sops);
}

/** emitSopsYaml through the `yaml` package, for any tree (and to check the fast emitter against). */
export function emitWithYamlPackage(data: SMap, sops: SMap): string {
  return emitPairs([...data.entries.map(([k, v]): [string, SNode, Region] => [k, v, 'data']), ['sops', sops, 'sops']]);
}

/**
 * The text of an entry under `secrets:` as emitSopsYaml writes it, its size in UTF-8 bytes, and
 * where those bytes lie in the latest file image that holds them (read or built by this store).
 */
export interface Fragment {
  name: string;
  text: string;
  size: number;
  image?: Uint8Array;
  start?: number;
}

/**
 * Fragments by entry node: entries are immutable once written (a new value is a new node), so a
 * rewrite emits only the entries that changed and copies the bytes of the others. Kept per store
 * instance.
 */
export type FragmentCache = WeakMap<SNode, Fragment>;

/** One entry of the `secrets` mapping, indented as in the whole document. */
export function emitSecretEntry(name: string, node: SNode): string {
  return emitPair(name, node, 'data', 4) ?? indentLines(emitPairs([[name, node, 'data']]), 4);
}

function indentLines(text: string, n: number): string {
  const pad = ' '.repeat(n);
  return text.replace(/^(?=.)/gm, pad);
}

const SECRETS_HEAD = Buffer.from('secrets:\n', 'utf8');

/**
 * The bytes of emitSopsYaml for the usual file (one top-level `secrets` mapping with entries),
 * built from the bytes of unchanged entries where an earlier image holds them (one copy per run of
 * neighbours), so that a rewrite of thousands of secrets neither joins nor encodes their text
 * again. `fresh` receives the entries emitted now, which the caller verifies. Other shapes:
 * undefined (use emitSopsYaml).
 */
export function emitSopsImage(
  data: SMap,
  sops: SMap,
  cache: FragmentCache,
  fresh: [string, SNode, string][],
): Buffer | undefined {
  if (data.entries.length !== 1 || data.entries[0]![0] !== 'secrets') return undefined;
  const secrets = data.entries[0]![1];
  if (secrets.kind !== 'map' || secrets.entries.length === 0) return undefined;
  const parts: Fragment[] = [];
  let total = SECRETS_HEAD.length;
  for (const [name, node] of secrets.entries) {
    let hit = cache.get(node);
    if (hit === undefined || hit.name !== name) {
      const text = emitSecretEntry(name, node);
      hit = { name, text, size: Buffer.byteLength(text, 'utf8') };
      cache.set(node, hit);
      fresh.push([name, node, text]);
    }
    parts.push(hit);
    total += hit.size;
  }
  const sopsText = emitPair('sops', sops, 'sops', 0) ?? emitPairs([['sops', sops, 'sops']]);
  fresh.push(['sops', sops, sopsText]);
  total += Buffer.byteLength(sopsText, 'utf8');
  // Zeroed, so that a size miscounted below could never write stale process memory to the file.
  const out = Buffer.alloc(total);
  let at = SECRETS_HEAD.copy(out, 0);
  const starts: number[] = [];
  let run: { image: Uint8Array; from: number; to: number; at: number } | undefined;
  const copyRun = () => {
    if (run === undefined) return;
    if (run.to > run.image.length) throw new Error('a secret entry lies outside the image it was read from');
    out.set(run.image.subarray(run.from, run.to), run.at);
    run = undefined;
  };
  for (const hit of parts) {
    starts.push(at);
    if (hit.image !== undefined && hit.start !== undefined) {
      if (run?.image === hit.image && run.to === hit.start) run.to += hit.size;
      else {
        copyRun();
        run = { image: hit.image, from: hit.start, to: hit.start + hit.size, at };
      }
    } else {
      copyRun();
      if (out.write(hit.text, at, 'utf8') !== hit.size) throw new Error('a secret entry did not encode to its size');
    }
    at += hit.size;
  }
  copyRun();
  at += out.write(sopsText, at, 'utf8');
  if (at !== total) throw new Error('the file image is not the size of its parts');
  // Complete: each fragment's bytes are now also here, where the next rewrite copies them from.
  parts.forEach((hit, i) => {
    hit.image = out;
    hit.start = starts[i]!;
  });
  return out;
}

/** Structural equality of two trees (for verifying emitted text against what was meant). */
export function sameTree(a: SNode, b: SNode): boolean {
  if (a.kind !== b.kind) return false;
  if (a.kind === 'scalar') return a.value === (b as SScalar).value;
  if (a.kind === 'seq') {
    const bi = (b as SSeq).items;
    return a.items.length === bi.length && a.items.every((x, i) => sameTree(x, bi[i]!));
  }
  const be = (b as SMap).entries;
  return a.entries.length === be.length && a.entries.every(([k, v], i) => be[i]![0] === k && sameTree(v, be[i]![1]));
}

// ---------------------------------------------------------------------------------------------
// SOPS metadata

export interface CryptRules {
  unencryptedSuffix: string;
  encryptedSuffix: string;
  unencryptedRegex: string;
  encryptedRegex: string;
  macOnlyEncrypted: boolean;
}

export interface AgeStanza {
  recipient: string;
  enc: string;
}

export interface SopsMetadata {
  age: AgeStanza[];
  lastModified: string;
  mac: string;
  version: string;
  rules: CryptRules;
  /** The `sops` mapping as found, unknown keys included, so a rewrite keeps them. */
  raw: SMap;
}

export const DEFAULT_UNENCRYPTED_SUFFIX = '_unencrypted';
/** The SOPS file-format version we write (the layout of SOPS 3.10+, empty key lists omitted). */
export const SOPS_FORMAT_VERSION = '3.10.2';

function str(m: SMap, key: string, required: boolean): string {
  const v = getEntry(m, key);
  if (v === undefined || (v.kind === 'scalar' && v.value === null)) {
    if (required) throw new SopsFormatError('metadata', `sops metadata lacks '${key}'`);
    return '';
  }
  if (v.kind !== 'scalar' || typeof v.value !== 'string') {
    if (v.kind === 'scalar' && typeof v.value === 'number' && key === 'version') return String(v.value);
    throw new SopsFormatError('metadata', `sops metadata '${key}' must be a string`);
  }
  return v.value;
}

export function readMetadata(sops: SNode | undefined): SopsMetadata {
  if (sops === undefined) throw new SopsFormatError('metadata', "no 'sops' metadata: not a SOPS-encrypted file");
  if (sops.kind !== 'map') throw new SopsFormatError('metadata', "'sops' metadata must be a mapping");
  for (const unsupported of [
    'key_groups',
    'shamir_threshold',
    'unencrypted_comment_regex',
    'encrypted_comment_regex',
  ]) {
    const v = getEntry(sops, unsupported);
    if (v !== undefined && !(v.kind === 'scalar' && (v.value === null || v.value === 0 || v.value === ''))) {
      throw new SopsFormatError(
        'unsupported',
        `sops metadata '${unsupported}' is not supported by kms-sync's SOPS store`,
      );
    }
  }
  const ageNode = getEntry(sops, 'age');
  const age: AgeStanza[] = [];
  if (ageNode !== undefined && !(ageNode.kind === 'scalar' && ageNode.value === null)) {
    if (ageNode.kind !== 'seq') throw new SopsFormatError('metadata', "sops metadata 'age' must be a list");
    for (const item of ageNode.items) {
      if (item.kind !== 'map') throw new SopsFormatError('metadata', "sops metadata 'age' entries must be mappings");
      age.push({ recipient: str(item, 'recipient', true).trim(), enc: str(item, 'enc', true) });
    }
  }
  const macOnly = getEntry(sops, 'mac_only_encrypted');
  const rules: CryptRules = {
    unencryptedSuffix: str(sops, 'unencrypted_suffix', false),
    encryptedSuffix: str(sops, 'encrypted_suffix', false),
    unencryptedRegex: str(sops, 'unencrypted_regex', false),
    encryptedRegex: str(sops, 'encrypted_regex', false),
    macOnlyEncrypted: macOnly?.kind === 'scalar' && macOnly.value === true,
  };
  const ruleCount = [
    rules.unencryptedSuffix,
    rules.encryptedSuffix,
    rules.unencryptedRegex,
    rules.encryptedRegex,
  ].filter((r) => r !== '').length;
  if (ruleCount > 1) {
    throw new SopsFormatError(
      'metadata',
      'cannot use more than one of encrypted_suffix, unencrypted_suffix, encrypted_regex or unencrypted_regex',
    );
  }
  if (ruleCount === 0) rules.unencryptedSuffix = DEFAULT_UNENCRYPTED_SUFFIX;
  const lastModified = str(sops, 'lastmodified', true);
  macAdditionalData(lastModified); // validates
  return { age, lastModified, mac: str(sops, 'mac', false), version: str(sops, 'version', true), rules, raw: sops };
}

/**
 * SOPS authenticates the MAC with `lastmodified` re-formatted by Go's time.RFC3339 layout:
 * fractional seconds dropped, a zero offset written as `Z`.
 */
export function macAdditionalData(lastModified: string): string {
  const m = /^(\d{4}-\d\d-\d\d)[Tt](\d\d:\d\d:\d\d)(?:\.\d+)?([Zz]|[+-]\d\d:\d\d)$/.exec(lastModified);
  if (!m) throw new SopsFormatError('metadata', "sops metadata 'lastmodified' is not an RFC 3339 timestamp");
  const zone = m[3] as string;
  const z = zone === 'Z' || zone === 'z' || zone === '+00:00' || zone === '-00:00' ? 'Z' : zone;
  return `${m[1]}T${m[2]}${z}`;
}

export function nowRfc3339(): string {
  return new Date().toISOString().replace(/\.\d{3}Z$/, 'Z');
}

function compileRule(src: string, name: string): RegExp {
  try {
    return new RegExp(src);
  } catch {
    throw new SopsFormatError('metadata', `sops metadata '${name}' is not a valid regular expression`);
  }
}

/** SOPS's shouldBeEncrypted for a leaf at `path` (map keys only). */
export function makeShouldEncrypt(rules: CryptRules): (path: string[]) => boolean {
  const unencRe = rules.unencryptedRegex ? compileRule(rules.unencryptedRegex, 'unencrypted_regex') : undefined;
  const encRe = rules.encryptedRegex ? compileRule(rules.encryptedRegex, 'encrypted_regex') : undefined;
  return (path) => {
    let encrypted = true;
    if (rules.unencryptedSuffix && path.some((p) => p.endsWith(rules.unencryptedSuffix))) encrypted = false;
    if (rules.encryptedSuffix) encrypted = path.some((p) => p.endsWith(rules.encryptedSuffix));
    if (unencRe && path.some((p) => unencRe.test(p))) encrypted = false;
    if (encRe) encrypted = path.some((p) => encRe.test(p));
    return encrypted;
  };
}

export const additionalData = (path: string[]): string => `${path.join(':')}:`;

/** Visits every non-null leaf in document order with its path (list indices are not path components). */
export function walkLeaves(n: SNode, path: string[], fn: (leaf: SScalar, path: string[]) => void): void {
  if (n.kind === 'map') for (const [k, v] of n.entries) walkLeaves(v, [...path, k], fn);
  else if (n.kind === 'seq') for (const item of n.items) walkLeaves(item, path, fn);
  else if (n.value !== null) fn(n, path);
}

const endsInHighSurrogate = (s: string) => {
  const c = s.charCodeAt(s.length - 1);
  return c >= 0xd800 && c <= 0xdbff;
};

/** MACOnlyEncryptedInitialization: sha256("sops"). */
const MAC_ONLY_ENCRYPTED_INIT = createHash('sha256').update('sops').digest();

export interface DecryptedTree {
  /** Upper-case hex SHA-512 as SOPS computes it. */
  mac: string;
  /** The plaintext of the encrypted leaf at `path`, if there is one. */
  plainAt(path: string[]): SopsPlain | undefined;
  /** The same, for a leaf of the entry `node` (a secret of this tree) at `path`. */
  plainIn(node: SNode, path: string[]): SopsPlain | undefined;
  /** Per entry of a top-level mapping (a secret), by its node: what it adds to the MAC and its plaintexts. */
  entries: WeakMap<SNode, EntryDecryption>;
  /** Leaves of top-level values that are not mappings: plaintext and ciphertext, by path key. */
  loose: Map<string, [SopsPlain, string]>;
}

interface EntryDecryption {
  /** Where the entry was when this was computed (AAD and rules depend on it): parent key, own key. */
  parent: string;
  name: string;
  /** The entry's leaves' bytes, in order, as the MAC takes them. */
  bytes: Buffer;
  leaves: [string, SopsPlain, string][];
}

export const pathKey = (path: string[]): string => path.join('\u0000');

/**
 * Decrypts every encrypted leaf (authenticating it) and computes the MAC over the whole tree. With
 * `known` (an earlier result under the same data key), an entry (secret) whose node is the one
 * decrypted then at the same path is neither walked nor decrypted again, and a loose leaf whose
 * ciphertext is the one decrypted then is not decrypted again: a rewrite of a store of thousands
 * of secrets decrypts only the values that changed, and its other work per secret is one lookup
 * and its share of one SHA-512 pass (the MAC covers every value, so it is computed whole).
 */
export function decryptTree(data: SMap, rules: CryptRules, dataKey: Uint8Array, known?: DecryptedTree): DecryptedTree {
  const shouldEncrypt = makeShouldEncrypt(rules);
  const macParts: Uint8Array[] = [];
  if (rules.macOnlyEncrypted) macParts.push(MAC_ONLY_ENCRYPTED_INIT);
  const loose = new Map<string, [SopsPlain, string]>();
  // Entries are immutable (a write replaces an entry's node) and checked against their place, so
  // the map of what was decrypted carries over from `known` (same data key) instead of being rebuilt.
  const entries = known?.entries ?? new WeakMap<SNode, EntryDecryption>();
  const order: EntryDecryption[] = [];
  const decryptLeaves = (node: SNode, base: string[], reuse: boolean): EntryDecryption => {
    // The entry's MAC bytes as one text, encoded once, instead of a buffer per leaf (an entry has
    // 7-8 leaves; a load of 3,000 entries made ~24,000 buffers). Parts go as buffers from the first
    // that is not text (a bytes value) or whose join could change the bytes: a text ending in a high
    // surrogate would pair with a low one starting the next (one leaf alone encodes it as U+FFFD).
    let text = '';
    let bytes: Uint8Array[] | undefined;
    const leaves: [string, SopsPlain, string][] = [];
    walkLeaves(node, base, (leaf, path) => {
      const encrypted = shouldEncrypt(path);
      let v: SopsPlain | string | number | boolean;
      if (encrypted) {
        if (typeof leaf.value !== 'string') {
          throw new SopsFormatError('integrity', `value at '${path.join('/')}' should be encrypted but is not`);
        }
        const pk = pathKey(path);
        const before = reuse ? known?.loose.get(pk) : undefined;
        if (before !== undefined && before[1] === leaf.value) v = before[0];
        else {
          try {
            v = decryptSopsValue(leaf.value, dataKey, additionalData(path));
          } catch (err) {
            const why = err instanceof SopsCipherError ? err.reason : 'error';
            throw new SopsFormatError(
              why === 'auth' ? 'integrity' : 'decrypt',
              why === 'auth'
                ? `value at '${path.join('/')}' failed authentication`
                : `value at '${path.join('/')}' cannot be decrypted (${why})`,
            );
          }
        }
        leaves.push([pk, v, leaf.value]);
      } else {
        v = leaf.value as string | number | boolean;
      }
      if (!rules.macOnlyEncrypted || encrypted) {
        const t = bytes === undefined ? macText(v) : undefined;
        if (t !== undefined && !endsInHighSurrogate(text)) text += t;
        else {
          bytes ??= [Buffer.from(text, 'utf8')];
          bytes.push(macBytes(v));
        }
      }
    });
    const all = bytes === undefined ? Buffer.from(text, 'utf8') : Buffer.concat(bytes);
    return { parent: base[0]!, name: base[base.length - 1]!, bytes: all, leaves };
  };
  for (const [k, v] of data.entries) {
    if (v.kind !== 'map') {
      const e = decryptLeaves(v, [k], true);
      macParts.push(e.bytes);
      for (const [pk, p, ct] of e.leaves) loose.set(pk, [p, ct]);
      continue;
    }
    for (const [k2, v2] of v.entries) {
      let e = entries.get(v2);
      if (e === undefined || e.parent !== k || e.name !== k2) {
        e = decryptLeaves(v2, [k, k2], false);
        entries.set(v2, e);
      }
      order.push(e);
      macParts.push(e.bytes);
    }
  }
  const mac = createHash('sha512').update(Buffer.concat(macParts)).digest('hex').toUpperCase();
  // The entries by place: a write looks up only the few values it wrote (scans, from the end,
  // where new entries usually are); many lookups (readAll) build the map.
  let byPlace: Map<string, EntryDecryption> | undefined;
  let lookups = 0;
  const entryAt = (parent: string, name: string): EntryDecryption | undefined => {
    if (byPlace === undefined && ++lookups <= SCANS_BEFORE_INDEX) {
      for (let i = order.length - 1; i >= 0; i--)
        if (order[i]!.name === name && order[i]!.parent === parent) return order[i];
      return undefined;
    }
    byPlace ??= new Map(order.map((e) => [`${e.parent}\u0000${e.name}`, e]));
    return byPlace.get(`${parent}\u0000${name}`);
  };
  const plainAt = (path: string[]): SopsPlain | undefined => {
    const pk = pathKey(path);
    if (path.length >= 2) {
      const e = entryAt(path[0]!, path[1]!);
      if (e) return e.leaves.find(([p]) => p === pk)?.[1];
    }
    return loose.get(pk)?.[0];
  };
  const plainIn = (node: SNode, path: string[]): SopsPlain | undefined => {
    const e = entries.get(node);
    if (e === undefined || e.parent !== path[0] || e.name !== path[1]) return plainAt(path);
    const pk = pathKey(path);
    return e.leaves.find(([p]) => p === pk)?.[1];
  };
  return { mac, plainAt, plainIn, entries, loose };
}

/**
 * The data tree with every encrypted leaf re-encrypted under `to` (a re-key: same plaintexts, same
 * types, same paths, so the same MAC); the plaintext leaves are shared. Throws SopsFormatError when a
 * leaf does not authenticate under `from`.
 */
export function reencryptTree(data: SMap, rules: CryptRules, from: Uint8Array, to: Uint8Array): SMap {
  const shouldEncrypt = makeShouldEncrypt(rules);
  const rec = (node: SNode, path: string[]): SNode => {
    if (node.kind === 'map') return map(node.entries.map(([k, v]) => [k, rec(v, [...path, k])]));
    if (node.kind === 'seq') return { kind: 'seq', items: node.items.map((i) => rec(i, path)) };
    if (node.value === null || !shouldEncrypt(path)) return node;
    if (typeof node.value !== 'string')
      throw new SopsFormatError('integrity', `value at '${path.join('/')}' should be encrypted but is not`);
    try {
      return scalar(reencryptSopsValue(node.value, from, to, additionalData(path)));
    } catch (err) {
      throw new SopsFormatError(
        'integrity',
        `value at '${path.join('/')}' cannot be re-encrypted (${err instanceof SopsCipherError ? err.reason : 'error'})`,
      );
    }
  };
  return map(data.entries.map(([k, v]) => [k, rec(v, [k])]));
}

/** Encrypts the leaves of a (new) subtree at `basePath` that the rules say must be encrypted. */
export function encryptSubtree(n: SNode, basePath: string[], rules: CryptRules, dataKey: Uint8Array): SNode {
  const shouldEncrypt = makeShouldEncrypt(rules);
  const rec = (node: SNode, path: string[]): SNode => {
    if (node.kind === 'map') return map(node.entries.map(([k, v]) => [k, rec(v, [...path, k])]));
    if (node.kind === 'seq') return { kind: 'seq', items: node.items.map((i) => rec(i, path)) };
    const v = node.value;
    if (v === null || !shouldEncrypt(path)) return scalar(v);
    const aad = additionalData(path);
    if (typeof v === 'string') return scalar(encryptSopsString(v, dataKey, aad));
    if (typeof v === 'boolean') return scalar(encryptBytes(Buffer.from(v ? 'True' : 'False'), 'bool', dataKey, aad));
    return scalar(encryptBytes(macBytes(v), Number.isInteger(v) ? 'int' : 'float', dataKey, aad));
  };
  return rec(n, basePath);
}

export function encryptMac(mac: string, dataKey: Uint8Array, lastModified: string): string {
  return encryptSopsString(mac, dataKey, macAdditionalData(lastModified));
}

/** Checks the stored MAC against the computed one; throws SopsFormatError('integrity') on mismatch. */
export function verifyMac(meta: SopsMetadata, computed: string, dataKey: Uint8Array): void {
  if (meta.mac === '') throw new SopsFormatError('integrity', 'the file has no MAC');
  let stored: string;
  try {
    const p = decryptSopsValue(meta.mac, dataKey, macAdditionalData(meta.lastModified));
    if (p.type !== 'str') throw new SopsCipherError('type', 'mac is not a string');
    stored = p.value;
  } catch {
    throw new SopsFormatError('integrity', 'the MAC failed authentication');
  }
  const a = Buffer.from(stored, 'utf8');
  const b = Buffer.from(computed, 'utf8');
  if (a.length !== b.length || !timingSafeEqual(a, b)) throw new SopsFormatError('integrity', 'MAC mismatch');
}

/** Splits a parsed file into its data tree and metadata. */
export function splitSopsFile(root: SMap): { data: SMap; meta: SopsMetadata } {
  const data = map(root.entries.filter(([k]) => k !== 'sops'));
  return { data, meta: readMetadata(getEntry(root, 'sops')) };
}

/** Builds the `sops` mapping for a write, keeping unknown keys of an existing one in place. */
export function buildSopsMapping(opts: {
  previous: SMap | undefined;
  age: AgeStanza[];
  lastModified: string;
  mac: string;
  rules: CryptRules;
}): SMap {
  const ageNode: SSeq = {
    kind: 'seq',
    items: opts.age.map((a) =>
      map([
        ['recipient', scalar(a.recipient)],
        ['enc', scalar(a.enc)],
      ]),
    ),
  };
  if (opts.previous) {
    const m = cloneNode(opts.previous);
    setEntry(m, 'age', ageNode);
    setEntry(m, 'lastmodified', scalar(opts.lastModified));
    setEntry(m, 'mac', scalar(opts.mac));
    setEntry(m, 'version', scalar(SOPS_FORMAT_VERSION));
    return m;
  }
  const m = map([
    ['age', ageNode],
    ['lastmodified', scalar(opts.lastModified)],
    ['mac', scalar(opts.mac)],
  ]);
  const r = opts.rules;
  if (r.unencryptedSuffix) m.entries.push(['unencrypted_suffix', scalar(r.unencryptedSuffix)]);
  if (r.encryptedSuffix) m.entries.push(['encrypted_suffix', scalar(r.encryptedSuffix)]);
  if (r.unencryptedRegex) m.entries.push(['unencrypted_regex', scalar(r.unencryptedRegex)]);
  if (r.encryptedRegex) m.entries.push(['encrypted_regex', scalar(r.encryptedRegex)]);
  if (r.macOnlyEncrypted) m.entries.push(['mac_only_encrypted', scalar(true)]);
  m.entries.push(['version', scalar(SOPS_FORMAT_VERSION)]);
  return m;
}
