//! Tests of the pipeline as a whole: whole evaluations through the real `Python`
//! backend over scripted workers (no Python, no GPU).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;

use crate::cache_key::CacheKey;
use crate::config::Config;
use crate::record::{Build, Evaluation};
use crate::sandbox::Confinement;
use crate::submission::Submission;
use crate::task::{Task, TaskId};
use crate::taskfacts::TaskFacts;
use crate::worker::Spawn;

use super::annotate::Annotations;
use super::backend::{Backend, Phase};
use super::build;
use super::python::Python;
use super::spawn::{Launcher, Spawner};

/// Whole evaluations: `Python` over scripted workers answering as `kbench_worker` does, on the
/// CPU in the KernelBench timing mode (two set-ups and one block of samples per arm, no timed
/// output check: the offline mode's adaptive rounds are `timing`'s to test). Nothing here
/// asserts a time.
mod scripted {
    use std::io;
    use std::path::Path;

    use serde_json::json;

    use super::*;
    use crate::check::{Finding, Severity};
    use crate::record::{BuildStatus, Check, Outcome};
    use crate::sandbox::Mode;
    use crate::verdict::Verdict;
    use crate::worker::fake::{self, Answer, Scripted};
    use crate::worker::request::Request;
    use crate::worker::{ErrorKind, Failure, WorkerError};

    type Script = fn(&Request) -> Answer;

    /// Workers by role: each spawned reference and candidate answers with its role's script.
    struct Scripts {
        reference: Script,
        candidate: Script,
    }

    impl Spawner for Scripts {
        type Worker = Scripted<Script>;

        fn spawn(&self, spec: &Spawn) -> io::Result<Scripted<Script>> {
            match spec.args.last().map(String::as_str) {
                Some("reference") => Ok(Scripted::new(self.reference)),
                Some("candidate") => Ok(Scripted::new(self.candidate)),
                Some("compile") => Ok(Scripted::new(compile as Script)),
                other => Err(io::Error::other(format!("no script for {other:?}"))),
            }
        }

        fn finish(_worker: Scripted<Script>) -> bool {
            true
        }
    }

    /// The trusted side: the task loads, every output compares equal (by KernelBench's rule
    /// too, where asked), perturbation and timing answer as the reference worker does.
    fn reference(request: &Request) -> Answer {
        match request {
            Request::Load(_) => fake::ok(json!({"constants": {"batch_size": 4, "dim": 8}})),
            Request::Check(c) => fake::ok(json!({
                "correct": true, "reason": "", "max_abs_diff": 0.0, "max_rel_diff": 0.0,
                "kernelbench_correct": c.kernelbench_tolerance.map(|_| true),
                "kernelbench_needed": c.kernelbench_tolerance.map(|_| 0.0),
            })),
            Request::Perturb(_) => fake::ok(json!({"shapes": [[8, 8]]})),
            Request::TimeSetup(_) => fake::ok(json!({"median_ms": 2.0})),
            Request::Time(_) => fake::ok(json!({"samples_ms": [2.0, 2.1, 1.9, 2.0, 2.05]})),
            Request::ProfilerCall(_) => fake::ok(json!({})),
            other => unexpected(other),
        }
    }

    /// An honest candidate whose kernel is CuPy's (loaded through the driver, so `kernels.mapped`
    /// cannot look and skips), twice as fast as the reference.
    fn candidate(request: &Request) -> Answer {
        match request {
            Request::Load(_) => fake::ok(json!({
                "startup_s": 0.5, "kernels": ["cupy:relu"], "checks": [],
            })),
            Request::Trial(_) => fake::ok(json!({"checks": []})),
            Request::KernelbenchTrial(_) => {
                fake::ok(json!({"correct": true, "needed": 0.0, "reason": ""}))
            }
            Request::Perturb(_) => fake::ok(json!({"shapes": [[8, 8]]})),
            Request::TimeSetup(_) => fake::ok(json!({"median_ms": 1.0})),
            Request::Time(_) => fake::ok(json!({"samples_ms": [1.0, 1.05, 0.95, 1.0, 1.02]})),
            Request::State(_) => fake::ok(json!({"checks": []})),
            Request::Profile(_) => fake::ok(json!({
                "profile": {}, "kernels": ["cupy:relu"], "checks": [],
            })),
            Request::ProfilerCall(_) => fake::ok(json!({})),
            other => unexpected(other),
        }
    }

    /// A compile worker whose import built an extension.
    fn compile(request: &Request) -> Answer {
        match request {
            Request::Compile(_) => fake::ok(json!({
                "kernels": ["cpp_extension.load_inline:relu"], "compiled": ["relu"],
            })),
            other => unexpected(other),
        }
    }

    fn unexpected(request: &Request) -> Answer {
        fake::err(error(
            ErrorKind::Protocol,
            &format!("unexpected {}", request.cmd()),
        ))
    }

    fn error(kind: ErrorKind, message: &str) -> WorkerError {
        WorkerError {
            kind,
            message: message.into(),
            fatal: false,
            traceback: None,
            drift: None,
            check: None,
        }
    }

    /// A run's setting on the CPU, writing under `dir`.
    fn config(dir: &Path) -> Config {
        let out = dir.join("out").display().to_string();
        let cli = <crate::cli::Cli as clap::Parser>::parse_from([
            "kbench",
            "eval",
            "subs",
            "--device",
            "cpu",
            "--mode",
            "kernelbench",
            "--seed",
            "7",
            "--trials",
            "2",
            "--max-samples",
            "5",
            "--out",
            &out,
        ]);
        let crate::cli::Command::Eval(args) = cli.command else {
            panic!("not eval");
        };
        let probe = crate::probe::Probe {
            facts: crate::probe::Facts::default(),
        };
        let mut config = Config::resolve(&args, dir.join("tasks"), "python3".into(), &probe)
            .expect("a CPU config");
        config.cache = dir.join("cache");
        config
    }

    /// Task 1 of level 1 and its submission, written under `dir`.
    fn pair(dir: &Path) -> (Task, Submission) {
        let id = TaskId {
            level: 1,
            number: 1,
        };
        let path = dir.join("1_relu.py");
        std::fs::write(&path, "class ModelNew:\n    pass\n").unwrap();
        let task = Task {
            id,
            name: "1_ReLU".into(),
            path: dir.join("tasks/level1/1_ReLU.py"),
        };
        let sub = Submission {
            task: id,
            path,
            file: "1_relu.py".into(),
            sample: None,
            sha256: "ab".repeat(32),
        };
        (task, sub)
    }

    fn finding() -> Finding {
        Finding {
            rule: "torch_fallback".into(),
            severity: Severity::Warning,
            line: 3,
            why: "calls torch.relu".into(),
        }
    }

    fn facts() -> HashMap<TaskId, TaskFacts> {
        let facts = TaskFacts {
            degenerate: vec!["constant_output".into()],
            errors: vec!["flops: unknown op".into()],
            ..TaskFacts::default()
        };
        [(
            TaskId {
                level: 1,
                number: 1,
            },
            facts,
        )]
        .into()
    }

