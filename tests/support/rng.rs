//! A seeded PRNG (splitmix64) and byte mutations for property tests and chaos runs: the
//! same seed gives the same cases on every machine, so a failure replays exactly.
#![allow(dead_code)] // each test file uses part of this

/// splitmix64: one add and a few multiplies per number, every seed (0 included) fine.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One of `items`.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Bytes that stress parsers when dropped anywhere: delimiters, numbers past every
/// integer type, escapes, control bytes, invalid UTF-8.
pub const SNIPPETS: &[&[u8]] = &[
    b"\n",
    b"\r\n",
    b"\r\n\r\n",
    b"\n\n",
    b" ",
    b"\t",
    b"\0",
    b"\xff\xfe",
    b"\xc3",
    b"\"",
    b"\\",
    b"\\u0000",
    b"\\uD800",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"=",
    b"&",
    b"?",
    b"%",
    b"%zz",
    b"%00",
    b"#",
    b"-",
    b".",
    b"+",
    b"e",
    b"0",
    b"99999999999999999999999999999999",
    b"-9223372036854775809",
    b"1e999999",
    b"18446744073709551616",
    b"null",
    b"true",
    b"\"\"",
    b"{}",
    b"[]",
    b"h",
    b"m",
    b"s",
    b"ms",
    b"us",
    b"\xc2\xb5s",
    b"ns",
];

/// One to three random edits of `base`: truncate, flip a byte, insert a snippet (once or
/// repeated), nest deeply, duplicate or delete a slice.
pub fn mutate(rng: &mut Rng, base: &[u8]) -> Vec<u8> {
    let mut b = base.to_vec();
    for _ in 0..1 + rng.below(3) {
        let at = rng.below(b.len() + 1);
        match rng.below(8) {
            0 => b.truncate(at),
            1 => {
                if !b.is_empty() {
                    let i = rng.below(b.len());
                    b[i] = rng.next_u64() as u8;
                }
            }
            2 => {
                let s = rng.pick(SNIPPETS).to_vec();
                b.splice(at..at, s);
            }
            3 => {
                let depth = 1 + rng.below(3000);
                let open: &[u8] = rng.pick::<&[u8]>(&[b"[".as_slice(), b"{\"a\":", b"[{\"x\":"]);
                b.splice(at..at, open.repeat(depth));
            }
            4 => {
                let end = (at + rng.below(200)).min(b.len());
                let dup = b[at..end].to_vec();
                b.splice(at..at, dup);
            }
            5 => {
                let end = (at + rng.below(50)).min(b.len());
                b.drain(at..end);
            }
            6 => {
                let s = rng.pick(SNIPPETS).to_vec();
                let n = 1 + rng.below(200);
                b.splice(at..at, s.repeat(n));
            }
            _ => {
                if !b.is_empty() {
                    let (i, j) = (rng.below(b.len()), rng.below(b.len()));
                    b.swap(i, j);
                }
            }
        }
    }
    b
}
