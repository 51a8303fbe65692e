//! The terminal at the end of a run (stdout): the summary table and the gate's decision
//! (`progress` reports while the run goes).

use comfy_table::{presets::UTF8_HORIZONTAL_ONLY, Table, TableComponent};

use super::summary::{RunSummary, Summary, FAST_P, FDR_Q};
use crate::gate::Gate;
use crate::record::RunRecord;

/// The summary table, as printed at the end of a run: one row per level, then all levels.
/// Two lines a row and no rules between columns keep it within 100 characters; fast_p holds
/// each p's point over its significant share.
pub fn summary_table(summary: &RunSummary) -> String {
    let mut table = Table::new();
    table
        .load_preset(UTF8_HORIZONTAL_ONLY)
        .remove_style(TableComponent::LeftBorder)
        .remove_style(TableComponent::RightBorder)
        .remove_style(TableComponent::VerticalLines);
    let ps: Vec<String> = FAST_P.iter().map(|p| format!("{p:<4}")).collect();
    table.set_header([
        "level".to_string(),
        "tasks".into(),
        "evaluated".into(),
        "correct".into(),
        "KB\ncorrect".into(),
        "excluded".into(),
        format!("fast_p at p =\n{}", ps.join(" ").trim_end()),
        "geomean\n[95% CI]".into(),
        "faster /\nslower".into(),
    ]);
    for column in table.column_iter_mut() {
        column.set_padding((0, 1));
    }
    for s in &summary.levels {
        // fast_p: the points on one line, the interval-based shares under them
        let (mut points, mut shares) = (Vec::new(), Vec::new());
        for p in FAST_P {
            match s.fast_p.iter().find(|f| f.p == p) {
                Some(f) => {
                    points.push(format!("{:.2}", f.point));
                    shares.push(format!("{:.2}", f.significant));
                }
                None => {
                    points.push("-   ".to_string());
                    shares.push("-   ".to_string());
                }
            }
        }
        let b = &s.significance;
        table.add_row([
            s.level.map_or("all".into(), |l| l.to_string()),
            s.tasks.to_string(),
            s.evaluated.to_string(),
            s.correct.to_string(),
            s.kernelbench_correct.to_string(),
            s.degenerate_tasks.to_string(),
            format!("{}\n{}", points.join(" "), shares.join(" ")),
            s.geomean_speedup.map_or("-".into(), |g| {
                format!("{:.3}\n[{:.3}, {:.3}]", g.ratio, g.ci_low, g.ci_high)
            }),
            format!("{} / {}\nof {}", b.faster, b.slower, b.tested),
        ]);
    }
    table.to_string()
}

/// Each task left out of the aggregates, with its degenerate-task flags, e.g.
/// `level1/12_Diag (identity)`.
fn excluded(record: &RunRecord) -> Vec<String> {
    let flags: std::collections::BTreeMap<_, _> = record
        .evaluations
        .iter()
        .filter(|e| e.verdict != crate::verdict::Verdict::Skipped && !e.task_flags.is_empty())
        .map(|e| (e.task, (e.label(), e.task_flags.join(", "))))
        .collect();
    flags
        .into_values()
        .map(|(label, flags)| format!("{label} ({flags})"))
        .collect()
}

