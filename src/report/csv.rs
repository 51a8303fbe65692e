//! results.csv: one row per evaluation, for leaderboards and spreadsheets. Column names are
//! stable (docs/csv-schema.md); times in ms; empty cells where a value does not apply.

use serde::Serialize;

use crate::error::{Error, Result};
use crate::record::{Evaluation, RunRecord};

#[derive(Serialize)]
struct Row<'a> {
    level: u32,
    problem_id: u32,
    task: &'a str,
    submission: &'a str,
    sample: Option<u32>,
    sha256: &'a str,
    verdict: &'a str,
    correct: bool,
    ref_ms: Option<f64>,
    kernel_ms: Option<f64>,
    speedup: Option<f64>,
    speedup_ci_low: Option<f64>,
    speedup_ci_high: Option<f64>,
    label: Option<&'static str>,
    mean_ratio: Option<f64>,
    /// `--baseline eager,compile`: torch.compile's median and the speedup over it.
    compile_ms: Option<f64>,
    speedup_vs_compile: Option<f64>,
    speedup_vs_compile_ci_low: Option<f64>,
    speedup_vs_compile_ci_high: Option<f64>,
    sol_ms: Option<f64>,
    percent_sol: Option<f64>,
    ref_percent_sol: Option<f64>,
    timing_invalid: Option<bool>,
    max_abs_diff: Option<f64>,
    trials_passed: usize,
    build_cache_hit: Option<bool>,
    /// Degenerate-task flags, separated by ';'.
    task_flags: String,
    reason: &'a str,
    /// `--published`: the published speedups and correctness, and what became of the claim
    /// here (`published::Class`; its system and evidence are the last columns).
    published_speedup: Option<f64>,
    published_speedup_vs_compile: Option<f64>,
    published_correct: Option<bool>,
    published_class: Option<&'static str>,
    /// Where the row comes from (docs/csv-schema.md): the run, its settings, its machine.
    run_id: &'a str,
    kbench_version: &'a str,
    config_hash: &'a str,
    gpu: &'a str,
    driver: &'a str,
    torch: &'a str,
    cuda: &'a str,
    /// KernelBench's own verdict, and the tolerance it was judged at (empty where not reached).
    kernelbench_correct: Option<bool>,
    kernelbench_tolerance: Option<f64>,
    /// The least tolerance at which KernelBench's rule passes (`Evaluation::kernelbench_needed`).
    kernelbench_needed: Option<f64>,
    /// `--published`: the system that published the claim, and the evidence of its class.
    published_system: Option<String>,
    published_evidence: Option<String>,
    /// `kbench serve`: the request's id, and the instance, node and GPU that judged it.
    request_id: Option<&'a str>,
    served_instance: Option<&'a str>,
    served_node: Option<&'a str>,
    served_gpu: Option<u32>,
    /// `--profile ncu`: the candidate's profiled call (every kernel it launched; `nsight::summarize`)
    /// and the reference's duration.
    ncu_launches: Option<usize>,
    ncu_own_launches: Option<usize>,
    ncu_ms: Option<f64>,
    ncu_occupancy_pct: Option<f64>,
    ncu_sm_pct: Option<f64>,
    ncu_dram_pct: Option<f64>,
    ncu_flop_per_byte: Option<f64>,
    ncu_ref_ms: Option<f64>,
}

/// `Row`'s fields in order: the header of a run with no rows (serde writes it with a first row).
const COLUMNS: [&str; 56] = [
    "level",
    "problem_id",
    "task",
    "submission",
    "sample",
    "sha256",
    "verdict",
    "correct",
    "ref_ms",
    "kernel_ms",
    "speedup",
    "speedup_ci_low",
    "speedup_ci_high",
    "label",
    "mean_ratio",
    "compile_ms",
    "speedup_vs_compile",
    "speedup_vs_compile_ci_low",
    "speedup_vs_compile_ci_high",
    "sol_ms",
    "percent_sol",
    "ref_percent_sol",
    "timing_invalid",
    "max_abs_diff",
    "trials_passed",
    "build_cache_hit",
    "task_flags",
    "reason",
    "published_speedup",
    "published_speedup_vs_compile",
    "published_correct",
    "published_class",
    "run_id",
    "kbench_version",
    "config_hash",
    "gpu",
    "driver",
    "torch",
    "cuda",
    "kernelbench_correct",
    "kernelbench_tolerance",
    "kernelbench_needed",
    "published_system",
    "published_evidence",
    "request_id",
    "served_instance",
    "served_node",
    "served_gpu",
    "ncu_launches",
    "ncu_own_launches",
    "ncu_ms",
    "ncu_occupancy_pct",
    "ncu_sm_pct",
    "ncu_dram_pct",
    "ncu_flop_per_byte",
    "ncu_ref_ms",
];

