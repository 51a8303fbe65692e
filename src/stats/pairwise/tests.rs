//! Tests of the statistics: each estimator, interval and label on samples with known answers.

use super::*;
use crate::stats::{
    benjamini_hochberg, fast_p, fast_p_band, geometric_mean, geometric_mean_ci, ratio_of_speedups,
    FastP, TaskDraws,
};

fn samples(values: &[f64]) -> Samples {
    Samples::new(values.to_vec()).unwrap()
}

/// Deterministic pseudo-random times: `base` times a log-uniform factor within ±`spread`,
/// optionally quantized to `tick` ms like CUDA event times.
fn noisy(n: usize, base: f64, spread: f64, tick: f64, seed: u64) -> Vec<f64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    (0..n)
        .map(|_| {
            let v = base * rng.gen_range(-spread..spread).exp();
            if tick > 0.0 {
                ((v / tick).round().max(1.0)) * tick
            } else {
                v
            }
        })
        .collect()
}

fn close(a: f64, b: f64, tol: f64) -> bool {
    (a - b).abs() <= tol * b.abs().max(1e-300)
}

// -- samples -------------------------------------------------------------------------------

#[test]
fn median_of_odd_and_even() {
    assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
    assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
}

#[test]
fn samples_reject_too_few_and_bad_values() {
    assert_eq!(
        Samples::new(vec![1.0]),
        Err(StatsError::TooFewSamples { n: 1 })
    );
    assert_eq!(
        Samples::new(vec![]),
        Err(StatsError::TooFewSamples { n: 0 })
    );
    assert_eq!(
        Samples::new(vec![1.0, 0.0]),
        Err(StatsError::BadSample {
            index: 1,
            value: 0.0
        })
    );
    assert_eq!(
        Samples::new(vec![-1.0, 1.0]),
        Err(StatsError::BadSample {
            index: 0,
            value: -1.0
        })
    );
    assert!(matches!(
        Samples::new(vec![1.0, f64::NAN]),
        Err(StatsError::BadSample { index: 1, .. })
    ));
    assert!(matches!(
        Samples::new(vec![f64::INFINITY, 1.0]),
        Err(StatsError::BadSample { index: 0, .. })
    ));
    assert_eq!(
        StatsError::BadSample {
            index: 1,
            value: 0.0
        }
        .to_string(),
        "use sample 1 (0 ms): a time must be finite and positive"
    );
}

#[test]
fn samples_keep_order_and_summaries_match_hand_values() {
    let s = samples(&[4.0, 1.0, 3.0, 2.0, 10.0]);
    assert_eq!(s.values_ms(), &[4.0, 1.0, 3.0, 2.0, 10.0]);
    assert_eq!(s.sorted_ms(), &[1.0, 2.0, 3.0, 4.0, 10.0]);
    assert_eq!(s.median_ms(), 3.0);
    assert_eq!(s.mean_ms(), 4.0);
    // deviations from 4: 0, 9, 1, 4, 36 -> 50 / 4
    assert_eq!(s.variance_ms2(), 12.5);
    // |x - 3| = 1, 2, 0, 1, 7 -> median 1
    assert_eq!(s.mad_ms(), 1.0);
    // type 7: h = 4 p
    assert_eq!(s.quantile_ms(0.25), 2.0);
    assert!(close(s.quantile_ms(0.6), 3.4, 1e-12));
    assert_eq!(s.quantile_ms(0.0), 1.0);
    assert_eq!(s.quantile_ms(1.0), 10.0);
}

#[test]
fn weighted_median_equals_median_of_the_materialized_multiset() {
    let sorted = [1.0, 2.0, 3.0, 5.0, 8.0];
    for weights in [
        [1, 1, 1, 1, 1],
        [0, 2, 0, 1, 1],
        [3, 0, 0, 0, 1],
        [0, 0, 0, 0, 2],
        [1, 0, 2, 0, 3],
    ] {
        let expanded: Vec<f64> = sorted
            .iter()
            .zip(weights)
            .flat_map(|(&v, w)| std::iter::repeat_n(v, w as usize))
            .collect();
        let total = weights.iter().sum::<u64>();
        assert_eq!(
            weighted_median(&sorted, total, |k| weights[k]),
            median(&expanded),
            "{weights:?}"
        );
    }
}

// -- bootstrap -----------------------------------------------------------------------------

