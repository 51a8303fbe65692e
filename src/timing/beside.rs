//! `runtime.processes`: what the candidate ran beside its worker while it was timed. Every
//! process of the candidate is stopped while the other arm runs (`Session::ask`), so work
//! beside the worker cannot slow the reference; this check names it: processes the candidate
//! started (forked, detached) that spent CPU time during timing, or that hold the GPU, are work
//! of its own outside the worker that kbench times, and the evaluation is `cheat`. Pure: the
//! census comes in, the check and the reason go out.

use crate::record::{Check, Outcome};
use crate::worker::tree::Beside;

pub const NAME: &str = "runtime.processes";

/// CPU seconds that processes beside the worker may spend during timing without counting as
/// work: the bookkeeping of idle honest helpers (torch.compile's compile workers block on a
/// pipe, waking once a minute), and stopping and continuing them, plus this share of the
/// timing's wall time.
const FREE_CPU_S: f64 = 0.005;
const FREE_SHARE: f64 = 0.01;

/// The check of the census `before` and `after` timing (`wall_s` long), and the reason for
/// `cheat` where the candidate worked beside its worker.
pub fn judge(before: &[Beside], after: &[Beside], wall_s: f64) -> (Check, Option<String>) {
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
    let mut why = Vec::new();
    if !gpu.is_empty() {
        why.push(format!(
            "{} process(es) beside the worker hold the GPU ({})",
            gpu.len(),
            listed(&mut gpu.iter().map(|p| format!("pid {} {}", p.pid, p.name)))
        ));
    }
    if cpu > FREE_CPU_S + FREE_SHARE * wall_s {
        why.push(format!(
            "processes beside the worker spent {cpu:.2} s of CPU during {wall_s:.2} s of timing ({})",
            listed(
                &mut spent
                    .iter()
                    .filter(|(_, s)| *s > 0.0)
                    .map(|(p, s)| format!("pid {} {} {s:.2} s", p.pid, p.name))
            )
        ));
    }
    let evidence = match (after.len(), why.is_empty()) {
        (0, _) => "no process beside the worker".to_string(),
        (n, true) => format!(
            "{n} process(es) beside the worker, idle while timed ({cpu:.2} s of CPU), none holding the GPU"
        ),
        (_, false) => why.join("; "),
    };
    let cheat = (!why.is_empty())
        .then(|| format!("{NAME}: work of its own outside the timed worker: {evidence}"));
    let check = Check {
        name: NAME.into(),
        outcome: if cheat.is_some() {
            Outcome::Fail
        } else {
            Outcome::Pass
        },
        evidence,
        seconds: 0.0,
        runs: 1,
    };
    (check, cheat)
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
    fn work_beside_the_worker_is_cheat_and_idle_helpers_are_not() {
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
                "a CUDA context of its own",
                vec![],
                vec![p(9, 0.0, true)],
                Some("hold the GPU (pid 9 p9)"),
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
        for (name, before, after, cheat) in cases {
            let (check, why) = judge(&before, &after, 10.0);
            assert_eq!(check.name, NAME);
            match cheat {
                Some(expected) => {
                    let why = why.unwrap_or_else(|| panic!("{name}: not cheat"));
                    assert!(why.contains(expected), "{name}: {why}");
                    assert_eq!(check.outcome, Outcome::Fail, "{name}");
                }
                None => {
                    assert!(why.is_none(), "{name}: {why:?}");
                    assert_eq!(check.outcome, Outcome::Pass, "{name}");
                }
            }
        }
    }
}
