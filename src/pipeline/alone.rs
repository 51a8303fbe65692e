//! What the stages that run fresh workers after the evaluation's own take from the evaluator
//! (`Alone`: KernelBench's trials, `--sanitize`'s tools, `--profile ncu`), and the one way a
//! CUDA tool runs a candidate (`Alone::under_tool`): a fresh worker started by the tool and
//! confined as any candidate, lent a copy of the submission's build, loaded, asked its one call,
//! given time to exit so that the tool writes its log whole, and the log read back as an
//! untrusted file from the folder the candidate shares with it.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::lanes::Gate;
use crate::submission::Submission;
use crate::task::Task;
use crate::verdict::Cause;
use crate::worker::Spawn;

use super::load::{self, Workers};
use super::pair::Companion;
use super::spawn::Spawner;
use super::stage::{exchange, log_path};
use super::workspace::lend_copy;

/// The most of a tool's log kbench reads.
pub(super) const LOG_CAP: u64 = 4 << 20;
/// How long a worker under a tool gets to exit on its own, so the tool writes its log whole.
pub(super) const EXIT_GRACE: Duration = Duration::from_secs(30);

/// What the stages alone take from the evaluator: its workers, the slot's gate and whether the
/// task takes the GPU alone, and the submission's build folder (`home`, lent to the candidate)
/// with its workers' environment (`env`).
pub(super) struct Alone<'w, S: Spawner> {
    pub workers: &'w Workers<'w, S>,
    pub gate: &'w Mutex<Arc<Gate>>,
    pub alone: bool,
    pub home: PathBuf,
    pub env: Vec<(String, String)>,
}

/// How a tool runs a candidate: the worker's log's role (`sanitizer-memcheck`, `ncu-candidate`),
/// the tool's log's name in the exchange folder, the worker's command line under the tool given
/// where the worker sees that log, and the size the submission loads at.
pub(super) struct Tool<'a> {
    pub role: &'a str,
    pub log: &'a str,
    pub wrap: &'a dyn Fn(&Path, Spawn) -> Spawn,
    pub size: load::Alone,
}

/// What a candidate's run under a tool left: what ended its call first (None: it answered),
/// the tool's log as far as it got, and the worker's log (where kept, and its name in the
/// record) once the worker started.
pub(super) struct UnderTool {
    pub ended: Option<Cause>,
    pub log: io::Result<Vec<u8>>,
    pub kept: Option<(PathBuf, String)>,
}

impl UnderTool {
    fn ended(cause: Cause) -> UnderTool {
        UnderTool {
            ended: Some(cause),
            log: Ok(Vec::new()),
            kept: None,
        }
    }
}

impl<S: Spawner> Alone<'_, S> {
    /// `call` (given where the worker sees its exchange folder) in a fresh candidate worker
    /// `tool` runs, with a copy of the build (`lend_copy`: workers under tools may run side by
    /// side), loaded at `tool.size`.
    pub(super) fn under_tool(
        &self,
        (task, sub): (&Task, &Submission),
        slot: usize,
        tool: Tool<'_>,
        call: impl FnOnce(&mut S::Worker, &Path) -> Result<(), Cause>,
    ) -> UnderTool {
        let workers = self.workers;
        let confinement = &workers.confinement;
        let exchange = match exchange(confinement) {
            Ok(exchange) => exchange,
            Err(e) => return UnderTool::ended(Cause::Unready(e)),
        };
        let seen = confinement.seen(exchange.dir.path());
        let started = workers.start_wrapped(slot, &exchange, |spec| {
            (tool.wrap)(&seen.join(tool.log), spec)
        });
        let Companion {
            mut worker,
            log,
            workspace,
        } = match started {
            Ok(companion) => companion,
            Err(e) => return UnderTool::ended(Cause::Unready(e)),
        };
        let (kept, rel) = log_path(&workers.config.out, sub, tool.role);
        let _ = std::fs::rename(log, &kept);
        let lent = lend_copy(confinement, &self.home, workspace);
        let called = lent
            .as_ref()
            .map_err(|e| Cause::Unready(e.clone()))
            .and_then(|lent| {
                let stage = match lent {
                    Some(lent) => lent.stage(confinement),
                    None => Ok(exchange.stage()),
                };
                let stage = stage.map_err(Cause::Unready)?;
                let env = &self.env[..];
                workers.load_alone((task, sub), slot, &mut worker, (&stage, env), tool.size)?;
                call(&mut worker, &seen)
            });
        let gone = S::finish_within(worker, EXIT_GRACE);
        lent.into_iter().flatten().for_each(|l| l.settle(gone));
        let log = crate::untrusted::read_regular_beneath(
            exchange.dir.path(),
            Path::new(tool.log),
            LOG_CAP,
        );
        UnderTool {
            ended: called.err(),
            log,
            kept: Some((kept, rel)),
        }
    }
}
