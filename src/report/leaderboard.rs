//! `kbench leaderboard RUN_DIR...`: one ranked row per submitter (one run each), in the
//! versioned board schema of docs/csv-schema.md. Runs are merged only when their results can
//! be compared (same mode, device, precision, tolerances, task set and sizes, library policy,
//! GPU model). fast_p and correctness count over the union of the runs' tasks, so a submitter
//! gains nothing by leaving hard tasks out; a task flagged degenerate in any run counts nowhere.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::error::{Error, Result};
use crate::record::RunRecord;
use crate::report::summary::{self, TaskOutcome};
use crate::stats::{self, Speedup, TaskDraws};
use crate::task::TaskId;

/// Bumped whenever a board column changes meaning or disappears (new columns go at the end).
pub const BOARD_SCHEMA: u32 = 1;

/// Seed of the geometric mean's bootstrap: the board is a function of the records alone.
const SEED: u64 = 0x1ead_b0a4d;

/// One submitter's run.
pub struct Entry<'a> {
    pub submitter: String,
    pub record: &'a RunRecord,
}

#[derive(Debug, Serialize)]
struct Row {
    board_schema: u32,
    rank: usize,
    submitter: String,
    run_id: String,
    kbench_version: String,
    config_hash: String,
    mode: String,
    precision: String,
    gpu: String,
    driver: String,
    torch: String,
    cuda: String,
    /// The union of the runs' tasks that count (not degenerate in any run).
    tasks: usize,
    /// Of those, the tasks this run has a correct result for, and their share.
    correct_tasks: usize,
    correctness: f64,
    fast_0: f64,
    fast_1: f64,
    fast_1_5: f64,
    fast_2: f64,
    /// fast_1 counting only tasks whose interval lies wholly above 1.
    fast_1_significant: f64,
    geomean_speedup: Option<f64>,
    geomean_ci_low: Option<f64>,
    geomean_ci_high: Option<f64>,
    /// Passing tasks behind the geometric mean.
    geomean_tasks: usize,
}

/// The settings two runs must share to sit on one board, by name.
fn comparable(r: &RunRecord) -> Vec<(&'static str, String)> {
    let c = &r.config;
    vec![
        ("mode", c.mode.clone()),
        ("device", c.device.clone()),
        ("precision", c.precision.clone()),
        ("atol", c.atol.to_string()),
        ("rtol", c.rtol.to_string()),
        ("tasks", c.tasks.clone()),
        ("sizes", c.overrides.to_string()),
        ("library policy", c.library_policy.clone()),
        ("gpu", r.environment.gpu_names()),
    ]
}

