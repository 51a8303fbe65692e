//! Suite aggregates (docs/design/timing.md 10.4 items 17 and 19), per level and over all levels, and where
//! the run's time went. Skipped evaluations count nowhere.
//!
//! The speedup aggregates count tasks, not files: a task with several submissions counts once,
//! by its best passing result (largest speedup point estimate). Picking the best favours fast
//! results; with one submission per task there is no choice to bias. A passing result is a `pass`
//! verdict with a timing that counts (`Timing::counts`: the speed of light does not rule it out,
//! and `timing.wall_envelope` did not charge it); `no_kernel`
//! results are correct but not kernels, so they count as no result. Tasks whose facts flag them
//! degenerate (constant output, identity, ...) leave every speedup aggregate: no result on them
//! is a win, and none is a loss either.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::record::{Arm, CompileBaseline, Evaluation, RunRecord, Timing};
use crate::stats::{self, Decision, FastP, Speedup, TaskDraws};
use crate::task::TaskId;
use crate::verdict::Verdict;

/// The p of fast_p: KernelBench's fast_0 and fast_1, and two larger bars.
pub const FAST_P: [f64; 4] = [0.0, 1.0, 1.5, 2.0];
/// False discovery rate of the suite's FASTER / SLOWER counts (Benjamini-Hochberg).
pub const FDR_Q: f64 = 0.05;
/// Bootstrap replicates per task behind the geometric mean's inner level. The outer level draws
/// one of them per task and replicate, so a thousand values of each task's distribution suffice
/// (fewer than the per-task interval's 5 000: the summary redoes them for every task).
const TASK_RESAMPLES: usize = 1_000;
/// Seed of the suite's bootstraps: fixed, so the summary is a function of the record alone (the
/// run's own seed may be secret).
const SEED: u64 = 0x5eed_5017;

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// None for all levels together.
    pub level: Option<u32>,
    /// Tasks with at least one evaluation that was not skipped.
    pub tasks: usize,
    /// Evaluations that were not skipped, and those of them that are correct (pass, no_kernel).
    pub evaluated: usize,
    pub correct: usize,
    /// Those KernelBench's own rule finds correct (`Evaluation::kernelbench_correct`).
    pub kernelbench_correct: usize,
    /// Tasks with several evaluated submissions: each counts once, by its best passing result.
    pub multi_submission_tasks: usize,
    /// Tasks left out of every speedup aggregate for their degenerate-task flags.
    pub degenerate_tasks: usize,
    /// Evaluations timed faster than the speed of light: their speedups count nowhere.
    pub invalid_timings: usize,
    /// fast_p's denominator: the tasks that are not degenerate.
    pub counted_tasks: usize,
    /// Geometric mean of the passing tasks' speedups with a two-level bootstrap interval (tasks,
    /// then each task's own paired bootstrap); None without a passing task.
    pub geomean_speedup: Option<Speedup>,
    /// One per `FAST_P` (empty without counted tasks): the share of counted tasks with a passing
    /// result above p, by point estimate and by interval ("significant").
    pub fast_p: Vec<FastP>,
    pub significance: Significance,
    /// With `--baseline eager,compile`: the same aggregates against torch.compile.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub versus_compile: Option<VersusCompile>,
}

/// The speedup aggregates against torch.compile (arm B), over the same counted tasks and their
/// same best results: a task whose best result has no compile baseline counts as not faster.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct VersusCompile {
    /// Counted tasks whose best result was timed against torch.compile.
    pub timed: usize,
    pub geomean_speedup: Option<Speedup>,
    pub fast_p: Vec<FastP>,
}

/// The suite gate's counts (10.4 item 17): a task is significantly FASTER when its label says
/// FASTER and its one-sided p-value that the candidate is faster survives Benjamini-Hochberg over
/// the tested tasks; SLOWER likewise with the p-value that it is slower (1 - p_faster).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Significance {
    pub q: f64,
    /// Passing tasks with a p-value.
    pub tested: usize,
    pub faster: usize,
    pub slower: usize,
}

