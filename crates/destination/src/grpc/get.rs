//! `Get`: a stream of one filter group's shared frames. It sends the group's
//! current snapshot, then one step per change ([`StreamCursor`] picks the
//! shared step, or one coalesced diff if the stream fell behind).

use std::sync::Arc;

use linkerd2_proxy_api::destination::GetDestination;

use super::{
    DestinationService, FrameStream, StreamCursor, request::get_request, status::RequestError,
};
use crate::index::endpoints::GroupState;

impl DestinationService {
    /// Opens a `Get` stream of encoded frames. Frames are shared with the
    /// group's other streams; the stream releases its group when dropped.
    pub(super) fn open_get(&self, request: GetDestination) -> Result<FrameStream, RequestError> {
        let get = get_request(&request, &self.cluster_domain).map_err(|error| {
            RequestError::Authority {
                path: request.path.clone(),
                error,
            }
        })?;
        let rx = self
            .index
            .write()
            .subscribe(&get.target.service, get.target.port, get.key.clone())
            .map_err(RequestError::Subscribe)?;
        tracing::debug!(path = %request.path, node = %get.node, "Get stream opened");
        self.metrics.stream_opened();

        let index = self.index.clone();
        let metrics = self.metrics.clone();
        let release = move || {
            index
                .write()
                .release(&get.target.service, get.target.port, &get.key);
            metrics.stream_closed();
        };
        let metrics = self.metrics.clone();
        let mut cursor = StreamCursor::new();
        let frames_for = move |newest: Arc<GroupState>| {
            let (frames, coalesced) = cursor.advance(newest);
            if coalesced {
                metrics.coalesced();
            }
            frames
        };
        Ok(super::subscription::follow(
            rx,
            release,
            self.shutdown.clone(),
            frames_for,
        ))
    }
}