/// Refuse runs that cannot be ranked together, naming what differs.
fn check_comparable(entries: &[Entry<'_>]) -> Result<()> {
    let Some(first) = entries.first() else {
        return Ok(());
    };
    let base = comparable(first.record);
    for e in &entries[1..] {
        let differ: Vec<String> = comparable(e.record)
            .into_iter()
            .zip(&base)
            .filter(|(a, b)| a.1 != b.1)
            .map(|(a, b)| format!("{} {} vs {}", a.0, a.1, b.1))
            .collect();
        if !differ.is_empty() {
            return Err(Error::Usage(format!(
                "merge {} and {} into one board: their results are not comparable ({})",
                e.submitter,
                first.submitter,
                differ.join("; ")
            )));
        }
    }
    Ok(())
}

/// The board as CSV bytes, best first: by fast_1, then the geometric mean, then correctness.
pub fn render(entries: &[Entry<'_>]) -> Result<Vec<u8>> {
    check_comparable(entries)?;
    let outcomes: Vec<BTreeMap<TaskId, TaskOutcome<'_>>> = entries
        .iter()
        .map(|e| {
            summary::task_outcomes(e.record)
                .into_iter()
                .map(|o| (o.task, o))
                .collect()
        })
        .collect();
    let degenerate: BTreeSet<TaskId> = outcomes
        .iter()
        .flat_map(|m| m.values().filter(|o| o.degenerate).map(|o| o.task))
        .collect();
    let tasks: BTreeSet<TaskId> = outcomes
        .iter()
        .flat_map(|m| m.keys().copied())
        .filter(|t| !degenerate.contains(t))
        .collect();
    let mut rows: Vec<Row> = entries
        .iter()
        .zip(&outcomes)
        .map(|(e, m)| row(e, m, &tasks))
        .collect();
    rows.sort_by(|a, b| {
        let g = |r: &Row| r.geomean_speedup.unwrap_or(0.0);
        b.fast_1
            .total_cmp(&a.fast_1)
            .then(g(b).total_cmp(&g(a)))
            .then(b.correctness.total_cmp(&a.correctness))
    });
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let fail = |e: ::csv::Error| Error::Other(format!("write the board: {e}"));
    for (i, mut r) in rows.into_iter().enumerate() {
        r.rank = i + 1;
        w.serialize(r).map_err(fail)?;
    }
    w.into_inner()
        .map_err(|e| Error::Other(format!("write the board: {e}")))
}

fn row(
    e: &Entry<'_>,
    outcomes: &BTreeMap<TaskId, TaskOutcome<'_>>,
    tasks: &BTreeSet<TaskId>,
) -> Row {
    let r = e.record;
    let counted: Vec<Option<(Speedup, Vec<f64>)>> = tasks
        .iter()
        .map(|t| outcomes.get(t).and_then(TaskOutcome::speedup))
        .collect();
    let speedups: Vec<Option<Speedup>> = counted.iter().map(|c| c.as_ref().map(|c| c.0)).collect();
    let fast = |p: f64| stats::fast_p(&speedups, p).map_or(0.0, |f| f.point);
    let draws: Vec<TaskDraws<'_>> = counted
        .iter()
        .flatten()
        .map(|(s, replicates)| TaskDraws {
            ratio: s.ratio,
            replicates,
        })
        .collect();
    let geomean =
        stats::geometric_mean_ci(&draws, stats::DEFAULT_RESAMPLES, stats::DEFAULT_LEVEL, SEED).ok();
    let correct_tasks = tasks
        .iter()
        .filter(|t| {
            outcomes
                .get(t)
                .is_some_and(|o| o.shown.verdict.is_correct())
        })
        .count();
    let env = &r.environment;
    Row {
        board_schema: BOARD_SCHEMA,
        rank: 0,
        submitter: e.submitter.clone(),
        run_id: r.run_id.clone(),
        kbench_version: r.kbench_version.clone(),
        config_hash: r.config.hash(),
        mode: r.config.mode.clone(),
        precision: r.config.precision.clone(),
        gpu: env.gpu_names(),
        driver: env.driver.clone().unwrap_or_default(),
        torch: env.torch.clone().unwrap_or_default(),
        cuda: env.torch_cuda.clone().unwrap_or_default(),
        tasks: tasks.len(),
        correct_tasks,
        correctness: if tasks.is_empty() {
            0.0
        } else {
            correct_tasks as f64 / tasks.len() as f64
        },
        fast_0: fast(0.0),
        fast_1: fast(1.0),
        fast_1_5: fast(1.5),
        fast_2: fast(2.0),
        fast_1_significant: stats::fast_p(&speedups, 1.0).map_or(0.0, |f| f.significant),
        geomean_speedup: geomean.map(|g| g.ratio),
        geomean_ci_low: geomean.map(|g| g.ci_low),
        geomean_ci_high: geomean.map(|g| g.ci_high),
        geomean_tasks: draws.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_record;
    use crate::verdict::Verdict;

    /// A second submitter: the sample run without its level-2 results.
    fn partial() -> RunRecord {
        let mut r = sample_record();
        r.run_id = "run-partial".into();
        r.evaluations.retain(|e| e.task.level == 1);
        r
    }

    /// A third: every correct result of the sample run incorrect.
    fn wrong() -> RunRecord {
        let mut r = sample_record();
        r.run_id = "run-wrong".into();
        for e in &mut r.evaluations {
            if e.verdict.is_correct() {
                e.verdict = Verdict::Incorrect;
                e.timing = None;
            }
        }
        r
    }

    #[test]
    fn board_snapshot() {
        let (a, b, c) = (sample_record(), partial(), wrong());
        let entries = [
            Entry {
                submitter: "wrong".into(),
                record: &c,
            },
            Entry {
                submitter: "partial".into(),
                record: &b,
            },
            Entry {
                submitter: "full".into(),
                record: &a,
            },
        ];
        insta::assert_snapshot!(String::from_utf8(render(&entries).unwrap()).unwrap());
    }

    #[test]
    fn missing_tasks_count_as_failures() {
        let (a, b) = (sample_record(), partial());
        let text = String::from_utf8(
            render(&[
                Entry {
                    submitter: "partial".into(),
                    record: &b,
                },
                Entry {
                    submitter: "full".into(),
                    record: &a,
                },
            ])
            .unwrap(),
        )
        .unwrap();
        let mut rows = ::csv::Reader::from_reader(text.as_bytes());
        let rows: Vec<::csv::StringRecord> = rows.records().map(|r| r.unwrap()).collect();
        // full: L1/19 and L2/5 above 1 of the four counted tasks; partial: L1/19 only
        assert_eq!(&rows[0][2], "full");
        assert_eq!((&rows[0][12], &rows[0][16]), ("4", "0.5"));
        assert_eq!(
            (&rows[1][2], &rows[1][12], &rows[1][16]),
            ("partial", "4", "0.25")
        );
    }

    #[test]
    fn runs_that_cannot_be_compared_are_refused() {
        let a = sample_record();
        let mut b = sample_record();
        b.config.precision = "fp16".into();
        let err = render(&[
            Entry {
                submitter: "a".into(),
                record: &a,
            },
            Entry {
                submitter: "b".into(),
                record: &b,
            },
        ])
        .unwrap_err()
        .to_string();
        assert!(err.contains("precision fp16 vs fp32"), "{err}");
    }
}
