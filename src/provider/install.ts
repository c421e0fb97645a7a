// `kms-sync provider install`: puts the provider where Terraform and OpenTofu find it without a
// registry, a filesystem mirror (by default the implied local mirror ~/.terraform.d/plugins), and
// adds a provider_installation block to the CLI configuration between marker comments, so a second
// run replaces only its own lines and never touches the user's other blocks. First everything is
// planned (and a conflict refused), then written: --print shows the plan and writes nothing.
import { createHash } from 'node:crypto';
import { existsSync, lstatSync, readdirSync, readFileSync, realpathSync, rmdirSync, rmSync, statSync } from 'node:fs';
import path from 'node:path';
import { makeFolders, unsafeAncestorsReason, unsafeTreeReason, writeFileSafely } from '../model/safe-files.js';
import {
  executableName,
  RELEASE_TEXTS,
  MIRROR_HOSTS,
  mirrorSources,
  parseReleaseZipName,
  providerAddress,
  releaseZipName,
  sumsName,
  terraformPlatform,
  zipEntries,
} from './release.js';
import { parseTrustedKeys, verifyReleaseSignature } from './release-signature.js';

const BEGIN_PREFIX = '# >>> kms-sync provider install >>>';
export const BEGIN_MARKER = `${BEGIN_PREFIX} (written by \`kms-sync provider install\`, which replaces the lines up to the end marker)`;
export const END_MARKER = '# <<< kms-sync provider install <<<';
/** The Node.js version the provider needs (package.json engines). */
export const NODE_MINIMUM = '22.19';

export interface InstallOptions {
  /** This kms-sync's version: the provider version a launcher serves. */
  version: string;
  env: NodeJS.ProcessEnv;
  home: string;
  /** Node platform and arch (process.platform, process.arch). */
  platform: string;
  arch: string;
  /** Mirror folder (or, with dev, the folder of the dev_overrides executable). */
  dir?: string;
  /** A release folder or one release zip: install the packaged executable from it. */
  from?: string;
  /** --from without SHA256SUMS beside the zip (the user said so: --insecure-skip-checksum). */
  skipChecksum?: boolean;
  /** Trusted release keys: the files given with --trusted-key (`asked`: a signature is then required), else the package's release-signing-keys file. */
  trustedKeys?: { file: string; text: string; asked: boolean }[];
  cliConfig: boolean;
  dev: boolean;
  /** The Node.js executable and the provider script a launcher runs. */
  node: string;
  providerScript: string;
}

export interface FileWrite {
  file: string;
  data: Buffer;
  mode: number;
  what: string;
}

export interface ConfigEdit {
  file: string;
  /** Undefined when the file does not exist yet. */
  before: string | undefined;
  after: string;
  /** The block between the markers (what --print shows). */
  block: string;
}

export interface InstallPlan {
  version: string;
  platform: string;
  /** 'packaged': the release zip's executable; 'launcher': a script that runs this installation with its Node.js. */
  kind: 'packaged' | 'launcher' | 'dev';
  dir: string;
  writes: FileWrite[];
  /** Files already in place with the same content. */
  unchanged: string[];
  removals: string[];
  configs: ConfigEdit[];
  /** CLI configuration files already up to date. */
  configsUnchanged: string[];
  notes: string[];
}

export class InstallError extends Error {
  readonly exitCode = 1;
  readonly detail: string;
  constructor(message: string, detail = '') {
    super(message);
    this.detail = detail;
  }
}

/** Where Terraform reads its CLI configuration, and the other files OpenTofu reads in its place. */
export function cliConfigFiles(env: NodeJS.ProcessEnv, home: string, platform: string): string[] {
  if (env.TF_CLI_CONFIG_FILE) return [path.resolve(env.TF_CLI_CONFIG_FILE)];
  if (platform === 'win32') {
    const appData = env.APPDATA ?? path.join(home, 'AppData', 'Roaming');
    return [path.join(appData, 'terraform.rc'), ...[path.join(appData, 'tofu.rc')].filter(existsSync)];
  }
  const xdg = path.join(env.XDG_CONFIG_HOME || path.join(home, '.config'), 'opentofu', 'tofurc');
  // OpenTofu prefers .tofurc (or the XDG file) over .terraformrc when it exists: edit it too.
  return [path.join(home, '.terraformrc'), ...[path.join(home, '.tofurc'), xdg].filter(existsSync)];
}

