// The provider's release files, named the way the Terraform registry and `terraform init` expect
// (one zip per platform holding one executable, a SHA256SUMS file, the registry manifest), and the
// small zip writer and reader they need: `npm run package:provider` writes them
// (scripts/package-provider.js) and `kms-sync provider install --from` reads them.
import { crc32, deflateRawSync, inflateRawSync } from 'node:zlib';
import { PROVIDER_SOURCE } from '../cdktf/mapping.js';

/** `registry.terraform.io/kms-sync/kms` → its parts. */
export function providerAddress(source = PROVIDER_SOURCE): { hostname: string; namespace: string; type: string } {
  const [hostname, namespace, type] = source.split('/') as [string, string, string];
  return { hostname, namespace, type };
}

/**
 * The hosts a mirror serves the provider under. Terraform reads `kms-sync/kms` as
 * registry.terraform.io/kms-sync/kms and OpenTofu as registry.opentofu.org/kms-sync/kms: a mirror
 * with both serves a short source address to both.
 */
export const MIRROR_HOSTS = ['registry.terraform.io', 'registry.opentofu.org'] as const;

/** Every source address the mirror serves (one per host). */
export function mirrorSources(): string[] {
  const { namespace, type } = providerAddress();
  return MIRROR_HOSTS.map((h) => `${h}/${namespace}/${type}`);
}

/** Terraform's name for a platform (`linux_amd64`), or undefined where Terraform has none. */
export function terraformPlatform(
  platform: string = process.platform,
  arch: string = process.arch,
): string | undefined {
  const os = (
    { linux: 'linux', darwin: 'darwin', win32: 'windows', freebsd: 'freebsd', openbsd: 'openbsd' } as Record<
      string,
      string
    >
  )[platform];
  const cpu = ({ x64: 'amd64', arm64: 'arm64', ia32: '386', arm: 'arm' } as Record<string, string>)[arch];
  return os && cpu ? `${os}_${cpu}` : undefined;
}

/** The platforms a release is built for (scripts/package-provider.js). */
export const RELEASE_PLATFORMS = ['linux_amd64', 'linux_arm64', 'darwin_amd64', 'darwin_arm64', 'windows_amd64'];

const TYPE = providerAddress().type;
export const releaseZipName = (version: string, platform: string) =>
  `terraform-provider-${TYPE}_${version}_${platform}.zip`;
export const executableName = (version: string, platform: string) =>
  `terraform-provider-${TYPE}_v${version}${platform.startsWith('windows_') ? '.exe' : ''}`;
/** Kms-sync's own license and the notices of the code of others in the executable (scripts/third-party-notices.js), beside it in each zip. */
export const NOTICES_NAME = 'THIRD_PARTY_NOTICES.txt';
export const RELEASE_TEXTS = ['LICENSE', NOTICES_NAME];
export const sumsName = (version: string) => `terraform-provider-${TYPE}_${version}_SHA256SUMS`;
export const manifestName = (version: string) => `terraform-provider-${TYPE}_${version}_manifest.json`;
/** The registry manifest: which plugin protocol versions the provider speaks. */
export const REGISTRY_MANIFEST = { version: 1, metadata: { protocol_versions: ['6.0'] } };

/** `terraform-provider-kms_0.1.0_linux_amd64.zip` → version and platform; undefined for other names. */
export function parseReleaseZipName(name: string): { version: string; platform: string } | undefined {
  const m = new RegExp(
    `^terraform-provider-${TYPE}_(\\d+\\.\\d+\\.\\d+(?:-[0-9A-Za-z.-]+)?)_([a-z0-9]+_[a-z0-9]+)\\.zip$`,
  ).exec(name);
  return m ? { version: m[1]!, platform: m[2]! } : undefined;
}

export interface ZipEntry {
  name: string;
  data: Buffer;
  mode: number;
}

/**
 * A zip archive of `entries` (deflated, Unix permissions kept, every timestamp 1980-01-01 so the
 * same input gives the same bytes, hence the same hash in lock files and SHA256SUMS).
 */
