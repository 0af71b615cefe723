//! The `sp-validator` binary end to end, run as a process on loopback:
//!
//! - `webhook`: registered with the shared local kube-apiserver, `kubectl
//!   apply` of valid and invalid ServiceProfiles shows what users see, and
//!   the serving certificate is replaced while the webhook runs;
//! - `deploy`: started with `deploy/`'s exact arguments (the chart's
//!   Go-style flags): ready, probes, the series dashboards read;
//! - `pprof_admin`: `-enable-pprof` serves profiles, its default does not.

mod deploy;
mod pprof_admin;
mod webhook;
