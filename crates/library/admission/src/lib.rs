//! Shared plumbing of Meridian's admission webhooks (`sp-validator`, and the
//! policy controller's webhook): AdmissionReview `v1`/`v1beta1` handling, an
//! HTTPS server whose certificate is reloaded from files, bounds on what a
//! client can make it hold ([`limits`]), and metrics.
//!
//! A webhook implements [`Validate`] and serves [`server::router`] with an
//! [`HttpsServer`]:
//!
//! ```no_run
//! # async fn run(validator: impl admission::Validate, shutdown: meridian_runtime::Shutdown)
//! #     -> Result<(), Box<dyn std::error::Error>> {
//! use admission::{CertStore, HttpsServer, Metrics, TlsPaths};
//! let certs = CertStore::load(TlsPaths { cert: "tls.crt".into(), key: "tls.key".into() })?;
//! tokio::spawn(certs.clone().watch(shutdown.clone().requested()));
//! let mut registry = prometheus_client::registry::Registry::default();
//! let peers = meridian_runtime::ConnectionMetrics::register(&mut registry);
//! let server = HttpsServer::bind("0.0.0.0:8443".parse()?, &certs, peers.listener("webhook")).await?;
//! let metrics = Metrics::register(&mut registry);
//! server.serve(admission::router(validator, metrics), shutdown).await;
//! # Ok(()) }
//! ```

pub mod limits;
pub mod metrics;
pub mod review;
pub mod server;
pub mod tls;

pub use limits::Limits;
pub use metrics::{Metrics, Outcome};
pub use review::{
    AdmissionRequest, AdmissionResponse, AdmissionReview, ReviewError, ReviewVersion,
};
pub use server::{HttpsServer, ServerError, router, router_with};
pub use tls::{CertStore, TlsError, TlsPaths};

/// The rules of one webhook. `Err(message)` denies the object with status
/// code 400 and that message; `kubectl` prints it to the user.
pub trait Validate: Send + Sync + 'static {
    fn validate(&self, request: &AdmissionRequest) -> Result<(), String>;

    /// The verdict with the warnings to return (`kubectl` prints each as
    /// `Warning: <text>`); by default [`Self::validate`]'s, without any.
    fn review(&self, request: &AdmissionRequest) -> Verdict {
        Verdict {
            result: self.validate(request),
            warnings: Vec::new(),
        }
    }
}

/// What a webhook answers: allowed or denied (with the message), and
/// warnings either way.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Verdict {
    pub result: Result<(), String>,
    pub warnings: Vec<String>,
}
