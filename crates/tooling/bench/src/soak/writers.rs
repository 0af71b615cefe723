//! What the leader-elected writers write, churned and checked: Services
//! selecting ExternalWorkloads (the destination's EndpointSlice writer
//! writes their slices) and Gateway API HTTPRoutes with Service parents
//! (the policy controller's status writer writes their status). The
//! operations here change what must be written; [`Writers::check`] compares
//! what the writers wrote with what the API says they should have,
//! listing both afresh (it never reads the model).

use std::collections::{BTreeMap, BTreeSet};

use k8s_api::{
    labels::{ENDPOINT_SLICE_MANAGED_BY, EXTERNAL_WORKLOADS_CONTROLLER, SERVICE_NAME},
    policy::http_route::POLICY_CONTROLLER_NAME,
};
use k8s_openapi::api::{core::v1::Service, discovery::v1::EndpointSlice};
use kube::{
    Api,
    api::{DynamicObject, ListParams, Patch, PatchParams},
    discovery::ApiResource,
};
use serde_json::json;

use super::{
    NS,
    ops::{apply_params, delete},
    rng::Rng,
};

/// Services selecting ExternalWorkloads (`ext-0`, `ext-1`).
const SERVICES: usize = 2;
/// ExternalWorkloads (`ew-0` …), spread over the Services.
const WORKLOADS: usize = 6;
/// HTTPRoutes (`route-0` …), each with one Service parent.
const ROUTES: usize = 3;

/// The writer operations, in equal measure.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WriterOp {
    WorkloadReadyFlip,
    WorkloadMove,
    WorkloadDeleteCreate,
    RouteReparent,
    RouteDeleteCreate,
}

const OPS: [WriterOp; 5] = [
    WriterOp::WorkloadReadyFlip,
    WriterOp::WorkloadMove,
    WriterOp::WorkloadDeleteCreate,
    WriterOp::RouteReparent,
    WriterOp::RouteDeleteCreate,
];

#[derive(Clone, Debug)]
struct Workload {
    exists: bool,
    service: usize,
    ready: bool,
}

#[derive(Clone, Debug)]
struct Route {
    exists: bool,
    parent: usize,
}

/// The writers' inputs and their operations.
pub struct Writers {
    client: kube::Client,
    workloads: Vec<Workload>,
    routes: Vec<Route>,
    rng: Rng,
    /// Operations performed, by kind.
    pub counts: BTreeMap<WriterOp, u64>,
    /// API calls that failed.
    pub errors: u64,
}

fn service_name(s: usize) -> String {
    format!("ext-{s}")
}

fn workload_name(i: usize) -> String {
    format!("ew-{i}")
}

fn route_name(k: usize) -> String {
    format!("route-{k}")
}

fn workload_ip(i: usize) -> String {
    format!("10.97.0.{}", i + 1)
}

fn workloads_api(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "workload.linkerd.io".into(),
        version: "v1beta1".into(),
        api_version: "workload.linkerd.io/v1beta1".into(),
        kind: "ExternalWorkload".into(),
        plural: "externalworkloads".into(),
    };
    Api::namespaced_with(client.clone(), NS, &resource)
}

fn routes_api(client: &kube::Client) -> Api<DynamicObject> {
    crate::policy_outbound::routes_api(client, NS)
}

impl Writers {
    pub fn new(client: kube::Client, rng: Rng) -> Self {
        Self {
            client,
            workloads: (0..WORKLOADS)
                .map(|i| Workload {
                    exists: true,
                    service: i % SERVICES,
                    ready: true,
                })
                .collect(),
            routes: (0..ROUTES)
                .map(|k| Route {
                    exists: true,
                    parent: k % SERVICES,
                })
                .collect(),
            rng,
            counts: BTreeMap::new(),
            errors: 0,
        }
    }

    /// Creates the Services, workloads and routes.
    pub async fn populate(&mut self) -> anyhow::Result<()> {
        let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
        for s in 0..SERVICES {
            let object = json!({
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": service_name(s)},
                "spec": {
                    "selector": {"app": service_name(s)},
                    "ports": [{"name": "http", "port": 80, "targetPort": "http"}],
                },
            });
            services
                .patch(&service_name(s), &apply_params(), &Patch::Apply(&object))
                .await?;
        }
        for i in 0..WORKLOADS {
            self.apply_workload(i).await?;
        }
        for k in 0..ROUTES {
            self.apply_route(k).await?;
        }
        Ok(())
    }

    /// Performs one random operation.
    pub async fn step(&mut self) {
        let op = OPS[self.rng.below(OPS.len())];
        *self.counts.entry(op).or_default() += 1;
        let result = match op {
            WriterOp::WorkloadReadyFlip => {
                let i = self.rng.below(WORKLOADS);
                self.workloads[i].ready = !self.workloads[i].ready;
                self.apply_workload_if_exists(i).await
            }
            WriterOp::WorkloadMove => {
                let i = self.rng.below(WORKLOADS);
                self.workloads[i].service = (self.workloads[i].service + 1) % SERVICES;
                self.apply_workload_if_exists(i).await
            }
            WriterOp::WorkloadDeleteCreate => {
                let i = self.rng.below(WORKLOADS);
                self.workloads[i].exists = !self.workloads[i].exists;
                if self.workloads[i].exists {
                    self.apply_workload(i).await
                } else {
                    delete(&workloads_api(&self.client), &workload_name(i)).await
                }
            }
            WriterOp::RouteReparent => {
                let k = self.rng.below(ROUTES);
                self.routes[k].parent = (self.routes[k].parent + 1) % SERVICES;
                if self.routes[k].exists {
                    self.apply_route(k).await
                } else {
                    Ok(())
                }
            }
            WriterOp::RouteDeleteCreate => {
                let k = self.rng.below(ROUTES);
                self.routes[k].exists = !self.routes[k].exists;
                if self.routes[k].exists {
                    self.apply_route(k).await
                } else {
                    delete(&routes_api(&self.client), &route_name(k)).await
                }
            }
        };
        if result.is_err() {
            self.errors += 1;
        }
    }

