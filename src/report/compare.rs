//! `kbench compare A B`: two runs task by task. Per task the speedup ratio B/A of its counted
//! result (the summary's), else of a correct `no_kernel` one, with an interval from both runs'
//! raw samples (their paired bootstraps, drawn independently), a label against
//! a practical band, and verdict changes; over the suite, both runs' geometric means and the
//! geometric mean of B/A over the tasks that count in both. The regression gate
//! (`--fail-on-regression X`) fails on a task or a suite ratio whose interval lies wholly below
//! 1 - X, and on a task correct in A but not in B.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use serde::Serialize;

use crate::record::RunRecord;
use crate::report::summary::{self, TaskOutcome};
use crate::stats::{self, Speedup, TaskDraws};
use crate::task::TaskId;
use crate::verdict::Verdict;

/// Bootstrap replicates of each task's ratio and of the suite's geometric mean.
const RESAMPLES: usize = 2_000;
/// Fixed: a comparison is a function of the two records alone.
const SEED: u64 = 0xc0_3a_4e;

/// What a task's ratio B/A says against the band [1 - band, 1 + band].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Change {
    Improved,
    Regressed,
    Same,
    Inconclusive,
}

impl Change {
    fn of(ratio: &Speedup, band: f64) -> Change {
        match ratio.decision(band) {
            stats::Decision::Faster => Change::Improved,
            stats::Decision::Slower => Change::Regressed,
            stats::Decision::Same => Change::Same,
            stats::Decision::Inconclusive => Change::Inconclusive,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            Change::Improved => "improved",
            Change::Regressed => "regressed",
            Change::Same => "same",
            Change::Inconclusive => "inconclusive",
        }
    }
}

/// One task in either run.
#[derive(Clone, Debug, Serialize)]
pub struct TaskChange {
    pub task: TaskId,
    pub name: String,
    /// The verdict each run shows for the task (its counted result, else its first); None
    /// where the run did not evaluate the task.
    pub before: Option<Verdict>,
    pub after: Option<Verdict>,
    /// Each run's speedup (counted, else correct and timed).
    pub before_speedup: Option<f64>,
    pub after_speedup: Option<f64>,
    /// B/A where both runs have a counted speedup, with its label.
    pub ratio: Option<Speedup>,
    pub change: Option<Change>,
    /// Degenerate in either run: shown, never in the suite ratio.
    pub degenerate: bool,
}