export function writeZip(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const e of entries) {
    const name = Buffer.from(e.name, 'utf8');
    const data = deflateRawSync(e.data);
    const crc = crc32(e.data);
    if (data.length >= 0xffffffff || e.data.length >= 0xffffffff)
      throw new Error(`${e.name}: too large for a zip without zip64`);
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4); // version needed: deflate
    local.writeUInt16LE(0x0800, 6); // names are UTF-8
    local.writeUInt16LE(8, 8); // deflate
    local.writeUInt16LE(0, 10); // 00:00
    local.writeUInt16LE(0x21, 12); // 1980-01-01
    local.writeUInt32LE(crc, 14);
    local.writeUInt32LE(data.length, 18);
    local.writeUInt32LE(e.data.length, 22);
    local.writeUInt16LE(name.length, 26);
    local.writeUInt16LE(0, 28);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE((3 << 8) | 20, 4); // made by Unix: the external attributes hold the mode
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    central.writeUInt16LE(8, 10);
    central.writeUInt16LE(0, 12);
    central.writeUInt16LE(0x21, 14);
    central.writeUInt32LE(crc, 16);
    central.writeUInt32LE(data.length, 20);
    central.writeUInt32LE(e.data.length, 24);
    central.writeUInt16LE(name.length, 28);
    central.writeUInt32LE(((0o100000 | e.mode) << 16) >>> 0, 38); // regular file + permissions
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, data);
    centrals.push(central, name);
    offset += local.length + name.length + data.length;
  }
  const cd = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(cd.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, cd, end]);
}

export type ZipEntryType = 'file' | 'symlink' | 'folder' | 'other' | 'no-unix-mode';

/** The names, Unix modes (permission bits with setuid/setgid/sticky) and file types of a zip's entries, read from its central directory. */
export function zipEntries(zip: Buffer): { name: string; mode: number; type: ZipEntryType }[] {
  return centralDirectory(zip).map(({ name, mode, type }) => ({ name, mode, type }));
}

function entryType(madeBy: number, attributes: number): ZipEntryType {
  if (madeBy >> 8 !== 3) return 'no-unix-mode'; // not made on Unix: the external attributes hold no mode
  const format = (attributes >>> 16) & 0o170000;
  return format === 0o100000 ? 'file' : format === 0o120000 ? 'symlink' : format === 0o040000 ? 'folder' : 'other';
}

/** The content of one entry of a zip (stored or deflated), checked against its CRC-32. */
export function zipEntryData(zip: Buffer, name: string): Buffer {
  const e = centralDirectory(zip).find((x) => x.name === name);
  if (!e) throw new Error(`no ${name} in the zip`);
  if (zip.readUInt32LE(e.offset) !== 0x04034b50) throw new Error(`${name}: bad local header`);
  const start = e.offset + 30 + zip.readUInt16LE(e.offset + 26) + zip.readUInt16LE(e.offset + 28);
  const raw = zip.subarray(start, start + e.compressedSize);
  const data = e.method === 0 ? Buffer.from(raw) : e.method === 8 ? inflateRawSync(raw) : undefined;
  if (!data) throw new Error(`${name}: compression method ${e.method} is not supported`);
  if (crc32(data) !== e.crc) throw new Error(`${name}: CRC-32 mismatch (a damaged zip)`);
  return data;
}

function centralDirectory(zip: Buffer): {
  name: string;
  mode: number;
  type: ZipEntryType;
  method: number;
  crc: number;
  compressedSize: number;
  offset: number;
}[] {
  const min = Math.max(0, zip.length - 22 - 0xffff);
  let end = -1;
  for (let i = zip.length - 22; i >= min; i--) {
    if (zip.readUInt32LE(i) === 0x06054b50) {
      end = i;
      break;
    }
  }
  if (end < 0) throw new Error('not a zip archive (no end of central directory)');
  const count = zip.readUInt16LE(end + 10);
  let p = zip.readUInt32LE(end + 16);
  const out: ReturnType<typeof centralDirectory> = [];
  for (let i = 0; i < count; i++) {
    if (p + 46 > zip.length || zip.readUInt32LE(p) !== 0x02014b50)
      throw new Error('not a zip archive (bad central directory)');
    const nameLength = zip.readUInt16LE(p + 28);
    const extra = zip.readUInt16LE(p + 30);
    const comment = zip.readUInt16LE(p + 32);
    out.push({
      name: zip.toString('utf8', p + 46, p + 46 + nameLength),
      mode: (zip.readUInt32LE(p + 38) >>> 16) & 0o7777,
      type: entryType(zip.readUInt16LE(p + 4), zip.readUInt32LE(p + 38)),
      method: zip.readUInt16LE(p + 10),
      crc: zip.readUInt32LE(p + 16),
      compressedSize: zip.readUInt32LE(p + 20),
      offset: zip.readUInt32LE(p + 42),
    });
    p += 46 + nameLength + extra + comment;
  }
  return out;
}
