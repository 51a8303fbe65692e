//! After timing, whether a kernel of the submission's own ran: the candidate's state checks, one
//! profiled call (its kernels, their share of GPU time against library kernels, what its source
//! defines), the reference's profiled call against it (`profile.reference_ops`), and whether a
//! reported kernel's shared object is mapped into the worker (`kernels.mapped`, read from
//! outside its interpreter). Gathers the `KernelEvidence` that
//! `verdict` judges and the host-speed error a timing's label may allow; decides neither.

use std::path::Path;

use crate::config::{Config, LibraryPolicy};
use crate::record::{merge_check, Check, Outcome, Timing};
use crate::reference_ops::{self, Profiles};
use crate::task::Task;
use crate::timing::{self, Failed};
use crate::verdict::{Cause, KernelEvidence};
use crate::worker::request::{Profile, State};
use crate::worker::{CheckName, Link, Stream};

use super::gathered::Gathered;
use super::stage::ask;

/// Above this share of GPU time in library kernels a submission is `no_kernel` where the
/// `--library-policy` applies a limit.
const MAX_LIBRARY_SHARE: f64 = 0.5;

/// The candidate worker's traced calls: library ops alone made every output (`checks/provenance.py`).
const LIBRARY_OUTPUT: CheckName = CheckName::ProfileLibraryOutput;

/// What the profiled call shows: the cause that decides the verdict (the kernels' evidence,
/// unless a breach of the module contract found after timing, or before it: `verify_and_time`),
/// and where the forward synchronizes with the host, the narrower host-speed error its timing's
/// label allows (`annotate` applies it).
pub(super) struct Judged {
    pub cause: Cause,
    pub host_error: Option<f64>,
}

/// What the profiled call's judgement takes from the run: its settings.
pub(super) struct Evidence<'a> {
    pub config: &'a Config,
}

impl Evidence<'_> {
    /// After timing: the candidate's checks (`State`), one profiled call (`profile.library_share`
    /// last, since profiling leaves state behind in the process it ran in), on a GPU the
    /// reference's profiled call too (`profile.reference_ops`; both recorded in
    /// `Evaluation::profile`), whether the reported kernels ran (`kernels.mapped`), and the
    /// kernels' evidence that decides the verdict. `seen` is where the worker sees the
    /// submission's build folder. Ends neither worker.
    pub(super) fn judge_profiled<W: Link>(
        &self,
        task: &Task,
        seen: &Path,
        reference: &mut W,
        candidate: &mut W,
        kernels: Vec<String>,
        eval: &mut Gathered,
    ) -> Result<Judged, Failed> {
        let cfg = self.config;
        // The candidate's state checks, outside every timed request (the wall envelope compares
        // them with the reference's), and its outputs' independence once it has warmed up.
        let state = State {
            seed: Stream::State { forward: false }.seed(cfg.seed),
            forward_seed: Stream::State { forward: true }.seed(cfg.seed),
        };
        let stated = ask(candidate, state, cfg.timeouts.call)?;
        for check in stated.checks {
            merge_check(&mut eval.checks, check);
        }
        // Its three calls: the profiled one and `profile.library_output`'s two traced ones.
        let mut profiled = ask(candidate, self.profile_request(), cfg.timeouts.call * 3)?;
        let library_made = self.library_made(std::mem::take(&mut profiled.checks), eval);
        let figures = profiled.profile;
        // The reference's profiled call, where the candidate's ran on a GPU: its launches for
        // `profile.reference_ops`, its busy time for the host-speed error. None if it failed:
        // neither is then claimed.
        let theirs = figures
            .total_ms
            .and_then(|_| ask(reference, self.profile_request(), cfg.timeouts.call).ok())
            .map(|reply| reply.profile);
        let host_error = eval
            .timing
            .as_ref()
            .filter(|t| t.host_error.is_some())
            .and_then(|t| host_error(t, theirs.as_ref()?.busy_ms, figures.busy_ms));
        let reference_ops = theirs
            .as_ref()
            .map(|r| reference_ops::compare(&r.launches, &figures.launches));
        if let Some(ops) = &reference_ops {
            merge_check(&mut eval.checks, reference_ops_check(ops));
        }
        let kernels = profiled.kernels.unwrap_or(kernels);
        let mapped = mapped_kernel_check(&kernels, candidate.python_pid(), seen);
        let evidence = KernelEvidence {
            kernels,
            build_failures: profiled.build_failures,
            // The build's to say (`decide::with_build`).
            drift_rewritten: None,
            defined: profiled.defined,
            custom_ms: figures.custom_ms,
            total_ms: figures.total_ms,
            library_share: figures.library_share,
            library_limit: self.library_share_limit(task),
            reference_ops,
            reuse_limit: self.reuse_limit(),
            policy: cfg.library_policy.as_str(),
            unmapped: (mapped.outcome == Outcome::Fail).then(|| mapped.evidence.clone()),
            library_made,
        };
        merge_check(&mut eval.checks, mapped);
        eval.profile = theirs.map(|r| Profiles {
            reference: r.launches,
            candidate: figures.launches,
        });
        // A breach found after timing outranks what the kernels show, as one found before does.
        let cause = match stated.contract {
            Some(why) => Cause::Contract(why),
            None => Cause::Kernels(Box::new(evidence)),
        };
        Ok(Judged { cause, host_error })
    }

    /// The profiled call's checks into `eval`; returns `profile.library_output`'s evidence where
    /// it failed and the library policy sets a limit (under `--library-policy any` the library
    /// may do it all: a warning).
    fn library_made(&self, checks: Vec<Check>, eval: &mut Gathered) -> Option<String> {
        let mut made = None;
        for mut check in checks {
            if check.name == LIBRARY_OUTPUT && check.outcome == Outcome::Fail {
                if self.reuse_limit().is_some() {
                    made = Some(check.evidence.clone());
                } else {
                    check.outcome = Outcome::Warn;
                }
            }
            merge_check(&mut eval.checks, check);
        }
        made
    }

    /// One profiled call after timing, the same inputs for either worker.
    fn profile_request(&self) -> Profile {
        Profile {
            seed: Stream::Profile { forward: false }.seed(self.config.seed),
            forward_seed: Stream::Profile { forward: true }.seed(self.config.seed),
        }
    }

    /// The largest share of GPU time library kernels may take in a submission that ran every
    /// kernel launch of the reference's (`profile.reference_ops`), at any level: the library
    /// limit, under every policy that sets one somewhere.
    fn reuse_limit(&self) -> Option<f64> {
        (self.config.library_policy != LibraryPolicy::Any).then_some(MAX_LIBRARY_SHARE)
    }

    /// The largest share of GPU time library kernels may take in a submission to this task
    /// before it counts as `no_kernel`, under the run's `--library-policy`.
    fn library_share_limit(&self, task: &Task) -> Option<f64> {
        match self.config.library_policy {
            LibraryPolicy::Strict => Some(MAX_LIBRARY_SHARE),
            LibraryPolicy::Partial => (task.id.level == 1).then_some(MAX_LIBRARY_SHARE),
            LibraryPolicy::Any => None,
        }
    }
}