/// Where the run's time went: sums over all evaluations.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WallTime {
    /// Builds that ran and their seconds; builds found in the cache and theirs.
    pub builds: usize,
    pub build_s: f64,
    pub build_cache_hits: usize,
    pub build_cache_hit_s: f64,
    /// Worker start-up; it overlaps the previous evaluation, so it adds less than this.
    pub worker_startup_s: f64,
    pub load_s: f64,
    /// Correctness trials and their checks, outside any timed region: the verification cost.
    pub correctness_s: f64,
    pub timing_s: f64,
    /// Within `timing_s`: both arms' set-up and warm-up.
    pub warmup_s: f64,
    /// After timing: the candidate's state checks and both profiled calls.
    pub after_timing_s: f64,
    /// Waiting for the GPU while another lane timed or checked (`--lanes`).
    pub gpu_wait_s: f64,
    /// Median verification cost of an evaluation that ran trials.
    pub correctness_median_s: Option<f64>,
}

/// Everything the summary says: one `Summary` per level present, then the total.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RunSummary {
    pub levels: Vec<Summary>,
    pub wall_time: WallTime,
    /// With `--published`: the evaluations against the published results.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub published: Option<crate::published::PublishedSummary>,
}

impl RunSummary {
    /// The summary over all levels.
    pub fn total(&self) -> &Summary {
        self.levels.last().expect("the total is always there")
    }
}

/// A timing whose speedup counts: a `pass` verdict the speed of light does not rule out.
fn passing(e: &Evaluation) -> Option<&Timing> {
    e.timing
        .as_ref()
        .filter(|t| e.verdict == Verdict::Pass && t.counts())
}

fn speedup(t: &Timing) -> Speedup {
    Speedup {
        ratio: t.speedup,
        ci_low: t.speedup_ci_low,
        ci_high: t.speedup_ci_high,
    }
}

/// One task's evaluations, reduced to what the aggregates need.
struct TaskResult<'a> {
    task: TaskId,
    submissions: usize,
    degenerate: bool,
    /// The best passing timing, if any.
    best: Option<&'a Timing>,
    /// Its paired bootstrap replicates (empty when its samples do not pair into rounds), and
    /// those of its speedup over torch.compile.
    replicates: Vec<f64>,
    compile_replicates: Vec<f64>,
}

impl<'a> TaskResult<'a> {
    fn new(task: TaskId, evals: &[&'a Evaluation]) -> Self {
        let best = best_passing(evals).and_then(passing);
        let seed = task_seed(task);
        let replicates = best
            .map(|t| paired_replicates(&t.reference, &t.candidate, seed))
            .unwrap_or_default();
        let compile_replicates = best
            .and_then(|t| {
                Some(paired_replicates(
                    &t.compile.as_ref()?.reference,
                    &t.candidate,
                    !seed,
                ))
            })
            .unwrap_or_default();
        TaskResult {
            task,
            submissions: evals.len(),
            degenerate: evals.iter().any(|e| !e.task_flags.is_empty()),
            best,
            replicates,
            compile_replicates,
        }
    }
}

/// The evaluation of a task whose speedup counts: its passing one with the largest speedup.
fn best_passing<'a>(evals: &[&'a Evaluation]) -> Option<&'a Evaluation> {
    evals
        .iter()
        .copied()
        .filter(|e| passing(e).is_some())
        .max_by(|a, b| {
            let s = |e: &Evaluation| e.timing.as_ref().map_or(0.0, |t| t.speedup);
            s(a).total_cmp(&s(b))
        })
}

fn task_seed(task: TaskId) -> u64 {
    SEED ^ (u64::from(task.level) << 32 | u64::from(task.number))
}

/// One task of a run as the reports over several runs see it (compare, leaderboard, HTML).
#[derive(Clone, Debug)]
pub struct TaskOutcome<'a> {
    pub task: TaskId,
    /// Flagged degenerate by its facts: left out of every speedup aggregate.
    pub degenerate: bool,
    /// The evaluation whose speedup counts (as in the summary), if any.
    pub best: Option<&'a Evaluation>,
    /// The one the task is shown by: `best`, else its first evaluation.
    pub shown: &'a Evaluation,
}

