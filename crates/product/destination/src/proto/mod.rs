//! Core values → linkerd2-proxy-api messages: the only place, with
//! [`crate::grpc`], that names proto types.
//!
//! - [`weighted_addr`]: one endpoint → `WeightedAddr`;
//! - [`snapshot`]: a group's snapshot, diffs and the `Update`s a stream sends;
//! - [`federated`]: the `Update`s of a federated Service's stream;
//! - [`frames`]: the one call that encodes shared frames;
//! - [`profile`]: ServiceProfiles and endpoints → `DestinationProfile`;
//! - [`view`]: what streams are sent, as the admin server shows it.

pub mod federated;
pub mod frames;
pub mod profile;
pub mod snapshot;
pub mod view;
pub mod weighted_addr;
