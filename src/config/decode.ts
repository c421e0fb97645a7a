// Bytes of a configuration file → text. Only UTF-8 is accepted: invalid bytes are an error at
// their line and column (never silently replaced by U+FFFD), and UTF-16/UTF-32 files are named as
// such. A UTF-8 byte-order mark is dropped.
import { isAscii } from 'node:buffer';
import type { Diagnostic } from './diagnostics.js';

const strict = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** The text, and whether each byte was one ASCII character (a byte's offset is then its character's). */
export type Decoded = { text: string; ascii?: true } | { diagnostic: Diagnostic };

/** `ascii`: the bytes are known to be ASCII already (checked as they were read: config/load.ts ReadScan). */
export function decodeConfig(file: string, bytes: Uint8Array, ascii = false): Decoded {
  const wide = wideEncoding(bytes);
  if (wide) {
    return {
      diagnostic: { file, line: 1, column: 1, path: '', message: `the file is encoded as ${wide}; save it as UTF-8` },
    };
  }
  // ASCII (most configurations): the same text as UTF-8's, a byte per character, found at
  // memory speed and copied instead of decoded (a 221 MB file: ~0.2 against ~0.32 s), and held
  // outside the heap, freed as soon as it is collected.
  if (ascii || isAscii(bytes))
    return { text: Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString('latin1'), ascii: true };
  try {
    return { text: strict.decode(bytes) };
  } catch {
    const bad = firstInvalidUtf8(bytes);
    const before = new TextDecoder('utf-8').decode(bytes.subarray(0, bad));
    const line = before.split('\n').length;
    const column = before.length - (before.lastIndexOf('\n') + 1) + 1;
    const shown = Array.from(bytes.subarray(bad, bad + 4))
      .map((b) => b.toString(16).toUpperCase().padStart(2, '0'))
      .join(' ');
    return {
      diagnostic: {
        file,
        line,
        column,
        path: '',
        message: `the file is not valid UTF-8 (bytes ${shown} at byte ${bad}); save it as UTF-8`,
      },
    };
  }
}

/** UTF-16/32 by byte-order mark, or by the NUL bytes that ASCII text has in those encodings. */
function wideEncoding(b: Uint8Array): string | undefined {
  if (b[0] === 0x00 && b[1] === 0x00 && b[2] === 0xfe && b[3] === 0xff)
    return 'UTF-32 (big-endian, with a byte-order mark)';
  if (b[0] === 0xff && b[1] === 0xfe && b[2] === 0x00 && b[3] === 0x00)
    return 'UTF-32 (little-endian, with a byte-order mark)';
  if (b[0] === 0xfe && b[1] === 0xff) return 'UTF-16 (big-endian, with a byte-order mark)';
  if (b[0] === 0xff && b[1] === 0xfe) return 'UTF-16 (little-endian, with a byte-order mark)';
  if (b.length >= 4) {
    if (b[0] === 0 && b[1] === 0 && b[2] === 0 && b[3] !== 0) return 'UTF-32 (big-endian)';
    if (b[0] !== 0 && b[1] === 0 && b[2] === 0 && b[3] === 0) return 'UTF-32 (little-endian)';
  }
  if (b.length >= 2) {
    if (b[0] === 0 && b[1] !== 0) return 'UTF-16 (big-endian)';
    if (b[0] !== 0 && b[1] === 0) return 'UTF-16 (little-endian)';
  }
  return undefined;
}

/** Offset of the first byte that does not start a well-formed UTF-8 sequence (RFC 3629). */
function firstInvalidUtf8(b: Uint8Array): number {
  let i = 0;
  while (i < b.length) {
    const c = b[i]!;
    let n: number;
    let min: number;
    if (c < 0x80) {
      i++;
      continue;
    } else if (c >= 0xc2 && c <= 0xdf) {
      n = 1;
      min = 0x80;
    } else if (c >= 0xe0 && c <= 0xef) {
      n = 2;
      min = 0x800;
    } else if (c >= 0xf0 && c <= 0xf4) {
      n = 3;
      min = 0x10000;
    } else return i;
    let cp = c & (0x3f >> n);
    for (let k = 1; k <= n; k++) {
      const x = b[i + k];
      if (x === undefined || (x & 0xc0) !== 0x80) return i;
      cp = (cp << 6) | (x & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += n + 1;
  }
  return b.length;
}