#[test]
fn speedup_is_seeded_and_brackets_the_ratio() {
    let reference: Vec<f64> = (0..50).map(|i| 2.0 + (i % 7) as f64 * 0.01).collect();
    let candidate: Vec<f64> = (0..50).map(|i| 1.0 + (i % 5) as f64 * 0.01).collect();
    let s = speedup(&reference, &candidate, 2000, 0.95, 7);
    assert_eq!(s, speedup(&reference, &candidate, 2000, 0.95, 7));
    assert_ne!(s, speedup(&reference, &candidate, 2000, 0.95, 8));
    assert!(s.ci_low <= s.ratio && s.ratio <= s.ci_high, "{s:?}");
    assert!((s.ratio - 2.03 / 1.02).abs() < 1e-9);
    assert!(s.ci_high - s.ci_low < 0.1);
}

#[test]
fn speedup_of_constant_arms_is_exact() {
    let s = speedup(&[2.0; 10], &[1.0; 10], 100, 0.95, 1);
    assert_eq!(
        s,
        Speedup {
            ratio: 2.0,
            ci_low: 2.0,
            ci_high: 2.0
        }
    );
}

fn rounds_of(reference: &[Vec<f64>], candidate: &[Vec<f64>]) -> Rounds {
    let rounds: Vec<Round> = reference
        .iter()
        .zip(candidate)
        .map(|(r, c)| Round {
            reference_ms: r,
            candidate_ms: c,
        })
        .collect();
    Rounds::new(&rounds).unwrap()
}

#[test]
fn rounds_reject_unpaired_short_and_bad_input() {
    let one = [1.0];
    let r = |reference_ms, candidate_ms| Round {
        reference_ms,
        candidate_ms,
    };
    assert_eq!(
        Rounds::new(&[r(&one, &one)]).unwrap_err(),
        StatsError::TooFewRounds { n: 1 }
    );
    assert_eq!(
        Rounds::new(&[r(&one, &one), r(&one, &[])]).unwrap_err(),
        StatsError::UnpairedRound { round: 1 }
    );
    assert_eq!(
        Rounds::new(&[r(&one, &one), r(&[-2.0], &one)]).unwrap_err(),
        StatsError::BadRoundSample {
            round: 1,
            value: -2.0
        }
    );
    assert_eq!(
        Rounds::from_tagged(&[1.0, 1.0], &[0], &[1.0, 1.0], &[0, 1]).unwrap_err(),
        StatsError::TagMismatch {
            samples: 2,
            tags: 1
        }
    );
    assert_eq!(
        Rounds::from_tagged(&[1.0, 1.0], &[0, 7], &[1.0, 1.0], &[0, 0]).unwrap_err(),
        StatsError::UnpairedRound { round: 7 }
    );
}

#[test]
fn rounds_from_tags_group_by_round() {
    // round 5 and round 9, tags out of order
    let rounds = Rounds::from_tagged(&[3.0, 1.0, 2.0], &[9, 5, 5], &[2.0, 1.0], &[5, 9]).unwrap();
    assert_eq!(rounds.len(), 2);
    assert_eq!(rounds.reference_median_ms(), 2.0);
    assert_eq!(rounds.candidate_median_ms(), 1.5);
    let by_hand = rounds_of(&[vec![1.0, 2.0], vec![3.0]], &[vec![2.0], vec![1.0]]);
    assert_eq!(
        paired_speedup(&rounds, 500, 0.95, 3),
        paired_speedup(&by_hand, 500, 0.95, 3)
    );
}

#[test]
fn paired_replicate_equals_median_of_concatenated_rounds() {
    let reference = [vec![1.0, 4.0], vec![2.0], vec![9.0, 3.0, 3.0]];
    let candidate = [vec![5.0], vec![1.0, 1.0], vec![2.0, 7.0]];
    let rounds = rounds_of(&reference, &candidate);
    for draws in [[1u32, 1, 1], [3, 0, 0], [0, 2, 1], [1, 0, 2]] {
        let concat = |arm: &[Vec<f64>]| -> Vec<f64> {
            arm.iter()
                .zip(draws)
                .flat_map(|(r, d)| r.iter().copied().cycle().take(r.len() * d as usize))
                .collect()
        };
        assert_eq!(
            rounds.reference.replicate_median(&draws),
            median(&concat(&reference)),
            "{draws:?}"
        );
        assert_eq!(
            rounds.candidate.replicate_median(&draws),
            median(&concat(&candidate)),
            "{draws:?}"
        );
    }
}