impl TaskOutcome<'_> {
    /// The counted speedup with its paired bootstrap replicates (the summary's seed).
    pub fn speedup(&self) -> Option<(Speedup, Vec<f64>)> {
        self.with_replicates(passing(self.best?)?)
    }

    /// `speedup`, else that of the shown evaluation when it is correct and validly timed
    /// (a `no_kernel` result): what a comparison of two runs of one submitter looks at.
    pub fn correct_speedup(&self) -> Option<(Speedup, Vec<f64>)> {
        self.speedup().or_else(|| {
            let t = self.shown.timing.as_ref()?;
            (self.shown.verdict.is_correct() && t.counts())
                .then(|| self.with_replicates(t))
                .flatten()
        })
    }

    fn with_replicates(&self, t: &Timing) -> Option<(Speedup, Vec<f64>)> {
        Some((
            speedup(t),
            paired_replicates(&t.reference, &t.candidate, task_seed(self.task)),
        ))
    }
}

/// Every task with an evaluation that was not skipped, in task order.
pub fn task_outcomes(record: &RunRecord) -> Vec<TaskOutcome<'_>> {
    let mut by_task: BTreeMap<TaskId, Vec<&Evaluation>> = BTreeMap::new();
    for e in record
        .evaluations
        .iter()
        .filter(|e| e.verdict != Verdict::Skipped)
    {
        by_task.entry(e.task).or_default().push(e);
    }
    by_task
        .into_iter()
        .map(|(task, evals)| {
            let best = best_passing(&evals);
            TaskOutcome {
                task,
                degenerate: evals.iter().any(|e| !e.task_flags.is_empty()),
                best,
                shown: best.unwrap_or(evals[0]),
            }
        })
        .collect()
}

/// The paired bootstrap replicates of one speedup (empty when the samples do not pair into
/// rounds).
fn paired_replicates(reference: &Arm, candidate: &Arm, seed: u64) -> Vec<f64> {
    stats::Rounds::from_tagged(
        &reference.samples_ms,
        &reference.rounds,
        &candidate.samples_ms,
        &candidate.rounds,
    )
    .map(|rounds| {
        stats::paired_speedup(&rounds, TASK_RESAMPLES, stats::DEFAULT_LEVEL, seed).replicates
    })
    .unwrap_or_default()
}

/// Geometric mean (two-level bootstrap) of the tasks' speedups.
fn geomean(draws: &[TaskDraws<'_>]) -> Option<Speedup> {
    stats::geometric_mean_ci(draws, stats::DEFAULT_RESAMPLES, stats::DEFAULT_LEVEL, SEED).ok()
}

fn fast_p(speedups: &[Option<Speedup>]) -> Vec<FastP> {
    FAST_P
        .iter()
        .filter_map(|&p| stats::fast_p(speedups, p))
        .collect()
}

/// The task's best result's speedup over torch.compile, if it was timed against it.
fn compile<'a>(r: &TaskResult<'a>) -> Option<&'a CompileBaseline> {
    r.best.and_then(|t| t.compile.as_ref())
}