    /// The real backend over `scripts`, with one static finding for the submission's file.
    /// A task's reference worker serves its next candidates even unconfined here (`reuse`),
    /// as the scripted workers cannot reach each other.
    fn backend<'a, S: Spawner>(
        config: &'a Config,
        facts: &'a HashMap<TaskId, TaskFacts>,
        scripts: S,
    ) -> Python<'a, S> {
        let confinement =
            Confinement::probe(Mode::Off, "python3", &[], &config.cache, false).unwrap();
        let launcher = Launcher {
            config,
            spawner: scripts,
            worker_path: PathBuf::new(),
        };
        let keys = ("scripted".into(), CacheKey::open(&config.cache).unwrap());
        let annotations =
            Annotations::new([("1_relu.py".to_string(), vec![finding()])].into(), None);
        let mut python =
            Python::spawning(launcher, keys, facts, Vec::new(), confinement, annotations);
        python.workers.reuse.enabled = true;
        python
    }

    /// Build and evaluate the submission with these workers.
    fn evaluate(reference: Script, candidate: Script) -> Evaluation {
        evaluate_in(1, reference, candidate)
    }

    /// The same in `lanes` lanes of the slot.
    fn evaluate_in(lanes: usize, reference: Script, candidate: Script) -> Evaluation {
        evaluate_with(&facts(), |c| c.lanes = lanes, reference, candidate)
    }

    /// The same for a task with these facts, in the run's setting as `adjust` leaves it.
    fn evaluate_with(
        facts: &HashMap<TaskId, TaskFacts>,
        adjust: impl Fn(&mut Config),
        reference: Script,
        candidate: Script,
    ) -> Evaluation {
        evaluate_watched(facts, adjust, (reference, candidate), &|_| {})
    }

    /// The same, telling `enter` each phase the evaluation enters.
    fn evaluate_watched(
        facts: &HashMap<TaskId, TaskFacts>,
        adjust: impl Fn(&mut Config),
        (reference, candidate): (Script, Script),
        enter: &dyn Fn(Phase),
    ) -> Evaluation {
        let dir = tempfile::tempdir().unwrap();
        let mut config = config(dir.path());
        adjust(&mut config);
        let python = backend(
            &config,
            facts,
            Scripts {
                reference,
                candidate,
            },
        );
        let (task, sub) = pair(dir.path());
        let build = python.compile(&task, &sub);
        assert_eq!(build.status, BuildStatus::Ok, "{}", build.message);
        python.evaluate(&task, &sub, &build, 0, enter)
    }

    /// The phases `evaluate_with` enters, in order, and its verdict.
    fn phases(adjust: impl Fn(&mut Config), candidate: Script) -> (Vec<Phase>, Verdict) {
        let entered = Mutex::new(Vec::new());
        let enter = |phase| entered.lock().unwrap().push(phase);
        let eval = evaluate_watched(&facts(), adjust, (reference, candidate), &enter);
        (entered.into_inner().unwrap(), eval.verdict)
    }

    /// `--profile ncu` comes after everything else: a fresh candidate and a fresh reference each
    /// answer one bracketed call under the tool. The scripted workers write no tool log, so
    /// `profile.ncu` skips and says why; the verdict, its reason and the timing are the run's
    /// without it, and without it nothing of the tool's is recorded.
    #[test]
    fn the_kernel_profiler_changes_no_verdict_or_timing() {
        use crate::worker::CheckName;
        let entered = Mutex::new(Vec::new());
        let enter = |phase| entered.lock().unwrap().push(phase);
        let tool = |c: &mut Config| c.profiler = Some("/cuda/bin/ncu".into());
        let profiled = evaluate_watched(&facts(), tool, (reference, candidate), &enter);
        let plain = evaluate(reference, candidate);
        assert_eq!(
            entered.into_inner().unwrap().last(),
            Some(&Phase::KernelProfiler)
        );
        assert_eq!(
            (profiled.verdict, &profiled.reason),
            (plain.verdict, &plain.reason)
        );
        let timing = |e: &Evaluation| serde_json::to_value(&e.timing).unwrap();
        assert!(plain.timing.is_some());
        assert_eq!(timing(&profiled), timing(&plain));
        let named = |e: &Evaluation| {
            let found = e.checks.iter().find(|c| c.name == CheckName::ProfileNcu);
            found.cloned()
        };
        assert_eq!(named(&plain), None);
        assert!(plain.ncu.is_none() && profiled.ncu.is_none());
        let check = named(&profiled).expect("profile.ncu");
        assert_eq!(check.outcome, Outcome::Skip, "{}", check.evidence);
        assert!(
            check
                .evidence
                .starts_with("not profiled: its log could not be read"),
            "the call itself was answered: {}",
            check.evidence
        );
        let logs = |e: &Evaluation| e.logs.iter().any(|l| l.contains(".ncu-"));
        assert!(logs(&profiled) && !logs(&plain), "{:?}", profiled.logs);
    }

    /// An evaluation tells its phases as it enters them: a passing one all of them, with a wait
    /// for the device before its workers and before timing alone; one that fails a trial goes
    /// from its trials to ending its workers; KernelBench's eval, asked for, comes last.
    #[test]
    fn an_evaluation_tells_the_phases_it_enters() {
        use Phase::*;
        let passing = [Waiting, Loading, Trials, Waiting, Timing, Profiling, Ending];
        assert_eq!(phases(|_| {}, candidate), (passing.to_vec(), Verdict::Pass));
        fn raises(request: &Request) -> Answer {
            match request {
                Request::Trial(_) => fake::err(error(ErrorKind::Forward, "RuntimeError: boom")),
                other => candidate(other),
            }
        }
        let failing = vec![Waiting, Loading, Trials, Ending];
        assert_eq!(phases(|_| {}, raises), (failing, Verdict::RuntimeError));
        let asked = phases(|c| c.kernelbench_eval = true, candidate).0;
        assert_eq!(asked, [&passing[..], &[Kernelbench]].concat());
    }

    fn check<'e>(eval: &'e Evaluation, name: &str) -> &'e Check {
        eval.checks
            .iter()
            .find(|c| c.name.as_str() == name)
            .unwrap_or_else(|| panic!("no {name} in {:?}", eval.checks))
    }

    /// What the run adds from outside the workers is on every evaluation, however it ended.
    fn assert_annotated(eval: &Evaluation) {
        assert_eq!(eval.findings, [finding()]);
        assert_eq!(eval.task_flags, ["constant_output"]);
        assert_eq!(check(eval, "task.facts").outcome, Outcome::Warn);
    }

    #[test]
    fn a_nondeterministic_reference_skips_the_candidates_second_calls() {
        fn no_second_calls(request: &Request) -> Answer {
            match request {
                Request::Trial(t) if t.deep => unexpected(request),
                other => candidate(other),
            }
        }
        let mut facts = facts();
        for f in facts.values_mut() {
            f.nondeterministic = Some(true);
        }
        let eval = evaluate_with(&facts, |_| {}, reference, no_second_calls);
        assert_eq!((eval.verdict, eval.reason.as_str()), (Verdict::Pass, ""));
        for name in ["outputs.independence", "determinism.rerun"] {
            let skipped = check(&eval, name);
            assert_eq!(skipped.outcome, Outcome::Skip, "{name}");
            assert!(skipped.evidence.contains("nondeterministic"), "{name}");
        }
    }

    #[test]
    fn a_task_parameter_without_a_partner_fails_the_perturbation() {
        fn unpaired(request: &Request) -> Answer {
            match request {
                Request::Perturb(_) => fake::ok(json!({
                    "shapes": [[8, 8]], "missing": ["fc.weight [8, 8]"], "extra": ["w [64]"],
                })),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, unpaired);
        assert_eq!(eval.verdict, Verdict::Contract);
        assert!(
            eval.reason.contains("the task's fc.weight [8, 8]"),
            "{}",
            eval.reason
        );
    }

    /// `params.perturbation` runs on plain and on scaled inputs; then both workers put the
    /// parameters back, before any later trial, so the checks after it and timing judge the
    /// parameters as built.
    #[test]
    fn the_parameters_go_back_before_the_next_trial() {
        use std::sync::atomic::{AtomicU32, Ordering::SeqCst};
        use std::sync::Mutex;
        static PERTURBED: AtomicU32 = AtomicU32::new(0);
        static RESTORED: AtomicU32 = AtomicU32::new(0);
        // Per scaled trial, how many workers had restored when it was checked.
        static SCALED: Mutex<Vec<u32>> = Mutex::new(Vec::new());
        fn counts(request: &Request) {
            if let Request::Perturb(p) = request {
                let count = if p.restore { &RESTORED } else { &PERTURBED };
                count.fetch_add(1, SeqCst);
            }
        }
        fn restoring(request: &Request) -> Answer {
            counts(request);
            if let Request::Check(c) = request {
                let restored = RESTORED.load(SeqCst);
                match c.variant {
                    None => assert_eq!(restored, 0, "{c:?}"),
                    Some(crate::worker::request::Variant::Scaled { .. }) => {
                        SCALED.lock().unwrap().push(restored)
                    }
                    Some(_) => assert_eq!(restored, 2, "{c:?}"),
                }
            }
            reference(request)
        }
        fn told(request: &Request) -> Answer {
            counts(request);
            candidate(request)
        }
        let eval = evaluate(restoring, told);
        assert_eq!((eval.verdict, eval.reason.as_str()), (Verdict::Pass, ""));
        assert_eq!((PERTURBED.load(SeqCst), RESTORED.load(SeqCst)), (2, 2));
        // The perturbation's scaled trial before the restore, the inputs' own after it.
        assert_eq!(*SCALED.lock().unwrap(), [0, 2]);
        assert_eq!(check(&eval, "params.perturbation").runs, 2);
    }

    /// The reference says its parameters as built; the candidate is asked with them (and the
    /// reference without).
    #[test]
    fn the_candidate_perturbs_with_the_parameters_the_reference_built() {
        fn says(request: &Request) -> Answer {
            match request {
                Request::Perturb(p) if !p.restore => {
                    assert!(p.built.is_none(), "the reference is told the parameters");
                    fake::ok(json!({"shapes": [[8, 8]], "built": [
                        {"name": "fc.weight", "shape": [8, 8], "dtype": "torch.float32", "digest": "00ff"},
                    ]}))
                }
                other => reference(other),
            }
        }
        fn told(request: &Request) -> Answer {
            if let Request::Perturb(p) = request {
                if p.restore {
                    return candidate(request);
                }
                let built = p
                    .built
                    .as_deref()
                    .expect("the reference's parameters as built");
                let said: Vec<_> = built
                    .iter()
                    .map(|b| (b.name.as_str(), b.shape.clone(), b.digest.as_str()))
                    .collect();
                assert_eq!(said, [("fc.weight", vec![8, 8], "00ff")]);
            }
            candidate(request)
        }
        let eval = evaluate(says, told);
        assert_eq!((eval.verdict, eval.reason.as_str()), (Verdict::Pass, ""));
        assert_eq!(check(&eval, "params.perturbation").outcome, Outcome::Pass);
    }

    #[test]
    fn a_task_without_parameters_skips_the_perturbation() {
        fn parameterless(request: &Request) -> Answer {
            match request {
                Request::Perturb(_) => fake::ok(json!({"shapes": []})),
                other => reference(other),
            }
        }
        let eval = evaluate(parameterless, candidate);
        assert_eq!(eval.verdict, Verdict::Pass);
        let skipped = check(&eval, "params.perturbation");
        assert_eq!(skipped.outcome, Outcome::Skip);
        assert_eq!(
            skipped.evidence,
            "the task's Model has no floating parameters to perturb"
        );
    }

    #[test]
    fn an_honest_candidate_passes_every_trial_and_is_timed() {
        let eval = evaluate(reference, candidate);
        assert_eq!((eval.verdict, eval.reason.as_str()), (Verdict::Pass, ""));
        // Two trials, new parameters on plain and scaled inputs, signed, scaled and shifted
        // inputs.
        assert_eq!(eval.trials.len(), 7);
        assert!(eval.trials.iter().all(|t| t.correct));
        for name in [
            "params.perturbation",
            "inputs.distribution_perturbation",
            "inputs.mean_shift",
        ] {
            assert_eq!(check(&eval, name).outcome, Outcome::Pass, "{name}");
        }
        let shape = check(&eval, "inputs.shape_perturbation");
        assert_eq!(shape.outcome, Outcome::Skip);
        assert_eq!(shape.evidence, "no constant that only sizes the inputs");
        assert_eq!(
            check(&eval, "harness.transfer").evidence,
            "a tensors-only file"
        );
        assert_eq!(check(&eval, "kernels.mapped").outcome, Outcome::Skip);
        let timing = eval.timing.as_ref().expect("timed");
        assert_eq!(timing.reference.samples_ms.len(), 5);
        assert_eq!(timing.candidate.samples_ms.len(), 5);
        assert_eq!(eval.logs.len(), 2);
        // KernelBench's verdict is taken on the two plain trials only.
        let judged: Vec<Option<bool>> = eval.trials.iter().map(|t| t.kernelbench_correct).collect();
        assert_eq!(
            judged,
            [Some(true), Some(true), None, None, None, None, None]
        );
        assert_eq!(eval.kernelbench_correct, Some(true));
        assert_annotated(&eval);
    }

    /// The parts of a phase are measured inside it: the trials' requests by worker within the
    /// correctness phase, the warm-up within timing; what follows timing is a phase of its own.
    #[test]
    fn each_phase_holds_its_parts() {
        let eval = evaluate(reference, candidate);
        let p = &eval.phases;
        let parts = [
            p.trials_candidate_s,
            p.trials_reference_s,
            p.warmup_s,
            p.after_timing_s,
        ];
        assert!(parts.iter().all(|&s| s > 0.0), "{p:?}");
        assert!(
            p.trials_candidate_s + p.trials_reference_s <= p.correctness_s,
            "{p:?}"
        );
        assert!(p.warmup_s <= p.timing_s, "{p:?}");
        // KernelBench's timing mode checks no timed output and has no process check (the
        // offline mode's parts are `timing`'s to test).
        assert_eq!((p.output_checks_s, p.process_check_s), (0.0, 0.0));
        let total = p.load_s + p.correctness_s + p.timing_s + p.after_timing_s;
        assert!(total <= eval.seconds, "{p:?} against {}", eval.seconds);
    }

    /// KernelBench's verdict stands beside kbench's stricter one: a kernel kbench rejects on a
    /// perturbed trial, or on its first trial's deep checks, still passes KernelBench's rule
    /// (the plain trials then go on for its verdict alone); one that fails that rule, or raises
    /// in a trial, does not; one whose build failed was never judged by it.
    #[test]
    fn kernelbench_verdict_stands_beside_kbench_stricter_one() {
        fn shift_fails(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.variant.is_some() => fake::ok(json!({
                    "correct": false, "reason": "output 0 differs", "max_abs_diff": 1.0,
                })),
                other => reference(other),
            }
        }
        fn deep_fails(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.deep => fake::ok(json!({
                    "correct": false, "kernelbench_correct": true,
                    "reason": "precision.fp64_error_ratio: 42x",
                })),
                other => reference(other),
            }
        }
        fn kernelbench_fails(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.kernelbench_tolerance.is_some() => fake::ok(json!({
                    "correct": false, "kernelbench_correct": false, "reason": "output 0 differs",
                })),
                other => reference(other),
            }
        }
        fn raises(request: &Request) -> Answer {
            match request {
                Request::Trial(_) => fake::err(error(ErrorKind::Forward, "RuntimeError: boom")),
                other => candidate(other),
            }
        }
        let eval = evaluate(shift_fails, candidate);
        assert_eq!(eval.verdict, Verdict::Incorrect);
        assert_eq!(eval.kernelbench_correct, Some(true));

        let eval = evaluate(deep_fails, candidate);
        assert_eq!(
            (eval.verdict, eval.reason.as_str()),
            (
                Verdict::Incorrect,
                "trial 0: precision.fp64_error_ratio: 42x"
            )
        );
        assert_eq!(eval.trials.len(), 1);
        assert_eq!(eval.kernelbench_correct, Some(true));

        let eval = evaluate(kernelbench_fails, candidate);
        assert_eq!(eval.verdict, Verdict::Incorrect);
        assert_eq!(eval.kernelbench_correct, Some(false));

        let eval = evaluate(reference, raises);
        assert_eq!(eval.verdict, Verdict::RuntimeError);
        assert_eq!(eval.kernelbench_correct, Some(false));
        assert_eq!(eval.kernelbench_needed, Some(1.0));

        // A second call that fails ends the trial before its first outputs are compared:
        // KernelBench, which makes no second call, gets its verdict from its trials run again
        // alone (`kernelbench.environment`), which make none either.
        fn rerun_differs(request: &Request) -> Answer {
            match request {
                Request::Trial(t) if t.deep => fake::err(WorkerError {
                    check: Some(crate::worker::CheckName::DeterminismRerun),
                    ..error(
                        ErrorKind::Output,
                        "determinism.rerun: output 0 differs between two calls on the same inputs",
                    )
                }),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, rerun_differs);
        assert_eq!(eval.verdict, Verdict::Incorrect);
        assert_eq!(
            (eval.kernelbench_correct, eval.kernelbench_needed),
            (Some(true), Some(0.0))
        );
        let again = check(&eval, "kernelbench.environment");
        assert_eq!(again.outcome, Outcome::Warn);
        assert!(
            again
                .evidence
                .starts_with("kbench's checks ended KernelBench's trial 0")
                && again.evidence.ends_with(
                    "KernelBench's eval runs again alone; its 2 trials are correct at 1e-4 (they need 0)"
                ),
            "{}",
            again.evidence
        );
        assert_eq!(eval.logs.len(), 3, "{:?}", eval.logs);
    }

    /// The first trial's second call finds the same output storage: a contract breach that ends
    /// the trial before KernelBench's verdict is known.
    fn static_output_breach() -> Answer {
        fake::err(error(
            ErrorKind::Contract,
            "outputs.independence: forward returns the same output storage on every call",
        ))
    }

    /// One of KernelBench's trials, run again alone, that is not allclose at 1e-4 (it needs 3e-3).
    fn kernelbench_miss() -> Answer {
        fake::ok(json!({
            "correct": false, "needed": 3e-3,
            "reason": "not allclose at 0.0001 (needs 0.003)",
        }))
    }

    /// The record of an evaluation whose KernelBench eval ran again and missed (`kernelbench_miss`):
    /// its columns, and the check's evidence ending in `tail`; returns the check.
    fn missed_kernelbench<'e>(eval: &'e Evaluation, tail: &str) -> &'e Check {
        assert_eq!(
            (eval.kernelbench_correct, eval.kernelbench_needed),
            (Some(false), Some(3e-3))
        );
        let again = check(eval, "kernelbench.environment");
        assert!(again.evidence.ends_with(tail), "{}", again.evidence);
        again
    }

    /// KernelBench's trials run again alone, by a candidate worker of a fresh pair loaded for
    /// them (`Load::kernelbench`, the pair's reference worker unused); their verdict is
    /// KernelBench's, and kbench's own verdict is untouched. Unless `--kernelbench-eval` asks
    /// for them everywhere, kbench's trials stand for KernelBench's and no pair is started
    /// otherwise.
    #[test]
    fn kernelbench_trials_run_again_as_its_eval_runs_them_where_it_matters() {
        fn static_output(request: &Request) -> Answer {
            match request {
                Request::Trial(t) if t.deep => static_output_breach(),
                Request::Load(l) if l.kernelbench => {
                    assert!(l.submission.is_some() && l.env.is_some(), "{l:?}");
                    fake::ok(json!({"startup_s": 0.5}))
                }
                Request::KernelbenchTrial(t) => {
                    assert!(t.index < 2 && t.tolerance == 1e-4, "{t:?}");
                    kernelbench_miss()
                }
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, static_output);
        assert_eq!(eval.verdict, Verdict::Contract);
        missed_kernelbench(
            &eval,
            "KernelBench's eval runs again alone; not correct at 1e-4: trial 0: not allclose at 0.0001 (needs 0.003)",
        );
        assert_eq!(eval.logs.len(), 3);
        assert!(
            eval.logs[2].ends_with(".kernelbench-candidate.log"),
            "{:?}",
            eval.logs
        );

        let eval = evaluate(reference, candidate);
        assert_eq!(eval.logs.len(), 2);
        assert!(eval
            .checks
            .iter()
            .all(|c| c.name.as_str() != "kernelbench.environment"));

        // Asked for (`--kernelbench-eval`), it runs wherever kbench's trials ran, and its
        // verdict replaces the one from kbench's trials.
        fn fails_kernelbench_alone(request: &Request) -> Answer {
            match request {
                Request::KernelbenchTrial(_) => kernelbench_miss(),
                other => candidate(other),
            }
        }
        let plain = evaluate(reference, candidate).verdict;
        let asked = |c: &mut Config| c.kernelbench_eval = true;
        let eval = evaluate_with(&facts(), asked, reference, fails_kernelbench_alone);
        assert_eq!(eval.verdict, plain);
        let again = missed_kernelbench(
            &eval,
            "(one process, PyTorch's own switches, its seeds): not correct at 1e-4: trial 0: not allclose at 0.0001 (needs 0.003)",
        );
        assert_eq!(again.outcome, Outcome::Pass);
        assert_eq!(eval.logs.len(), 3);
    }

    /// What KernelBench's eval, run again, cannot get past decides as in KernelBench: the
    /// submission's error fails it.
    #[test]
    fn kernelbench_eval_fails_where_the_submission_raises() {
        fn raises(request: &Request) -> Answer {
            match request {
                Request::Trial(t) if t.deep => static_output_breach(),
                Request::KernelbenchTrial(_) => fake::err(error(
                    ErrorKind::Forward,
                    "forward: RuntimeError: Offset increment outside graph capture",
                )),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, raises);
        assert_eq!(
            (eval.kernelbench_correct, eval.kernelbench_needed),
            (Some(false), Some(1.0))
        );
        let again = check(&eval, "kernelbench.environment");
        assert!(
            again
                .evidence
                .contains("KernelBench's eval ends: forward: RuntimeError: Offset increment"),
            "{}",
            again.evidence
        );
    }

    /// `kernelbench_needed` is the largest over KernelBench's trials, which go on past kbench's
    /// failure and KernelBench's at the run's tolerance while it passes at 1e-2 (its verdict
    /// there is then known from the one run); one past 1e-2 stops them.
    #[test]
    fn kernelbench_needed_is_known_at_its_loosest_tolerance_from_one_run() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static LOOSE: AtomicUsize = AtomicUsize::new(0);
        static FAR: AtomicUsize = AtomicUsize::new(0);
        fn missed(request: &Request, calls: &AtomicUsize, needed: [f64; 2]) -> Answer {
            match request {
                Request::Check(c) if c.kernelbench_tolerance.is_some() => {
                    let n = calls.fetch_add(1, Ordering::SeqCst);
                    fake::ok(json!({
                        "correct": false, "kernelbench_correct": false, "reason": "output 0 differs",
                        "kernelbench_needed": needed[n.min(1)],
                    }))
                }
                other => reference(other),
            }
        }
        fn loose(request: &Request) -> Answer {
            missed(request, &LOOSE, [1e-3, 3e-3])
        }
        fn far(request: &Request) -> Answer {
            missed(request, &FAR, [0.5, 0.5])
        }
        let eval = evaluate(loose, candidate);
        assert_eq!(
            (eval.verdict, eval.kernelbench_correct),
            (Verdict::Incorrect, Some(false))
        );
        assert_eq!(eval.kernelbench_needed, Some(3e-3));
        assert_eq!(LOOSE.load(Ordering::SeqCst), 2);

        let eval = evaluate(far, candidate);
        assert_eq!(eval.kernelbench_needed, Some(0.5));
        assert_eq!(FAR.load(Ordering::SeqCst), 1);

        assert_eq!(evaluate(reference, candidate).kernelbench_needed, Some(0.0));
    }

    #[test]
    fn a_contract_breach_is_judged_after_the_values_which_outrank_it() {
        /// The candidate's deep call returned an input's memory.
        fn aliases(request: &Request) -> Answer {
            match request {
                Request::Trial(t) if t.deep => fake::ok(json!({
                    "checks": [], "contract": "outputs.alias: output 0 shares memory with input 0",
                })),
                other => candidate(other),
            }
        }
        /// Every trial's values are wrong.
        fn wrong(request: &Request) -> Answer {
            match request {
                Request::Check(_) => {
                    fake::ok(json!({"correct": false, "reason": "output 0 differs"}))
                }
                other => reference(other),
            }
        }
        /// The second of KernelBench's trials is wrong.
        fn second_wrong(request: &Request) -> Answer {
            match request {
                Request::Check(c) if !c.deep && c.kernelbench_tolerance.is_some() => fake::ok(
                    json!({"correct": false, "kernelbench_correct": false, "reason": "output 0 differs"}),
                ),
                other => reference(other),
            }
        }
        /// Right values, with the first trial's inputs written.
        fn inputs_written(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.deep => fake::ok(json!({
                    "correct": true, "kernelbench_correct": true,
                    "contract": "inputs.integrity: forward modified its input(s) [0]",
                })),
                other => reference(other),
            }
        }
        /// Wrong on the parameters' new values only.
        fn stale_weights(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.variant.is_none() && c.kernelbench_tolerance.is_none() => {
                    fake::ok(
                        json!({"correct": false, "reason": "output 0 differs: max abs diff 1.4"}),
                    )
                }
                other => reference(other),
            }
        }
        /// Wrong on the parameters' new values and on signed inputs.
        fn stale_and_signed_wrong(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.variant.is_some() => signed_wrong(request),
                other => stale_weights(other),
            }
        }
        /// Wrong on signed inputs only.
        fn signed_wrong(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.variant.is_some() => fake::ok(json!({
                    "correct": false, "reason": "output 0 differs", "max_abs_diff": 1.0,
                })),
                other => reference(other),
            }
        }
        let cases: [(Script, Script, Verdict, &str); 8] = [
            (
                signed_wrong,
                aliases,
                Verdict::Incorrect,
                "inputs.distribution_perturbation (signed inputs",
            ),
            (
                reference,
                aliases,
                Verdict::Contract,
                "trial 0: outputs.alias: output 0 shares memory with input 0",
            ),
            (
                wrong,
                aliases,
                Verdict::Incorrect,
                "trial 0: output 0 differs",
            ),
            (
                second_wrong,
                aliases,
                Verdict::Incorrect,
                "trial 1: output 0 differs",
            ),
            (
                inputs_written,
                aliases,
                Verdict::Contract,
                "trial 0: inputs.integrity: forward modified its input(s) [0]",
            ),
            (
                stale_weights,
                candidate,
                Verdict::Contract,
                "params.perturbation (new parameter values): right with the parameters it was \
                 built with, wrong after they changed: output 0 differs: max abs diff 1.4",
            ),
            (
                stale_weights,
                aliases,
                Verdict::Contract,
                "trial 0: outputs.alias",
            ),
            // The later trials run on the parameters as built: wrong values there outrank the
            // perturbation's breach.
            (
                stale_and_signed_wrong,
                candidate,
                Verdict::Incorrect,
                "inputs.distribution_perturbation (signed inputs",
            ),
        ];
        for (reference, candidate, verdict, reason) in cases {
            let eval = evaluate(reference, candidate);
            assert_eq!(eval.verdict, verdict, "{}", eval.reason);
            assert!(eval.reason.starts_with(reason), "{}", eval.reason);
            // A breach stops no clock; wrong values do.
            assert_eq!(
                eval.timing.is_some(),
                verdict == Verdict::Contract,
                "{}",
                eval.reason
            );
            // KernelBench's rule is its own: a breach of kbench's contract leaves it true.
            let kernelbench = !matches!(eval.reason.as_str(), r if r.contains("differs") && r.starts_with("trial"));
            assert_eq!(
                eval.kernelbench_correct,
                Some(kernelbench),
                "{}",
                eval.reason
            );
        }
    }

    /// A breach of the module contract with the values right is timed and profiled as a correct
    /// evaluation is, every check after timing made once; the breach decides the verdict, and
    /// what timing met after it is named in the reason.
    #[test]
    fn contract_evaluations_carry_timing() {
        fn inputs_written(request: &Request) -> Answer {
            match request {
                Request::Check(c) if c.deep => fake::ok(json!({
                    "correct": true, "kernelbench_correct": true,
                    "contract": "inputs.integrity: forward modified its input(s) [0]",
                })),
                other => reference(other),
            }
        }
        let eval = evaluate(inputs_written, candidate);
        assert_eq!(
            (eval.verdict, eval.reason.as_str()),
            (
                Verdict::Contract,
                "trial 0: inputs.integrity: forward modified its input(s) [0]"
            )
        );
        let timing = eval.timing.as_ref().expect("timed");
        assert!(timing.speedup > 1.5, "{timing:?}");
        assert_eq!(eval.kernelbench_correct, Some(true));
        // The same checks, each as often, as a passing evaluation's: none skipped or repeated.
        let runs = |e: &Evaluation| -> Vec<(crate::worker::CheckName, u32)> {
            let mut runs: Vec<_> = e.checks.iter().map(|c| (c.name.clone(), c.runs)).collect();
            runs.sort();
            runs
        };
        assert_eq!(runs(&eval), runs(&evaluate(reference, candidate)));
        assert_annotated(&eval);

        fn untimeable(request: &Request) -> Answer {
            match request {
                Request::TimeSetup(_) => fake::err(error(ErrorKind::Forward, "forward: boom")),
                other => candidate(other),
            }
        }
        let eval = evaluate(inputs_written, untimeable);
        assert_eq!(eval.verdict, Verdict::Contract);
        assert_eq!(
            eval.reason,
            "trial 0: inputs.integrity: forward modified its input(s) [0]; after the breach: \
             runtime_error: forward: boom"
        );
        assert!(eval.timing.is_none());
    }

    /// A module that hands out one static output only once warm: timing meets it in a burst (a
    /// `contract` error from the candidate's timed calls) and times it again one call per
    /// sample; the check after timing finds it again, and the profiled call still runs.
    #[test]
    fn a_static_output_met_while_timed_is_timed_again_and_is_contract() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        const MET: &str = "outputs.independence: timed call 3 returned the memory of the burst's \
                           earlier output 0 of call 2";
        const AFTER: &str = "outputs.independence: forward returns the same output storage";
        fn warm_static(request: &Request) -> Answer {
            static SETUPS: AtomicUsize = AtomicUsize::new(0);
            match request {
                Request::TimeSetup(_) => {
                    SETUPS.fetch_add(1, Ordering::SeqCst);
                    candidate(request)
                }
                Request::Time(_) if SETUPS.load(Ordering::SeqCst) == 1 => {
                    fake::err(error(ErrorKind::Contract, MET))
                }
                Request::State(_) => fake::ok(json!({
                    "checks": [{"name": "outputs.independence", "outcome": "fail",
                                "evidence": AFTER, "seconds": 0.0}],
                    "contract": AFTER,
                })),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, warm_static);
        assert_eq!(
            (eval.verdict, eval.reason.as_str()),
            (Verdict::Contract, MET)
        );
        assert!(eval.timing.is_some(), "timed again");
        let found = check(&eval, "outputs.independence");
        assert_eq!(found.outcome, Outcome::Fail);
        assert!(
            found.evidence.starts_with("while timed: "),
            "{}",
            found.evidence
        );
        assert!(eval
            .checks
            .iter()
            .any(|c| c.name.as_str() == "kernels.mapped"));

        // Found only after timing: the verdict is the breach's, with the timing and the profile.
        fn static_after(request: &Request) -> Answer {
            match request {
                Request::State(_) => warm_static(request),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, static_after);
        assert_eq!(
            (eval.verdict, eval.reason.as_str()),
            (Verdict::Contract, AFTER)
        );
        assert!(eval.timing.is_some());
        assert!(eval
            .checks
            .iter()
            .any(|c| c.name.as_str() == "kernels.mapped"));
    }

    #[test]
    fn a_candidate_without_kernels_of_its_own_is_no_kernel() {
        fn pure_pytorch(request: &Request) -> Answer {
            match request {
                Request::Load(_) => fake::ok(json!({"startup_s": 0.5, "kernels": []})),
                Request::Profile(_) => fake::ok(json!({"profile": {}, "kernels": []})),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, pure_pytorch);
        assert_eq!(eval.verdict, Verdict::NoKernel);
        assert_eq!(eval.reason, "correct, but no custom kernel (pure PyTorch)");
        assert!(eval.timing.is_some());
        assert_annotated(&eval);
    }

    /// A candidate profiled on a GPU gets the reference's profiled call beside its own: both
    /// recorded, compared in `profile.reference_ops`. A reference whose profiled call fails
    /// leaves neither, and no claim.
    #[test]
    fn the_reference_is_profiled_beside_a_gpu_profile_and_both_are_recorded() {
        const GEMM: &str = "sm90_xmma_gemm_f32f32_f32f32_f32_nt_n";
        fn profiled_reference(request: &Request) -> Answer {
            match request {
                Request::Profile(_) => fake::ok(json!({"profile": {
                    "busy_ms": 2.0, "total_ms": 2.0,
                    "launches": [{"name": GEMM, "launches": 1, "ms": 2.0}],
                }})),
                other => reference(other),
            }
        }
        fn gemm_and_copy(request: &Request) -> Answer {
            match request {
                Request::Profile(_) => fake::ok(json!({
                    "profile": {
                        "library_share": 0.99, "custom_ms": 0.02, "total_ms": 2.02, "busy_ms": 2.02,
                        "launches": [
                            {"name": GEMM, "launches": 1, "ms": 2.0},
                            {"name": "copy_kernel(float*)", "launches": 1, "ms": 0.02, "own": true},
                        ],
                    },
                    "kernels": ["cupy:copy"], "checks": [],
                })),
                other => candidate(other),
            }
        }
        let eval = evaluate(profiled_reference, gemm_and_copy);
        assert_eq!(
            check(&eval, "profile.reference_ops").evidence,
            "the candidate's call ran 1 of the reference's 1 kernel launch(es) (1 kernel(s))"
        );
        let profile = eval.profile.as_ref().expect("both profiles recorded");
        assert_eq!(profile.reference.len(), 1);
        assert_eq!(profile.candidate.len(), 2);
        assert!(profile.candidate[1].own && !profile.candidate[0].own);
        // Level 1 under the partial policy: the library share decides first.
        assert_eq!(eval.verdict, Verdict::NoKernel);
        assert!(
            eval.reason.starts_with("profile.library_share"),
            "{}",
            eval.reason
        );

        let alone = evaluate(reference, gemm_and_copy);
        assert!(alone.profile.is_none());
        assert!(!alone
            .checks
            .iter()
            .any(|c| c.name.as_str() == "profile.reference_ops"));
    }

    /// `profile.library_output` from the candidate's traced calls decides `no_kernel`, except
    /// under `--library-policy any`, which lets the library do everything: there it warns.
    #[test]
    fn library_ops_that_made_every_output_are_no_kernel_unless_the_policy_allows_any() {
        fn library_made(request: &Request) -> Answer {
            match request {
                Request::Profile(_) => fake::ok(json!({
                    "profile": {}, "kernels": ["cupy:copy"],
                    "checks": [{"name": "profile.library_output", "outcome": "fail",
                        "evidence": "library ops made every output (output 0: aten.clamp_min_.default)"}],
                })),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, library_made);
        assert_eq!(eval.verdict, Verdict::NoKernel);
        assert_eq!(
            eval.reason,
            "profile.library_output: library ops made every output (output 0: aten.clamp_min_.default)"
        );
        let any = evaluate_with(
            &facts(),
            |c| c.library_policy = crate::config::LibraryPolicy::Any,
            reference,
            library_made,
        );
        assert_eq!(any.verdict, Verdict::Pass, "{}", any.reason);
        assert_eq!(check(&any, "profile.library_output").outcome, Outcome::Warn);
    }

    #[test]
    fn wrong_values_are_incorrect_at_the_first_trial() {
        fn differs(request: &Request) -> Answer {
            match request {
                Request::Check(_) => fake::ok(json!({
                    "correct": false,
                    "reason": "output 0 differs: max abs diff 1 (at [0, 0]; rtol 0.0001)",
                    "max_abs_diff": 1.0,
                })),
                other => reference(other),
            }
        }
        let eval = evaluate(differs, candidate);
        assert_eq!(eval.verdict, Verdict::Incorrect);
        assert_eq!(
            eval.reason,
            "trial 0: output 0 differs: max abs diff 1 (at [0, 0]; rtol 0.0001)"
        );
        assert_eq!(eval.trials.len(), 1);
        assert!(eval.timing.is_none());
        assert_eq!(check(&eval, "harness.transfer").outcome, Outcome::Pass);
        assert_annotated(&eval);
    }

    #[test]
    fn a_forward_that_raises_is_a_runtime_error() {
        fn raises(request: &Request) -> Answer {
            match request {
                Request::Trial(_) => fake::err(error(ErrorKind::Forward, "RuntimeError: boom")),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, raises);
        assert_eq!(eval.verdict, Verdict::RuntimeError);
        assert_eq!(eval.reason, "RuntimeError: boom");
        assert!(eval.trials.is_empty() && eval.timing.is_none());
        assert_annotated(&eval);
    }

    #[test]
    fn a_candidate_that_dies_has_crashed() {
        fn dies(request: &Request) -> Answer {
            match request {
                Request::Trial(_) => Err(Failure::Exited("killed by signal 11".into())),
                other => candidate(other),
            }
        }
        let eval = evaluate(reference, dies);
        assert_eq!(eval.verdict, Verdict::Crashed);
        let died = Failure::Exited("killed by signal 11".into());
        assert_eq!(eval.reason, died.to_string());
        assert_annotated(&eval);
    }

    #[test]
    fn a_failed_build_is_a_compile_error_annotated_like_any_other() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let facts = facts();
        let python = backend(
            &config,
            &facts,
            Scripts {
                reference,
                candidate,
            },
        );
        let (task, sub) = pair(dir.path());
        let mut build = python.compile(&task, &sub);
        build.status = BuildStatus::Failed;
        build.message = "error: identifier \"x\" is undefined".into();
        let eval = python.evaluate(&task, &sub, &build, 0, &|_| {});
        assert_eq!(eval.verdict, Verdict::CompileError);
        assert_eq!(eval.reason, "error: identifier \"x\" is undefined");
        assert!(eval.logs.is_empty() && eval.trials.is_empty());
        assert_eq!(eval.kernelbench_correct, None);
        assert_annotated(&eval);
        // A file's findings go to its one evaluation.
        let again = python.evaluate(&task, &sub, &build, 0, &|_| {});
        assert!(again.findings.is_empty());
    }

    /// A cached build is reused only while its record authenticates under the cache's key and
    /// its artifacts are unchanged: a record rewritten without the key (a submission that made
    /// another's build read `failed`), or without its MAC (an older kbench's), is built again and
    /// that evaluation says so; so is an artifact changed since, even with the record rewritten
    /// to the artifacts' new hash.
    #[test]
    fn a_cached_build_is_reused_only_while_its_record_authenticates() {
        let dir = tempfile::tempdir().unwrap();
        let config = config(dir.path());
        let facts = facts();
        let python = backend(
            &config,
            &facts,
            Scripts {
                reference,
                candidate,
            },
        );
        let (task, sub) = pair(dir.path());
        std::fs::write(&sub.path, "# load_inline\nclass ModelNew:\n    pass\n").unwrap();
        let folder = python.builder.build_dir(&sub);
        let (record, mac) = python.builder.record_paths(&folder);
        let built = python.compile(&task, &sub);
        assert!(!built.cache_hit && built.cache_note.is_empty(), "{built:?}");
        assert!(python.compile(&task, &sub).cache_hit);
        let forge = |status: BuildStatus| {
            let mut b = built.clone();
            b.status = status;
            b.message = "error: poisoned".into();
            b.artifacts_sha256 = build::artifacts_hash(&folder);
            std::fs::write(&record, serde_json::to_vec_pretty(&b).unwrap()).unwrap();
        };
        let untrusted = |b: &Build| {
            !b.cache_hit && b.status == BuildStatus::Ok && b.cache_note.contains("not trusted")
        };

        // Rewritten to `failed`: built again, said once.
        forge(BuildStatus::Failed);
        let rebuilt = python.compile(&task, &sub);
        assert!(untrusted(&rebuilt), "{rebuilt:?}");
        let next = python.compile(&task, &sub);
        assert!(next.cache_hit && next.cache_note.is_empty(), "{next:?}");
        // Without its MAC.
        std::fs::remove_file(&mac).unwrap();
        assert!(untrusted(&python.compile(&task, &sub)));
        // An artifact added: built again; with the record rewritten to the new hash, that
        // record is not trusted.
        let artifact = folder.join("torch_extensions/relu.so");
        std::fs::create_dir_all(artifact.parent().unwrap()).unwrap();
        std::fs::write(&artifact, b"ELF").unwrap();
        let stale = python.compile(&task, &sub);
        assert!(!stale.cache_hit && stale.cache_note.is_empty(), "{stale:?}");
        std::fs::create_dir_all(artifact.parent().unwrap()).unwrap();
        std::fs::write(&artifact, b"ELF").unwrap();
        forge(BuildStatus::Ok);
        assert!(untrusted(&python.compile(&task, &sub)));
    }

    #[test]
    fn out_of_memory_beside_another_lane_runs_again_alone_and_is_annotated_once() {
        fn out_of_memory(request: &Request) -> Answer {
            match request {
                Request::Load(_) => fake::err(error(ErrorKind::Oom, "CUDA out of memory")),
                other => candidate(other),
            }
        }
        let eval = evaluate_in(2, reference, out_of_memory);
        // Alone it ran out of memory too: the submission's own.
        assert_eq!(eval.verdict, Verdict::RuntimeError);
        assert_eq!(eval.reason, "CUDA out of memory");
        assert_eq!(check(&eval, "harness.alone").outcome, Outcome::Warn);
        assert_eq!(check(&eval, "task.facts").runs, 1);
        assert_annotated(&eval);
    }

    /// Many candidates of one task on one slot (`reuse`): each candidate's behaviour comes from
    /// the file it loads; the spawner numbers the reference workers and counts the loads each
    /// served.
    mod many_candidates {
        use std::sync::{Arc, Mutex};

        use super::*;

        type Boxed = Box<dyn FnMut(&Request) -> Answer + Send>;

        /// How the reference workers answer: `fails(worker, load)` says whether a worker's
        /// request fails, by the worker's number and how many loads it has served.
        struct Spawned {
            fails: fn(&Request, usize, usize) -> Option<Answer>,
            /// Per reference worker, in the order started, the loads it served.
            loads: Arc<Mutex<Vec<usize>>>,
            /// The same per candidate worker.
            candidates: Arc<Mutex<Vec<usize>>>,
            /// `Load::memo` of every reference load, in order.
            memos: Arc<Mutex<Vec<bool>>>,
        }

        impl Spawner for Spawned {
            type Worker = Scripted<Boxed>;

            fn spawn(&self, spec: &Spawn) -> io::Result<Scripted<Boxed>> {
                match spec.args.last().map(String::as_str) {
                    Some("reference") => {
                        let loads = self.loads.clone();
                        let me = {
                            let mut all = loads.lock().unwrap();
                            all.push(0);
                            all.len() - 1
                        };
                        let fails = self.fails;
                        let memos = self.memos.clone();
                        Ok(Scripted::new(Box::new(move |r: &Request| {
                            let served = loads.lock().unwrap()[me];
                            if let Some(answer) = fails(r, me, served) {
                                return answer;
                            }
                            if let Request::Load(l) = r {
                                loads.lock().unwrap()[me] += 1;
                                memos.lock().unwrap().push(l.memo);
                            }
                            reference(r)
                        })))
                    }
                    Some("candidate") => {
                        let mut file = String::new();
                        let loads = self.candidates.clone();
                        let me = {
                            let mut all = loads.lock().unwrap();
                            all.push(0);
                            all.len() - 1
                        };
                        Ok(Scripted::new(Box::new(move |r: &Request| {
                            if let Request::Load(l) = r {
                                loads.lock().unwrap()[me] += 1;
                                let staged = l.submission.as_ref().and_then(|p| p.file_name());
                                file = staged.unwrap().to_string_lossy().into_owned();
                            }
                            match (file.as_str(), r) {
                                ("crash.py", Request::Trial(_)) => {
                                    Err(Failure::Exited("killed by signal 11".into()))
                                }
                                ("cheat.py", Request::Trial(_)) => fake::err(error(
                                    ErrorKind::Cheat,
                                    "harness.poison: read another call's memory",
                                )),
                                _ => candidate(r),
                            }
                        })))
                    }
                    Some("compile") => Ok(Scripted::new(Box::new(compile))),
                    other => Err(io::Error::other(format!("no script for {other:?}"))),
                }
            }

            /// A candidate of `linger.py` left a process that did not end with it.
            fn finish(worker: Scripted<Boxed>) -> bool {
                !worker.sent.iter().any(|r| {
                    matches!(r, Request::Load(l)
                        if l.submission.as_ref().is_some_and(|p| p.ends_with("linger.py")))
                })
            }
        }

        fn never(_: &Request, _: usize, _: usize) -> Option<Answer> {
            None
        }

        /// The first reference worker's first check is a CUDA error.
        fn first_check_fails(r: &Request, me: usize, _: usize) -> Option<Answer> {
            (me == 0 && matches!(r, Request::Check(_)))
                .then(|| fake::err(error(ErrorKind::Cuda, "an illegal memory access")))
        }

        /// The first reference worker cannot load the task a second time.
        fn reload_fails(r: &Request, me: usize, served: usize) -> Option<Answer> {
            (me == 0 && served == 1 && matches!(r, Request::Load(_)))
                .then(|| Err(Failure::Exited("killed by signal 9".into())))
        }

        /// What the workers of a run served: per reference worker its loads, per candidate
        /// worker its loads, and `Load::memo` of every reference load in order.
        struct Served {
            loads: Vec<usize>,
            candidates: Vec<usize>,
            memos: Vec<bool>,
        }

        /// How a run's workers answer (`Spawned::fails`), whether references are kept (`reuse`)
        /// and what the task's facts say of `nondeterministic`.
        type How = (
            fn(&Request, usize, usize) -> Option<Answer>,
            bool,
            Option<bool>,
        );

        /// The run of the candidates `files` of one task on slot 0, given to `run`, where the
        /// task's facts say `nondeterministic`; what `run` returns and what the workers served.
        fn with_run<R>(
            files: &[&str],
            (fails, reuse, nondeterministic): How,
            run: impl FnOnce(&Python<'_, Spawned>, &[(Task, Submission)]) -> R,
        ) -> (R, Served) {
            let dir = tempfile::tempdir().unwrap();
            let config = config(dir.path());
            let mut facts = facts();
            facts
                .values_mut()
                .for_each(|f| f.nondeterministic = nondeterministic);
            let loads = Arc::new(Mutex::new(Vec::new()));
            let candidates = Arc::new(Mutex::new(Vec::new()));
            let memos = Arc::new(Mutex::new(Vec::new()));
            let spawned = Spawned {
                fails,
                loads: loads.clone(),
                candidates: candidates.clone(),
                memos: memos.clone(),
            };
            let mut python = backend(&config, &facts, spawned);
            python.workers.reuse.enabled = reuse;
            let (task, honest) = pair(dir.path());
            let work: Vec<(Task, Submission)> = files
                .iter()
                .map(|f| {
                    let path = dir.path().join(f);
                    std::fs::write(&path, "class ModelNew:\n    pass\n").unwrap();
                    let sub = Submission {
                        path,
                        file: f.to_string(),
                        ..honest.clone()
                    };
                    (task.clone(), sub)
                })
                .collect();
            let got = run(&python, &work);
            drop(python);
            let served = Served {
                loads: loads.lock().unwrap().clone(),
                candidates: candidates.lock().unwrap().clone(),
                memos: memos.lock().unwrap().clone(),
            };
            (got, served)
        }

        /// Evaluate the candidates `files` of one task in order on slot 0: their verdicts and
        /// what the workers served.
        fn evaluate_all(files: &[&str], how: How) -> (Vec<Verdict>, Served) {
            with_run(files, how, |python, work| {
                python.expect(work);
                work.iter()
                    .map(|(task, sub)| {
                        let build = python.compile(task, sub);
                        python.evaluate(task, sub, &build, 0, &|_| {}).verdict
                    })
                    .collect()
            })
        }

        /// Before the run's first evaluation the slot's pool is up, and its next pair has
        /// candidate workers beside its reference for the task's later candidates (two ahead
        /// on the CPU); a task of one candidate gets none, and unconfined none is kept.
        #[test]
        fn the_pool_starts_with_the_run_and_its_next_pair_has_workers_for_later_candidates() {
            let cases: [(&[&str], bool, usize); 4] = [
                (&["a.py", "b.py", "c.py", "d.py"], true, 3),
                (&["a.py", "b.py"], true, 2),
                (&["a.py"], true, 1),
                (&["a.py", "b.py", "c.py"], false, 1),
            ];
            for (files, reuse, started) in cases {
                let ((), served) = with_run(files, (never, reuse, None), |python, work| {
                    python.expect(work)
                });
                assert_eq!(served.loads, [0], "{files:?}");
                assert_eq!(
                    served.candidates,
                    vec![0; started],
                    "{files:?}, reuse {reuse}"
                );
            }
        }

        /// A reference keeps its outputs for the task's other candidates (`Load::memo`) where the
        /// task's facts say its reference repeats itself: on every load of a task of several
        /// candidates, the last's included (it reads them), and not for a lone candidate. Not
        /// where the reference draws random numbers or the facts do not say, nor unconfined.
        #[test]
        fn the_reference_keeps_its_outputs_only_for_a_repeating_tasks_other_candidates() {
            type Case = (&'static [&'static str], Option<bool>, bool, &'static [bool]);
            let cases: [Case; 5] = [
                (&["a.py", "b.py", "c.py"], Some(false), true, &[true; 3]),
                (&["a.py"], Some(false), true, &[false]),
                (&["a.py", "b.py"], Some(true), true, &[false; 2]),
                (&["a.py", "b.py"], None, true, &[false; 2]),
                (&["a.py", "b.py"], Some(false), false, &[false; 2]),
            ];
            for (files, nondeterministic, reuse, memos) in cases {
                let (verdicts, served) = evaluate_all(files, (never, reuse, nondeterministic));
                assert!(verdicts.iter().all(|v| *v == Verdict::Pass), "{verdicts:?}");
                assert_eq!(
                    served.memos, memos,
                    "{files:?}, nondeterministic {nondeterministic:?}, reuse {reuse}"
                );
            }
        }

        /// One reference worker serves the task's candidates, one fresh candidate worker each
        /// (started beside it, at most two ahead on the CPU and no more than candidates to
        /// come); what a candidate does (crash, cheat) leaves the next one's verdict alone; a
        /// reference that erred is retired (with the candidate workers started beside it), and
        /// one that cannot load the task again is replaced before the candidate is judged. While
        /// evaluations are left to start, the refill keeps one spare pair, whose workers load
        /// nothing unless a reference is replaced; none once the last has started. Unconfined,
        /// every candidate gets a fresh pair.
        #[test]
        fn a_tasks_candidates_share_a_clean_reference_worker() {
            use Verdict::{Cheat, Crashed, Pass, Skipped};
            type Case = (
                &'static str,
                &'static [&'static str],
                fn(&Request, usize, usize) -> Option<Answer>,
                &'static [Verdict],
                &'static [usize],
                usize,
            );
            let cases: [Case; 7] = [
                (
                    "honest",
                    &["a.py", "b.py", "c.py", "d.py"],
                    never,
                    &[Pass; 4],
                    &[4, 0],
                    5,
                ),
                (
                    "unconfined",
                    &["a.py", "b.py", "c.py"],
                    never,
                    &[Pass; 3],
                    &[1, 1, 1],
                    3,
                ),
                (
                    "crash",
                    &["crash.py", "b.py"],
                    never,
                    &[Crashed, Pass],
                    &[2, 0],
                    3,
                ),
                // A cheat caught before its outputs were compared: KernelBench's trials run
                // again alone, by the candidate worker of a fresh pair, whose reference loads
                // nothing (`kernelbench.environment`).
                (
                    "cheat",
                    &["cheat.py", "b.py"],
                    never,
                    &[Cheat, Pass],
                    &[2, 0, 0],
                    4,
                ),
                // A candidate whose processes did not all end with it: its reference (and the
                // exchange they shared) serves no one else; the next candidate gets a fresh pair.
                (
                    "lingers",
                    &["linger.py", "b.py"],
                    never,
                    &[Pass, Pass],
                    &[1, 1],
                    3,
                ),
                // The first reference's two companions go with it.
                (
                    "reference error",
                    &["a.py", "b.py", "c.py"],
                    first_check_fails,
                    &[Skipped, Pass, Pass],
                    &[1, 2, 0],
                    6,
                ),
                // The second candidate's first worker loaded it beside the stale reference.
                (
                    "reload fails",
                    &["a.py", "b.py", "c.py"],
                    reload_fails,
                    &[Pass, Pass, Pass],
                    &[1, 2, 0],
                    6,
                ),
            ];
            for (name, files, fails, verdicts, loads, started) in cases {
                let (got, served) = evaluate_all(files, (fails, name != "unconfined", None));
                let candidates = served.candidates;
                assert_eq!(got, verdicts, "{name}");
                assert_eq!(served.loads, loads, "{name}");
                assert_eq!(candidates.len(), started, "{name}: {candidates:?}");
                assert!(candidates.iter().all(|n| *n <= 1), "{name}: {candidates:?}");
            }
        }
    }
}
