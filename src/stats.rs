//! Statistics of the timing protocol (docs/design/timing.md 10.3 step 13 and 10.4): samples of one arm,
//! speedups with confidence intervals, rank tests, decision labels, suite aggregates and
//! sample-quality warnings. Pure: no I/O, no clocks, no global state; every resampling takes a
//! seed, so the same samples always give the same report. It must not decide what a sample is,
//! when to take one, or what a verdict is: it computes on the numbers it is given. Times are
//! `f64` milliseconds; a speedup is always reference time / candidate time (> 1 = faster).

mod pairwise;
mod suite;

pub use pairwise::*;
pub use suite::{
    benjamini_hochberg, fast_p, fast_p_band, geometric_mean, geometric_mean_ci, ratio_of_speedups,
    FastP, TaskDraws,
};
