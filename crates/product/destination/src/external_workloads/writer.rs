//! Applies one Service's [`Actions`] to the API server: creates, full
//! updates carrying the `resourceVersion` they were computed from (so a
//! concurrent change makes them fail with a conflict and the Service is
//! retried from fresh caches), and deletes preconditioned on that version
//! too (a slice changed since, relabelled to another manager say, is not
//! deleted from a stale view), each with our field manager and a timeout. What was written is returned so the caller can tell when
//! its caches have caught up ([`super::tracker`]).

use std::{
    collections::BTreeMap,
    sync::atomic::{AtomicBool, Ordering},
    time::Duration,
};

use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::{
    Api,
    api::{DeleteParams, PostParams, Preconditions},
};

use super::{metrics::WriterMetrics, reconcile::Actions};

/// Why writing a Service's slices failed.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    #[error("{op} EndpointSlice {name}: {source}")]
    Api {
        op: &'static str,
        name: String,
        #[source]
        source: kube::Error,
    },
    #[error("{op} EndpointSlice {name}: timed out")]
    Timeout { op: &'static str, name: String },
}

impl WriteError {
    /// The API status code, if the API server answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api {
                source: kube::Error::Api(status),
                ..
            } => Some(status.code),
            _ => None,
        }
    }
}

/// What a successful write left in the API.
#[derive(Debug, Default)]
pub struct Written {
    /// Created or updated slices as the API returned them.
    pub stored: Vec<EndpointSlice>,
    /// Names of deleted slices.
    pub deleted: Vec<String>,
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

/// A create refused because the namespace is terminating: nothing can be
/// written there any more, which is no reason to retry.
fn namespace_terminating(error: &kube::Error) -> bool {
    matches!(error, kube::Error::Api(status)
        if status.code == 403 && status.message.contains("being terminated"))
}

async fn timed<T>(
    op: &'static str,
    name: &str,
    timeout: Duration,
    call: impl Future<Output = Result<T, kube::Error>>,
) -> Result<Result<T, kube::Error>, WriteError> {
    tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| WriteError::Timeout {
            op,
            name: name.to_string(),
        })
}

fn api_error(op: &'static str, name: &str, source: kube::Error) -> WriteError {
    WriteError::Api {
        op,
        name: name.to_string(),
        source,
    }
}

/// How to delete a slice read at `version`: refused (409) if it changed
/// since.
pub fn delete_params(version: Option<&str>) -> DeleteParams {
    DeleteParams {
        preconditions: version.map(|v| Preconditions {
            resource_version: Some(v.to_string()),
            uid: None,
        }),
        ..DeleteParams::default()
    }
}

/// Writes `actions` in `api`'s namespace: creates, then updates, then
/// deletes (as the original; each delete preconditioned on the slice's
/// version in `versions`, by name), stopping at the first failure, or as
/// soon as `leading` turns false; each accepted write is counted in
/// `metrics`. Returns what was written either way.
pub async fn apply(
    api: &Api<EndpointSlice>,
    actions: Actions,
    versions: &BTreeMap<String, String>,
    field_manager: &str,
    timeout: Duration,
    leading: &AtomicBool,
    metrics: &WriterMetrics,
) -> (Written, Result<(), WriteError>) {
    let mut written = Written::default();
    let result = write(
        api,
        actions,
        versions,
        (field_manager, timeout),
        leading,
        metrics,
        &mut written,
    )
    .await;
    (written, result)
}

async fn write(
    api: &Api<EndpointSlice>,
    actions: Actions,
    versions: &BTreeMap<String, String>,
    (field_manager, timeout): (&str, Duration),
    leading: &AtomicBool,
    metrics: &WriterMetrics,
    written: &mut Written,
) -> Result<(), WriteError> {
    let leads = || leading.load(Ordering::Acquire);
    let pp = PostParams {
        field_manager: Some(field_manager.to_string()),
        ..Default::default()
    };
    for slice in actions.create {
        if !leads() {
            return Ok(());
        }
        let name = slice.metadata.generate_name.clone().unwrap_or_default();
        match timed("create", &name, timeout, api.create(&pp, &slice)).await? {
            Ok(created) => {
                metrics.wrote("create");
                written.stored.push(created);
            }
            Err(error) if namespace_terminating(&error) => return Ok(()),
            Err(error) => return Err(api_error("create", &name, error)),
        }
    }
    for slice in actions.update {
        if !leads() {
            return Ok(());
        }
        let name = slice.metadata.name.clone().unwrap_or_default();
        match timed("update", &name, timeout, api.replace(&name, &pp, &slice)).await? {
            Ok(updated) => {
                metrics.wrote("update");
                written.stored.push(updated);
            }
            Err(error) => return Err(api_error("update", &name, error)),
        }
    }
    for name in actions.delete {
        if !leads() {
            return Ok(());
        }
        let dp = delete_params(versions.get(&name).map(String::as_str));
        match timed("delete", &name, timeout, api.delete(&name, &dp)).await? {
            Ok(_) => {
                metrics.wrote("delete");
                written.deleted.push(name);
            }
            // Already gone: what we wanted.
            Err(error) if is_status(&error, 404) => written.deleted.push(name),
            Err(error) => return Err(api_error("delete", &name, error)),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_delete_is_refused_if_the_slice_changed_since_it_was_read() {
        let dp = delete_params(Some("12"));
        assert_eq!(
            dp.preconditions.and_then(|p| p.resource_version).as_deref(),
            Some("12")
        );
        assert!(delete_params(None).preconditions.is_none());
    }
}