#[test]
fn paired_bootstrap_is_seeded_and_brackets_the_ratio() {
    let reference: Vec<Vec<f64>> = (0..200).map(|r| noisy(2, 2.0, 0.05, 0.0, r)).collect();
    let candidate: Vec<Vec<f64>> = (0..200)
        .map(|r| noisy(2, 1.0, 0.05, 0.0, 1000 + r))
        .collect();
    let rounds = rounds_of(&reference, &candidate);
    let b = paired_speedup(&rounds, DEFAULT_RESAMPLES, 0.95, 11);
    assert_eq!(b, paired_speedup(&rounds, DEFAULT_RESAMPLES, 0.95, 11));
    assert_ne!(
        b.speedup,
        paired_speedup(&rounds, DEFAULT_RESAMPLES, 0.95, 12).speedup
    );
    let s = b.speedup;
    assert_eq!(
        s.ratio,
        rounds.reference_median_ms() / rounds.candidate_median_ms()
    );
    assert!(s.ci_low < s.ratio && s.ratio < s.ci_high, "{s:?}");
    assert!(close(s.ratio, 2.0, 0.03), "{s:?}");
    assert_eq!(b.replicates.len(), DEFAULT_RESAMPLES);
    assert!(b.replicates.windows(2).all(|w| w[0] <= w[1]));
    // a wider level gives a wider interval from the same replicates
    let wide = paired_speedup(&rounds, DEFAULT_RESAMPLES, 0.99, 11).speedup;
    assert!(wide.ci_low <= s.ci_low && wide.ci_high >= s.ci_high);
}

#[test]
fn paired_bootstrap_cancels_drift_shared_within_rounds() {
    // Both arms slow down together by up to 50 % (power capping); the candidate is exactly
    // twice as fast within every round. Resampling rounds keeps the ratio at 2; resampling
    // arms independently mixes slow reference rounds with fast candidate rounds.
    let drift = |r: usize| 1.0 + 0.5 * (r as f64 / 99.0);
    let reference: Vec<Vec<f64>> = (0..100).map(|r| vec![2.0 * drift(r)]).collect();
    let candidate: Vec<Vec<f64>> = (0..100).map(|r| vec![drift(r)]).collect();
    let paired = paired_speedup(&rounds_of(&reference, &candidate), 2000, 0.95, 5).speedup;
    assert!(
        close(paired.ci_low, 2.0, 1e-12) && close(paired.ci_high, 2.0, 1e-12),
        "{paired:?}"
    );
    let flat = |arm: &[Vec<f64>]| arm.concat();
    let independent = speedup(&flat(&reference), &flat(&candidate), 2000, 0.95, 5);
    assert!(
        independent.ci_high - independent.ci_low > 0.1,
        "{independent:?}"
    );
}

#[test]
fn paired_bootstrap_of_equal_arms_is_one_and_same() {
    let arm: Vec<Vec<f64>> = (0..50).map(|r| noisy(3, 1.0, 0.2, 0.0, r)).collect();
    let s = paired_speedup(&rounds_of(&arm, &arm), 1000, 0.95, 9).speedup;
    assert_eq!(
        s,
        Speedup {
            ratio: 1.0,
            ci_low: 1.0,
            ci_high: 1.0
        }
    );
    assert_eq!(s.decision(DELTA_DEDICATED), Decision::Same);
}

// -- rank statistics -----------------------------------------------------------------------

fn brute_force_hl(reference: &[f64], candidate: &[f64]) -> Vec<f64> {
    let mut d: Vec<f64> = reference
        .iter()
        .flat_map(|r| candidate.iter().map(move |c| r.ln() - c.ln()))
        .collect();
    d.sort_by(f64::total_cmp);
    d
}

#[test]
fn hodges_lehmann_of_a_small_case_by_hand() {
    // ln 2 - ln 1, ln 2 - ln 2, ln 4 - ln 1, ln 4 - ln 2 = {ln 2, 0, ln 4, ln 2}: median ln 2
    let s = hodges_lehmann(&samples(&[2.0, 4.0]), &samples(&[1.0, 2.0]), 0.95);
    assert!(close(s.ratio, 2.0, 1e-12), "{s:?}");
    // 4 pairs are too few for a 95 % interval: it spans every difference
    assert!(
        close(s.ci_low, 1.0, 1e-12) && close(s.ci_high, 4.0, 1e-12),
        "{s:?}"
    );
}

#[test]
fn hodges_lehmann_interval_index_is_rounded_down() {
    // m = n = 11, no ties: mn/2 - z sqrt(mn(m+n+1)/12) = 60.5 - 1.96 x 15.23 = 30.65 -> 30,
    // so the interval is [d_(30), d_(92)] of the 121 sorted differences
    let r: Vec<f64> = (1..=11).map(f64::from).collect();
    let c: Vec<f64> = r.iter().map(|v| v + 0.5).collect();
    let s = hodges_lehmann(&samples(&r), &samples(&c), 0.95);
    let d = brute_force_hl(&r, &c);
    assert!(close(s.ratio, d[60].exp(), 1e-12), "{s:?}");
    assert!(
        close(s.ci_low, d[29].exp(), 1e-12),
        "{s:?} vs {}",
        d[29].exp()
    );
    assert!(
        close(s.ci_high, d[91].exp(), 1e-12),
        "{s:?} vs {}",
        d[91].exp()
    );
}

