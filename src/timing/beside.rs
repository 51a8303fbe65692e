//! `runtime.processes`: what the candidate ran beside its worker while it was timed. What the
//! candidate started beside its worker is stopped whenever the reference or the control arm
//! runs (`Session::alone`), so it cannot slow them; this check says what there was: processes
//! the candidate started (forked, detached) that spent CPU time during timing, or that hold the
//! GPU's device files open. Evidence, not a verdict: torch.compile's own compile workers are
//! such processes (on an H200, 32 of them held the device files of an honest level2/34 kernel,
//! and one compiled for 0.32 s during level3/17's timing), and nothing from outside tells them
//! from a submission's. Pure: the census comes in, the check goes out.

use crate::record::{Check, Outcome};
use crate::worker::tree::Beside;
use crate::worker::CheckName;

pub const NAME: CheckName = CheckName::RuntimeProcesses;

/// CPU seconds that processes beside the worker may spend during timing without a warning: the
/// bookkeeping of idle helpers, and stopping and continuing them, plus this share of the
/// timing's wall time.
const FREE_CPU_S: f64 = 0.005;
const FREE_SHARE: f64 = 0.01;

/// The check of the census `before` and `after` timing (`wall_s` long): a warning where
/// processes beside the worker worked or hold the GPU's device files.
pub fn judge(before: &[Beside], after: &[Beside], wall_s: f64) -> Check {
    let spent: Vec<(&Beside, f64)> = after
        .iter()
        .map(|p| {
            let earlier = before
                .iter()
                .find(|b| b.pid == p.pid && b.name == p.name)
                .map_or(0.0, |b| b.cpu_s);
            (p, (p.cpu_s - earlier).max(0.0))
        })
        .collect();
    let cpu: f64 = spent.iter().map(|(_, s)| s).sum();
    let gpu: Vec<&Beside> = after.iter().filter(|p| p.gpu).collect();
    let listed = |ps: &mut dyn Iterator<Item = String>| ps.take(4).collect::<Vec<_>>().join(", ");
    let mut worked = Vec::new();
    if !gpu.is_empty() {
        worked.push(format!(
            "{} process(es) beside the worker hold the GPU's device files ({})",
            gpu.len(),
            listed(&mut gpu.iter().map(|p| format!("pid {} {}", p.pid, p.name)))
        ));
    }
    if cpu > FREE_CPU_S + FREE_SHARE * wall_s {
        worked.push(format!(
            "processes beside the worker spent {cpu:.2} s of CPU during {wall_s:.2} s of timing, stopped whenever the other arm ran ({})",
            listed(
                &mut spent
                    .iter()
                    .filter(|(_, s)| *s > 0.0)
                    .map(|(p, s)| format!("pid {} {} {s:.2} s", p.pid, p.name))
            )
        ));
    }
    let (outcome, evidence) = match (after.len(), worked.is_empty()) {
        (0, _) => (Outcome::Pass, "no process beside the worker".to_string()),
        (n, true) => (
            Outcome::Pass,
            format!("{n} process(es) beside the worker, idle while timed ({cpu:.2} s of CPU)"),
        ),
        (_, false) => (Outcome::Warn, worked.join("; ")),
    };
    Check {
        name: NAME,
        outcome,
        evidence,
        seconds: 0.0,
        runs: 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(pid: u32, cpu_s: f64, gpu: bool) -> Beside {
        Beside {
            pid,
            name: format!("p{pid}"),
            cpu_s,
            gpu,
        }
    }

    #[test]
    fn work_beside_the_worker_is_named_and_idle_helpers_pass() {
        type Case = (&'static str, Vec<Beside>, Vec<Beside>, Option<&'static str>);
        let cases: Vec<Case> = vec![
            ("none", vec![], vec![], None),
            (
                "idle helpers (torch.compile's workers)",
                vec![p(7, 3.0, false), p(8, 2.0, false)],
                vec![p(7, 3.01, false), p(8, 2.0, false)],
                None,
            ),
            (
                "busy while timed",
                vec![p(7, 0.1, false)],
                vec![p(7, 4.1, false)],
                Some("spent 4.00 s of CPU"),
            ),
            (
                "born busy during timing",
                vec![],
                vec![p(9, 2.5, false)],
                Some("pid 9 p9 2.50 s"),
            ),
            (
                "the GPU's device files",
                vec![],
                vec![p(9, 0.0, true)],
                Some("hold the GPU's device files (pid 9 p9)"),
            ),
            (
                "a pid reused by another process counts from zero",
                vec![Beside {
                    name: "other".into(),
                    ..p(7, 1.0, false)
                }],
                vec![p(7, 1.02, false)],
                Some("pid 7 p7 1.02 s"),
            ),
        ];
        for (name, before, after, warned) in cases {
            let check = judge(&before, &after, 10.0);
            assert_eq!(check.name, NAME);
            match warned {
                Some(expected) => {
                    assert_eq!(check.outcome, Outcome::Warn, "{name}");
                    assert!(
                        check.evidence.contains(expected),
                        "{name}: {}",
                        check.evidence
                    );
                }
                None => assert_eq!(check.outcome, Outcome::Pass, "{name}: {}", check.evidence),
            }
        }
    }
}
