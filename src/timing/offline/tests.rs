//! Tests of the offline schedule: bursts and the order of rounds.

use super::*;
use ArmId::{Candidate, Compiled, Eager};

#[test]
fn calls_under_a_hundred_microseconds_are_timed_in_bursts() {
    assert_eq!(burst_size(0.1), 1);
    assert_eq!(burst_size(0.056), 8);
    assert_eq!(burst_size(0.018), 23);
    assert_eq!(burst_size(0.010), BURST_MAX);
    assert_eq!(burst_size(0.0001), BURST_MAX);
    assert_eq!(burst_size(0.0), 1);
    assert_eq!(burst_size(f64::INFINITY), 1);
}

#[test]
fn rounds_are_palindromes_with_a_rotated_start() {
    assert_eq!(round_order(0, 2), [Eager, Candidate, Candidate, Eager]);
    assert_eq!(round_order(1, 2), [Candidate, Eager, Eager, Candidate]);
    let three: Vec<Vec<ArmId>> = (0..3).map(|r| round_order(r, 3)).collect();
    assert_eq!(
        three[0],
        [Eager, Compiled, Candidate, Candidate, Compiled, Eager]
    );
    assert_eq!(
        three[1],
        [Compiled, Candidate, Eager, Eager, Candidate, Compiled]
    );
    assert_eq!(round_order(3, 3), three[0]);
    // Over a cycle of starts every arm holds every position once.
    for position in 0..6 {
        let mut arms: Vec<usize> = three.iter().map(|o| o[position].index()).collect();
        arms.sort();
        assert_eq!(arms, [0, 1, 2]);
    }
}

/// The offline protocol end to end over scripted workers, on the CPU: each worker answers
/// `time_setup` with its warm-up figures and `time` with a block of samples shaped as
/// `kbench_worker/timing/offline.py` writes them. A scripted reply returns at once, so the wall time
/// kbench measures around a block is below the times it reports, for either arm alike: the
/// envelope sees no unexplained time unless a script sleeps.
mod session {
    use std::path::PathBuf;
    use std::time::Duration;

    use serde_json::json;

    use crate::config::Config;
    use crate::probe::Probe;
    use crate::record::{Check, Outcome, Timing, CHARGED};
    use crate::stats::Decision;
    use crate::timing::{Failed, Session, Spent};
    use crate::verdict::Cause;
    use crate::worker::fake::{self, Answer, Scripted};
    use crate::worker::request::Request;

    /// A run's configuration on the CPU, from the command line's defaults.
    fn cpu_config() -> Config {
        let cli = <crate::cli::Cli as clap::Parser>::parse_from([
            "kbench",
            "eval",
            "submissions",
            "--device",
            "cpu",
        ]);
        let crate::cli::Command::Eval(args) = cli.command else {
            panic!("not eval");
        };
        let probe = Probe {
            facts: crate::probe::Facts::default(),
        };
        Config::resolve(&args, PathBuf::from("tasks"), "python3".into(), &probe).unwrap()
    }

    /// A worker's script; both workers of a session are links of one type.
    type Script = Box<dyn FnMut(&Request) -> Answer>;

    /// A worker whose calls take `ms` (its warm-up's median) and whose k-th sample reads `ms`
    /// give or take 0.4 %, the same sequence in every worker; it sleeps `sleep_ms` per sample
    /// before it replies (0: it replies at once).
    fn worker(ms: f64, sleep_ms: f64) -> Script {
        let mut taken = 0u32;
        Box::new(move |request| match request {
            Request::TimeSetup(_) => fake::ok(json!({
                "median_ms": ms, "submit_ms": 0.01, "calls": 10, "sets": 4,
                "kept": {"slots": 640, "container": false, "files": []},
            })),
            Request::CheckKept(kept) => {
                assert!(kept.slot < 640 && kept.kept["slots"] == 640, "{kept:?}");
                fake::ok(json!({"correct": true}))
            }
            Request::Time(time) => {
                let n = time.n.expect("an offline block names its samples");
                let samples: Vec<f64> = (taken..taken + n)
                    .map(|k| ms * (1.0 + 0.001 * f64::from(k % 5)))
                    .collect();
                taken += n;
                std::thread::sleep(Duration::from_secs_f64(sleep_ms * f64::from(n) / 1e3));
                fake::ok(json!({
                    "samples_ms": samples, "overflows": 0, "audit_ms": [],
                    "audit_excess_ms": [], "burst": time.burst.unwrap_or(1),
                }))
            }
            other => panic!("timing sent {}", other.cmd()),
        })
    }

    /// The timing of a reference whose calls take 1 ms against `candidate`, with the checks it
    /// made, and the commands each worker was sent.
    fn timed(candidate: Script) -> (Timing, Vec<Check>, [Vec<String>; 2]) {
        let (timing, checks, commands, _) = time_with(worker(1.0, 0.0), candidate);
        (timing.unwrap(), checks, commands)
    }

