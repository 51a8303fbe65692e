//! Tests of the pipeline as a whole: its seeds, and whole evaluations through the real `Python`
//! backend over scripted workers (no Python, no GPU).

use super::*;

#[test]
fn derived_seeds_differ_and_repeat() {
    let seeds: Vec<u64> = (0..10).map(|i| derive_seed(42, i)).collect();
    let mut unique = seeds.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), 10);
    assert_eq!(seeds[3], derive_seed(42, 3));
    assert!(
        seeds.iter().all(|s| *s < 1 << 53),
        "seeds must survive JSON as exact numbers"
    );
    // The worker derives timed calls' seeds the same way (timing.py derive_seed(42, 3)).
    assert_eq!(derive_seed(42, 3), 542_934_981_142_619);
}
