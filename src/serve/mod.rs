//! `kbench serve`: the warm service (`service`), its HTTP front (`http`), the queue every
//! request's stages go through (`queue`), a request's body and settings (`request`) and the
//! reply it gets (`reply`). This file declares and re-exports only.

pub mod http;
pub mod queue;
pub mod reply;
pub mod request;
mod service;

pub use service::{Service, Shared, GRACE};