#[test]
fn pair_order_statistics_match_a_full_sort() {
    for (seed, m, n, tick) in [
        (1, 7, 5, 0.0),
        (2, 40, 33, 0.05),
        (3, 64, 64, 0.2),
        (4, 1, 9, 0.0),
        (5, 30, 30, 1.0),
    ] {
        let r = noisy(m, 1.0, 0.5, tick, seed);
        let c = noisy(n, 1.2, 0.5, tick, seed + 100);
        let sorted = brute_force_hl(&r, &c);
        let mut x: Vec<f64> = r.iter().map(|v| v.ln()).collect();
        let mut y: Vec<f64> = c.iter().map(|v| v.ln()).collect();
        x.sort_by(f64::total_cmp);
        y.sort_by(f64::total_cmp);
        let pairs = PairDifferences { x, y };
        for k in 1..=sorted.len() as u64 {
            assert_eq!(pairs.kth(k), sorted[k as usize - 1], "seed {seed} k {k}");
        }
    }
}

#[test]
fn hodges_lehmann_matches_brute_force_and_mann_whitney_indices() {
    // ties from quantization included
    let (r, c) = (noisy(60, 1.0, 0.3, 0.02, 21), noisy(45, 0.8, 0.3, 0.02, 22));
    let (rs, cs) = (samples(&r), samples(&c));
    let s = hodges_lehmann(&rs, &cs, 0.95);
    let d = brute_force_hl(&r, &c);
    let total = d.len();
    assert!(close(
        s.ratio.ln(),
        (d[total / 2 - 1] + d[total / 2]) / 2.0,
        1e-12
    ));
    let (_, ties) = u_statistic(rs.sorted_ms(), cs.sorted_ms());
    let k = (total as f64 / 2.0 - 1.959963984540054 * u_sigma(60, 45, ties)).floor() as usize;
    assert!(
        close(s.ci_low, d[k - 1].exp(), 1e-12) && close(s.ci_high, d[total - k].exp(), 1e-12),
        "{s:?}"
    );
    assert!(s.ci_low < s.ratio && s.ratio < s.ci_high);
    assert!(close(s.ratio, 1.25, 0.1), "{s:?}");
}

#[test]
fn hodges_lehmann_of_a_pure_scale_shift_is_exact() {
    // pairwise differences of x - (x + s) are symmetric about -s
    let r = noisy(101, 1.0, 0.4, 0.0, 31);
    let c: Vec<f64> = r.iter().map(|v| v * 2.0).collect();
    let s = hodges_lehmann(&samples(&r), &samples(&c), 0.95);
    assert!(close(s.ratio, 0.5, 1e-12), "{s:?}");
    // swapping the arms inverts the estimate and the interval
    let t = hodges_lehmann(&samples(&c), &samples(&r), 0.95);
    assert!(close(t.ratio, 1.0 / s.ratio, 1e-12));
    assert!(close(t.ci_low, 1.0 / s.ci_high, 1e-12) && close(t.ci_high, 1.0 / s.ci_low, 1e-12));
}

#[test]
fn mann_whitney_matches_the_reference_formula() {
    // R: wilcox.test(c(4,5,6), c(1,2,3), alternative = "greater", exact = FALSE) -> 0.04043
    let w = mann_whitney(&samples(&[4.0, 5.0, 6.0]), &samples(&[1.0, 2.0, 3.0]));
    assert_eq!(w.u, 9.0);
    assert!(close(w.p_faster, 0.04042779918502615, 1e-9), "{w:?}");
    assert!(close(w.p_slower, 0.9854518341293739, 1e-9), "{w:?}");
    assert!(close(w.z, 4.5 / 5.25f64.sqrt(), 1e-12));
}

#[test]
fn mann_whitney_corrects_for_ties() {
    // U = 2 x 3.5 + 5 + 5 = 17; one tie group of five 3s; var = 20/12 (10 - 120/72)
    let w = mann_whitney(
        &samples(&[3.0, 3.0, 4.0, 5.0]),
        &samples(&[1.0, 2.0, 3.0, 3.0, 3.0]),
    );
    assert_eq!(w.u, 17.0);
    assert!(
        close(w.z, 7.0 / 13.888888888888891f64.sqrt(), 1e-12),
        "{w:?}"
    );
    assert!(close(w.p_faster, 0.04056794851105706, 1e-9), "{w:?}");
    assert!(close(w.p_slower, 0.9779143275457787, 1e-9), "{w:?}");
}