    /// The same with a reference of its own.
    fn time_with(
        reference: Script,
        candidate: Script,
    ) -> (Result<Timing, Failed>, Vec<Check>, [Vec<String>; 2], Spent) {
        time_in(&cpu_config(), false, reference, candidate)
    }

    /// The same in the run's setting `config`, one call per sample where `single_calls`.
    fn time_in(
        config: &Config,
        single_calls: bool,
        reference: Script,
        candidate: Script,
    ) -> (Result<Timing, Failed>, Vec<Check>, [Vec<String>; 2], Spent) {
        let mut reference = Scripted::new(reference);
        let mut candidate = Scripted::new(candidate);
        let mut checks = Vec::new();
        let mut session = Session {
            config,
            reference: &mut reference,
            candidate: &mut candidate,
            gpu: None,
            cpu: None,
            seed_base: 7,
            kept_files: None,
            single_calls,
            spent: Spent::default(),
        };
        let timing = session.run(&mut checks);
        let spent = session.spent;
        (
            timing,
            checks,
            [reference.commands(), candidate.commands()],
            spent,
        )
    }

    fn outcome(checks: &[Check], name: &str) -> Outcome {
        checks
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap()
            .outcome
    }

    /// The session's time outside its sampled rounds is counted where it went: both arms'
    /// set-ups, and the reference's checks of timed outputs (each in a request of its own).
    #[test]
    fn the_warm_up_and_the_output_checks_are_counted_apart() {
        let (timing, checks, commands, spent) = time_with(worker(1.0, 0.0), worker(1.0, 0.0));
        assert!(timing.is_ok());
        assert!(
            commands[0].iter().any(|c| c == "check_kept"),
            "{commands:?}"
        );
        assert_eq!(outcome(&checks, "timing.timed_output_check"), Outcome::Pass);
        assert!(
            spent.warmup_s > 0.0 && spent.output_checks_s > 0.0,
            "{spent:?}"
        );
        assert_eq!(
            spent.process_check_s, 0.0,
            "a SAME label has no process check"
        );
    }

    /// On a GPU, calls of 10 µs are timed in bursts, unless the candidate hands out one static
    /// output: then every arm's sample is one call, and the timing says why.
    #[test]
    fn a_static_output_is_timed_one_call_per_sample() {
        let mut config = cpu_config();
        config.device = crate::config::Device::Cuda;
        for single_calls in [false, true] {
            let bursts = std::rc::Rc::new(std::cell::RefCell::new(Vec::new()));
            let asked = |seen: std::rc::Rc<std::cell::RefCell<Vec<u32>>>| -> Script {
                let mut short = worker(0.01, 0.0);
                Box::new(move |request| {
                    if let Request::Time(time) = request {
                        seen.borrow_mut().push(time.burst.unwrap_or(1));
                    }
                    short(request)
                })
            };
            let (timing, _, _, _) = time_in(
                &config,
                single_calls,
                asked(bursts.clone()),
                asked(bursts.clone()),
            );
            let timing = timing.unwrap();
            let bursts = bursts.borrow();
            let note = timing
                .warnings
                .iter()
                .any(|w| w.starts_with("one call per sample"));
            if single_calls {
                assert!(bursts.iter().all(|b| *b == 1), "{bursts:?}");
                assert!(note && timing.burst.is_none(), "{:?}", timing.warnings);
            } else {
                assert!(bursts.iter().all(|b| *b == super::BURST_MAX), "{bursts:?}");
                assert!(
                    !note && timing.burst == Some(super::BURST_MAX),
                    "{:?}",
                    timing.warnings
                );
            }
        }
    }

    #[test]
    fn equal_speeds_read_same() {
        let (timing, checks, commands) = timed(worker(1.0, 0.0));
        assert_eq!(timing.label, Decision::Same, "{timing:?}");
        assert!((timing.speedup - 1.0).abs() < 1e-9, "{}", timing.speedup);
        assert_eq!(timing.method, "cpu_perf_counter");
        assert_eq!(outcome(&checks, "timing.wall_envelope"), Outcome::Pass);
        // On the CPU there are no audit calls.
        assert_eq!(outcome(&checks, "timing.audit"), Outcome::Skip);
        assert_eq!(outcome(&checks, "timing.timed_output_check"), Outcome::Pass);
        // Each worker sets up once, then times blocks: A C C A rounds, two blocks per arm; the
        // reference also checks kept outputs, the first round's and others', and the candidate
        // is asked nothing but blocks.
        for sent in &commands {
            assert_eq!(sent[0], "time_setup");
        }
        let [reference, candidate] = &commands;
        assert!(candidate[1..].iter().all(|c| c == "time"), "{candidate:?}");
        assert_eq!(reference[3], "check_kept", "{reference:?}");
        let blocks = reference.iter().filter(|c| *c == "time").count();
        assert_eq!(blocks, candidate.len() - 1);
        assert_eq!(
            timing.reference.samples_ms.len(),
            timing.candidate.samples_ms.len()
        );
    }

