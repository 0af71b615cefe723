//! The ServiceProfile admission webhook (`sp-validator`) as a library: the
//! validation rules and their plumbing into the shared [`admission`] server.
//!
//! - [`args`]: the binary's flags, the original's Go-style ones included;
//! - [`validate`]: the rules and their messages;
//! - [`decode`]: strict, Go-compatible decoding of `request.object`;
//! - [`duration`]: Go's `time.ParseDuration`;
//! - [`quantity`]: Kubernetes quantity syntax.

pub mod args;
pub mod decode;
/// Go `time.ParseDuration` semantics (shared with the destination, which reads the same fields).
pub use k8s_api::go_duration as duration;
pub mod quantity;
pub mod validate;

use admission::{AdmissionRequest, Validate};

/// The webhook's rules. Every request with an object is validated; the
/// operation, the old object and the namespace do not matter.
#[derive(Clone, Copy, Debug, Default)]
pub struct ServiceProfileValidator;

impl Validate for ServiceProfileValidator {
    fn validate(&self, request: &AdmissionRequest) -> Result<(), String> {
        match &request.object {
            Some(object) => validate::validate(object).map_err(|invalid| invalid.0),
            // DELETE and CONNECT carry no object: nothing to check.
            None => Ok(()),
        }
    }
}
