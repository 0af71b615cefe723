//! The one place that encodes messages into gRPC frames. Frames are encoded
//! once per group (or profile) and shared by every stream that sends them.

use std::sync::Arc;

use bytes::Bytes;
use linkerd2_proxy_api::destination::{DestinationProfile, Update};

use grpc_stream::encode_frame;

use super::snapshot::{Snapshot, initial_updates, updates_between};

/// Encoded gRPC frames, shared by every stream that sends them.
pub type Frames = Arc<[Bytes]>;

/// Encodes messages into frames.
pub fn encode(updates: &[Update]) -> Frames {
    updates.iter().map(encode_frame).collect()
}

/// The frames that start a new stream at `snapshot`.
pub fn initial(snapshot: &Snapshot) -> Frames {
    encode(&initial_updates(snapshot))
}

/// The frames that bring a stream from `old` to `new` (one coalesced step).
pub fn step(old: &Snapshot, new: &Snapshot) -> Frames {
    encode(&updates_between(old, new))
}

/// The frame of a profile.
pub fn profile(profile: &DestinationProfile) -> Bytes {
    encode_frame(profile)
}
