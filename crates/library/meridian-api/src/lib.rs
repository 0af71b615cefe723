//! gRPC APIs Meridian adds between its own containers, generated from
//! `proto/` at build time. Linkerd's wire API comes from the
//! `linkerd2-proxy-api` crate instead.

/// `meridian.policy.v1`: what the policy controller tells the destination.
pub mod policy {
    #[allow(clippy::all, clippy::pedantic, missing_docs, unused_qualifications)]
    pub mod v1 {
        tonic::include_proto!("meridian.policy.v1");
    }
}
