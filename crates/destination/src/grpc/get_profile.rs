//! `GetProfile`: resolve the target once (a Service name, a ClusterIP, a pod
//! IP or host port), then follow that profile's shared frame: the current
//! profile first, a new one whenever what the proxy sees changes (a slow
//! client only ever gets the newest).

use std::net::SocketAddr;

use futures::StreamExt;
use linkerd2_proxy_api::destination::{DestinationProfile, GetDestination};

use super::{
    DestinationService, FrameStream,
    request::{ProfileTarget, profile_request},
    status::RequestError,
    streams::{Followed, Registered, StreamEntry, StreamKind},
};
use crate::{index::profiles::Resolution, proto::profile::ProfileState};

impl DestinationService {
    /// Opens a `GetProfile` stream; it releases its profile when dropped.
    pub(super) fn open_profile(
        &self,
        request: GetDestination,
        peer: Option<SocketAddr>,
    ) -> Result<FrameStream, RequestError> {
        let parsed = profile_request(&request, &self.cluster_domain).map_err(|error| {
            RequestError::Authority {
                path: request.path.clone(),
                error,
            }
        })?;
        let client_ns = parsed.client_ns();
        let resolution = {
            let index = self.index.read();
            match &parsed.target {
                ProfileTarget::Addr(addr) => index.resolve_profile_addr(*addr, client_ns),
                ProfileTarget::Name {
                    service,
                    instance,
                    port,
                } => index.resolve_profile_name(service, instance.as_deref(), *port, client_ns),
            }
        }
        .map_err(RequestError::Profile)?;
        let new_stream = |followed| {
            StreamEntry::new(
                StreamKind::GetProfile,
                request.path.clone(),
                peer,
                parsed.token.clone(),
                followed,
            )
        };
        let key = match resolution {
            Resolution::Empty => {
                let registered = self.streams.register(new_stream(Followed::EmptyProfile));
                return Ok(self.empty_profile(registered));
            }
            Resolution::Key(key) => key,
        };
        let rx = self.index.write().subscribe_profile(key.clone());
        // The key is kept once, in the registry entry; the release reads it
        // back from there.
        let registered = self.streams.register(new_stream(Followed::Profile(key)));
        let entry = registered.listed();
        let index = self.index.clone();
        let release = move || {
            let listed = registered.listed();
            drop(registered);
            if let Followed::Profile(key) = &listed.followed {
                index.write().release_profile(key);
            }
        };
        Ok(super::subscription::follow(
            rx,
            release,
            self.shutdown.clone(),
            move |state: std::sync::Arc<ProfileState>| {
                entry.progress.sent(state.version, false);
                state.frames.clone()
            },
        ))
    }

    /// The port is not the Service's: one empty profile, then the stream
    /// stays open until shutdown (the proxy falls back to policy).
    fn empty_profile(&self, registered: Registered) -> FrameStream {
        let frame = grpc_stream::encode_frame(&DestinationProfile::default());
        let mut shutdown = self.shutdown.clone();
        registered.listed().progress.sent(0, false);
        let stream = futures::stream::once(futures::future::ready(Ok(frame)))
            .chain(futures::stream::pending())
            .take_until(async move {
                let _ = shutdown.wait_for(|stop| *stop).await;
                drop(registered);
            });
        Box::pin(stream)
    }
}
