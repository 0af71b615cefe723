//! `GetProfile`: resolve the target once (a Service name, a ClusterIP, a pod
//! IP or host port; a miss is checked with the API server first), then
//! follow that profile's shared frame: the current profile first, a new one
//! whenever what the proxy sees changes (a slow client only ever gets the
//! newest). A Service name resolves whether or not the Service exists yet.

use std::net::SocketAddr;

use linkerd2_proxy_api::destination::GetDestination;

use super::{
    DestinationService, FrameStream,
    request::{ProfileTarget, profile_request},
    status::RequestError,
    streams::{Followed, StreamEntry, StreamKind},
};
use crate::proto::profile::ProfileState;

impl DestinationService {
    /// Opens a `GetProfile` stream; it releases its profile when dropped.
    pub(super) async fn open_profile(
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
        self.confirm_profile_target(&parsed.target)
            .await
            .map_err(|_| RequestError::MissBudget {
                path: request.path.clone(),
            })?;
        let client_ns = parsed.client_ns();
        let key = {
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
        .map_err(|error| RequestError::Profile {
            path: request.path.clone(),
            error,
        })?;
        let rx = self.index.write().subscribe_profile(key.clone());
        // The key is kept once, in the registry entry; the release reads it
        // back from there.
        let registered = self.streams.register(StreamEntry::new(
            StreamKind::GetProfile,
            request.path.as_str(),
            peer,
            self.tokens.share(parsed.token),
            Followed::Profile(key),
        ));
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
            None,
            self.shutdown.clone(),
            move |state: std::sync::Arc<ProfileState>| {
                // (A publisher with nothing to send yet has no frame.)
                if !state.frames.is_empty() {
                    entry.progress.sent(state.version, false);
                }
                state.frames.clone()
            },
        ))
    }
}
