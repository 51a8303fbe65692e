//! Worker processes and the protocol kbench speaks with them.

pub mod check_name;
#[cfg(test)]
pub mod fake;
pub mod link;
pub mod live;
pub mod process;
pub mod protocol;
pub mod python;
pub mod request;
#[cfg(test)]
mod schema;
mod seed;
mod streams;
pub mod tree;

pub use check_name::CheckName;
pub use link::{Failure, Link};
pub use process::{Spawn, Worker};
pub use protocol::{ErrorKind, Reply, WorkerError};
pub use seed::{derive_seed, Stream};
