//! `--sample N`: shapes chosen so that each value of M, N and K is used about equally. Greedy
//! and deterministic: each step takes the shape whose three values have been used least so
//! far, ties broken by a hash of the shape's name (the same N gives the same shapes anywhere).

use std::collections::HashMap;

use sha2::{Digest, Sha256};

/// An `M_N_K` shape.
pub type Shape = [u64; 3];

pub fn name(shape: Shape) -> String {
    format!("{}_{}_{}", shape[0], shape[1], shape[2])
}

/// `M_N_K` read back.
pub fn parse(text: &str) -> Option<Shape> {
    let parts: Vec<u64> = text
        .trim()
        .split('_')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    <[u64; 3]>::try_from(parts).ok()
}

fn tiebreak(shape: Shape) -> [u8; 32] {
    Sha256::digest(name(shape).as_bytes()).into()
}

/// `n` of `shapes` (all of them when there are fewer), in the order chosen.
pub fn spread(shapes: &[Shape], n: usize) -> Vec<Shape> {
    let mut left: Vec<(Shape, [u8; 32])> = shapes.iter().map(|&s| (s, tiebreak(s))).collect();
    let mut used: [HashMap<u64, usize>; 3] = Default::default();
    let mut chosen = Vec::new();
    while chosen.len() < n && !left.is_empty() {
        let cost = |s: &Shape| -> (usize, usize) {
            let counts: Vec<usize> = (0..3)
                .map(|d| used[d].get(&s[d]).copied().unwrap_or(0))
                .collect();
            (
                counts.iter().copied().max().unwrap_or(0),
                counts.iter().sum(),
            )
        };
        let best = (0..left.len())
            .min_by_key(|&i| (cost(&left[i].0), left[i].1))
            .expect("left is not empty");
        let (shape, _) = left.swap_remove(best);
        for (d, value) in shape.iter().enumerate() {
            *used[d].entry(*value).or_default() += 1;
        }
        chosen.push(shape);
    }
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    fn grid(values: &[u64]) -> Vec<Shape> {
        let mut all = Vec::new();
        for &m in values {
            for &n in values {
                for &k in values {
                    all.push([m, n, k]);
                }
            }
        }
        all
    }

    #[test]
    fn a_sample_uses_every_value_about_equally_and_repeats() {
        let values = [64, 128, 256, 512, 1024, 2048, 4096, 8192, 12288, 16384];
        let all = grid(&values);
        for n in [10, 20, 25, 30] {
            let sample = spread(&all, n);
            assert_eq!(sample.len(), n);
            assert_eq!(sample, spread(&all, n), "deterministic");
            let mut reversed = all.clone();
            reversed.reverse();
            assert_eq!(
                sample,
                spread(&reversed, n),
                "independent of the listing's order"
            );
            for d in 0..3 {
                let counts: Vec<usize> = values
                    .iter()
                    .map(|v| sample.iter().filter(|s| s[d] == *v).count())
                    .collect();
                let (lo, hi) = (counts.iter().min().unwrap(), counts.iter().max().unwrap());
                assert!(hi - lo <= 1, "n={n} dimension {d}: {counts:?}");
            }
        }
        assert_eq!(spread(&all[..3], 10).len(), 3);
    }

    #[test]
    fn names_round_trip() {
        assert_eq!(parse("64_128_16384"), Some([64, 128, 16384]));
        assert_eq!(name([64, 128, 16384]), "64_128_16384");
        for bad in ["64_128", "64_128_x", "1_2_3_4", ""] {
            assert_eq!(parse(bad), None, "{bad}");
        }
    }
}
