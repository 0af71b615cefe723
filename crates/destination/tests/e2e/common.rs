//! Helpers shared by the destination's end-to-end tests.

use std::{
    collections::BTreeSet,
    net::{Ipv4Addr, SocketAddr},
};

use k8s_openapi::{
    api::core::v1::{Service, ServicePort, ServiceSpec},
    apimachinery::pkg::util::intstr::IntOrString,
};
use kube::api::PostParams;
use linkerd2_proxy_api::destination::destination_client::DestinationClient;
use test_support::{ServerProcess, TestEnv, free_addr};
use tonic::transport::Channel;

pub struct Destination {
    pub process: ServerProcess,
    pub addr: SocketAddr,
}

pub async fn start_destination(env: &TestEnv, addr: SocketAddr) -> Destination {
    env.cluster().ensure_crds();
    let admin = free_addr();
    let args = vec![
        format!("--kubeconfig={}", env.cluster().kubeconfig().display()),
        format!("--addr={addr}"),
        format!("--admin-addr={admin}"),
    ];
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