fn versus_compile(counted: &[&TaskResult<'_>]) -> Option<VersusCompile> {
    let speedups: Vec<Option<Speedup>> = counted
        .iter()
        .map(|r| {
            compile(r).map(|b| Speedup {
                ratio: b.speedup,
                ci_low: b.speedup_ci_low,
                ci_high: b.speedup_ci_high,
            })
        })
        .collect();
    let draws: Vec<TaskDraws<'_>> = counted
        .iter()
        .filter_map(|r| {
            Some(TaskDraws {
                ratio: compile(r)?.speedup,
                replicates: &r.compile_replicates,
            })
        })
        .collect();
    (!draws.is_empty()).then(|| VersusCompile {
        timed: draws.len(),
        geomean_speedup: geomean(&draws),
        fast_p: fast_p(&speedups),
    })
}

fn significance(counted: &[&TaskResult<'_>]) -> Significance {
    let tested: Vec<(&Timing, f64)> = counted
        .iter()
        .filter_map(|r| r.best)
        .filter_map(|t| Some((t, t.p_faster?)))
        .collect();
    let count = |p: &dyn Fn(f64) -> f64, label: Decision| {
        let ps: Vec<f64> = tested.iter().map(|(_, pf)| p(*pf)).collect();
        stats::benjamini_hochberg(&ps, FDR_Q)
            .iter()
            .zip(&tested)
            .filter(|(rejected, (t, _))| **rejected && t.label == label)
            .count()
    };
    Significance {
        q: FDR_Q,
        tested: tested.len(),
        faster: count(&|pf| pf, Decision::Faster),
        slower: count(&|pf| 1.0 - pf, Decision::Slower),
    }
}

fn summarize(level: Option<u32>, evals: &[&Evaluation], results: &[&TaskResult<'_>]) -> Summary {
    let counted: Vec<&TaskResult<'_>> = results.iter().copied().filter(|r| !r.degenerate).collect();
    let speedups: Vec<Option<Speedup>> = counted.iter().map(|r| r.best.map(speedup)).collect();
    let draws: Vec<TaskDraws<'_>> = counted
        .iter()
        .filter_map(|r| {
            Some(TaskDraws {
                ratio: r.best?.speedup,
                replicates: &r.replicates,
            })
        })
        .collect();
    Summary {
        level,
        tasks: results.len(),
        evaluated: evals.len(),
        correct: evals.iter().filter(|e| e.verdict.is_correct()).count(),
        kernelbench_correct: evals
            .iter()
            .filter(|e| e.kernelbench_correct == Some(true))
            .count(),
        multi_submission_tasks: results.iter().filter(|r| r.submissions > 1).count(),
        degenerate_tasks: results.len() - counted.len(),
        invalid_timings: evals
            .iter()
            .filter(|e| e.timing.as_ref().is_some_and(|t| t.invalid))
            .count(),
        counted_tasks: counted.len(),
        geomean_speedup: geomean(&draws),
        fast_p: fast_p(&speedups),
        significance: significance(&counted),
        versus_compile: versus_compile(&counted),
    }
}

fn wall_time(evals: &[Evaluation]) -> WallTime {
    let mut w = WallTime::default();
    for e in evals {
        if let Some(b) = &e.build {
            if b.cache_hit {
                w.build_cache_hits += 1;
                w.build_cache_hit_s += b.seconds;
            } else {
                w.builds += 1;
                w.build_s += b.seconds;
            }
        }
        w.worker_startup_s += e.phases.worker_startup_s.unwrap_or(0.0);
        w.load_s += e.phases.load_s;
        w.correctness_s += e.phases.correctness_s;
        w.timing_s += e.phases.timing_s;
        w.warmup_s += e.phases.warmup_s;
        w.after_timing_s += e.phases.after_timing_s;
        w.gpu_wait_s += e.phases.gpu_wait_s;
    }
    let verified: Vec<f64> = evals
        .iter()
        .filter(|e| !e.trials.is_empty())
        .map(|e| e.phases.correctness_s)
        .collect();
    w.correctness_median_s = (!verified.is_empty()).then(|| stats::median(&verified));
    w
}

/// The summary of a run. Costs a paired bootstrap per passing task: call it once, at the end.
pub fn summarize_run(record: &RunRecord) -> RunSummary {
    let evaluated: Vec<&Evaluation> = record
        .evaluations
        .iter()
        .filter(|e| e.verdict != Verdict::Skipped)
        .collect();
    let mut by_task: BTreeMap<TaskId, Vec<&Evaluation>> = BTreeMap::new();
    for e in &evaluated {
        by_task.entry(e.task).or_default().push(e);
    }
    let results: Vec<TaskResult<'_>> = by_task
        .iter()
        .map(|(task, evals)| TaskResult::new(*task, evals))
        .collect();
    let mut levels: Vec<u32> = by_task.keys().map(|t| t.level).collect();
    levels.dedup();
    let of_level = |level: Option<u32>| {
        let keep = |t: TaskId| level.is_none_or(|l| t.level == l);
        let evals: Vec<&Evaluation> = evaluated.iter().copied().filter(|e| keep(e.task)).collect();
        let tasks: Vec<&TaskResult<'_>> = results.iter().filter(|r| keep(r.task)).collect();
        summarize(level, &evals, &tasks)
    };
    RunSummary {
        levels: levels
            .into_iter()
            .map(Some)
            .chain([None])
            .map(of_level)
            .collect(),
        wall_time: wall_time(&record.evaluations),
        published: crate::published::summarize(record),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_record;

    fn total(record: &RunRecord) -> Summary {
        summarize_run(record).total().clone()
    }

    #[test]
    fn one_result_per_task_the_best_passing_one() {
        let record = sample_record();
        let all = total(&record);
        // level 1/19 has three files: the 2.0x pass counts, the 1.25x pass and the wrong one not
        assert_eq!(all.multi_submission_tasks, 1);
        let fast_1 = all.fast_p.iter().find(|f| f.p == 1.0).unwrap();
        let fast_2 = all.fast_p.iter().find(|f| f.p == 2.0).unwrap();
        // counted: L1/19 (2.0), L1/23 (timeout), L2/5 (1.6), L2/76 (no_kernel); L1/12 degenerate
        assert_eq!(
            (all.tasks, all.counted_tasks, all.degenerate_tasks),
            (5, 4, 1)
        );
        assert_eq!(fast_1.point, 0.5);
        assert_eq!(fast_2.point, 0.0);
        let g = all.geomean_speedup.unwrap();
        assert!((g.ratio - (2.0f64 * 1.6).sqrt()).abs() < 1e-12, "{g:?}");
        assert!(g.ci_low <= g.ratio && g.ratio <= g.ci_high, "{g:?}");
    }

    #[test]
    fn the_compile_baseline_gets_its_own_aggregates_over_the_same_tasks() {
        let mut record = sample_record();
        assert!(total(&record).versus_compile.is_none());
        let honest = crate::record::fixtures::honest_timing(&mut record);
        honest.compile = Some(CompileBaseline {
            reference: honest.reference.clone(),
            compile_s: 12.0,
            speedup: 1.2,
            speedup_ci_low: 1.1,
            speedup_ci_high: 1.3,
            label: Decision::Faster,
            compile_gain: 1.6,
        });
        let all = total(&record);
        let v = all
            .versus_compile
            .expect("one task was timed against torch.compile");
        assert_eq!(v.timed, 1);
        assert!((v.geomean_speedup.unwrap().ratio - 1.2).abs() < 1e-12);
        // Over the same four counted tasks: only L1/19 beats torch.compile, at 1.2x.
        let fast_1 = v.fast_p.iter().find(|f| f.p == 1.0).unwrap();
        assert_eq!((fast_1.point, fast_1.significant), (0.25, 0.25));
        assert_eq!(v.fast_p.iter().find(|f| f.p == 1.5).unwrap().point, 0.0);
        // The eager aggregates are untouched.
        assert_eq!(all.geomean_speedup, total(&sample_record()).geomean_speedup);
    }

    #[test]
    fn invalid_timings_count_as_no_result() {
        let mut record = sample_record();
        crate::record::fixtures::honest_timing(&mut record).invalid = true;
        let all = total(&record);
        assert_eq!(all.invalid_timings, 1);
        // L1/19 falls back to its 1.25x file
        let g = all.geomean_speedup.unwrap();
        assert!((g.ratio - (1.25f64 * 1.6).sqrt()).abs() < 1e-12, "{g:?}");
    }

    #[test]
    fn charged_timings_count_as_no_result() {
        let mut record = sample_record();
        crate::record::fixtures::honest_timing(&mut record).method = crate::record::CHARGED.into();
        let g = total(&record).geomean_speedup.unwrap();
        assert!((g.ratio - (1.25f64 * 1.6).sqrt()).abs() < 1e-12, "{g:?}");
    }

    #[test]
    fn benjamini_hochberg_decides_the_faster_and_slower_counts() {
        let mut record = sample_record();
        let all = total(&record);
        // L1/19 and L2/5 are FASTER with p = 0.001; the no_kernel task is not tested
        assert_eq!(
            all.significance,
            Significance {
                q: FDR_Q,
                tested: 2,
                faster: 2,
                slower: 0
            }
        );
        // a p-value that does not survive the correction leaves the label uncounted
        for e in &mut record.evaluations {
            if let Some(t) = e.timing.as_mut() {
                t.p_faster = t.p_faster.map(|_| 0.04);
            }
        }
        assert_eq!(total(&record).significance.faster, 2);
        let honest = record
            .evaluations
            .iter_mut()
            .find(|e| e.file.ends_with("honest.py"))
            .unwrap();
        honest.timing.as_mut().unwrap().p_faster = Some(0.9);
        // p-values 0.04 and 0.9 against thresholds 0.025 and 0.05: neither is rejected
        assert_eq!(total(&record).significance.faster, 0);
    }

    #[test]
    fn a_slower_label_needs_its_own_p_value() {
        let mut record = sample_record();
        for e in &mut record.evaluations {
            if let Some(t) = e.timing.as_mut().filter(|_| e.verdict == Verdict::Pass) {
                t.label = Decision::Slower;
                t.p_faster = Some(0.999);
            }
        }
        let s = total(&record).significance;
        assert_eq!((s.tested, s.faster, s.slower), (2, 0, 2));
    }

    #[test]
    fn task_outcomes_count_the_summarys_best_result() {
        let record = sample_record();
        let outcomes = task_outcomes(&record);
        // skipped L2/77 is not a task of the run
        assert_eq!(outcomes.len(), total(&record).tasks);
        let relu = outcomes.iter().find(|o| o.task.number == 19).unwrap();
        assert!(relu.shown.file.ends_with("honest.py"));
        let (s, replicates) = relu.speedup().unwrap();
        assert_eq!(s.ratio, 2.0);
        assert!(!replicates.is_empty());
        let softmax = outcomes.iter().find(|o| o.task.number == 23).unwrap();
        assert!(softmax.best.is_none() && softmax.speedup().is_none());
        assert_eq!(softmax.shown.verdict, Verdict::Timeout);
        assert!(
            outcomes
                .iter()
                .find(|o| o.task.number == 12)
                .unwrap()
                .degenerate
        );
    }

    #[test]
    fn levels_then_total_and_same_numbers_every_time() {
        let record = sample_record();
        let s = summarize_run(&record);
        let levels: Vec<Option<u32>> = s.levels.iter().map(|l| l.level).collect();
        assert_eq!(levels, [Some(1), Some(2), None]);
        assert_eq!(summarize_run(&record), s);
    }

    #[test]
    fn wall_time_splits_builds_and_phases() {
        let record = sample_record();
        let w = summarize_run(&record).wall_time;
        let evals = &record.evaluations;
        assert_eq!(w.builds + w.build_cache_hits, evals.len());
        let sum = |f: fn(&Evaluation) -> f64| evals.iter().map(f).sum::<f64>();
        assert!((w.correctness_s - sum(|e| e.phases.correctness_s)).abs() < 1e-12);
        assert!((w.timing_s - sum(|e| e.phases.timing_s)).abs() < 1e-12);
        assert!((w.warmup_s - sum(|e| e.phases.warmup_s)).abs() < 1e-12);
        assert!((w.after_timing_s - sum(|e| e.phases.after_timing_s)).abs() < 1e-12);
        assert!(w.warmup_s > 0.0 && w.after_timing_s > 0.0);
        assert!(w.correctness_median_s.is_some());
        assert_eq!(wall_time(&[]).correctness_median_s, None);
    }

    #[test]
    fn an_empty_run_has_a_total_without_aggregates() {
        let mut record = sample_record();
        record.evaluations.clear();
        let all = total(&record);
        assert_eq!(all.tasks, 0);
        assert!(all.fast_p.is_empty() && all.geomean_speedup.is_none());
    }
}
