//! `meridian-cli preflight`: before the swap, reads the cluster's objects
//! and lists everything Meridian would treat differently from the running
//! Linkerd, one line per finding: routes whose status would change
//! ([`routes`]), ServiceProfiles the sp-validator webhook would refuse
//! ([`profiles`]) and chart values of the destination Deployment Meridian
//! ignores or refuses ([`flags`]). The decisions are those modules' pure
//! functions, which call the Meridian libraries that decide the same
//! things in the running controllers; this file only lists objects.

pub mod flags;
pub mod profiles;
pub mod routes;

use anyhow::Context;
use k8s_api::{
    gateway::{self, GatewayRoute},
    labels::DESTINATION_CONTAINERS,
    policy::{EgressNetwork, HTTPRoute, Server},
    service_profile::ServiceProfile,
};
use k8s_openapi::api::core::v1::Service;
use kube::{
    Api, Client, Resource,
    api::{ApiResource, DynamicObject, ListParams},
};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// One thing Meridian would treat differently.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Finding {
    /// The object's kind.
    pub kind: String,
    /// `namespace/name`.
    pub name: String,
    /// What changes.
    pub what: String,
    /// Why.
    pub why: String,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} {}: {}; why: {}",
            self.kind, self.name, self.what, self.why
        )
    }
}

#[derive(clap::Args)]
pub struct PreflightArgs {
    /// The control plane's namespace (where the destination Deployment,
    /// labelled `linkerd.io/control-plane-component=destination`, runs).
    #[arg(short = 'n', long, default_value = "linkerd")]
    pub namespace: String,
    /// Scan only this namespace's routes, Servers, Services and
    /// ServiceProfiles (default: every namespace).
    #[arg(long)]
    pub scan_namespace: Option<String>,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
}

/// Prints the findings; returns the exit status (0 nothing would change,
/// 1 something would). An error is "could not ask" (2).
pub async fn run(args: PreflightArgs) -> anyhow::Result<i32> {
    let kube = crate::kube_client(args.context.as_deref()).await?;
    let scan = args.scan_namespace.as_deref();
    let mut findings = flag_findings(&kube, &args.namespace).await?;

    let objects = routes::RouteObjects {
        servers: list::<Server>(&kube, scan, &[]).await?,
        services: list::<Service>(&kube, scan, &[]).await?,
        egress_networks: list::<EgressNetwork>(&kube, scan, &[]).await?,
        policy_http: list::<HTTPRoute>(&kube, scan, &[]).await?,
        gateway_http: list::<gateway::HTTPRoute>(&kube, scan, gateway::HTTPRoute::VERSIONS).await?,
        grpc: list::<gateway::GRPCRoute>(&kube, scan, gateway::GRPCRoute::VERSIONS).await?,
        tls: list::<gateway::TLSRoute>(&kube, scan, gateway::TLSRoute::VERSIONS).await?,
        tcp: list::<gateway::TCPRoute>(&kube, scan, gateway::TCPRoute::VERSIONS).await?,
    };
    findings.extend(routes::findings(objects));
    let profiles = list_json(&kube, scan, &ApiResource::erase::<ServiceProfile>(&()), &[]).await?;
    findings.extend(profiles::findings(&profiles));

    for finding in &findings {
        println!("{finding}");
    }
    if findings.is_empty() {
        println!("nothing found that Meridian would treat differently");
        Ok(0)
    } else {
        println!(
            "{} finding(s): Meridian would treat these differently",
            findings.len()
        );
        Ok(1)
    }
}

/// The chart-value findings of the control plane's destination Deployment.
async fn flag_findings(kube: &Client, ns: &str) -> anyhow::Result<Vec<Finding>> {
    let (name, deployment) = crate::destination_deployment(kube, ns).await?;
    let containers: Vec<flags::ContainerArgs> = deployment
        .spec
        .and_then(|s| s.template.spec)
        .map(|s| s.containers)
        .unwrap_or_default()
        .into_iter()
        .filter(|c| DESTINATION_CONTAINERS.contains(&c.name.as_str()))
        .map(|c| flags::ContainerArgs {
            container: c.name,
            args: c.args.unwrap_or_default(),
        })
        .collect();
    Ok(flags::findings(&name, &containers))
}

/// Every `K` (of `scan`'s namespace, else all), read at the first of
/// `versions` the API server serves (`K`'s own version when empty); a
/// kind whose CRD is not installed has none.
async fn list<K>(kube: &Client, scan: Option<&str>, versions: &[&str]) -> anyhow::Result<Vec<K>>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let resource = ApiResource::erase::<K>(&());
    list_json(kube, scan, &resource, versions)
        .await?
        .into_iter()
        .map(|value| {
            serde_json::from_value(value)
                .with_context(|| format!("reading a {} of the cluster", resource.kind))
        })
        .collect()
}

/// Every object of `resource` as JSON, with its `apiVersion` and `kind`.
async fn list_json(
    kube: &Client,
    scan: Option<&str>,
    resource: &ApiResource,
    versions: &[&str],
) -> anyhow::Result<Vec<Value>> {
    let versions: Vec<&str> = if versions.is_empty() {
        vec![resource.version.as_str()]
    } else {
        versions.to_vec()
    };
    for version in versions {
        let mut at = resource.clone();
        at.version = version.to_string();
        at.api_version = if at.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", at.group)
        };
        let api: Api<DynamicObject> = match scan {
            Some(ns) => Api::namespaced_with(kube.clone(), ns, &at),
            None => Api::all_with(kube.clone(), &at),
        };
        match api.list(&ListParams::default()).await {
            Ok(list) => {
                return list
                    .items
                    .into_iter()
                    .map(|item| {
                        let mut value = serde_json::to_value(item)?;
                        value["apiVersion"] = at.api_version.clone().into();
                        value["kind"] = at.kind.clone().into();
                        Ok(value)
                    })
                    .collect();
            }
            // Not served at this version, or the CRD is not installed.
            Err(kube::Error::Api(status)) if status.code == 404 => continue,
            Err(error) => {
                return Err(error).with_context(|| format!("listing {}", at.plural));
            }
        }
    }
    Ok(Vec::new())
}
