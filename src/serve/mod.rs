//! `kbench serve`: the warm service (`service`), its HTTP front (`http`), the queue every
//! request's stages go through (`queue`), a request's body and settings (`request`), the reply
//! it gets (`reply`), the requests answered by id (`answers`) and where the service runs
//! (`place`). This file declares and re-exports only.

pub mod answers;
pub mod http;
pub mod place;
pub mod queue;
pub mod reply;
pub mod request;
mod service;

pub use place::Place;
pub use service::{Service, Shared, GRACE};
