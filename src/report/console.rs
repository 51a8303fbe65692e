//! The terminal: a progress bar while the run goes (stderr), a line per finished evaluation,
//! and at the end the summary table and the gate's decision (stdout).

use comfy_table::{presets::UTF8_FULL_CONDENSED, Table};
use indicatif::{ProgressBar, ProgressStyle};

use super::summary::by_level;
use crate::gate::Gate;
use crate::record::{Evaluation, RunRecord};

pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    pub fn new(total: usize) -> Progress {
        let bar = ProgressBar::new(total as u64);
        bar.set_style(
            ProgressStyle::with_template(
                "{spinner} [{elapsed_precise}] {bar:30} {pos}/{len} evaluated, {msg}",
            )
            .expect("static template"),
        );
        bar.set_message("building");
        Progress { bar }
    }

    pub fn built(&self, done: usize) {
        self.bar.set_message(format!("{done} built"));
    }

    pub fn evaluated(&self, e: &Evaluation) {
        self.bar.inc(1);
        let timing = e
            .timing
            .as_ref()
            .map(|t| {
                format!(
                    "  {:.3}x [{:.3}, {:.3}] {}",
                    t.speedup, t.speedup_ci_low, t.speedup_ci_high, t.label
                )
            })
            .unwrap_or_default();
        let reason = if e.reason.is_empty() {
            String::new()
        } else {
            format!("  ({})", first_line(&e.reason, 120))
        };
        self.bar.suspend(|| {
            eprintln!(
                "{:>13}  {}  {}{timing}{reason}",
                e.verdict.as_str(),
                e.label(),
                e.file
            )
        });
    }

    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

fn first_line(s: &str, max: usize) -> String {
    let line = s.lines().find(|l| !l.trim().is_empty()).unwrap_or_default();
    if line.chars().count() > max {
        format!("{}...", line.chars().take(max).collect::<String>())
    } else {
        line.to_string()
    }
}

/// The summary table, as printed at the end of a run.
pub fn summary_table(record: &RunRecord) -> String {
    let mut table = Table::new();
    table.load_preset(UTF8_FULL_CONDENSED);
    table.set_header([
        "level",
        "evaluated",
        "correct",
        "fast_0",
        "fast_1",
        "fast_1 (CI > 1)",
        "geomean speedup",
    ]);
    for s in by_level(record) {
        table.add_row([
            s.level.map_or("all".into(), |l| l.to_string()),
            s.evaluated.to_string(),
            s.correct.to_string(),
            format!("{:.2}", s.fast_0),
            format!("{:.2}", s.fast_1),
            format!("{:.2}", s.fast_1_significant),
            s.geomean_speedup.map_or("-".into(), |g| format!("{g:.3}")),
        ]);
    }
    table.to_string()
}

/// Everything printed after the run: unmatched files, the table, where the reports are, the gate.
pub fn final_report(record: &RunRecord, gate: &Gate, out: &std::path::Path) -> String {
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
    text.push_str(&summary_table(record));
    text.push_str(&format!("\nreports in {}\n", out.display()));
    if gate.failures.is_empty() {
        text.push_str("gate: passed\n");
    } else {
        text.push_str(&format!(
            "gate: failed ({} evaluation(s))\n",
            gate.failures.len()
        ));
        for f in &gate.failures {
            text.push_str(&format!("  {f}\n"));
        }
    }
    text
}
