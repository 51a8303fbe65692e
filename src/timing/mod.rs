//! The timing of one evaluation (docs/design/timing.md 10.2-10.4) over its two workers, and the
//! statistics of the comparison. The protocol, offline: every arm warms up behind a blocker,
//! which sizes the blocker, the bursts and the blocks; then interleaved rounds of blocks of
//! samples, each a palindrome over the arms (A C C A, then C A A C; with the torch.compile
//! baseline B, A B C C B A with the start rotated), with NVML read after every block (slowdown
//! rounds retaken, power capping tagged), timed outputs checked at unpredictable rounds and audit
//! calls in every tenth, until the speedup's interval is tight enough or a budget runs out; then
//! the candidate's reported times are checked against the wall time seen from here (the
//! envelope) and the audit, the statistics summarized, and the label settled (host error,
//! process effect, charged times, clock parity). `--mode kernelbench` and `--mode server` time
//! otherwise. The samples themselves are taken by the workers (`kbench_worker/timing/`); this
//! module never runs submission code.
//!
//! Files: `session` (the workers, one request, the dispatch), `arms` (the arms and their
//! samples), `offline`, `kernelbench`, `server` (the modes), `envelope` (the wall-clock envelope
//! and the audit), `label` (every change to a label), `replies` (the workers' timing replies),
//! `summary` (the statistics of one comparison), `kept` (the check of timed calls' outputs),
//! `beside` (the census of what the candidate ran beside its worker).

mod arms;
mod beside;
mod envelope;
mod kept;
mod kernelbench;
mod label;
mod offline;
mod replies;
mod server;
mod session;
mod summary;

pub use label::{allow_host_error, host_error};
pub use replies::Checked;
pub use session::{Failed, Session, Spent};
#[cfg(test)]
pub use summary::summarize;
