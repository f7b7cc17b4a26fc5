//! The explorer's random numbers: SplitMix64, so that a seed gives the same schedules on every
//! machine and every build, byte for byte (no dependency whose stream may change between
//! versions).

/// A SplitMix64 generator.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The generator of schedule `index` of `seed`: independent of every other schedule's, so a
    /// shard generates its schedules without generating the others.
    pub fn schedule(seed: u64, index: u64) -> Rng {
        let mut r = Rng(seed ^ 0x6a09_e667_f3bc_c908);
        let a = r.next_u64();
        Rng(a ^ index.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n` ≥ 1).
    pub fn below(&mut self, n: u64) -> u64 {
        // Lemire's multiply-shift: no modulo bias worth the name at these sizes.
        ((u128::from(self.next_u64()) * u128::from(n.max(1))) >> 64) as u64
    }

    /// True with probability `num / den`.
    pub fn chance(&mut self, num: u64, den: u64) -> bool {
        self.below(den) < num
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[self.below(xs.len() as u64) as usize]
    }

    /// An index by weight (weights not all zero).
    pub fn weighted(&mut self, weights: &[u32]) -> usize {
        let total: u64 = weights.iter().map(|w| u64::from(*w)).sum();
        let mut x = self.below(total.max(1));
        for (i, w) in weights.iter().enumerate() {
            let w = u64::from(*w);
            if x < w {
                return i;
            }
            x -= w;
        }
        weights.len().saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stream_is_splitmix64() {
        // The first outputs of SplitMix64 from seed 0 (the published reference values).
        let mut r = Rng::new(0);
        assert_eq!(r.next_u64(), 0xe220_a839_7b1d_cdaf);
        assert_eq!(r.next_u64(), 0x6e78_9e6a_a1b9_65f4);
    }

    #[test]
    fn below_stays_below_and_reaches_every_value() {
        let mut r = Rng::new(7);
        let mut seen = [false; 5];
        for _ in 0..1000 {
            let x = r.below(5);
            assert!(x < 5);
            seen[x as usize] = true;
        }
        assert!(seen.iter().all(|s| *s));
    }

    #[test]
    fn schedules_of_one_seed_differ_and_repeat() {
        let a = Rng::schedule(1, 0).next_u64();
        assert_eq!(a, Rng::schedule(1, 0).next_u64());
        assert_ne!(a, Rng::schedule(1, 1).next_u64());
        assert_ne!(a, Rng::schedule(2, 0).next_u64());
    }

    #[test]
    fn a_zero_weight_is_never_picked() {
        let mut r = Rng::new(3);
        for _ in 0..500 {
            assert_ne!(r.weighted(&[2, 0, 5]), 1);
        }
    }
}