#[test]
fn mann_whitney_of_equal_and_all_tied_arms() {
    let a = samples(&noisy(50, 1.0, 0.2, 0.0, 41));
    let w = mann_whitney(&a, &a);
    assert_eq!(w.u, 1250.0);
    assert_eq!(w.z, 0.0);
    assert!(
        w.p_faster > 0.5 && close(w.p_faster, w.p_slower, 1e-12),
        "{w:?}"
    );
    let tied = samples(&[1.0; 30]);
    assert_eq!(
        mann_whitney(&tied, &tied),
        MannWhitney {
            u: 450.0,
            z: 0.0,
            p_faster: 1.0,
            p_slower: 1.0
        }
    );
}

#[test]
fn mann_whitney_is_antisymmetric_in_the_arms() {
    let (a, b) = (
        samples(&noisy(40, 1.0, 0.3, 0.05, 51)),
        samples(&noisy(35, 0.9, 0.3, 0.05, 52)),
    );
    let (ab, ba) = (mann_whitney(&a, &b), mann_whitney(&b, &a));
    assert_eq!(ab.u + ba.u, (40 * 35) as f64);
    assert!(close(ab.p_faster, ba.p_slower, 1e-12) && close(ab.p_slower, ba.p_faster, 1e-12));
    assert!(ab.p_faster < 0.05, "{ab:?}");
}

// -- ratio of means ------------------------------------------------------------------------

#[test]
fn fieller_by_hand() {
    // a = 10, b = 5, var 1 and 0.25, t = 2: 24 θ² - 100 θ + 96 = 0 -> θ = 1.5, 8/3
    let r = fieller(10.0, 1.0, 5.0, 0.25, 2.0);
    let ci = r.ci.unwrap();
    assert_eq!(r.ratio, 2.0);
    assert!(
        close(ci.low, 1.5, 1e-12) && close(ci.high, 8.0 / 3.0, 1e-12),
        "{r:?}"
    );
    // no uncertainty in the denominator: (a ± t sqrt(var_a)) / b
    let ci = fieller(10.0, 1.0, 5.0, 0.0, 2.0).ci.unwrap();
    assert!(close(ci.low, 1.6, 1e-12) && close(ci.high, 2.4, 1e-12));
    // the denominator's mean is within t standard errors of zero: unbounded
    assert_eq!(fieller(10.0, 1.0, 1.0, 1.0, 2.0).ci, None);
}

#[test]
fn ratio_of_means_agrees_with_the_delta_method_when_precise() {
    let (r, c) = (noisy(400, 3.0, 0.1, 0.0, 61), noisy(400, 1.5, 0.1, 0.0, 62));
    let (rs, cs) = (samples(&r), samples(&c));
    let m = ratio_of_means(&rs, &cs, 0.95);
    assert_eq!(m.ratio, rs.mean_ms() / cs.mean_ms());
    let ci = m.ci.unwrap();
    assert!(ci.low < m.ratio && m.ratio < ci.high);
    let cv2 = |s: &Samples| s.variance_ms2() / s.len() as f64 / s.mean_ms().powi(2);
    let delta_half = 1.9659 * m.ratio * (cv2(&rs) + cv2(&cs)).sqrt(); // t with 399 df
    assert!(
        close((ci.high - ci.low) / 2.0, delta_half, 0.01),
        "{m:?} vs ±{delta_half}"
    );
}

// -- decision ------------------------------------------------------------------------------

#[test]
fn decision_labels_and_their_edges() {
    let d = DELTA_DEDICATED;
    assert_eq!(decide(1.02, 1.10, d), Decision::Faster);
    assert_eq!(decide(0.90, 0.98, d), Decision::Slower);
    assert_eq!(decide(0.995, 1.005, d), Decision::Same);
    assert_eq!(decide(0.99, 1.01, d), Decision::Same);
    assert_eq!(decide(0.98, 1.005, d), Decision::Inconclusive);
    assert_eq!(decide(1.005, 1.05, d), Decision::Inconclusive);
    assert_eq!(decide(0.5, 2.0, d), Decision::Inconclusive);
    // on the edge of the band is not beyond it
    assert_eq!(decide(1.0 + d, 1.2, d), Decision::Inconclusive);
    // the shared band is wider
    assert_eq!(decide(1.02, 1.10, DELTA_SHARED), Decision::Inconclusive);
    assert_eq!(decide(0.98, 1.02, DELTA_SHARED), Decision::Same);
}

