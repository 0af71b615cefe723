//! The soak's workload and its seeded operations. Everything lives in
//! namespace `soak`: selector-less Services with hand-written EndpointSlices
//! (`kubernetes.io/service-name`), kwok-style pods (created, then given a
//! Running status with their pod IP) that the slices reference by
//! `targetRef`, a few targetless endpoints, and ServiceProfiles; and, for
//! the policy controller's `WatchPort` streams, pods outside the churn that
//! are relabelled between groups, each group selected by one `Server` whose
//! port and protocol change.
//!
//! The model here only chooses sensible operations (what exists, what a
//! slice lists); the audit never reads it: its truth comes from a fresh LIST.
//! A pod's IP is a function of its name, so a re-created pod reuses its IP,
//! and no two live objects share an address.

use std::{collections::BTreeMap, net::Ipv4Addr};

use futures::{StreamExt, stream};
use k8s_openapi::api::{
    core::v1::{Namespace, Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{
    Api,
    api::{DeleteParams, DynamicObject, Patch, PatchParams, PostParams},
    discovery::ApiResource,
};
use serde_json::{Value, json};

use super::{NS, rng::Rng};

/// Pods a Service's pod set can have at most (indices `0..MAX_PODS`).
const MAX_PODS: usize = 40;
/// Slice names of a Service: `<svc>-a`, `<svc>-b`, `<svc>-c`.
const SLICES: [&str; 3] = ["a", "b", "c"];
const FIELD_MANAGER: &str = "meridian-soak";

/// Routes a ServiceProfile is made of: (name, method, path regex).
const ROUTES: [(&str, &str, &str); 6] = [
    ("GET /", "GET", "/"),
    ("POST /api", "POST", "/api"),
    ("GET /health", "GET", "/health"),
    ("PUT /items", "PUT", "/items/[^/]*"),
    ("DELETE /items", "DELETE", "/items/[^/]*"),
    ("GET /metrics", "GET", "/metrics"),
];

/// Server protocols.
const PROTOCOLS: [&str; 6] = ["unknown", "HTTP/1", "HTTP/2", "gRPC", "opaque", "TLS"];

/// Server ports: a number, or a container port's name.
const SERVER_PORTS: [&str; 4] = ["8080", "http", "9090", "admin"];

/// Values of the Service's `config.linkerd.io/opaque-ports` annotation.
const OPAQUE: [Option<&str>; 7] = [
    None,
    Some("80"),
    Some("9000"),
    Some("80,9000"),
    Some("70-90"),
    Some("http"),
    Some("admin"),
];

/// Port lists a slice cycles through (`None`: no `ports` field).
fn slice_port_variants() -> Vec<Option<Vec<(&'static str, i32)>>> {
    vec![
        Some(vec![("http", 8080), ("admin", 9090)]),
        Some(vec![("web", 8080), ("admin", 9090)]),
        Some(vec![("http", 8081), ("metrics", 9091)]),
        Some(vec![("http", 8080)]),
        None,
    ]
}

/// The operations, with their weights in the random sequence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Op {
    ScaleUp,
    ScaleDown,
    ReadyFlip,
    PodRecreate,
    PodDelete,
    ServicePorts,
    ServiceAnnotate,
    ServiceTrafficPolicy,
    ServiceDeleteCreate,
    SlicePorts,
    SliceTargetless,
    SliceDeleteCreate,
    ProfileEdit,
    ServerEdit,
    ServerDeleteCreate,
    PodRelabel,
}

const OPS: [(Op, u32); 16] = [
    (Op::ScaleUp, 14),
    (Op::ScaleDown, 11),
    (Op::ReadyFlip, 14),
    (Op::PodRecreate, 8),
    (Op::PodDelete, 4),
    (Op::ServicePorts, 6),
    (Op::ServiceAnnotate, 5),
    (Op::ServiceTrafficPolicy, 3),
    (Op::ServiceDeleteCreate, 4),
    (Op::SlicePorts, 6),
    (Op::SliceTargetless, 4),
    (Op::SliceDeleteCreate, 4),
    (Op::ProfileEdit, 8),
    (Op::ServerEdit, 5),
    (Op::ServerDeleteCreate, 2),
    (Op::PodRelabel, 4),
];

/// A `Server` selecting the pods labelled `group=<its index>`.
#[derive(Clone, Debug)]
struct ServerModel {
    exists: bool,
    port: &'static str,
    protocol: &'static str,
}

#[derive(Clone, Debug)]
struct Endpoint {
    ip: String,
    ready: Option<bool>,
    /// The pod index it references (`None`: no targetRef).
    pod: Option<usize>,
}

#[derive(Clone, Debug)]
struct Slice {
    name: String,
    exists: bool,
    ports: Option<Vec<(&'static str, i32)>>,
    endpoints: Vec<Endpoint>,
}

#[derive(Clone, Debug)]
struct Svc {
    index: usize,
    name: String,
    /// Followed by `GetProfile` streams: never deleted, port 80 never removed.
    profiled: bool,
    exists: bool,
    /// (name, port) of the Service's ports.
    ports: Vec<(&'static str, i32)>,
    opaque: Option<&'static str>,
    local: bool,
    slices: Vec<Slice>,
    /// Which pod indices exist.
    pods: Vec<bool>,
    /// The ServiceProfile's routes (indices into [`ROUTES`]), if it exists.
    profile: Option<Vec<usize>>,
}

impl Svc {
    fn referenced(&self, k: usize) -> bool {
        self.slices
            .iter()
            .any(|s| s.endpoints.iter().any(|e| e.pod == Some(k)))
    }
}

/// The workload, its client and the operation counters.
pub struct Workload {
    client: kube::Client,
    services: Vec<Svc>,
    /// The `WatchPort` pods' groups (`None`: no `group` label).
    policy_pods: Vec<Option<usize>>,
    servers: Vec<ServerModel>,
    rng: Rng,
    /// Operations performed, by kind.
    pub counts: BTreeMap<Op, u64>,
    /// API calls that failed (the op is counted; the truth is whatever the
    /// API holds).
    pub errors: u64,
    /// The first few errors, for the report.
    pub first_errors: Vec<String>,
}

pub fn service_name(s: usize) -> String {
    format!("svc-{s}")
}

fn pod_name(s: usize, k: usize) -> String {
    format!("svc-{s}-p{k}")
}

fn pod_ip(s: usize, k: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 100 + (s / 250) as u8, (s % 250) as u8, (k + 1) as u8)
}

fn targetless_ip(s: usize, t: usize) -> String {
    format!("10.250.{}.{}", s % 250, t + 1)
}

/// The name of policy pod `i`.
pub fn policy_pod_name(i: usize) -> String {
    format!("pol-{i}")
}

fn server_name(g: usize) -> String {
    format!("srv-{g}")
}

pub fn servers(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "policy.linkerd.io".into(),
        version: "v1beta3".into(),
        api_version: "policy.linkerd.io/v1beta3".into(),
        kind: "Server".into(),
        plural: "servers".into(),
    };
    Api::namespaced_with(client.clone(), NS, &resource)
}

fn profile_name(service: &str) -> String {
    format!("{service}.{NS}.svc.cluster.local")
}

pub fn service_profiles(client: &kube::Client) -> Api<DynamicObject> {
    let resource = ApiResource {
        group: "linkerd.io".into(),
        version: "v1alpha2".into(),
        api_version: "linkerd.io/v1alpha2".into(),
        kind: "ServiceProfile".into(),
        plural: "serviceprofiles".into(),
    };
    Api::namespaced_with(client.clone(), NS, &resource)
}

impl Workload {
    /// The initial model of `services` Services (the first `profiled` of
    /// them followed by `GetProfile`) and `policy_pods` pods for
    /// `WatchPort`, from `rng`.
    pub fn new(
        client: kube::Client,
        services: usize,
        profiled: usize,
        policy_pods: usize,
        mut rng: Rng,
    ) -> Self {
        let groups = (policy_pods / 5).max(2);
        let servers = (0..groups)
            .map(|g| ServerModel {
                exists: true,
                port: SERVER_PORTS[g % SERVER_PORTS.len()],
                protocol: PROTOCOLS[g % PROTOCOLS.len()],
            })
            .collect();
        let policy_pods = (0..policy_pods).map(|i| Some(i % groups)).collect();
        let services = (0..services)
            .map(|s| {
                let n = rng.range(2, 6);
                let two = s % 2 == 0;
                let mut slices: Vec<Slice> = SLICES
                    .iter()
                    .map(|suffix| Slice {
                        name: format!("{}-{suffix}", service_name(s)),
                        exists: false,
                        ports: Some(vec![("http", 8080), ("admin", 9090)]),
                        endpoints: Vec::new(),
                    })
                    .collect();
                slices[0].exists = true;
                slices[1].exists = two;
                for k in 0..n {
                    let slice = if two { k % 2 } else { 0 };
                    slices[slice].endpoints.push(Endpoint {
                        ip: pod_ip(s, k).to_string(),
                        ready: None,
                        pod: Some(k),
                    });
                }
                if s % 3 == 0 {
                    slices[0].endpoints.push(Endpoint {
                        ip: targetless_ip(s, 0),
                        ready: None,
                        pod: None,
                    });
                }
                let mut pods = vec![false; MAX_PODS];
                for p in pods.iter_mut().take(n) {
                    *p = true;
                }
                Svc {
                    index: s,
                    name: service_name(s),
                    profiled: s < profiled,
                    exists: true,
                    ports: vec![("http", 80), ("admin", 9000)],
                    opaque: None,
                    local: false,
                    slices,
                    pods,
                    profile: (s < profiled).then(|| vec![0, 1]),
                }
            })
            .collect();
        Self {
            client,
            services,
            policy_pods,
            servers,
            rng,
            counts: BTreeMap::new(),
            errors: 0,
            first_errors: Vec::new(),
        }
    }

    /// Names of the Services.
    pub fn service_names(&self) -> Vec<String> {
        self.services.iter().map(|s| s.name.clone()).collect()
    }

    /// Names of the pods followed by `WatchPort`.
    pub fn policy_pod_names(&self) -> Vec<String> {
        (0..self.policy_pods.len()).map(policy_pod_name).collect()
    }

    /// Names of the Services followed by `GetProfile`.
    pub fn profiled_names(&self) -> Vec<String> {
        self.services
            .iter()
            .filter(|s| s.profiled)
            .map(|s| s.name.clone())
            .collect()
    }

    /// Creates the namespace and everything the model holds.
    pub async fn populate(&mut self) -> anyhow::Result<()> {
        let mut ns = Namespace::default();
        ns.metadata.name = Some(NS.into());
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await?;
        let pods: Vec<(usize, usize)> = self
            .services
            .iter()
            .flat_map(|svc| {
                svc.pods
                    .iter()
                    .enumerate()
                    .filter(|(_, exists)| **exists)
                    .map(move |(k, _)| (svc.index, k))
            })
            .collect();
        let api: Api<Pod> = Api::namespaced(self.client.clone(), NS);
        let results: Vec<anyhow::Result<()>> = stream::iter(pods)
            .map(|(s, k)| {
                let api = api.clone();
                async move { create_pod(&api, s, k).await }
            })
            .buffer_unordered(8)
            .collect()
            .await;
        for result in results {
            result?;
        }
        for i in 0..self.policy_pods.len() {
            self.create_policy_pod(i).await?;
        }
        for g in 0..self.servers.len() {
            self.apply_server(g).await?;
        }
        for i in 0..self.services.len() {
            self.apply_service(i).await?;
            for j in 0..SLICES.len() {
                if self.services[i].slices[j].exists {
                    self.apply_slice(i, j).await?;
                }
            }
            if self.services[i].profile.is_some() {
                self.apply_profile(i).await?;
            }
        }
        Ok(())
    }

    /// Performs one random operation.
    pub async fn step(&mut self) {
        let weights: Vec<u32> = OPS.iter().map(|(_, w)| *w).collect();
        let op = OPS[self.rng.weighted(&weights)].0;
        let s = self.rng.below(self.services.len());
        *self.counts.entry(op).or_default() += 1;
        if let Err(error) = self.run(op, s).await {
            self.errors += 1;
            if self.first_errors.len() < 5 {
                self.first_errors
                    .push(format!("{op:?} on {}: {error:#}", service_name(s)));
            }
        }
    }

    /// Operations performed in total.
    pub fn total(&self) -> u64 {
        self.counts.values().sum()
    }

    async fn run(&mut self, op: Op, s: usize) -> anyhow::Result<()> {
        match op {
            Op::ScaleUp => self.scale_up(s).await,
            Op::ScaleDown => self.scale_down(s).await,
            Op::ReadyFlip => self.ready_flip(s).await,
            Op::PodRecreate => self.pod_recreate(s).await,
            Op::PodDelete => self.pod_delete(s).await,
            Op::ServicePorts => self.service_ports(s).await,
            Op::ServiceAnnotate => {
                self.services[s].opaque = *self.rng.pick(&OPAQUE).unwrap_or(&None);
                self.apply_service_if_exists(s).await
            }
            Op::ServiceTrafficPolicy => {
                self.services[s].local = !self.services[s].local;
                self.apply_service_if_exists(s).await
            }
            Op::ServiceDeleteCreate => self.service_delete_create(s).await,
            Op::SlicePorts => {
                let j = self.rng.below(SLICES.len());
                let variants = slice_port_variants();
                self.services[s].slices[j].ports =
                    self.rng.pick(&variants).cloned().unwrap_or_default();
                self.apply_slice_if_exists(s, j).await
            }
            Op::SliceTargetless => self.slice_targetless(s).await,
            Op::SliceDeleteCreate => {
                let j = self.rng.below(SLICES.len());
                if self.services[s].slices[j].exists {
                    self.services[s].slices[j].exists = false;
                    let name = self.services[s].slices[j].name.clone();
                    delete(&self.slices(), &name).await
                } else {
                    self.services[s].slices[j].exists = true;
                    self.apply_slice(s, j).await
                }
            }
            Op::ProfileEdit => self.profile_edit(s).await,
            Op::ServerEdit => {
                let g = self.rng.below(self.servers.len());
                if self.rng.chance(50) {
                    self.servers[g].protocol = *self.rng.pick(&PROTOCOLS).unwrap_or(&"unknown");
                } else {
                    self.servers[g].port = *self.rng.pick(&SERVER_PORTS).unwrap_or(&"8080");
                }
                if self.servers[g].exists {
                    self.apply_server(g).await
                } else {
                    Ok(())
                }
            }
            Op::ServerDeleteCreate => {
                let g = self.rng.below(self.servers.len());
                if self.servers[g].exists {
                    self.servers[g].exists = false;
                    delete(&servers(&self.client), &server_name(g)).await
                } else {
                    self.servers[g].exists = true;
                    self.apply_server(g).await
                }
            }
            Op::PodRelabel => {
                if self.policy_pods.is_empty() {
                    return Ok(());
                }
                let i = self.rng.below(self.policy_pods.len());
                let group = self.rng.below(self.servers.len() + 1);
                self.policy_pods[i] = (group < self.servers.len()).then_some(group);
                let patch = json!({"metadata": {"labels": {
                    "group": self.policy_pods[i].map(|g| g.to_string()),
                }}});
                self.pods()
                    .patch(
                        &policy_pod_name(i),
                        &PatchParams::default(),
                        &Patch::Merge(&patch),
                    )
                    .await?;
                Ok(())
            }
        }
    }

    async fn create_policy_pod(&self, i: usize) -> anyhow::Result<()> {
        let name = policy_pod_name(i);
        let mut spec = local_cluster::workload::PodSpecBuilder::new(&name, node_of(i))
            .label("role", "policy")
            .port(Some("http"), 8080)
            .port(Some("admin"), 9090)
            .meshed("linkerd");
        if let Some(g) = self.policy_pods[i] {
            spec = spec.label("group", &g.to_string());
        }
        let pods = self.pods();
        pods.create(&PostParams::default(), &spec.build()).await?;
        let ip = Ipv4Addr::new(10, 99, (i / 250) as u8, (i % 250 + 1) as u8);
        local_cluster::workload::set_status(&pods, &name, ip, true).await?;
        Ok(())
    }

    async fn apply_server(&self, g: usize) -> anyhow::Result<()> {
        let server = &self.servers[g];
        let port = match server.port.parse::<u16>() {
            Ok(n) => json!(n),
            Err(_) => json!(server.port),
        };
        let object = json!({
            "apiVersion": "policy.linkerd.io/v1beta3",
            "kind": "Server",
            "metadata": {"name": server_name(g)},
            "spec": {
                "podSelector": {"matchLabels": {"group": g.to_string()}},
                "port": port,
                "proxyProtocol": server.protocol,
                "accessPolicy": "all-unauthenticated",
            },
        });
        servers(&self.client)
            .patch(&server_name(g), &apply_params(), &Patch::Apply(&object))
            .await?;
        Ok(())
    }

    async fn scale_up(&mut self, s: usize) -> anyhow::Result<()> {
        let n = self.rng.range(1, 3);
        let free: Vec<usize> = (0..MAX_PODS)
            .filter(|k| !self.services[s].referenced(*k))
            .collect();
        let existing: Vec<usize> = (0..SLICES.len())
            .filter(|j| self.services[s].slices[*j].exists)
            .collect();
        let j = match self.rng.pick(&existing) {
            Some(j) => *j,
            None => {
                self.services[s].slices[0].exists = true;
                0
            }
        };
        let pods = self.pods();
        for _ in 0..n {
            let Some(&k) = self.rng.pick(&free) else {
                break;
            };
            if self.services[s].referenced(k) {
                continue;
            }
            if !self.services[s].pods[k] {
                self.services[s].pods[k] = true;
                create_pod(&pods, s, k).await?;
            }
            let ready = *self.rng.pick(&[None, Some(true)]).unwrap_or(&None);
            self.services[s].slices[j].endpoints.push(Endpoint {
                ip: pod_ip(s, k).to_string(),
                ready,
                pod: Some(k),
            });
        }
        self.apply_slice(s, j).await
    }

    async fn scale_down(&mut self, s: usize) -> anyhow::Result<()> {
        let n = self.rng.range(1, 3);
        let pods = self.pods();
        let mut touched = Vec::new();
        for _ in 0..n {
            let refs: Vec<(usize, usize)> = self.services[s]
                .slices
                .iter()
                .enumerate()
                .flat_map(|(j, slice)| {
                    slice
                        .endpoints
                        .iter()
                        .enumerate()
                        .filter(|(_, e)| e.pod.is_some())
                        .map(move |(e, _)| (j, e))
                })
                .collect();
            let Some(&(j, e)) = self.rng.pick(&refs) else {
                break;
            };
            let removed = self.services[s].slices[j].endpoints.remove(e);
            if !touched.contains(&j) {
                touched.push(j);
            }
            // Mostly the pod goes too; sometimes it stays, unlisted.
            if let Some(k) = removed.pod
                && self.services[s].pods[k]
                && self.rng.chance(80)
            {
                self.services[s].pods[k] = false;
                delete_pod(&pods, &pod_name(s, k)).await?;
            }
        }
        for j in touched {
            self.apply_slice_if_exists(s, j).await?;
        }
        Ok(())
    }

    async fn ready_flip(&mut self, s: usize) -> anyhow::Result<()> {
        let refs: Vec<(usize, usize)> = self.services[s]
            .slices
            .iter()
            .enumerate()
            .flat_map(|(j, slice)| (0..slice.endpoints.len()).map(move |e| (j, e)))
            .collect();
        let Some(&(j, e)) = self.rng.pick(&refs) else {
            return Ok(());
        };
        let ep = &mut self.services[s].slices[j].endpoints[e];
        ep.ready = match ep.ready {
            None => Some(false),
            Some(false) => Some(true),
            Some(true) => None,
        };
        self.apply_slice_if_exists(s, j).await
    }

    /// Deletes a listed pod and creates it again (same name, same IP), or
    /// restores a listed pod that is gone.
    async fn pod_recreate(&mut self, s: usize) -> anyhow::Result<()> {
        let listed: Vec<usize> = (0..MAX_PODS)
            .filter(|k| self.services[s].referenced(*k))
            .collect();
        let Some(&k) = self.rng.pick(&listed) else {
            return Ok(());
        };
        let pods = self.pods();
        if self.services[s].pods[k] {
            delete_pod(&pods, &pod_name(s, k)).await?;
        }
        self.services[s].pods[k] = true;
        create_pod(&pods, s, k).await
    }

    /// Deletes a pod and leaves the slices listing it (its endpoint must go).
    async fn pod_delete(&mut self, s: usize) -> anyhow::Result<()> {
        let existing: Vec<usize> = (0..MAX_PODS)
            .filter(|k| self.services[s].pods[*k])
            .collect();
        let Some(&k) = self.rng.pick(&existing) else {
            return Ok(());
        };
        self.services[s].pods[k] = false;
        delete_pod(&self.pods(), &pod_name(s, k)).await
    }

    async fn service_ports(&mut self, s: usize) -> anyhow::Result<()> {
        let svc = &mut self.services[s];
        match self.rng.below(3) {
            // Rename port 80 (slices name their ports `http`, sometimes `web`).
            0 => {
                if let Some(p) = svc.ports.iter_mut().find(|p| p.1 == 80) {
                    p.0 = if p.0 == "http" { "web" } else { "http" };
                } else {
                    svc.ports.insert(0, ("http", 80));
                }
            }
            // Add or remove port 9000 (`admin` or `metrics`).
            1 => {
                if let Some(i) = svc.ports.iter().position(|p| p.1 == 9000) {
                    if svc.ports[i].0 == "admin" && self.rng.chance(50) {
                        svc.ports[i].0 = "metrics";
                    } else {
                        svc.ports.remove(i);
                    }
                } else {
                    svc.ports.push(("admin", 9000));
                }
            }
            // Add or remove port 81 (`alt`, which no slice offers); without
            // it, requests for 81 use the number on every slice.
            _ => {
                if let Some(i) = svc.ports.iter().position(|p| p.1 == 81) {
                    svc.ports.remove(i);
                } else {
                    svc.ports.push(("alt", 81));
                }
            }
        }
        // Profiled Services keep port 80; no Service is left without ports.
        if !svc.ports.iter().any(|p| p.1 == 80) && (svc.profiled || svc.ports.is_empty()) {
            svc.ports.insert(0, ("http", 80));
        }
        self.apply_service_if_exists(s).await
    }

    async fn service_delete_create(&mut self, s: usize) -> anyhow::Result<()> {
        if self.services[s].profiled {
            // Followed by GetProfile, whose resolution is made once per
            // stream: these Services stay; edit their annotation instead.
            self.services[s].opaque = *self.rng.pick(&OPAQUE).unwrap_or(&None);
            return self.apply_service(s).await;
        }
        if self.services[s].exists {
            self.services[s].exists = false;
            let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
            delete(&services, &self.services[s].name.clone()).await
        } else {
            self.services[s].exists = true;
            self.apply_service(s).await
        }
    }

    async fn slice_targetless(&mut self, s: usize) -> anyhow::Result<()> {
        let j = self.rng.below(SLICES.len());
        let slice = &mut self.services[s].slices[j];
        let targetless: Vec<usize> = (0..slice.endpoints.len())
            .filter(|e| slice.endpoints[*e].pod.is_none())
            .collect();
        if !targetless.is_empty() && self.rng.chance(50) {
            if let Some(&e) = self.rng.pick(&targetless) {
                slice.endpoints.remove(e);
            }
        } else {
            // Targetless IPs are unique per (Service, slice, n).
            let used: Vec<String> = self.services[s]
                .slices
                .iter()
                .flat_map(|sl| sl.endpoints.iter().map(|e| e.ip.clone()))
                .collect();
            if let Some(ip) = (0..30)
                .map(|t| targetless_ip(s, t))
                .find(|ip| !used.contains(ip))
            {
                self.services[s].slices[j].endpoints.push(Endpoint {
                    ip,
                    ready: None,
                    pod: None,
                });
            }
        }
        self.apply_slice_if_exists(s, j).await
    }

    async fn profile_edit(&mut self, s: usize) -> anyhow::Result<()> {
        // Only profiled Services' profiles matter; pick one of them.
        let profiled: Vec<usize> = (0..self.services.len())
            .filter(|i| self.services[*i].profiled)
            .collect();
        let s = match self.rng.pick(&profiled) {
            Some(p) => *p,
            None => s,
        };
        if self.services[s].profile.is_some() && self.rng.chance(20) {
            self.services[s].profile = None;
            let name = profile_name(&self.services[s].name);
            return delete(&service_profiles(&self.client), &name).await;
        }
        let n = self.rng.range(0, 4);
        let mut routes: Vec<usize> = Vec::new();
        for _ in 0..n {
            let r = self.rng.below(ROUTES.len());
            if !routes.contains(&r) {
                routes.push(r);
            }
        }
        self.services[s].profile = Some(routes);
        self.apply_profile(s).await
    }

    // ---- writes ----

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), NS)
    }

    fn slices(&self) -> Api<EndpointSlice> {
        Api::namespaced(self.client.clone(), NS)
    }

    async fn apply_service_if_exists(&mut self, s: usize) -> anyhow::Result<()> {
        if self.services[s].exists {
            self.apply_service(s).await
        } else {
            Ok(())
        }
    }

    async fn apply_service(&self, s: usize) -> anyhow::Result<()> {
        let svc = &self.services[s];
        let ports: Vec<Value> = svc
            .ports
            .iter()
            .map(|(name, port)| json!({"name": name, "port": port, "targetPort": port, "protocol": "TCP"}))
            .collect();
        let mut metadata = json!({"name": svc.name});
        if let Some(list) = svc.opaque {
            metadata["annotations"] = json!({"config.linkerd.io/opaque-ports": list});
        }
        let object = json!({
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": metadata,
            "spec": {
                "ports": ports,
                "internalTrafficPolicy": if svc.local { "Local" } else { "Cluster" },
            },
        });
        let services: Api<Service> = Api::namespaced(self.client.clone(), NS);
        services
            .patch(&svc.name, &apply_params(), &Patch::Apply(&object))
            .await?;
        Ok(())
    }

    async fn apply_slice_if_exists(&mut self, s: usize, j: usize) -> anyhow::Result<()> {
        if self.services[s].slices[j].exists {
            self.apply_slice(s, j).await
        } else {
            Ok(())
        }
    }

    async fn apply_slice(&self, s: usize, j: usize) -> anyhow::Result<()> {
        let svc = &self.services[s];
        let slice = &svc.slices[j];
        let endpoints: Vec<Value> = slice
            .endpoints
            .iter()
            .map(|e| {
                let mut v = json!({"addresses": [e.ip]});
                if let Some(ready) = e.ready {
                    v["conditions"] = json!({"ready": ready});
                }
                if let Some(k) = e.pod {
                    v["targetRef"] =
                        json!({"kind": "Pod", "namespace": NS, "name": pod_name(s, k)});
                    v["nodeName"] = json!(node_of(k));
                }
                v
            })
            .collect();
        let mut object = json!({
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {"name": slice.name, "labels": {
                "kubernetes.io/service-name": svc.name,
                "endpointslice.kubernetes.io/managed-by": FIELD_MANAGER,
            }},
            "addressType": "IPv4",
            "endpoints": endpoints,
        });
        if let Some(ports) = &slice.ports {
            let ports: Vec<Value> = ports
                .iter()
                .map(|(name, port)| json!({"name": name, "port": port, "protocol": "TCP"}))
                .collect();
            object["ports"] = json!(ports);
        }
        self.slices()
            .patch(&slice.name, &apply_params(), &Patch::Apply(&object))
            .await?;
        Ok(())
    }

    async fn apply_profile(&self, s: usize) -> anyhow::Result<()> {
        let svc = &self.services[s];
        let routes: Vec<Value> = svc
            .profile
            .iter()
            .flatten()
            .filter_map(|r| ROUTES.get(*r))
            .map(|(name, method, path)| {
                json!({"name": name, "condition": {"method": method, "pathRegex": path}})
            })
            .collect();
        let name = profile_name(&svc.name);
        let object = json!({
            "apiVersion": "linkerd.io/v1alpha2",
            "kind": "ServiceProfile",
            "metadata": {"name": name},
            "spec": {"routes": routes},
        });
        service_profiles(&self.client)
            .patch(&name, &apply_params(), &Patch::Apply(&object))
            .await?;
        Ok(())
    }
}

