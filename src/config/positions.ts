// Where each value of a parsed document came from, for the parsers that build plain values directly
// (the fast YAML path and JSON): one entry per mapping or list, with the offsets of its keys and
// values, and offset → line:column through the line starts.
import type { PathSegment } from './diagnostics.js';

export interface Position {
  line: number;
  column: number;
}

/**
 * Offsets of one container, flat (cheap to build for hundreds of thousands of containers): for a
 * mapping `key, keyOffset, valueOffset` per key in source order; for a list one offset per item.
 */
export type ContainerOffsets = (string | number)[];

export class PositionIndex {
  private readonly containers = new Map<object, ContainerOffsets>();
  private lineStarts: number[] | undefined;

  private readonly text: string;
  /** Offset of the document's root value. */
  rootOffset: number;

  constructor(text: string, rootOffset = 0) {
    this.text = text;
    this.rootOffset = rootOffset;
  }

  set(container: object, offsets: ContainerOffsets): void {
    this.containers.set(container, offsets);
  }

  /**
   * The path walked by the last lookup (segments, and the node and offset after each): lookups come
   * in document order and share long prefixes (`projects[0].environments[0].clients[k]…` for each of
   * 10,000 clients), so each one resumes where it parts from the previous one.
   */
  private memo: { root: unknown; segs: PathSegment[]; nodes: unknown[]; offsets: number[] } = {
    root: undefined,
    segs: [],
    nodes: [],
    offsets: [],
  };

  /** Offset of the value (or, with `atKey`, of the last segment's key) at `segments`; the deepest existing ancestor otherwise. */
  offsetOf(root: unknown, segments: readonly PathSegment[], atKey = false): number {
    const memo = this.memo;
    let i = 0;
    if (memo.root === root) {
      const n = Math.min(segments.length, memo.segs.length);
      while (i < n && memo.segs[i] === segments[i]) i++;
    } else {
      memo.root = root;
    }
    // With `atKey` the last step ends on a key, not a value: never resumed from.
    if (atKey && i === segments.length && i > 0) i--;
    memo.segs.length = i;
    memo.nodes.length = i;
    memo.offsets.length = i;
    let node = i > 0 ? memo.nodes[i - 1] : root;
    let offset = i > 0 ? memo.offsets[i - 1]! : this.rootOffset;
    for (; i < segments.length; i++) {
      const seg = segments[i]!;
      if (node === null || typeof node !== 'object') break;
      const c = this.containers.get(node);
      if (!c) break;
      if (Array.isArray(node)) {
        if (typeof seg !== 'number' || seg < 0 || seg >= c.length) break;
        offset = c[seg] as number;
        node = node[seg];
      } else {
        const key = String(seg);
        let k = 0;
        while (k < c.length && c[k] !== key) k += 3;
        if (k >= c.length) break;
        if (atKey && i === segments.length - 1) return c[k + 1] as number;
        offset = c[k + 2] as number;
        node = (node as Record<string, unknown>)[key];
      }
      memo.segs.push(seg);
      memo.nodes.push(node);
      memo.offsets.push(offset);
    }
    return offset;
  }

  locate(root: unknown, segments: readonly PathSegment[], atKey = false): Position {
    return this.position(this.offsetOf(root, segments, atKey));
  }

  /** 1-based line and column (UTF-16 code units, as editors count them) of an offset. */
  position(offset: number): Position {
    const starts = (this.lineStarts ??= lineStartsOf(this.text));
    let lo = 0;
    let hi = starts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (starts[mid]! <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, column: offset - starts[lo]! + 1 };
  }
}

export function lineStartsOf(text: string): number[] {
  const starts = [0];
  for (let i = text.indexOf('\n'); i >= 0; i = text.indexOf('\n', i + 1)) starts.push(i + 1);
  return starts;
}
