//! Helpers shared by the destination's end-to-end tests.

use std::{
    collections::{BTreeMap, BTreeSet},
    net::{IpAddr, Ipv4Addr, SocketAddr},
    time::Duration,
};

use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::util::intstr::IntOrString,
};
use kube::api::PostParams;
use linkerd2_proxy_api::destination::{
    GetDestination, Update, WeightedAddr, destination_client::DestinationClient, update,
};
use test_support::{ServerProcess, TestEnv, eventually, free_addr};
use tonic::{Streaming, transport::Channel};

/// A writer writes the slices of every namespace's Services (its Lease is
/// per control plane, here per test namespace): the tests that run one, or
/// check that none runs, take turns, so two writers never write for the
/// same Service.
pub static WRITERS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Planes started with `deploy/`'s arguments take the writers' Leases in
/// `linkerd` (the chart's control-plane namespace); the tests that start
/// one, or check that none is taken there, take turns.
pub static LINKERD_LEASES: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A Server for the `http` port of the `app: web` pods (authorizing no
/// one by itself) and a policy HTTPRoute on it, `web-api`.
pub const WEB_SERVER_AND_ROUTE: &str = "apiVersion: policy.linkerd.io/v1beta3
kind: Server
metadata:
  name: web-http
spec:
  podSelector:
    matchLabels: {app: web}
  port: http
  proxyProtocol: HTTP/1
  accessPolicy: deny
---
apiVersion: policy.linkerd.io/v1beta3
kind: HTTPRoute
metadata:
  name: web-api
spec:
  parentRefs: [{group: policy.linkerd.io, kind: Server, name: web-http}]
  rules:
    - matches: [{path: {type: PathPrefix, value: /api}, method: GET}]
";

/// How long a stream may take to show a change.
pub const TIMEOUT: Duration = Duration::from_secs(30);

pub struct Destination {
    pub process: ServerProcess,
    pub addr: SocketAddr,
}

pub async fn start_destination(env: &TestEnv, addr: SocketAddr) -> Destination {
    start_destination_with(env, addr, &[]).await
}

/// [`start_destination`] with more flags.
pub async fn start_destination_with(
    env: &TestEnv,
    addr: SocketAddr,
    extra: &[String],
) -> Destination {
    env.cluster().ensure_crds();
    let admin = free_addr();
    let mut args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--addr={addr}"),
        format!("--admin-addr={admin}"),
    ];
    args.extend_from_slice(extra);
    let process =
        ServerProcess::start(env!("CARGO_BIN_EXE_destination").as_ref(), &args, admin).await;
    Destination { process, addr }
}

pub async fn client(addr: SocketAddr) -> DestinationClient<Channel> {
    DestinationClient::connect(format!("http://{addr}"))
        .await
        .expect("connect to destination")
}

pub fn at(ips: &[Ipv4Addr], port: u16) -> BTreeSet<SocketAddr> {
    ips.iter()
        .map(|ip| SocketAddr::new((*ip).into(), port))
        .collect()
}

