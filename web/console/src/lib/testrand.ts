// Seeded randomness for the property tests (test code only: nothing in the
// console imports it). A failing case reproduces from its seed.

// rng is mulberry32: a small, fast generator of numbers in [0, 1).
export function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// pick is one element of a, chosen by r.
export function pick<T>(r: () => number, a: readonly T[]): T {
  return a[Math.floor(r() * a.length)] as T;
}

// randomText joins n pieces chosen by r: input made of the fragments a
// parser finds hardest.
export function randomText(r: () => number, pieces: readonly string[], n: number): string {
  let s = "";
  for (let i = 0; i < n; i++) s += pick(r, pieces);
  return s;
}
