//! A small seeded PRNG (xorshift64*) for jitter and randomised timeouts; not for secrets.

use std::collections::hash_map::RandomState;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::{SystemTime, UNIX_EPOCH};

/// xorshift64*: fast, good enough to spread retries of many clients apart.
#[derive(Clone, Debug)]
pub struct XorShift64 {
    state: u64,
}

impl XorShift64 {
    /// A generator with a fixed seed (tests replay the same sequence).
    pub fn new(seed: u64) -> Self {
        // Zero is the one state xorshift never leaves; any other constant will do.
        XorShift64 {
            state: if seed == 0 {
                0x9E37_79B9_7F4A_7C15
            } else {
                seed
            },
        }
    }

    /// A generator seeded from the OS (std's `RandomState` keys come from the OS's random
    /// source), the clock and the current thread, so replicas and restarts differ.
    pub fn from_entropy() -> Self {
        // `DefaultHasher::new()` has fixed keys: replicas started in the same nanosecond
        // bucket would jitter in lockstep. `RandomState` is keyed from the OS per process.
        let mut h = RandomState::new().build_hasher();
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
            .hash(&mut h);
        std::thread::current().id().hash(&mut h);
        std::process::id().hash(&mut h);
        Self::new(h.finish())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.state = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A uniform float in `[0, 1)`.
    pub fn next_f64(&mut self) -> f64 {
        // The top 53 bits fill a double's mantissa exactly.
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A uniform integer in `[lo, hi]` (inclusive); `lo` when `hi <= lo`.
    pub fn range_inclusive(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        let span = hi - lo;
        if span == u64::MAX {
            return self.next_u64();
        }
        // Modulo bias is at most span/2^64: irrelevant for timeouts and jitter.
        lo + self.next_u64() % (span + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_sequence() {
        let mut a = XorShift64::new(42);
        let mut b = XorShift64::new(42);
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
    }

    #[test]
    fn entropy_seeds_differ_between_generators_made_together() {
        // RandomState's keys come from the OS once per process and then step per instance,
        // so even generators made in the same clock tick start apart.
        let firsts: std::collections::HashSet<u64> = (0..100)
            .map(|_| XorShift64::from_entropy().next_u64())
            .collect();
        assert_eq!(firsts.len(), 100);
    }

    #[test]
    fn zero_seed_does_not_get_stuck() {
        let mut r = XorShift64::new(0);
        assert_ne!(r.next_u64(), 0);
        assert_ne!(r.next_u64(), r.next_u64());
    }

    #[test]
    fn floats_are_in_unit_interval_and_spread() {
        let mut r = XorShift64::new(7);
        let (mut low, mut high) = (0, 0);
        for _ in 0..10_000 {
            let f = r.next_f64();
            assert!((0.0..1.0).contains(&f));
            if f < 0.5 {
                low += 1
            } else {
                high += 1
            }
        }
        assert!(low > 4_500 && high > 4_500, "{low} / {high}");
    }

    #[test]
    fn ranges_are_inclusive_and_bounded() {
        let mut r = XorShift64::new(9);
        let mut seen = [false; 4];
        for _ in 0..1_000 {
            let v = r.range_inclusive(300, 303);
            assert!((300..=303).contains(&v));
            seen[(v - 300) as usize] = true;
        }
        assert!(seen.iter().all(|&s| s));
        assert_eq!(r.range_inclusive(5, 5), 5);
        assert_eq!(r.range_inclusive(6, 5), 6);
    }
}
