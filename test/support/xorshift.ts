// A seeded random source for the tests that draw inputs: xorshift32, so that every residue is
// reached (a multiply past 2 ** 53 loses the low bits that % n reads).

/** A draw in [0, n) from `seed` on: the same draws for the same seed. */
export function xorshift32(seed: number): (n: number) => number {
  let s = seed;
  return (n: number) => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) % n;
  };
}