pub async fn create_service(
    env: &TestEnv,
    name: &str,
    ports: Vec<(i32, IntOrString)>,
    headless: bool,
) {
    let svc = Service {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            selector: Some([("app".to_string(), name.to_string())].into()),
            cluster_ip: headless.then(|| "None".to_string()),
            ports: Some(
                ports
                    .into_iter()
                    .map(|(port, target)| ServicePort {
                        name: Some(format!("p{port}")),
                        port,
                        target_port: Some(target),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    };
    env.api::<Service>()
        .create(&PostParams::default(), &svc)
        .await
        .expect("create service");
}

/// A Service `name` selecting `app: name`, port 80 → the pods' `http` port.
pub async fn http_service(env: &TestEnv, name: &str) {
    create_service(
        env,
        name,
        vec![(80, IntOrString::String("http".into()))],
        false,
    )
    .await;
}

pub fn authority(env: &TestEnv, svc: &str, port: u16) -> String {
    format!("{svc}.{}.svc.cluster.local:{port}", env.ns)
}

pub async fn ready_pod(env: &TestEnv, app: &str, name: &str) -> Ipv4Addr {
    let spec = env
        .pod(name)
        .label("app", app)
        .port(Some("http"), 8080)
        .meshed("linkerd");
    env.create_ready_pod(&spec).await.1
}

/// A Get stream and the endpoint set it describes so far.
pub struct EndpointStream {
    pub stream: Streaming<Update>,
    pub current: BTreeMap<SocketAddr, WeightedAddr>,
    pub labels: std::collections::HashMap<String, String>,
    /// `Some(exists)` after a NoEndpoints until the next Add.
    pub no_endpoints: Option<bool>,
    pub messages: usize,
}

impl EndpointStream {
    pub async fn open(
        client: &mut DestinationClient<Channel>,
        path: &str,
        token: &str,
    ) -> Result<Self, tonic::Status> {
        let request = GetDestination {
            scheme: "k8s".into(),
            path: path.into(),
            context_token: token.into(),
        };
        let stream = client.get(request).await?.into_inner();
        Ok(Self {
            stream,
            current: BTreeMap::new(),
            labels: Default::default(),
            no_endpoints: None,
            messages: 0,
        })
    }

    /// Reads and applies one message.
    pub async fn next(&mut self) -> Update {
        let update = tokio::time::timeout(TIMEOUT, self.stream.message())
            .await
            .expect("a message within the timeout")
            .expect("stream healthy")
            .expect("stream open");
        self.apply(&update);
        update
    }

    pub fn apply(&mut self, update: &Update) {
        self.messages += 1;
        match &update.update {
            Some(update::Update::Add(set)) => {
                self.no_endpoints = None;
                self.labels = set.metric_labels.clone();
                for addr in &set.addrs {
                    self.current.insert(socket_addr(addr), addr.clone());
                }
            }
            Some(update::Update::Remove(set)) => {
                for addr in &set.addrs {
                    self.current.remove(&tcp_addr(addr));
                }
            }
            Some(update::Update::NoEndpoints(none)) => {
                self.current.clear();
                self.no_endpoints = Some(none.exists);
            }
            None => panic!("empty update"),
        }
    }

    pub fn addrs(&self) -> BTreeSet<SocketAddr> {
        self.current.keys().copied().collect()
    }

    /// Reads messages until `done` holds.
    pub async fn wait_for(&mut self, what: &str, done: impl Fn(&Self) -> bool) {
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while !done(self) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            match tokio::time::timeout(left, self.stream.message()).await {
                Ok(Ok(Some(update))) => self.apply(&update),
                other => panic!(
                    "waiting for {what}: {other:?}; current {:?}, no_endpoints {:?}",
                    self.addrs(),
                    self.no_endpoints
                ),
            }
        }
    }

    pub async fn wait_addrs(&mut self, what: &str, want: &BTreeSet<SocketAddr>) {
        self.wait_for(what, |s| {
            s.addrs() == *want && s.no_endpoints.is_none() != want.is_empty()
        })
        .await;
    }
}

pub fn socket_addr(addr: &WeightedAddr) -> SocketAddr {
    tcp_addr(addr.addr.as_ref().expect("addr"))
}

pub fn tcp_addr(addr: &linkerd2_proxy_api::net::TcpAddress) -> SocketAddr {
    let ip: IpAddr = addr.ip.expect("ip").try_into().expect("valid ip");
    SocketAddr::new(ip, u16::try_from(addr.port).expect("port"))
}

/// The writers' Leases, in the control plane's namespace (`linkerd`).
pub const LEASES: [&str; 2] = [
    "policy-controller-write",
    "linkerd-destination-endpoint-write",
];

/// Waits until neither Lease is held (absent, or expired: a plane of an
/// earlier test stopped less than its 30 s ago), then deletes what is left
/// of them, so a writer would lead at once: a new replica counts a Lease
/// it finds held as live for a whole duration from when it first saw it,
/// on its own clock (as client-go does), however old the record.
pub async fn wait_linkerd_leases_free(env: &TestEnv) {
    eventually(
        "the Leases in linkerd free",
        Duration::from_secs(90),
        || async {
            let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
                env.client.clone(),
                "linkerd",
            );
            for name in LEASES {
                let spec = api
                    .get_opt(name)
                    .await
                    .expect("get lease")
                    .and_then(|l| l.spec);
                let Some(spec) = spec else { continue };
                let renewed = spec.renew_time.map(|t| t.0.as_second()).unwrap_or_default();
                let expires = renewed + i64::from(spec.lease_duration_seconds.unwrap_or_default());
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_secs() as i64)
                    .unwrap_or_default();
                if spec.holder_identity.is_some_and(|h| !h.is_empty()) && expires >= now {
                    return Err(format!("{name} held until {expires}"));
                }
            }
            Ok(())
        },
    )
    .await;
    let api = kube::Api::<k8s_openapi::api::coordination::v1::Lease>::namespaced(
        env.client.clone(),
        "linkerd",
    );
    for name in LEASES {
        match api.delete(name, &Default::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 => {}
            Err(error) => panic!("deleting the expired Lease {name}: {error}"),
        }
    }
}