/// `profile.reference_ops`, recorded as evidence: the verdict weighs it with the library share.
fn reference_ops_check(ops: &reference_ops::ReferenceOps) -> Check {
    Check {
        name: CheckName::ProfileReferenceOps,
        outcome: Outcome::Pass,
        evidence: ops.to_string(),
        seconds: 0.0,
        runs: 1,
    }
}

/// A forward that synchronizes with the host inside: the labels' host-speed error scaled by the
/// share of each arm's time the GPU was idle in its profiled call. None without both busy times:
/// the whole error stays.
fn host_error(
    timing: &Timing,
    reference_busy_ms: Option<f64>,
    candidate_busy_ms: Option<f64>,
) -> Option<f64> {
    let (r, c) = reference_busy_ms.zip(candidate_busy_ms)?;
    Some(timing::host_error(
        r / timing.reference.median_ms,
        c / timing.candidate.median_ms,
    ))
}

/// `kernels.mapped`: whether a kernel the candidate worker reports really ran, seen from outside
/// its interpreter (which the submission controls): a shared object of the submission's own build
/// folder (its extension, or Triton's launcher; `build_dir` is where the worker sees it) must be
/// mapped into the worker's process. CuPy kernels load through the driver, not as files:
/// reported, not verified.
fn mapped_kernel_check(kernels: &[String], pid: u32, build_dir: &Path) -> Check {
    let check = |outcome, evidence| Check {
        name: CheckName::KernelsMapped,
        outcome,
        evidence,
        seconds: 0.0,
        runs: 1,
    };
    if kernels.is_empty() {
        return check(Outcome::Skip, "no kernel reported".into());
    }
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).unwrap_or_default();
    let prefix = build_dir.display().to_string();
    let mut mapped: Vec<&str> = maps
        .lines()
        .filter_map(|line| line.split_whitespace().nth(5))
        .filter(|path| path.starts_with(&prefix) && path.contains(".so"))
        .collect();
    mapped.dedup();
    if let Some(first) = mapped.first() {
        let name = Path::new(first)
            .file_name()
            .unwrap_or_default()
            .to_string_lossy();
        check(
            Outcome::Pass,
            format!(
                "{} file(s) of the build mapped into the worker, e.g. {name}",
                mapped.len()
            ),
        )
    } else if kernels.iter().all(|k| k.starts_with("cupy:")) {
        check(
            Outcome::Skip,
            "CuPy kernels load through the driver: not verified".into(),
        )
    } else {
        check(
            Outcome::Fail,
            format!(
                "the worker reports {} but no shared object of the submission's build is mapped into it",
                kernels.join(", ")
            ),
        )
    }
}
