// letGo (src/config/paths.ts): a large buffer no longer read is freed at once (detached), and a
// small one, which may be a slice of Node's shared pool, is left alone.
import { describe, expect, it } from 'vitest';
import { letGo } from '../../src/config/paths.js';

describe('letGo', () => {
  it('detaches a buffer of its own, and the views over it read as empty', () => {
    const bytes = Buffer.alloc(1 << 20, 97);
    const lines = new Int32Array(1 << 16);
    letGo(bytes);
    letGo(lines);
    expect(bytes.buffer.byteLength).toBe(0);
    expect(bytes.length).toBe(0);
    expect(lines.length).toBe(0);
    letGo(bytes); // already let go: nothing more to do
  });

  it("leaves a slice of the shared pool, and the pool's other slices, alone", () => {
    const a = Buffer.from('kept');
    const b = Buffer.from('also kept');
    expect(a.buffer).toBe(b.buffer);
    letGo(a);
    expect(a.toString()).toBe('kept');
    expect(b.toString()).toBe('also kept');
  });
});
