//! One evaluation, (task, submission) on one device, through the Python workers: the backend
//! the scheduler drives (`backend`), the real one (`python`, which reads as the sequence), and
//! a file per stage below it. Layered, each file using only those below it:
//!
//! - `python`: the `Python` backend, the sequence of one evaluation;
//! - `kernelbench`, `sanitize`, `ncu_profile`: KernelBench's trials alone, the candidate's
//!   kernels under compute-sanitizer (`--sanitize`), each in fresh candidate workers, and both
//!   arms' kernels under Nsight Compute (`--profile ncu`) in fresh workers;
//! - `load`: the `Workers` (the pool, reuse's workers, the loads), over `reuse` (what is kept
//!   for a task's next candidate) and `pair` (the workers an evaluation takes);
//! - `build`: the `Builder` (the compile pool's builds, the cache, where workers see a build);
//! - `verify`, `evidence`, `decide`, `annotate`: the trials, the profiled call's evidence, the
//!   verdict, and what the run adds, each taking what it needs;
//! - `alone`: what those stages take from the evaluator, and a candidate run by a CUDA tool;
//! - `workspace`, `stage`, `spawn`, `sizing`, `replies`: where confined workers write, what
//!   crosses between the workers, how workers start, the task's size, the replies read.
//!
//! This file declares and re-exports only.

mod alone;
mod annotate;
mod backend;
mod build;
mod decide;
mod evidence;
mod gathered;
mod kernelbench;
mod load;
mod ncu_profile;
mod pair;
mod python;
mod replies;
mod reuse;
mod sanitize;
mod sizing;
mod spawn;
mod stage;
mod verify;
mod workspace;

#[cfg(test)]
mod tests;

pub use annotate::Annotations;
pub use backend::{Backend, Phase};
pub use python::Python;