/// What the table's columns mean and what they leave out (`excluded`: each task left out).
fn summary_notes(total: &Summary, excluded: &[String]) -> String {
    let mut text = format!(
        "KB correct: evaluations KernelBench's own rule passes (allclose at \
         --kernelbench-tolerance on its trials, nothing else); kbench's correct is the stricter.\n\
         fast_p: share of tasks with a passing kernel faster than p (second line: its interval \
         above p); one result per task, the best by speedup{}.\n\
         faster / slower: labels whose one-sided p-value survives Benjamini-Hochberg at q = \
         {FDR_Q} over the tasks tested.\n",
        match total.multi_submission_tasks {
            0 => String::new(),
            n => format!(" ({n} task(s) had several submissions)"),
        }
    );
    if let Some(v) = &total.versus_compile {
        let fast: Vec<String> = v
            .fast_p
            .iter()
            .map(|f| format!("fast_{} {:.2} ({:.2})", f.p, f.point, f.significant))
            .collect();
        text.push_str(&format!(
            "vs torch.compile ({} task(s) timed against it): geomean {}; {}.\n",
            v.timed,
            v.geomean_speedup.map_or("-".into(), |g| format!(
                "{:.3} [{:.3}, {:.3}]",
                g.ratio, g.ci_low, g.ci_high
            )),
            fast.join(", ")
        ));
    }
    if !excluded.is_empty() {
        text.push_str(&format!(
            "excluded from every speedup aggregate, their references flagged degenerate by the \
             task facts (a trivial kernel could pass the check; `kbench list --meta`, \
             docs/checks.md; no flag counts them): {}.\n",
            excluded.join(", ")
        ));
    }
    if total.tasks > 0 && total.counted_tasks == 0 {
        text.push_str("fast_p and geomean show -: every task is excluded.\n");
    }
    if total.invalid_timings > 0 {
        text.push_str(&format!(
            "{} timing(s) faster than the speed of light count as no result.\n",
            total.invalid_timings
        ));
    }
    text
}

/// Where the run's time went, in two lines.
fn wall_time_lines(summary: &RunSummary) -> String {
    let w = &summary.wall_time;
    format!(
        "time: builds {:.1} s ({} built; {} cache hit(s), {:.1} s), worker start-up {:.1} s \
         (overlapped), load {:.1} s, correctness {:.1} s, timing {:.1} s (warm-up {:.1} s), \
         after timing {:.1} s, waiting for other lanes {:.1} s\n\
         verification cost (correctness trials and checks, outside the timed region): {} per \
         evaluation, {:.1} s in all\n",
        w.build_s,
        w.builds,
        w.build_cache_hits,
        w.build_cache_hit_s,
        w.worker_startup_s,
        w.load_s,
        w.correctness_s,
        w.timing_s,
        w.warmup_s,
        w.after_timing_s,
        w.gpu_wait_s,
        w.correctness_median_s
            .map_or("-".into(), |m| format!("median {m:.2} s")),
        w.correctness_s,
    )
}

/// Everything printed after the run: unmatched files, the table, where the reports are, the gate.
pub fn final_report(
    record: &RunRecord,
    summary: &RunSummary,
    gate: &Gate,
    out: &std::path::Path,
) -> String {
    let mut text = String::new();
    if !record.unmatched.is_empty() {
        text.push_str(&format!(
            "{} file(s) matched no task:\n",
            record.unmatched.len()
        ));
        for u in &record.unmatched {
            text.push_str(&format!("  {}: {}\n", u.file, u.why));
        }
    }
    text.push_str(&summary_table(summary));
    text.push('\n');
    text.push_str(&summary_notes(summary.total(), &excluded(record)));
    if let Some(published) = &summary.published {
        text.push_str(&crate::published::render(published));
    }
    text.push_str(&wall_time_lines(summary));
    text.push_str(&format!("reports in {}\n", out.display()));
    for w in &gate.warnings {
        text.push_str(&format!("gate: warning: {w}\n"));
    }
    if gate.passed() {
        text.push_str("gate: passed\n");
    } else {
        text.push_str("gate: failed");
        if !gate.failures.is_empty() {
            text.push_str(&format!(" ({} evaluation(s))", gate.failures.len()));
        }
        text.push('\n');
        for f in gate.run.iter().chain(&gate.failures) {
            text.push_str(&format!("  {f}\n"));
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::fixtures::sample_record;
    use crate::report::summary;

    #[test]
    fn the_summary_table_fits_100_columns() {
        let table = summary_table(&summary::summarize_run(&sample_record()));
        for line in table.lines() {
            assert!(
                line.chars().count() <= 100,
                "{} chars: {line}",
                line.chars().count()
            );
        }
    }
}
