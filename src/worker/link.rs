//! One worker as the pipeline and timing talk to it: the process (`Worker`) or, in tests, a
//! script (`fake::Scripted`). It carries requests and replies; it decides nothing.

use std::time::Duration;

use super::protocol::Reply;
use super::request::{Command, Request};
use super::tree::Beside;

/// Why a request got no reply.
#[derive(Debug, Clone, PartialEq)]
pub enum Failure {
    /// No reply within the deadline; the worker was killed.
    Timeout(Duration),
    /// The worker ended without replying (crash, signal, `os._exit`).
    Exited(String),
    /// The reply could not be read as the protocol.
    Protocol(String),
    /// A reply line the worker did not write (`protocol::Unread::Forged`), which the reason's
    /// first word names as the check it fails (`protocol::FORGED`).
    Forged(String),
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Timeout(d) => write!(f, "no reply within {:.0} s", d.as_secs_f64()),
            Failure::Exited(how) => write!(f, "worker exited without replying ({how})"),
            Failure::Protocol(why) => write!(f, "protocol error: {why}"),
            Failure::Forged(why) => write!(f, "protocol error: {why}"),
        }
    }
}

/// The conversation with one worker.
pub trait Link {
    /// Send one request and wait for its reply body, untyped. A failure (no answer in time, a
    /// reply that is not the worker's, a worker gone) leaves the worker dead.
    fn exchange(&mut self, request: Request, deadline: Duration) -> Result<Reply, Failure>;

    /// The process that runs the worker's Python (for the kernels it maps).
    fn python_pid(&self) -> u32;

    /// Kill the worker (and everything it started).
    fn kill(&mut self);
    /// Stop every process the worker started beside its own (forked, detached: not the worker
    /// and its threads) until `resume`, and any started since the last `pause`.
    fn pause(&mut self);
    /// Continue what `pause` stopped, if anything.
    fn resume(&mut self);
    /// The processes the worker started beside its own (forked, detached), with the CPU time
    /// each spent and whether it holds the GPU.
    fn beside(&self) -> Vec<Beside>;

    /// Whether it still runs and answered every request so far without an error (a failure or
    /// an error reply): what a worker must be to serve another evaluation.
    fn clean(&self) -> bool;

    /// Send one request and read its reply as the command's: a body that does not fit is a
    /// protocol failure, and the worker is killed.
    fn request<C: Command>(
        &mut self,
        command: C,
        deadline: Duration,
    ) -> Result<Reply<C::Reply>, Failure>
    where
        Self: Sized,
    {
        let request: Request = command.into();
        let cmd = request.cmd();
        let reply = self.exchange(request, deadline)?;
        reply.read(&cmd).map_err(|why| {
            self.kill();
            Failure::Protocol(why)
        })
    }
}

/// A borrowed link is a link, so `&mut dyn Link` takes typed requests too.
impl<L: Link + ?Sized> Link for &mut L {
    fn exchange(&mut self, request: Request, deadline: Duration) -> Result<Reply, Failure> {
        (**self).exchange(request, deadline)
    }

    fn python_pid(&self) -> u32 {
        (**self).python_pid()
    }

    fn kill(&mut self) {
        (**self).kill()
    }
    fn pause(&mut self) {
        (**self).pause()
    }
    fn resume(&mut self) {
        (**self).resume()
    }
    fn beside(&self) -> Vec<Beside> {
        (**self).beside()
    }

    fn clean(&self) -> bool {
        (**self).clean()
    }
}