impl TaskChange {
    /// Correct in A, not correct (or not evaluated) in B.
    pub fn broke(&self) -> bool {
        self.before.is_some_and(Verdict::is_correct) && !self.after.is_some_and(Verdict::is_correct)
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Comparison {
    pub before_run: String,
    pub after_run: String,
    pub band: f64,
    pub tasks: Vec<TaskChange>,
    /// Each run's own suite geometric mean (`summary.json`'s total).
    pub before_geomean: Option<Speedup>,
    pub after_geomean: Option<Speedup>,
    /// The geometric mean of B/A over the tasks with a ratio that are not degenerate, and their
    /// number.
    pub suite_ratio: Option<Speedup>,
    pub suite_tasks: usize,
}

/// Compare run `after` (B) with run `before` (A).
pub fn compare(before: &RunRecord, after: &RunRecord, band: f64) -> Comparison {
    let a: BTreeMap<TaskId, TaskOutcome<'_>> = summary::task_outcomes(before)
        .into_iter()
        .map(|o| (o.task, o))
        .collect();
    let b: BTreeMap<TaskId, TaskOutcome<'_>> = summary::task_outcomes(after)
        .into_iter()
        .map(|o| (o.task, o))
        .collect();
    let mut ids: Vec<TaskId> = a.keys().chain(b.keys()).copied().collect();
    ids.sort_unstable();
    ids.dedup();
    let mut draws: Vec<(f64, Vec<f64>)> = Vec::new();
    let tasks = ids
        .into_iter()
        .map(|id| {
            let (x, y) = (a.get(&id), b.get(&id));
            let sx = x.and_then(TaskOutcome::correct_speedup);
            let sy = y.and_then(TaskOutcome::correct_speedup);
            let degenerate = x.is_some_and(|o| o.degenerate) || y.is_some_and(|o| o.degenerate);
            let ratio = match (&sx, &sy) {
                (Some((s1, r1)), Some((s2, r2))) => {
                    let seed = SEED ^ (u64::from(id.level) << 32 | u64::from(id.number));
                    let r = stats::ratio_of_speedups(
                        (s1, r1),
                        (s2, r2),
                        RESAMPLES,
                        stats::DEFAULT_LEVEL,
                        seed,
                    );
                    if !degenerate {
                        draws.push((r.speedup.ratio, r.replicates));
                    }
                    Some(r.speedup)
                }
                _ => None,
            };
            TaskChange {
                task: id,
                name: x
                    .or(y)
                    .map(|o| o.shown.task_name.clone())
                    .unwrap_or_default(),
                before: x.map(|o| o.shown.verdict),
                after: y.map(|o| o.shown.verdict),
                before_speedup: sx.map(|s| s.0.ratio),
                after_speedup: sy.map(|s| s.0.ratio),
                change: ratio.as_ref().map(|r| Change::of(r, band)),
                ratio,
                degenerate,
            }
        })
        .collect();
    let task_draws: Vec<TaskDraws<'_>> = draws
        .iter()
        .map(|(ratio, replicates)| TaskDraws {
            ratio: *ratio,
            replicates,
        })
        .collect();
    Comparison {
        before_run: before.run_id.clone(),
        after_run: after.run_id.clone(),
        band,
        tasks,
        before_geomean: summary::summarize_run(before).total().geomean_speedup,
        after_geomean: summary::summarize_run(after).total().geomean_speedup,
        suite_ratio: stats::geometric_mean_ci(&task_draws, RESAMPLES, stats::DEFAULT_LEVEL, SEED)
            .ok(),
        suite_tasks: task_draws.len(),
    }
}

/// Why `--fail-on-regression threshold` fails the comparison (empty: it passes).
pub fn regressions(c: &Comparison, threshold: f64) -> Vec<String> {
    let floor = 1.0 - threshold;
    let mut out = Vec::new();
    for t in &c.tasks {
        let label = format!("level{}/{}", t.task.level, t.name);
        if t.broke() {
            out.push(format!(
                "{label}: {} in A, {} in B",
                t.before.map_or("-", Verdict::as_str),
                t.after.map_or("not evaluated", Verdict::as_str)
            ));
        } else if let Some(r) = t.ratio.filter(|r| r.ci_high < floor && !t.degenerate) {
            out.push(format!(
                "{label}: B/A {:.3} [{:.3}, {:.3}] below {floor:.3}",
                r.ratio, r.ci_low, r.ci_high
            ));
        }
    }
    if let Some(r) = c.suite_ratio.filter(|r| r.ci_high < floor) {
        out.push(format!(
            "suite: geomean B/A {:.3} [{:.3}, {:.3}] below {floor:.3}",
            r.ratio, r.ci_low, r.ci_high
        ));
    }
    out
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.3}"))
}

fn interval(s: &Option<Speedup>) -> String {
    s.map_or("-".into(), |s| {
        format!("{:.3} [{:.3}, {:.3}]", s.ratio, s.ci_low, s.ci_high)
    })
}

/// The comparison as the terminal shows it: a table of the tasks where anything differs or a
/// ratio exists, then the counts and the suite line.
pub fn render(c: &Comparison) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED).set_header([
        "task",
        "verdict A",
        "verdict B",
        "speedup A",
        "speedup B",
        "B/A [95 % CI]",
        "change",
    ]);
    for t in &c.tasks {
        let verdict = |v: Option<Verdict>| v.map_or("-", Verdict::as_str);
        let mut change = t.change.map_or("", Change::as_str).to_string();
        if t.before != t.after {
            change = [change.as_str(), "verdict changed"]
                .iter()
                .filter(|s| !s.is_empty())
                .copied()
                .collect::<Vec<_>>()
                .join(", ");
        }
        if t.degenerate {
            change.push_str(" (degenerate task)");
        }
        table.add_row([
            format!("level{}/{}", t.task.level, t.name),
            verdict(t.before).into(),
            verdict(t.after).into(),
            num(t.before_speedup),
            num(t.after_speedup),
            interval(&t.ratio),
            change.trim().to_string(),
        ]);
    }
    let count = |k: Change| c.tasks.iter().filter(|t| t.change == Some(k)).count();
    let mut out = format!("A: {}\nB: {}\n{table}\n", c.before_run, c.after_run);
    let _ = writeln!(
        out,
        "{} task(s): {} improved, {} regressed, {} same, {} inconclusive (band ±{:.1} %), {} verdict change(s)",
        c.tasks.len(),
        count(Change::Improved),
        count(Change::Regressed),
        count(Change::Same),
        count(Change::Inconclusive),
        100.0 * c.band,
        c.tasks.iter().filter(|t| t.before != t.after).count()
    );
    let _ = writeln!(
        out,
        "geomean speedup: A {}, B {}; B/A over {} task(s) timed in both: {}",
        interval(&c.before_geomean),
        interval(&c.after_geomean),
        c.suite_tasks,
        interval(&c.suite_ratio)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_record;

    /// B: the sample run with the 1.6x level-2 kernel twice as slow and the timed-out softmax
    /// now passing at 1.5x.
    fn after() -> RunRecord {
        let mut b = sample_record();
        b.run_id = "run-after".into();
        for e in &mut b.evaluations {
            if e.file == "level2/5_Conv.py" {
                let t = e.timing.as_mut().unwrap();
                for s in &mut t.candidate.samples_ms {
                    *s *= 2.0;
                }
                t.candidate.median_ms *= 2.0;
                t.speedup /= 2.0;
                t.speedup_ci_low /= 2.0;
                t.speedup_ci_high /= 2.0;
            }
        }
        let timed = b
            .evaluations
            .iter()
            .find(|e| e.file == "level2/5_Conv.py")
            .unwrap()
            .timing
            .clone();
        let softmax = b
            .evaluations
            .iter_mut()
            .find(|e| e.file == "level1/23_Softmax.py")
            .unwrap();
        softmax.verdict = Verdict::Pass;
        softmax.reason.clear();
        softmax.timing = timed.map(|mut t| {
            for s in &mut t.reference.samples_ms {
                *s *= 1.875;
            }
            t.reference.median_ms *= 1.875;
            t.speedup *= 1.875;
            t
        });
        b
    }

    #[test]
    fn comparison_snapshot() {
        let c = compare(&sample_record(), &after(), stats::DELTA_SHARED);
        insta::assert_snapshot!(render(&c));
    }

    #[test]
    fn a_run_against_itself_changes_nothing() {
        let a = sample_record();
        let c = compare(&a, &a, stats::DELTA_SHARED);
        for t in c.tasks.iter().filter(|t| t.ratio.is_some()) {
            let r = t.ratio.unwrap();
            assert_eq!(r.ratio, 1.0);
            assert!(r.ci_low <= 1.0 && 1.0 <= r.ci_high, "{r:?}");
        }
        assert!(regressions(&c, 0.0).is_empty());
        assert_eq!(c.suite_ratio.unwrap().ratio, 1.0);
    }

    #[test]
    fn the_gate_catches_slower_tasks_and_broken_ones() {
        let (a, b) = (sample_record(), after());
        let c = compare(&a, &b, stats::DELTA_SHARED);
        let conv = c.tasks.iter().find(|t| t.name == "5_Task").unwrap();
        assert_eq!(conv.change, Some(Change::Regressed));
        assert!((conv.ratio.unwrap().ratio - 0.5).abs() < 1e-12);
        // a 50 % regression fails a 10 % threshold, not a 60 % one
        let why = regressions(&c, 0.1);
        assert!(
            why.iter().any(|w| w.starts_with("level2/5_Task")),
            "{why:?}"
        );
        assert!(regressions(&c, 0.6).is_empty());
        // B/A the other way: the conv improved, softmax broke (pass in B, timeout in A)
        let back = compare(&b, &a, stats::DELTA_SHARED);
        let why = regressions(&back, 0.6);
        assert_eq!(why, ["level1/23_Task: pass in A, timeout in B"]);
    }
}
