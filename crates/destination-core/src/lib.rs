//! Pure domain logic of `Destination.Get`: parsing requests, translating
//! Kubernetes objects into endpoints, filtering them per client group, and
//! turning snapshot changes into `Update` messages. No I/O, no async.

pub mod authority;
pub mod config;
pub mod context_token;
pub mod endpoint_translator;
pub mod filter;
pub mod snapshot;
