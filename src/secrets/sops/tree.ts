// The ordered tree a SOPS YAML document is read into (document.ts) and written from: its own
// file, so that the fast reader and emitter (fast-yaml.ts) and the document share it without
// importing each other.
export type ScalarValue = string | number | boolean | null;
export type SNode = SMap | SSeq | SScalar;
export interface SMap {
  kind: 'map';
  entries: [string, SNode][];
}
export interface SSeq {
  kind: 'seq';
  items: SNode[];
}
export interface SScalar {
  kind: 'scalar';
  value: ScalarValue;
}

export const scalar = (value: ScalarValue): SScalar => ({ kind: 'scalar', value });
export const map = (entries: [string, SNode][] = []): SMap => ({ kind: 'map', entries });
