//! On the CPU, whether a task fits the host's memory. An evaluation holds the task's inputs,
//! outputs and parameters (its facts, counted at full size) in both the reference's and the
//! candidate's worker, so twice their sum is a floor under what it needs: activations, the
//! float64 reference of the precision checks and each trial's fresh inputs come on top. A task
//! whose floor is above the memory available (`MemAvailable`) is skipped before its workers
//! start, the reason giving both numbers, rather than sending the host into swap or the OOM
//! killer; `warning` says so before the run, and names the tasks within half of it. Only at
//! full size: the facts count no other size, and `--scale small` is made to fit a CPU.

use std::collections::HashMap;

use crate::config::{Config, Device};
use crate::task::{Task, TaskId};
use crate::taskfacts::TaskFacts;

/// The host's available memory in bytes: `MemAvailable` of /proc/meminfo.
pub fn available() -> Option<u64> {
    parse_available(&std::fs::read_to_string("/proc/meminfo").ok()?)
}

fn parse_available(meminfo: &str) -> Option<u64> {
    let line = meminfo.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// Twice the task's inputs, outputs and parameters; None where its facts lack one.
fn floor(facts: &TaskFacts) -> Option<u64> {
    Some(2 * (facts.input_bytes? + facts.output_bytes? + facts.param_bytes?))
}

fn gib(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1 << 30))
}

/// Why the task with `facts` cannot run on this host, if it cannot: on the CPU at full size,
/// its floor above the memory `available`.
pub fn refusal(
    config: &Config,
    facts: Option<&TaskFacts>,
    available: Option<u64>,
) -> Option<String> {
    if config.device != Device::Cpu || !config.full_size() {
        return None;
    }
    let (need, available) = (floor(facts?)?, available?);
    (need > available).then(|| {
        format!(
            "needs at least {} on the CPU at full size (its inputs, outputs and parameters in \
             the reference's and the candidate's workers), and {} is available: run it with \
             --scale small",
            gib(need),
            gib(available)
        )
    })
}

/// Before a run on the CPU at full size: how many of `tasks` will be skipped for memory
/// (`refusal`) and how many need over half of what is available, each with its largest.
pub fn warning(
    config: &Config,
    tasks: &[Task],
    facts: &HashMap<TaskId, TaskFacts>,
    available: Option<u64>,
) -> Option<String> {
    if config.device != Device::Cpu || !config.full_size() {
        return None;
    }
    let available = available?;
    let mut needs: Vec<(u64, String)> = tasks
        .iter()
        .filter_map(|t| Some((floor(facts.get(&t.id)?)?, t.label())))
        .filter(|(need, _)| *need > available / 2)
        .collect();
    needs.sort();
    needs.dedup();
    let (over, near): (Vec<_>, Vec<_>) = needs.iter().rev().partition(|(n, _)| *n > available);
    let largest = |list: &[&(u64, String)]| {
        list.first()
            .map(|(n, label)| format!(" (the largest, {label}: at least {})", gib(*n)))
            .unwrap_or_default()
    };
    let mut text = Vec::new();
    if !over.is_empty() {
        text.push(format!(
            "{} task(s) need more than the {} of memory available and will be skipped{}",
            over.len(),
            gib(available),
            largest(&over)
        ));
    }
    if !near.is_empty() {
        text.push(format!(
            "{} task(s) need over half of the {} available and may not fit{}",
            near.len(),
            gib(available),
            largest(&near)
        ));
    }
    (!text.is_empty()).then(|| {
        format!(
            "--device cpu at full size: {}; --scale small runs the tasks at a size made for a CPU",
            text.join("; ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Config {
        crate::config::tests::resolved(&[&["--device", "cpu"], args].concat())
    }

    fn facts(bytes: u64) -> TaskFacts {
        TaskFacts {
            input_bytes: Some(bytes),
            output_bytes: Some(bytes),
            param_bytes: Some(0),
            ..TaskFacts::default()
        }
    }

    fn task(number: u32) -> Task {
        Task {
            id: TaskId { level: 1, number },
            name: format!("{number}_X"),
            path: "x".into(),
        }
    }

    #[test]
    fn reads_mem_available() {
        let meminfo =
            "MemTotal:       16318480 kB\nMemFree:         1000 kB\nMemAvailable:    8000000 kB\n";
        assert_eq!(parse_available(meminfo), Some(8_192_000_000));
        assert_eq!(parse_available("MemTotal: 1 kB\n"), None);
        assert!(available().is_some());
    }

    /// Each task's floor against what is available, and the start of its refusal.
    #[test]
    fn a_task_that_cannot_fit_the_cpu_at_full_size_is_refused() {
        const GIB: u64 = 1 << 30;
        let full = config(&[]);
        for (config, bytes, available, expected) in [
            // 2 x (3 + 3) GiB = 12 GiB
            (
                &full,
                3 * GIB,
                Some(8 * GIB),
                Some("needs at least 12.0 GiB on the CPU at full size"),
            ),
            (&full, 3 * GIB, Some(16 * GIB), None),
            (&full, 3 * GIB, None, None),
            (&config(&["--scale", "small"]), 3 * GIB, Some(8 * GIB), None),
            (
                &config(&["--set", "batch_size=2"]),
                3 * GIB,
                Some(8 * GIB),
                None,
            ),
        ] {
            let got = refusal(config, Some(&facts(bytes)), available);
            match expected {
                None => assert_eq!(got, None),
                Some(start) => {
                    let got = got.unwrap();
                    assert!(got.starts_with(start), "{got}");
                    assert!(got.contains("8.0 GiB is available") && got.ends_with("--scale small"));
                }
            }
        }
        assert_eq!(refusal(&full, Some(&TaskFacts::default()), Some(GIB)), None);
        assert_eq!(refusal(&full, None, Some(GIB)), None);
    }

    #[test]
    fn warns_before_the_run_of_tasks_that_will_be_skipped_or_may_not_fit() {
        const GIB: u64 = 1 << 30;
        let tasks = [task(1), task(2), task(3), task(4)];
        let facts: HashMap<TaskId, TaskFacts> =
            [(1, 3 * GIB), (2, 5 * GIB), (3, GIB + GIB / 2), (4, GIB / 8)]
                .into_iter()
                .map(|(n, bytes)| (task(n).id, facts(bytes)))
                .collect();
        let full = config(&[]);
        assert_eq!(
            warning(&full, &tasks, &facts, Some(8 * GIB)).unwrap(),
            "--device cpu at full size: 2 task(s) need more than the 8.0 GiB of memory available \
             and will be skipped (the largest, level1/2_X: at least 20.0 GiB); 1 task(s) need \
             over half of the 8.0 GiB available and may not fit (the largest, level1/3_X: at \
             least 6.0 GiB); --scale small runs the tasks at a size made for a CPU"
        );
        assert_eq!(warning(&full, &tasks, &facts, Some(64 * GIB)), None);
        assert_eq!(
            warning(&config(&["--scale", "small"]), &tasks, &facts, Some(GIB)),
            None
        );
    }
}