#[test]
fn decision_strings_are_stable() {
    for (d, s) in [
        (Decision::Faster, "faster"),
        (Decision::Slower, "slower"),
        (Decision::Same, "same"),
        (Decision::Inconclusive, "inconclusive"),
    ] {
        assert_eq!(d.as_str(), s);
        assert_eq!(d.to_string(), s);
        assert_eq!(serde_json::to_string(&d).unwrap(), format!("\"{s}\""));
        assert_eq!(
            serde_json::from_str::<Decision>(&format!("\"{s}\"")).unwrap(),
            d
        );
    }
}

// -- suite ---------------------------------------------------------------------------------

#[test]
fn benjamini_hochberg_steps_up() {
    // thresholds k q / m = 0.0125, 0.025, 0.0375, 0.05: rank 2 fails alone, rank 3 passes
    assert_eq!(
        benjamini_hochberg(&[0.2, 0.035, 0.001, 0.03], 0.05),
        [false, true, true, true]
    );
    assert_eq!(
        benjamini_hochberg(&[0.01, 0.04, 0.03, 0.005], 0.05),
        [true; 4]
    );
    assert_eq!(benjamini_hochberg(&[0.03, 0.5], 0.05), [false, false]);
    assert_eq!(benjamini_hochberg(&[0.02, 0.5], 0.05), [true, false]);
    assert_eq!(benjamini_hochberg(&[0.025, 0.025], 0.05), [true, true]);
    assert_eq!(benjamini_hochberg(&[f64::NAN, 0.001], 0.05), [false, true]);
    assert!(benjamini_hochberg(&[], 0.05).is_empty());
}

#[test]
fn geometric_mean_of_reciprocals_is_one() {
    assert!((geometric_mean(&[2.0, 0.5]).unwrap() - 1.0).abs() < 1e-12);
    assert_eq!(geometric_mean(&[]), None);
}

#[test]
fn geometric_mean_ci_of_two_point_tasks() {
    // outer draws give 0.5, 1 or 2 with probability 1/4, 1/2, 1/4
    let tasks = [
        TaskDraws {
            ratio: 2.0,
            replicates: &[],
        },
        TaskDraws {
            ratio: 0.5,
            replicates: &[],
        },
    ];
    let s = geometric_mean_ci(&tasks, DEFAULT_RESAMPLES, 0.95, 3).unwrap();
    assert!(close(s.ratio, 1.0, 1e-12));
    assert!(
        close(s.ci_low, 0.5, 1e-12) && close(s.ci_high, 2.0, 1e-12),
        "{s:?}"
    );
}

#[test]
fn geometric_mean_ci_includes_within_task_spread() {
    let spread: Vec<f64> = noisy(DEFAULT_RESAMPLES, 1.5, 0.2, 0.0, 71);
    let tight = [TaskDraws {
        ratio: 1.5,
        replicates: &[1.5; 10],
    }];
    let s = geometric_mean_ci(&tight, 1000, 0.95, 1).unwrap();
    assert!(
        close(s.ratio, 1.5, 1e-12) && close(s.ci_low, 1.5, 1e-12) && close(s.ci_high, 1.5, 1e-12)
    );
    let loose = [TaskDraws {
        ratio: 1.5,
        replicates: &spread,
    }];
    let s = geometric_mean_ci(&loose, 1000, 0.95, 1).unwrap();
    assert!(
        s.ci_low < 1.4 && s.ci_high > 1.6 && s.ci_low < s.ratio && s.ratio < s.ci_high,
        "{s:?}"
    );
    assert_eq!(s, geometric_mean_ci(&loose, 1000, 0.95, 1).unwrap());
}

#[test]
fn geometric_mean_ci_rejects_bad_input() {
    assert_eq!(
        geometric_mean_ci(&[], 10, 0.95, 1),
        Err(StatsError::EmptySuite)
    );
    let bad = [
        TaskDraws {
            ratio: 1.0,
            replicates: &[],
        },
        TaskDraws {
            ratio: 1.0,
            replicates: &[1.0, 0.0],
        },
    ];
    assert_eq!(
        geometric_mean_ci(&bad, 10, 0.95, 1),
        Err(StatsError::BadSpeedup {
            index: 1,
            value: 0.0
        })
    );
}

#[test]
fn fast_p_point_and_significant() {
    let s = |ratio, ci_low| {
        Some(Speedup {
            ratio,
            ci_low,
            ci_high: ratio + 1.0,
        })
    };
    let tasks = [s(1.2, 1.1), s(1.6, 0.9), s(0.8, 0.7), None];
    assert_eq!(
        fast_p(&tasks, 0.0),
        Some(FastP {
            p: 0.0,
            point: 0.75,
            significant: 0.75
        })
    );
    assert_eq!(
        fast_p(&tasks, 1.0),
        Some(FastP {
            p: 1.0,
            point: 0.5,
            significant: 0.25
        })
    );
    assert_eq!(
        fast_p(&tasks, 1.5),
        Some(FastP {
            p: 1.5,
            point: 0.25,
            significant: 0.0
        })
    );
    assert_eq!(
        fast_p(&tasks, 2.0),
        Some(FastP {
            p: 2.0,
            point: 0.0,
            significant: 0.0
        })
    );
    assert_eq!(fast_p(&[], 1.0), None);
}