pub(super) fn apply_params() -> PatchParams {
    PatchParams::apply(FIELD_MANAGER).force()
}

fn node_of(k: usize) -> &'static str {
    if k.is_multiple_of(2) {
        "node-1"
    } else {
        "node-2"
    }
}

/// Creates pod `k` of Service `s` and gives it a Running status with its IP.
async fn create_pod(pods: &Api<Pod>, s: usize, k: usize) -> anyhow::Result<()> {
    let name = pod_name(s, k);
    let mut spec = local_cluster::workload::PodSpecBuilder::new(&name, node_of(k))
        .label("app", &service_name(s))
        .port(Some("http"), 8080)
        .port(Some("admin"), 9090);
    if !k.is_multiple_of(3) {
        spec = spec.meshed("linkerd");
    }
    pods.create(&PostParams::default(), &spec.build()).await?;
    local_cluster::workload::set_status(pods, &name, pod_ip(s, k), true).await?;
    Ok(())
}

async fn delete_pod(pods: &Api<Pod>, name: &str) -> anyhow::Result<()> {
    match local_cluster::workload::delete_now(pods, name).await {
        Ok(()) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

pub(super) async fn delete<K>(api: &Api<K>, name: &str) -> anyhow::Result<()>
where
    K: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(e.into()),
    }
}
