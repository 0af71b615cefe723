//! The client a question is asked as: a pod, introduced as its proxy
//! introduces itself (the context token and policy workload the Linkerd
//! 2.20 chart writes into the proxy's environment).

use std::time::Duration;

use super::question::{Api, Question, Request};

/// A client pod, as its proxy introduces itself.
#[derive(Clone, Debug)]
pub struct ClientPod {
    pub namespace: String,
    pub pod: String,
    pub node: String,
}

impl ClientPod {
    /// `LINKERD2_PROXY_DESTINATION_CONTEXT` as the chart renders it.
    pub fn context_token(&self) -> String {
        format!(
            "{{\"ns\":{}, \"nodeName\":{}, \"pod\":{}}}\n",
            json(&self.namespace),
            json(&self.node),
            json(&self.pod)
        )
    }

    /// `LINKERD2_PROXY_POLICY_WORKLOAD` as the chart renders it.
    pub fn workload(&self) -> String {
        workload(&self.namespace, &self.pod)
    }

    fn name(&self) -> String {
        format!("{}/{}", self.namespace, self.pod)
    }

    /// `api` of `request` about `target`, asked as this client.
    pub(super) fn ask(
        &self,
        api: Api,
        target: String,
        request: Request,
        age: Option<Duration>,
    ) -> Question {
        Question {
            api,
            target,
            request,
            client: self.name(),
            age,
        }
    }

    /// `api` of the destination API for `path` (an authority or
    /// `ip:port`), with this client's context token.
    pub(super) fn ask_destination(
        &self,
        api: Api,
        path: String,
        age: Option<Duration>,
    ) -> Question {
        let request = Request::Destination {
            path: path.clone(),
            token: self.context_token(),
        };
        self.ask(api, path, request, age)
    }
}

pub fn json(s: &str) -> String {
    serde_json::Value::from(s).to_string()
}

/// The policy workload of a pod, as its proxy sends it.
pub fn workload(namespace: &str, pod: &str) -> String {
    format!("{{\"ns\":{}, \"pod\":{}}}\n", json(namespace), json(pod))
}