    #[test]
    fn a_wrong_kept_output_is_a_cheat_and_a_candidate_without_a_pool_cannot_hide_it() {
        let mut honest = worker(1.0, 0.0);
        let reference: Script = Box::new(move |request| match request {
            Request::CheckKept(_) => {
                fake::ok(json!({"correct": false, "reason": "output 0 differs"}))
            }
            other => honest(other),
        });
        let (timing, _, _, _) = time_with(reference, worker(1.0, 0.0));
        match timing {
            Err(Cause::TimedOutputWrong(why)) => {
                assert!(
                    why.contains("round 0, timed call") && why.contains("output 0 differs"),
                    "{why}"
                )
            }
            other => panic!("{other:?}"),
        }
        let mut honest = worker(1.0, 0.0);
        let poolless: Script = Box::new(move |request| match request {
            Request::TimeSetup(_) => fake::ok(json!({"median_ms": 1.0, "submit_ms": 0.01})),
            other => honest(other),
        });
        let (timing, _, _, _) = time_with(worker(1.0, 0.0), poolless);
        assert!(
            matches!(timing, Err(Cause::TimedOutputWrong(_))),
            "{timing:?}"
        );
    }

    /// Every request to the reference reaches it while what the candidate started beside its
    /// worker is stopped, and the candidate's own requests while it runs; those processes are
    /// counted (`runtime.processes`): one that holds the GPU's device files is named in a warning.
    #[test]
    fn the_reference_runs_with_the_candidates_processes_stopped_and_they_are_named() {
        use crate::worker::tree::Beside;
        let config = cpu_config();
        for gpu in [false, true] {
            let mut reference = Scripted::new(worker(1.0, 0.0));
            let mut candidate = Scripted::new(worker(1.0, 0.0));
            candidate.beside = vec![Beside {
                pid: 42,
                name: "python3".into(),
                cpu_s: 0.0,
                gpu,
            }];
            let mut checks = Vec::new();
            let timing = Session {
                config: &config,
                reference: &mut reference,
                candidate: &mut candidate,
                gpu: None,
                cpu: None,
                seed_base: 7,
                kept_files: None,
                single_calls: false,
                spent: Spent::default(),
            }
            .run(&mut checks);
            assert_eq!(candidate.while_paused, 0, "{gpu}");
            assert_eq!(reference.pauses, 0, "{gpu}");
            assert_eq!(candidate.pauses, reference.sent.len(), "{gpu}");
            assert!(!candidate.paused);
            assert!(timing.is_ok(), "{timing:?}");
            let check = checks
                .iter()
                .find(|c| c.name.as_str() == "runtime.processes")
                .unwrap();
            match gpu {
                false => assert_eq!(check.outcome, Outcome::Pass, "{check:?}"),
                true => {
                    assert_eq!(check.outcome, Outcome::Warn, "{check:?}");
                    assert!(check.evidence.contains("(pid 42 python3)"), "{check:?}");
                }
            }
        }
    }

    #[test]
    fn a_candidate_twice_as_slow_reads_slower_around_a_half() {
        let (timing, checks, _) = timed(worker(2.0, 0.0));
        assert_eq!(timing.label, Decision::Slower, "{timing:?}");
        assert!((timing.speedup - 0.5).abs() < 0.01, "{}", timing.speedup);
        assert!(timing.speedup_ci_low <= 0.5 && 0.5 <= timing.speedup_ci_high);
        assert_eq!(outcome(&checks, "timing.wall_envelope"), Outcome::Pass);
        // Far from 1, so no process check.
        assert!(timing.process.is_none());
    }

    #[test]
    fn times_far_below_the_wall_time_taken_are_charged() {
        // The candidate reports 0.01 ms a call but takes at least 15 ms of wall time a sample:
        // beyond the reference's (which replies at once) and the CPU's 10 ms allowance, at
        // least 5 ms a sample is unexplained and charged, however long the sleeps overrun.
        let (timing, checks, _) = timed(worker(0.01, 15.0));
        assert_eq!(outcome(&checks, "timing.wall_envelope"), Outcome::Warn);
        assert_eq!(timing.method, CHARGED);
        let charged = timing.candidate.median_ms;
        assert!(charged > 5.0, "{charged}");
        assert_eq!(timing.label, Decision::Slower, "{timing:?}");
        assert!(timing.speedup < 0.2, "{}", timing.speedup);
        assert!(timing
            .warnings
            .iter()
            .any(|w| w.contains("timing.wall_envelope")));
    }
}