// -- outliers ------------------------------------------------------------------------------

#[test]
fn tukey_fences_by_hand() {
    // Q1 = x[3] = 101, Q3 = x[9] = 107, IQR 6: mild fences 92 / 116, severe 83 / 125
    let values = [
        130.0, 80.0, 90.0, 100.0, 101.0, 102.0, 103.0, 104.0, 105.0, 106.0, 107.0, 108.0, 120.0,
    ];
    let s = samples(&values);
    let labels = tukey_labels(&s);
    use Outlier::*;
    assert_eq!(labels[..3], [HighSevere, LowSevere, LowMild]);
    assert!(labels[3..12].iter().all(|l| *l == NotAnOutlier));
    assert_eq!(labels[12], HighMild);
    let counts = OutlierCounts::from_labels(&labels);
    assert_eq!(
        counts,
        OutlierCounts {
            low_severe: 1,
            low_mild: 1,
            high_mild: 1,
            high_severe: 1
        }
    );
    assert_eq!(counts.severe(), 2);
    // 130 comes first but lies 26 above a median of 104, under 10 MAD = 30: no warm-up warning
    assert_eq!(sample_warnings(&s), [SampleWarning::NoisyEnvironment]);
    let mut slow_first = values;
    slow_first[0] = 135.0;
    assert_eq!(
        sample_warnings(&samples(&slow_first)),
        [
            SampleWarning::WarmupTooShort,
            SampleWarning::NoisyEnvironment
        ]
    );
    assert_eq!(
        serde_json::to_string(&HighSevere).unwrap(),
        "\"high_severe\""
    );
    assert_eq!(
        serde_json::to_string(&SampleWarning::WarmupTooShort).unwrap(),
        "\"warmup_too_short\""
    );
}

#[test]
fn warmup_warning_needs_a_slow_first_sample() {
    let mut values = noisy(100, 1.0, 0.01, 0.0, 81);
    assert!(sample_warnings(&samples(&values)).is_empty());
    values[0] = 2.0;
    assert_eq!(
        sample_warnings(&samples(&values)),
        [SampleWarning::WarmupTooShort]
    );
    // the same slow sample later is one high outlier among 100: no warning
    values.swap(0, 50);
    assert!(sample_warnings(&samples(&values)).is_empty());
}

#[test]
fn warnings_ignore_one_tick_on_quantized_times() {
    // a 20 µs sample (the burst floor of step 8) at 0.5 µs event resolution, most samples on
    // one tick: MAD = IQR = 0, yet one tick (2.5 %) is neither a warm-up problem nor severe
    let mut values = vec![0.020; 80];
    values.extend([0.0205; 20]);
    values.swap(0, 99);
    let s = samples(&values);
    assert_eq!(s.mad_ms(), 0.0);
    assert_eq!(s.quantile_ms(0.75) - s.quantile_ms(0.25), 0.0);
    assert!(sample_warnings(&s).is_empty());
    assert!(tukey_labels(&s).iter().all(|l| *l != Outlier::HighSevere));
}

#[test]
fn noisy_environment_needs_more_than_five_percent_severe() {
    let mut values = vec![1.0; 100];
    for (i, v) in values.iter_mut().enumerate() {
        *v += (i % 10) as f64 * 0.001;
    }
    for v in &mut values[50..55] {
        *v = 5.0;
    }
    assert!(
        sample_warnings(&samples(&values)).is_empty(),
        "5 of 100 is not more than 5 %"
    );
    values[60] = 5.0;
    assert_eq!(
        sample_warnings(&samples(&values)),
        [SampleWarning::NoisyEnvironment]
    );
}

// -- stopping ------------------------------------------------------------------------------

#[test]
fn median_rank_interval_by_hand() {
    // n = 100, z√n / 2 = 9.80: l = ⌊40.2⌋ = 40, u = ⌈60.8⌉ = 61
    let sorted: Vec<f64> = (1..=100).map(f64::from).collect();
    assert_eq!(
        median_rank_interval(&sorted, z_two_sided(0.95)),
        (40.0, 61.0)
    );
    // tiny samples clamp to the extremes
    assert_eq!(
        median_rank_interval(&[1.0, 2.0, 3.0], z_two_sided(0.95)),
        (1.0, 3.0)
    );
    let s = samples(&sorted);
    let expected = std::f64::consts::SQRT_2 * (61f64.ln() - 40f64.ln()) / 2.0;
    assert!(close(log_ratio_half_width(&s, &s, 0.95), expected, 1e-12));
    assert!(!precision_reached(&s, &s, 0.01));
}