    /// Operations performed in total.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    async fn apply_workload_if_exists(&self, i: usize) -> anyhow::Result<()> {
        if self.workloads[i].exists {
            self.apply_workload(i).await
        } else {
            Ok(())
        }
    }

    /// Applies workload `i` (spec and labels), then its `Ready` condition.
    async fn apply_workload(&self, i: usize) -> anyhow::Result<()> {
        let w = &self.workloads[i];
        let name = workload_name(i);
        let object = json!({
            "apiVersion": "workload.linkerd.io/v1beta1",
            "kind": "ExternalWorkload",
            "metadata": {"name": name, "labels": {"app": service_name(w.service)}},
            "spec": {
                "meshTLS": {
                    "identity": format!("spiffe://root.linkerd.cluster.local/{name}"),
                    "serverName": format!("{name}.cluster.local"),
                },
                "ports": [{"name": "http", "port": 8080}],
                "workloadIPs": [{"ip": workload_ip(i)}],
            },
        });
        let api = workloads_api(&self.client);
        api.patch(&name, &apply_params(), &Patch::Apply(&object))
            .await?;
        let status = json!({"status": {"conditions": [{
            "type": "Ready",
            "status": if w.ready { "True" } else { "False" },
            "lastTransitionTime": "2026-01-01T00:00:00Z",
            "reason": "Probed",
        }]}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&status))
            .await?;
        Ok(())
    }

    /// Applies route `k` with its one Service parent (and that Service as
    /// its backend).
    async fn apply_route(&self, k: usize) -> anyhow::Result<()> {
        let parent = service_name(self.routes[k].parent);
        let object = json!({
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": route_name(k)},
            "spec": {
                "parentRefs": [{"group": "core", "kind": "Service", "name": parent, "port": 80}],
                "rules": [{
                    "matches": [{"path": {"type": "PathPrefix", "value": format!("/r{k}")}}],
                    "backendRefs": [{"name": parent, "port": 80}],
                }],
            },
        });
        routes_api(&self.client)
            .patch(&route_name(k), &apply_params(), &Patch::Apply(&object))
            .await?;
        Ok(())
    }

    /// What the writers got wrong now, listed afresh: for each Service,
    /// the endpoints of our slices against its workloads (address and
    /// readiness), and for each route, the Service parents our status
    /// accepts against its `parentRefs`.
    pub async fn check(&self) -> anyhow::Result<Vec<String>> {
        let lp = ListParams::default();
        let workloads = workloads_api(&self.client).list(&lp).await?.items;
        let selector = format!("{ENDPOINT_SLICE_MANAGED_BY}={EXTERNAL_WORKLOADS_CONTROLLER}");
        let slices = Api::<EndpointSlice>::namespaced(self.client.clone(), NS)
            .list(&ListParams::default().labels(&selector))
            .await?
            .items;
        let routes = routes_api(&self.client).list(&lp).await?.items;
        let mut wrong = Vec::new();
        for s in 0..SERVICES {
            let name = service_name(s);
            let want: BTreeSet<(String, bool)> = workloads
                .iter()
                .filter(|w| w.metadata.labels.as_ref().and_then(|l| l.get("app")) == Some(&name))
                .filter_map(|w| {
                    let ip = w.data["spec"]["workloadIPs"][0]["ip"].as_str()?.to_string();
                    let ready = w.data["status"]["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Ready" && c["status"] == "True")
                    });
                    Some((ip, ready))
                })
                .collect();
            let got: BTreeSet<(String, bool)> = slices
                .iter()
                .filter(|sl| {
                    sl.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(SERVICE_NAME))
                        == Some(&name)
                })
                .flat_map(|sl| sl.endpoints.iter().flatten())
                .flat_map(|e| {
                    let ready = e.conditions.as_ref().and_then(|c| c.ready) == Some(true);
                    e.addresses.iter().map(move |a| (a.clone(), ready))
                })
                .collect();
            if want != got {
                wrong.push(format!(
                    "EndpointSlices of {name}: hold {got:?}, its workloads are {want:?}"
                ));
            }
        }
        for route in &routes {
            let name = route.metadata.name.clone().unwrap_or_default();
            let want: BTreeSet<String> = route.data["spec"]["parentRefs"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|p| Some(p["name"].as_str()?.to_string()))
                .collect();
            let got: BTreeSet<String> = route.data["status"]["parents"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|p| p["controllerName"] == POLICY_CONTROLLER_NAME)
                .filter(|p| {
                    p["conditions"].as_array().is_some_and(|cs| {
                        cs.iter()
                            .any(|c| c["type"] == "Accepted" && c["status"] == "True")
                    })
                })
                .filter_map(|p| Some(p["parentRef"]["name"].as_str()?.to_string()))
                .collect();
            let all: usize = route.data["status"]["parents"].as_array().map_or(0, |ps| {
                ps.iter()
                    .filter(|p| p["controllerName"] == POLICY_CONTROLLER_NAME)
                    .count()
            });
            if want != got || all != want.len() {
                wrong.push(format!(
                    "HTTPRoute {name}: status accepts {got:?} ({all} parents of ours), its parents are {want:?}"
                ));
            }
        }
        Ok(wrong)
    }
}