pub fn render(record: &RunRecord) -> Result<Vec<u8>> {
    let mut w = ::csv::Writer::from_writer(Vec::new());
    let fail = |e: ::csv::Error| Error::Other(format!("write CSV: {e}"));
    if record.evaluations.is_empty() {
        w.write_record(COLUMNS).map_err(fail)?;
    }
    let (config_hash, gpu) = (record.config.hash(), record.environment.gpu_names());
    for e in &record.evaluations {
        w.serialize(row(record, e, (&config_hash, &gpu)))
            .map_err(fail)?;
    }
    w.into_inner()
        .map_err(|e| Error::Other(format!("write CSV: {e}")))
}

/// The row of `e`, one of `record`'s evaluations (the run's config hash and GPU names given).
fn row<'a>(
    record: &'a RunRecord,
    e: &'a Evaluation,
    (config_hash, gpu): (&'a str, &'a str),
) -> Row<'a> {
    let env = &record.environment;
    let timing = e.timing.as_ref();
    let compile = timing.and_then(|t| t.compile.as_ref());
    let published = record.published.as_ref().and_then(|p| p.row(e));
    let compared = published.map(|p| crate::published::compare(e, p));
    let ncu = e.ncu.as_ref();
    let mine = ncu.map(|n| crate::nsight::summarize(&n.candidate));
    let theirs = ncu.map(|n| crate::nsight::summarize(&n.reference));
    Row {
        level: e.task.level,
        problem_id: e.task.number,
        task: &e.task_name,
        submission: &e.file,
        sample: e.sample,
        sha256: &e.sha256,
        verdict: e.verdict.as_str(),
        correct: e.verdict.is_correct(),
        ref_ms: timing.map(|t| t.reference.median_ms),
        kernel_ms: timing.map(|t| t.candidate.median_ms),
        speedup: timing.map(|t| t.speedup),
        speedup_ci_low: timing.map(|t| t.speedup_ci_low),
        speedup_ci_high: timing.map(|t| t.speedup_ci_high),
        label: timing.map(|t| t.label.as_str()),
        mean_ratio: timing.map(|t| t.mean_ratio),
        compile_ms: compile.map(|b| b.reference.median_ms),
        speedup_vs_compile: compile.map(|b| b.speedup),
        speedup_vs_compile_ci_low: compile.map(|b| b.speedup_ci_low),
        speedup_vs_compile_ci_high: compile.map(|b| b.speedup_ci_high),
        sol_ms: timing.and_then(|t| t.sol_ms),
        percent_sol: timing.and_then(|t| t.percent_sol),
        ref_percent_sol: timing.and_then(|t| t.reference_percent_sol),
        timing_invalid: timing.map(|t| t.invalid),
        max_abs_diff: e
            .trials
            .iter()
            .filter_map(|t| t.max_abs_diff)
            .reduce(f64::max),
        trials_passed: e.trials.iter().filter(|t| t.correct).count(),
        build_cache_hit: e.build.as_ref().map(|b| b.cache_hit),
        task_flags: e.task_flags.join(";"),
        reason: &e.reason,
        published_speedup: published.and_then(|p| p.speedup),
        published_speedup_vs_compile: published.and_then(|p| p.speedup_vs_compile),
        published_correct: published.and_then(|p| p.correct),
        published_class: compared.as_ref().map(|c| c.class.as_str()),
        run_id: &record.run_id,
        kbench_version: &record.kbench_version,
        config_hash,
        gpu,
        driver: env.driver.as_deref().unwrap_or_default(),
        torch: env.torch.as_deref().unwrap_or_default(),
        cuda: env.torch_cuda.as_deref().unwrap_or_default(),
        kernelbench_correct: e.kernelbench_correct,
        kernelbench_tolerance: record.config.kernelbench_tolerance,
        kernelbench_needed: e.kernelbench_needed,
        published_system: compared.as_ref().map(|c| c.system.clone()),
        published_evidence: compared.map(|c| c.evidence),
        request_id: e.served.as_ref().and_then(|s| s.id.as_deref()),
        served_instance: e.served.as_ref().map(|s| s.instance.as_str()),
        served_node: e.served.as_ref().map(|s| s.node.as_str()),
        served_gpu: e.served.as_ref().and_then(|s| s.gpu),
        ncu_launches: mine.map(|m| m.launches),
        ncu_own_launches: mine.map(|m| m.own),
        ncu_ms: mine.and_then(|m| m.ms),
        ncu_occupancy_pct: mine.and_then(|m| m.occupancy_pct),
        ncu_sm_pct: mine.and_then(|m| m.sm_pct),
        ncu_dram_pct: mine.and_then(|m| m.dram_pct),
        ncu_flop_per_byte: mine.and_then(|m| m.flop_per_byte),
        ncu_ref_ms: theirs.and_then(|t| t.ms),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn empty_header_is_the_rows_header() {
        let text =
            String::from_utf8(render(&crate::record::fixtures::sample_record()).unwrap()).unwrap();
        assert_eq!(text.lines().next().unwrap(), COLUMNS.join(","));
    }
}