#[test]
fn precision_is_reached_on_tight_arms_only_with_enough_samples() {
    let tight = samples(&noisy(200, 1.0, 0.01, 0.0, 91));
    let also_tight = samples(&noisy(200, 0.5, 0.01, 0.0, 92));
    assert!(log_ratio_half_width(&tight, &also_tight, 0.95) < 0.005);
    assert!(precision_reached(&tight, &also_tight, 0.01));
    assert!(!precision_reached(&tight, &also_tight, 0.001));
    let few = samples(&noisy(MIN_SAMPLES_FOR_STOPPING - 1, 1.0, 0.0001, 0.0, 93));
    assert!(!precision_reached(&few, &tight, 0.5));
    // the half-width is symmetric in the arms
    assert_eq!(
        log_ratio_half_width(&tight, &also_tight, 0.95),
        log_ratio_half_width(&also_tight, &tight, 0.95)
    );
}

#[test]
fn quantile_speedup_reads_tails() {
    let base = noisy(500, 1.0, 0.05, 0.0, 101);
    let same = quantile_speedup(&base, &base, 0.99, 1_000, 0.95, 7);
    assert!((same.ratio - 1.0).abs() < 1e-12, "{same:?}");
    assert!(same.ci_low <= 1.0 && 1.0 <= same.ci_high, "{same:?}");
    // A candidate whose slowest 5 % take ten times longer: medians agree, p99s do not.
    let mut tail = base.clone();
    for v in tail.iter_mut().take(25) {
        *v *= 10.0;
    }
    let p99 = quantile_speedup(&base, &tail, 0.99, 1_000, 0.95, 7);
    assert!(p99.ci_high < 0.5, "{p99:?}");
    let p50 = quantile_speedup(&base, &tail, 0.5, 1_000, 0.95, 7);
    assert!(p50.ci_low < 1.0 && p50.ci_high > 0.95, "{p50:?}");
}

#[test]
fn fast_p_band_brackets_the_point() {
    let s = |ratio: f64, ci_low: f64, ci_high: f64| {
        Some(Speedup {
            ratio,
            ci_low,
            ci_high,
        })
    };
    let tasks = [s(1.2, 0.9, 1.5), s(2.0, 1.8, 2.2), None, s(0.8, 0.7, 0.9)];
    let (low, high) = fast_p_band(&tasks, 1.0).unwrap();
    assert_eq!((low, high), (0.25, 0.5));
    assert_eq!(fast_p(&tasks, 1.0).unwrap().point, 0.5);
    assert_eq!(fast_p_band(&[], 1.0), None);
}

#[test]
fn ratio_of_speedups_from_replicates_and_from_intervals() {
    let before = Speedup {
        ratio: 2.0,
        ci_low: 1.9,
        ci_high: 2.1,
    };
    let after = Speedup {
        ratio: 1.0,
        ci_low: 0.95,
        ci_high: 1.05,
    };
    let rb: Vec<f64> = (0..200).map(|i| 1.9 + 0.001 * f64::from(i)).collect();
    let ra: Vec<f64> = (0..200).map(|i| 0.95 + 0.0005 * f64::from(i)).collect();
    let r = ratio_of_speedups((&before, &rb), (&after, &ra), 2_000, 0.95, 7);
    assert_eq!(r.speedup.ratio, 0.5);
    assert!(r.speedup.ci_low < 0.5 && 0.5 < r.speedup.ci_high, "{r:?}");
    assert!(r.speedup.ci_low > 0.45 && r.speedup.ci_high < 0.55, "{r:?}");
    assert_eq!(r.replicates.len(), 2_000);
    assert_eq!(
        r,
        ratio_of_speedups((&before, &rb), (&after, &ra), 2_000, 0.95, 7)
    );
    // no replicates: the log half-widths add in quadrature
    let n = ratio_of_speedups((&before, &[]), (&after, &ra), 2_000, 0.95, 7);
    assert!(n.replicates.is_empty());
    let half = |s: &Speedup| (s.ci_high / s.ci_low).ln() / 2.0;
    let expected = half(&before).hypot(half(&after));
    assert!(((n.speedup.ci_high / 0.5).ln() - expected).abs() < 1e-12);
    assert!(((0.5 / n.speedup.ci_low).ln() - expected).abs() < 1e-12);
}