/** Terraform's implied local mirror, which it searches even without a CLI configuration. */
export function impliedMirror(env: NodeJS.ProcessEnv, home: string, platform: string): string {
  if (platform === 'win32')
    return path.join(env.APPDATA ?? path.join(home, 'AppData', 'Roaming'), 'terraform.d', 'plugins');
  return path.join(home, '.terraform.d', 'plugins');
}

/** An HCL string literal: JSON's escapes, plus template sequences doubled. */
export const hclString = (s: string) => JSON.stringify(s).replace(/\$\{/g, '$${').replace(/%\{/g, '%%{');

/**
 * The block for a mirror. With a provider_installation block, Terraform no longer does what it does
 * without one: take each provider found in its implied mirror from there and never from its
 * registry. So direct excludes kms-sync's provider and every other provider in the mirror now
 * (`others`), which keeps an offline mirror of other providers working; the mirror has no include.
 */
export function installBlock(mirror: string, others: string[] = []): string {
  const excluded = [...mirrorSources(), ...others.filter((o) => !mirrorSources().includes(o))];
  return [
    'provider_installation {',
    '  filesystem_mirror {',
    `    path = ${hclString(mirror)}`,
    '  }',
    '  direct {',
    `    exclude = [${excluded.map(hclString).join(', ')}]`,
    '  }',
    '}',
  ].join('\n');
}

/** The providers a filesystem mirror holds (host/namespace/type folders with something inside). */
export function mirroredProviders(mirror: string): string[] {
  const dirs = (p: string) => {
    try {
      return readdirSync(p, { withFileTypes: true })
        .filter((e) => e.isDirectory())
        .map((e) => e.name);
    } catch {
      return [];
    }
  };
  const found: string[] = [];
  for (const host of dirs(mirror).filter((h) => h.includes('.'))) {
    for (const ns of dirs(path.join(mirror, host))) {
      for (const type of dirs(path.join(mirror, host, ns))) {
        if (readdirSync(path.join(mirror, host, ns, type)).length > 0) found.push(`${host}/${ns}/${type}`);
      }
    }
  }
  return found.sort();
}

export function devBlock(dir: string): string {
  const width = Math.max(...mirrorSources().map((s) => s.length)) + 2;
  return [
    'provider_installation {',
    '  dev_overrides {',
    ...mirrorSources().map((s) => `    ${hclString(s).padEnd(width)} = ${hclString(dir)}`),
    '  }',
    '  direct {}',
    '}',
  ].join('\n');
}

const isMarker = (line: string, marker: string) =>
  line.trim().startsWith(marker === BEGIN_MARKER ? BEGIN_PREFIX : marker);

/**
 * `text` (a CLI configuration, or undefined for none) with `block` between the markers: replacing
 * the lines between them, else appended. Refuses when a provider_installation block of the user's
 * already exists outside the markers: Terraform takes one, and merging HCL by hand is the user's call.
 */
export function withBlock(file: string, text: string | undefined, block: string): string {
  const marked = `${BEGIN_MARKER}\n${block}\n${END_MARKER}\n`;
  if (text === undefined || text.trim() === '') return marked;
  const lines = text.split('\n');
  const begin = lines.findIndex((l) => isMarker(l, BEGIN_MARKER));
  const end = lines.findIndex((l, i) => i > begin && isMarker(l, END_MARKER));
  const strayEnd = begin < 0 ? lines.findIndex((l) => isMarker(l, END_MARKER)) : -1;
  if ((begin >= 0 && end < 0) || strayEnd >= 0) {
    const line = (begin >= 0 ? begin : strayEnd) + 1;
    throw new InstallError(
      `${file} line ${line}: a kms-sync marker without its partner (${begin >= 0 ? 'no end marker after it' : 'no begin marker before it'}); remove the kms-sync lines by hand and run again`,
    );
  }
  const outside = lines.map((l, i) => (begin >= 0 && i >= begin && i <= end ? '' : l));
  let depth = 0;
  for (const [i, raw] of outside.entries()) {
    const l = raw.replace(/(^|\s)(#|\/\/).*$/, '');
    if (depth === 0 && /^\s*provider_installation\s*(\{|$)/.test(l)) {
      throw new InstallError(
        `${file} line ${i + 1} already has a provider_installation block, which kms-sync does not edit (Terraform reads only one way to install providers).`,
        `Add this to that block yourself (or run with --no-cli-config to install only the provider files):\n\n${block.split('\n').slice(1, -1).join('\n')}\n\nIf the block has a direct {} method, add the exclude line to it rather than a second direct block.\n`,
      );
    }
    depth += (l.match(/\{/g) ?? []).length - (l.match(/\}/g) ?? []).length;
  }
  if (begin >= 0)
    return [...lines.slice(0, begin), ...marked.trimEnd().split('\n'), ...lines.slice(end + 1)].join('\n');
  return `${text.replace(/\n*$/, '\n')}\n${marked}`;
}

function readIfExists(file: string): Buffer | undefined {
  try {
    return readFileSync(file);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw e;
  }
}

const sha256 = (data: Buffer) => createHash('sha256').update(data).digest('hex');

/** The suffix of a release checksum file's detached SSH signature (ssh-keygen -Y sign, renamed: `.sig` is GPG's, for the Terraform registry). */
export const SIGNATURE_SUFFIX = '.sshsig';

/** The SHA-256 a checksum file gives for `name` (`<hex>  <name>` lines, as sha256sum writes them), or undefined. */
export function checksumFor(sums: string, name: string): string | undefined {
  for (const line of sums.split('\n')) {
    const m = /^([0-9a-fA-F]{64}) [ *](.+?)\r?$/.exec(line);
    if (m && m[2] === name) return m[1]!.toLowerCase();
  }
  return undefined;
}

/**
 * The release zip to install from `from` (a release folder or a zip): listed in the SHA256SUMS
 * beside it (required unless skipChecksum), that file's signature checked when one is published
 * or a trusted key is given, and its one entry a regular executable file no one else may write.
 */
function releaseZip(
  o: InstallOptions,
  platform: string,
): { file: string; version: string; data: Buffer; notes: string[] } {
  const from = o.from!;
  let file = path.resolve(from);
  if (!existsSync(file)) throw new InstallError(`--from ${from}: no such file or folder`);
  if (statSync(file).isDirectory()) {
    const zips = readdirSync(file)
      .map((n) => ({ n, p: parseReleaseZipName(n) }))
      .filter((z) => z.p?.platform === platform);
    const pick = zips.find((z) => z.p!.version === o.version) ?? (zips.length === 1 ? zips[0] : undefined);
    if (!pick) {
      throw new InstallError(
        zips.length === 0
          ? `--from ${from}: no ${releaseZipName('<version>', platform)} in this folder (build one with npm run package:provider, or pick this platform's zip of a release)`
          : `--from ${from}: several versions for ${platform} (${zips.map((z) => z.p!.version).join(', ')}) and none is ${o.version}: pass the zip itself`,
      );
    }
    file = path.join(file, pick.n);
  }
  const parsed = parseReleaseZipName(path.basename(file));
  if (!parsed)
    throw new InstallError(
      `--from ${from}: not a provider release zip (expected a name like ${releaseZipName(o.version, platform)})`,
    );
  if (parsed.platform !== platform)
    throw new InstallError(`--from ${from}: built for ${parsed.platform}, this machine is ${platform}`);
  const data = readFileSync(file);
  const notes: string[] = [];
  const sumsFile = path.join(path.dirname(file), sumsName(parsed.version));
  const sums = readIfExists(sumsFile);
  if (!sums) {
    if (!o.skipChecksum) {
      throw new InstallError(
        `--from ${file}: no ${sumsName(parsed.version)} beside it, so nothing shows the zip is the one released: download it with the zip (or pass --insecure-skip-checksum to install it unchecked)`,
      );
    }
    notes.push(
      `Installed without checking a checksum (--insecure-skip-checksum): nothing showed that ${path.basename(file)} is the zip that was released.`,
    );
  } else {
    const want = checksumFor(sums.toString('utf8'), path.basename(file));
    if (!want) throw new InstallError(`--from ${file}: ${sumsName(parsed.version)} beside it has no line for this zip`);
    if (want !== sha256(data))
      throw new InstallError(
        `--from ${file}: its SHA-256 does not match ${sumsName(parsed.version)} (a damaged or altered download)`,
      );
    notes.push(...checkSignature(o, sumsFile, sums));
  }
  let entries: ReturnType<typeof zipEntries>;
  try {
    entries = zipEntries(data);
  } catch (e) {
    throw new InstallError(`--from ${file}: ${(e as Error).message}`);
  }
  const exe = executableName(parsed.version, platform);
  // The executable, and beside it only the texts a release zip carries (scripts/package-provider.js):
  // Terraform unpacks every entry into the provider's folder.
  const texts = entries.filter((e) => e.name !== exe);
  if (entries.length - texts.length !== 1 || texts.some((e) => !RELEASE_TEXTS.includes(e.name))) {
    throw new InstallError(
      `--from ${file}: expected ${exe} in the zip, with at most ${RELEASE_TEXTS.join(' and ')} beside it; found ${entries.map((e) => e.name).join(', ') || 'none'}`,
    );
  }
  for (const text of texts)
    if (text.type !== 'file' || text.mode & ~0o644)
      throw new InstallError(
        `--from ${file}: ${text.name} in the zip is not a regular file of mode 0644 or narrower (${text.type === 'file' ? `mode 0${text.mode.toString(8)}` : text.type})`,
      );
  const entry = entries.find((e) => e.name === exe)!;
  // Terraform unpacks the zip as it is: a link would point the provider anywhere, and a mode wider
  // than 0755 (writable by others, setuid) would be unpacked with it.
  if (entry.type !== 'file')
    throw new InstallError(
      `--from ${file}: ${exe} in the zip is ${entry.type === 'no-unix-mode' ? 'without a Unix mode (not made on Unix)' : `a ${entry.type === 'symlink' ? 'symbolic link' : entry.type}`}, not a regular file`,
    );
  if (entry.mode & ~0o755)
    throw new InstallError(
      `--from ${file}: ${exe} in the zip has mode 0${entry.mode.toString(8)}, wider than 0755 (writable by others, or setuid/setgid/sticky)`,
    );
  if (!platform.startsWith('windows_') && (entry.mode & 0o111) === 0)
    throw new InstallError(`--from ${file}: ${exe} in the zip is not executable`);
  return { file, version: parsed.version, data, notes };
}

/** The detached signature of the checksum file: checked when published or when a trusted key is given. */
function checkSignature(o: InstallOptions, sumsFile: string, sums: Buffer): string[] {
  const sigFile = `${sumsFile}${SIGNATURE_SUFFIX}`;
  const sig = readIfExists(sigFile);
  const given = o.trustedKeys ?? [];
  const keys = given.flatMap((k) => {
    try {
      return parseTrustedKeys(k.text, k.file);
    } catch (e) {
      throw new InstallError((e as Error).message);
    }
  });
  if (!sig) {
    if (given.some((k) => k.asked))
      throw new InstallError(
        `--from: ${path.basename(sumsFile)} is not signed (no ${path.basename(sigFile)} beside it), and --trusted-key asks for a signature`,
      );
    return [
      `${path.basename(sumsFile)} is not signed (no ${path.basename(sigFile)}): the zip matches its checksum file, which came from the same place.`,
    ];
  }
  if (keys.length === 0) {
    throw new InstallError(
      `--from: ${path.basename(sigFile)} is published, but there is no trusted release key to check it with: pass --trusted-key FILE (the release's ssh-ed25519 public key; docs/terraform-provider.md, "Signed releases")`,
    );
  }
  try {
    const by = verifyReleaseSignature(sums, sig.toString('utf8'), keys);
    return [`${path.basename(sumsFile)} is signed by a trusted release key${by ? ` (${by})` : ''}.`];
  } catch (e) {
    throw new InstallError(`--from: ${sigFile}: ${(e as Error).message}; nothing installed`);
  }
}

function launcherScript(node: string, script: string): Buffer {
  const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
  return Buffer.from(
    `#!/bin/sh\n# Written by kms-sync provider install: runs the provider of this kms-sync installation with its Node.js.\nexec ${q(node)} ${q(script)} "$@"\n`,
  );
}

/** Works out everything an install would write; writes nothing. Throws InstallError when it cannot. */
export function planInstall(o: InstallOptions): InstallPlan {
  const platform = terraformPlatform(o.platform, o.arch);
  if (!platform) throw new InstallError(`no Terraform platform for ${o.platform}/${o.arch}`);
  const { namespace, type } = providerAddress();
  const plan: InstallPlan = {
    version: o.version,
    platform,
    kind: 'launcher',
    dir: '',
    writes: [],
    unchanged: [],
    removals: [],
    configs: [],
    configsUnchanged: [],
    notes: [],
  };
  const want = (file: string, data: Buffer, mode: number, what: string) => {
    const have = readIfExists(file);
    if (have?.equals(data) && (o.platform === 'win32' || (statSync(file).mode & 0o777) === mode))
      plan.unchanged.push(file);
    else plan.writes.push({ file, data, mode, what });
  };
  const noLauncher = () =>
    new InstallError(
      `there is no packaged provider for ${platform} here, and on Windows Terraform cannot run a launcher script: pass --from with a release folder or this platform's release zip (${releaseZipName(o.version, platform)})`,
    );

  let block: string;
  if (o.dev) {
    if (o.from)
      throw new InstallError(
        "--dev and --from do not go together: --dev runs this installation's provider code, --from installs a packaged release",
      );
    if (o.platform === 'win32') throw noLauncher();
    plan.kind = 'dev';
    plan.dir = path.resolve(o.dir ?? path.join(path.dirname(impliedMirror(o.env, o.home, o.platform)), 'kms-sync-dev'));
    want(
      path.join(plan.dir, `terraform-provider-${type}`),
      launcherScript(o.node, o.providerScript),
      0o755,
      'launcher (dev_overrides)',
    );
    block = devBlock(plan.dir);
    plan.notes.push(
      'dev_overrides: skip terraform init and run plan/apply directly; Terraform warns that the provider is overridden. Rebuild (npm run build) and the next command runs the new code.',
    );
  } else {
    plan.dir = path.resolve(o.dir ?? impliedMirror(o.env, o.home, o.platform));
    const release = o.from ? releaseZip(o, platform) : undefined;
    if (release) plan.notes.push(...release.notes);
    const version = release?.version ?? o.version;
    plan.version = version;
    const packed = (host: string) => path.join(plan.dir, host, namespace, type, releaseZipName(version, platform));
    const unpacked = (host: string) =>
      path.join(plan.dir, host, namespace, type, version, platform, executableName(version, platform));
    // A packaged executable installed earlier stays: a run without --from does not swap it for a launcher.
    const installedZip =
      !release && existsSync(packed(MIRROR_HOSTS[0])) ? readFileSync(packed(MIRROR_HOSTS[0])) : undefined;
    if (release || installedZip) {
      plan.kind = 'packaged';
      for (const host of MIRROR_HOSTS) {
        want(
          packed(host),
          release?.data ?? installedZip!,
          0o644,
          `release zip (${release ? path.basename(release.file) : 'installed earlier'})`,
        );
        if (existsSync(unpacked(host))) plan.removals.push(unpacked(host));
      }
      if (plan.removals.length > 0)
        plan.notes.push(
          "This replaces the Node.js launcher installed before. In working directories initialised with it, delete the kms-sync/kms entry of .terraform.lock.hcl and the folder .terraform/providers, then run terraform init (the package's hash changed).",
        );
      if (release && version !== o.version)
        plan.notes.push(
          `This release is provider version ${version} (this kms-sync is ${o.version}): require version = "${version}" in required_providers.`,
        );
    } else {
      if (o.platform === 'win32') throw noLauncher();
      for (const host of MIRROR_HOSTS)
        want(unpacked(host), launcherScript(o.node, o.providerScript), 0o755, 'launcher');
      plan.notes.push(
        `The provider installed is a launcher: it runs this kms-sync's provider with Node.js ${process.version} (${o.node}). Every machine where Terraform runs it needs Node.js >= ${NODE_MINIMUM} and this kms-sync installation; where Node.js is missing, install a packaged release instead: kms-sync provider install --from <release folder> (npm run package:provider builds one).`,
      );
    }
    const others = mirroredProviders(plan.dir).filter((p) => !mirrorSources().includes(p));
    block = installBlock(plan.dir, others);
    if (others.length > 0 && o.cliConfig)
      plan.notes.push(
        `The mirror also holds ${others.join(', ')}: excluded from registry installation as Terraform does without a CLI block. Providers added to ${plan.dir} later: run kms-sync provider install again.`,
      );
  }

  if (o.cliConfig) {
    for (const file of cliConfigFiles(o.env, o.home, o.platform)) {
      const before = readIfExists(file)?.toString('utf8');
      const after = withBlock(file, before, block);
      if (after === before) plan.configsUnchanged.push(file);
      else plan.configs.push({ file, before, after, block });
    }
  } else if (!o.dev && plan.dir !== impliedMirror(o.env, o.home, o.platform)) {
    plan.notes.push(
      `--no-cli-config with --dir: Terraform only finds the provider once your CLI configuration has a filesystem_mirror for ${plan.dir}.`,
    );
  }
  refuseFoldersOthersCanWrite(plan);
  return plan;
}

/**
 * Terraform runs the installed provider with the user's credentials (KMS_API_KEY in its
 * environment): no one else may be able to swap it, nor the CLI configuration that says where it
 * is. So every folder of the mirror on the way to a file, and the mirror itself, must be ours (or
 * root's) and writable by no one else, and the folders above it and above each CLI configuration
 * must not let someone else replace them (writable by others only when sticky, as /tmp).
 */
function refuseFoldersOthersCanWrite(plan: InstallPlan): void {
  const refuse = (bad: string, what: string) =>
    new InstallError(
      `refusing to install: ${bad}, so someone else could replace ${what}, which Terraform runs with your credentials`,
      'Make it yours and writable by you only (chmod go-w, and check what it holds), or choose another folder (--dir).\n',
    );
  for (const file of [...plan.writes.map((w) => w.file), ...plan.unchanged, ...plan.removals]) {
    const bad = unsafeTreeReason(path.dirname(file), plan.dir);
    if (bad) throw refuse(bad, 'the provider');
  }
  for (const file of [...plan.configs.map((c) => c.file), ...plan.configsUnchanged]) {
    const bad = unsafeAncestorsReason(file) ?? otherUsersFile(file);
    if (bad) throw refuse(bad, 'the CLI configuration (where Terraform takes providers from)');
  }
}

function otherUsersFile(file: string): string | undefined {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  try {
    const st = lstatSync(file);
    if (st.uid !== uid && st.uid !== 0) return `${file} is owned by another user (uid ${st.uid})`;
    if (!st.isSymbolicLink() && st.mode & 0o022)
      return `${file} is writable by other users (mode 0${(st.mode & 0o777).toString(8)})`;
  } catch {
    // not there yet
  }
  return undefined;
}

/** Writes a file (a symlinked config: its target) through a random-name O_EXCL temp file and a rename, in folders made 0755. */
function writeInPlace(file: string, data: Buffer | string, mode: number): void {
  let target = file;
  try {
    target = realpathSync(file);
  } catch {
    // a new file
  }
  makeFolders(path.dirname(target), 0o755);
  writeFileSafely(target, data, mode);
}

/** Carries out a plan: provider files first, then each CLI configuration (a backup of the old one beside it). */
export function applyInstall(plan: InstallPlan): { backups: string[] } {
  for (const w of plan.writes) {
    makeFolders(path.dirname(w.file), 0o755);
    writeFileSafely(w.file, w.data, w.mode);
  }
  for (const file of plan.removals) {
    rmSync(file, { force: true });
    // Leave no empty <version>/<platform> folders behind.
    for (let dir = path.dirname(file), i = 0; i < 2; i++, dir = path.dirname(dir)) {
      try {
        rmdirSync(dir);
      } catch {
        break;
      }
    }
  }
  const backups: string[] = [];
  for (const c of plan.configs) {
    const mode = c.before === undefined ? 0o644 : statSync(c.file).mode & 0o777;
    if (c.before !== undefined) {
      const backup = `${c.file}.kms-sync.bak`;
      writeInPlace(backup, readFileSync(c.file), mode);
      backups.push(backup);
    }
    writeInPlace(c.file, c.after, mode);
  }
  return { backups };
}
