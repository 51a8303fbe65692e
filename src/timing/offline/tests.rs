//! Tests of the offline schedule: bursts and the order of rounds.

use super::*;
use ArmId::{Candidate, Compiled, Eager};

#[test]
fn calls_under_ten_microseconds_are_timed_in_bursts() {
    assert_eq!(burst_size(0.056), 1);
    assert_eq!(burst_size(0.010), 1);
    assert_eq!(burst_size(0.008), 3);
    assert_eq!(burst_size(0.002), 10);
    assert_eq!(burst_size(0.0001), BURST_MAX);
    assert_eq!(burst_size(0.0), 1);
    assert_eq!(burst_size(f64::INFINITY), 1);
}

#[test]
fn rounds_are_palindromes_with_a_rotated_start() {
    assert_eq!(round_order(0, 2), [Eager, Candidate, Candidate, Eager]);
    assert_eq!(round_order(1, 2), [Candidate, Eager, Eager, Candidate]);
    let three: Vec<Vec<ArmId>> = (0..3).map(|r| round_order(r, 3)).collect();
    assert_eq!(
        three[0],
        [Eager, Compiled, Candidate, Candidate, Compiled, Eager]
    );
    assert_eq!(
        three[1],
        [Compiled, Candidate, Eager, Eager, Candidate, Compiled]
    );
    assert_eq!(round_order(3, 3), three[0]);
    // Over a cycle of starts every arm holds every position once.
    for position in 0..6 {
        let mut arms: Vec<usize> = three.iter().map(|o| o[position].index()).collect();
        arms.sort();
        assert_eq!(arms, [0, 1, 2]);
    }
}
