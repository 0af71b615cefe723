//! `meridian-cli explain <client-pod> <target>`: for one client pod and one
//! target, checks the four things that break mesh traffic (endpoints,
//! discovery, policy, profiles), each line with where it came from, then a
//! verdict naming the first broken one. Exit status 0 when all pass, 1 when
//! one is broken, 2 when the question could not be answered.
//!
//! It reads the Kubernetes API (kubeconfig / `--context`), asks the
//! destination and the policy controller what they would send (the client's
//! own context token and workload), and reads the destination's
//! introspection listener (`/streams`, `/targets`, `/audit`) for what they
//! did send.

mod authz;
mod report;

use std::{net::IpAddr, time::Duration};

use anyhow::{Context, bail};
use clap::Args;
use destination::{core::mesh_identity, k8s::profiles::profile_rules};
use k8s_api::{labels, service_profile::ServiceProfile};
use k8s_openapi::api::{
    core::v1::{Pod, Service},
    discovery::v1::EndpointSlice,
};
use kube::{Api, Client, api::ListParams};
use linkerd2_proxy_api::{
    destination::{GetDestination, destination_client::DestinationClient, update},
    inbound::{PortSpec, inbound_server_policies_client::InboundServerPoliciesClient},
    outbound::{
        TrafficSpec, outbound_policies_client::OutboundPoliciesClient, proxy_protocol, traffic_spec,
    },
};
use serde_json::Value;

use crate::{forward, kube_client};
use report::{Axis, AxisReport, Report};

/// `explain`'s arguments.
#[derive(Args, Debug)]
pub struct ExplainArgs {
    /// The client pod (in `--namespace`).
    pub client: String,
    /// The target: `<svc>.<ns>[.svc.<domain>]:<port>`, `svc/<name>[.<ns>] <port>`, or `<ip>:<port>`.
    #[arg(num_args = 1..=2, required = true)]
    pub target: Vec<String>,
    /// The client pod's namespace.
    #[arg(short = 'n', long, default_value = "default")]
    pub namespace: String,
    /// The kubeconfig context to use.
    #[arg(long)]
    pub context: Option<String>,
    /// `text` or `json`.
    #[arg(short = 'o', long, default_value = "text")]
    pub output: String,
    /// The destination's introspection address (`/streams`, `/targets`,
    /// `/audit`; its `--introspection-addr`).
    #[arg(
        long,
        env = "MERIDIAN_DESTINATION_INTROSPECTION_ADDR",
        default_value = "http://127.0.0.1:9986"
    )]
    pub destination_introspection_addr: String,
    /// The policy controller's gRPC address.
    #[arg(
        long,
        env = "MERIDIAN_POLICY_ADDR",
        default_value = "http://127.0.0.1:8090"
    )]
    pub policy_addr: String,
    /// The cluster domain.
    #[arg(long, default_value = "cluster.local")]
    pub cluster_domain: String,
    /// The identity trust domain.
    #[arg(long, default_value = "cluster.local")]
    pub trust_domain: String,
    /// Find the Meridian pod in this namespace and reach its destination
    /// (gRPC 8086, introspection 9986) and policy (gRPC 8090) ports through the API
    /// server, instead of the addresses above.
    #[arg(long, value_name = "CONTROL_PLANE_NAMESPACE", num_args = 0..=1, default_missing_value = "linkerd")]
    pub port_forward: Option<String>,
}

/// The target, resolved to a Service port.
struct Target {
    namespace: String,
    name: String,
    port: u16,
}

impl Target {
    fn authority(&self, domain: &str) -> String {
        format!(
            "{}.{}.svc.{domain}:{}",
            self.name, self.namespace, self.port
        )
    }
}

/// The client pod's facts.
struct ClientPod {
    namespace: String,
    name: String,
    node: String,
    ip: Option<IpAddr>,
    identity: Option<String>,
}

impl ClientPod {
    fn token(&self, pod: &str) -> String {
        serde_json::json!({"ns": self.namespace, "nodeName": self.node, "pod": pod}).to_string()
    }

    fn workload(&self) -> String {
        serde_json::json!({"ns": self.namespace, "pod": self.name}).to_string()
    }
}

/// Our own probes' pod name in context tokens, so they never count as the client's streams.
const PROBE_POD: &str = "meridian-explain";

/// Runs `explain`; the exit status to end with.
pub async fn run(destination_addr: &str, mut args: ExplainArgs) -> anyhow::Result<i32> {
    let kube = kube_client(args.context.as_deref()).await?;
    let mut destination_addr = destination_addr.to_string();
    if let Some(ns) = args.port_forward.clone() {
        let pod = forward::meridian_pod(&kube, &ns).await?;
        destination_addr = forward::forward(&kube, &ns, &pod, 8086).await?;
        args.destination_introspection_addr = forward::forward(&kube, &ns, &pod, 9986).await?;
        args.policy_addr = forward::forward(&kube, &ns, &pod, 8090).await?;
        eprintln!("port-forwarding to Pod {ns}/{pod} (8086, 9986, 8090)");
    }
    let destination_addr = destination_addr.as_str();
    let pod = Api::<Pod>::namespaced(kube.clone(), &args.namespace)
        .get_opt(&args.client)
        .await
        .with_context(|| format!("reading Pod {}/{}", args.namespace, args.client))?
        .with_context(|| format!("Pod {}/{} does not exist", args.namespace, args.client))?;
    let client = client_pod(&pod, &args);
    let target = resolve_target(&kube, &args).await?;
    let authority = target.authority(&args.cluster_domain);

    let mut endpoints = AxisReport::new(Axis::Endpoints);
    let ready_pods = check_endpoints(&kube, &target, &mut endpoints).await?;
    check_client_view(destination_addr, &client, &authority, &mut endpoints).await;

    let mut discovery = AxisReport::new(Axis::Discovery);
    check_discovery(&args, &client, &target, &mut discovery).await;

    let mut policy = AxisReport::new(Axis::Policy);
    check_policy(&args, &client, &authority, &ready_pods, &mut policy).await;

    let mut profiles = AxisReport::new(Axis::Profiles);
    check_profiles(&kube, &args, &client, &target, &mut profiles).await?;

    let report = Report::new(
        format!("Pod {}/{}", client.namespace, client.name),
        authority,
        vec![endpoints, discovery, policy, profiles],
    );
    if args.output == "json" {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        print!("{}", report.render());
    }
    Ok(if report.ok { 0 } else { 1 })
}

fn client_pod(pod: &Pod, args: &ExplainArgs) -> ClientPod {
    let spec = pod.spec.as_ref();
    let namespace = pod
        .metadata
        .namespace
        .clone()
        .unwrap_or_else(|| args.namespace.clone());
    let sa = spec
        .and_then(|s| s.service_account_name.clone())
        .unwrap_or_else(|| "default".into());
    let identity = pod
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(labels::CONTROL_PLANE_NS))
        .map(|cp| mesh_identity(&sa, &namespace, cp, &args.trust_domain));
    ClientPod {
        name: pod.metadata.name.clone().unwrap_or_default(),
        node: spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        ip: pod
            .status
            .as_ref()
            .and_then(|s| s.pod_ip.as_deref())
            .and_then(|ip| ip.parse().ok()),
        identity,
        namespace,
    }
}

/// Parses the target forms and resolves an IP to the Service with that ClusterIP.
async fn resolve_target(kube: &Client, args: &ExplainArgs) -> anyhow::Result<Target> {
    let split_name = |name: &str| -> (String, String) {
        let mut parts = name.splitn(3, '.');
        let svc = parts.next().unwrap_or_default().to_string();
        let ns = parts
            .next()
            .map_or_else(|| args.namespace.clone(), str::to_string);
        (svc, ns)
    };
    let parse_port = |p: &str| -> anyhow::Result<u16> {
        p.parse().with_context(|| format!("invalid port {p:?}"))
    };
    match &args.target[..] {
        [name, port] => {
            let name = name.strip_prefix("svc/").unwrap_or(name);
            let (name, namespace) = split_name(name);
            Ok(Target {
                namespace,
                name,
                port: parse_port(port)?,
            })
        }
        [one] => {
            let (host, port) = one
                .rsplit_once(':')
                .with_context(|| format!("target {one:?} has no port"))?;
            let port = parse_port(port)?;
            if let Ok(ip) = host.trim_matches(['[', ']']).parse::<IpAddr>() {
                let services = Api::<Service>::all(kube.clone())
                    .list(&ListParams::default())
                    .await
                    .context("listing Services")?;
                let svc = services
                    .items
                    .into_iter()
                    .find(|s| {
                        s.spec.as_ref().is_some_and(|spec| {
                            spec.cluster_ips
                                .iter()
                                .flatten()
                                .chain(spec.cluster_ip.iter())
                                .any(|c| c.parse::<IpAddr>().ok() == Some(ip))
                        })
                    })
                    .with_context(|| format!("no Service has the ClusterIP {ip}"))?;
                return Ok(Target {
                    namespace: svc.metadata.namespace.unwrap_or_default(),
                    name: svc.metadata.name.unwrap_or_default(),
                    port,
                });
            }
            let (name, namespace) = split_name(host);
            Ok(Target {
                namespace,
                name,
                port,
            })
        }
        _ => bail!("give the target as one or two arguments"),
    }
}

/// A ready endpoint's pod and target port (the inbound policy check asks about it).
struct ReadyPod {
    namespace: String,
    name: String,
    port: u16,
}

/// The Service, its slices, ready and not-ready endpoints (and why not).
async fn check_endpoints(
    kube: &Client,
    target: &Target,
    out: &mut AxisReport,
) -> anyhow::Result<Vec<ReadyPod>> {
    let svc_source = format!("Service {}/{}", target.namespace, target.name);
    let Some(svc) = Api::<Service>::namespaced(kube.clone(), &target.namespace)
        .get_opt(&target.name)
        .await
        .context("reading the Service")?
    else {
        out.broken("the Service does not exist", svc_source);
        return Ok(Vec::new());
    };
    let service_port = svc
        .spec
        .as_ref()
        .and_then(|s| s.ports.as_ref())
        .and_then(|ports| ports.iter().find(|p| p.port == i32::from(target.port)));
    let Some(service_port) = service_port else {
        out.broken(
            format!("the Service has no port {}", target.port),
            svc_source,
        );
        return Ok(Vec::new());
    };
    out.ok(
        format!("the Service exists with port {}", target.port),
        svc_source,
    );
    let port_name = service_port.name.clone().unwrap_or_default();

    let slices = Api::<EndpointSlice>::namespaced(kube.clone(), &target.namespace)
        .list(&ListParams::default().labels(&format!("{}={}", labels::SERVICE_NAME, target.name)))
        .await
        .context("listing EndpointSlices")?;
    let pods = Api::<Pod>::namespaced(kube.clone(), &target.namespace);
    let (mut ready, mut total, mut ready_pods) = (0, 0, Vec::new());
    for slice in &slices.items {
        let slice_source = format!(
            "EndpointSlice {}/{}",
            target.namespace,
            slice.metadata.name.as_deref().unwrap_or_default()
        );
        let Some(port) = slice
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.clone().unwrap_or_default() == port_name)
            .and_then(|p| p.port)
            .and_then(|p| u16::try_from(p).ok())
        else {
            continue;
        };
        for ep in slice.endpoints.iter().flatten() {
            total += 1;
            let pod_name = ep
                .target_ref
                .as_ref()
                .filter(|r| r.kind.as_deref() == Some("Pod"))
                .and_then(|r| r.name.clone());
            let addr = ep.addresses.first().cloned().unwrap_or_default();
            let is_ready = ep.conditions.as_ref().and_then(|c| c.ready).unwrap_or(true);
            if is_ready {
                ready += 1;
                if let Some(name) = pod_name {
                    ready_pods.push(ReadyPod {
                        namespace: target.namespace.clone(),
                        name,
                        port,
                    });
                }
                continue;
            }
            let why = match &pod_name {
                Some(name) => match pods.get_opt(name).await.ok().flatten() {
                    Some(pod) => not_ready_reason(&pod),
                    None => "its pod no longer exists".into(),
                },
                None => "not ready".into(),
            };
            let who = pod_name.map_or(addr.clone(), |p| {
                format!("Pod {}/{p} ({addr})", target.namespace)
            });
            out.note(format!("{who} is not ready: {why}"), slice_source.clone());
        }
    }
    let source = format!("EndpointSlices of {}/{}", target.namespace, target.name);
    if ready == 0 {
        out.broken(format!("0 of {total} endpoints ready"), source);
    } else {
        out.ok(format!("{ready} of {total} endpoints ready"), source);
    }
    Ok(ready_pods)
}

/// A pod's Ready condition, or its phase, in words.
fn not_ready_reason(pod: &Pod) -> String {
    let status = pod.status.as_ref();
    let ready = status
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == "Ready"));
    match ready {
        Some(c) if c.status != "True" => {
            let mut why = format!("Ready={}", c.status);
            if let Some(reason) = c.reason.as_deref().filter(|r| !r.is_empty()) {
                why.push_str(&format!(" ({reason})"));
            }
            if let Some(message) = c.message.as_deref().filter(|m| !m.is_empty()) {
                why.push_str(&format!(": {message}"));
            }
            why
        }
        _ => format!(
            "phase {}",
            status.and_then(|s| s.phase.as_deref()).unwrap_or("unknown")
        ),
    }
}

/// What a `Get` with the client's context token is sent first: what the
/// client's filter group (node, zone hints, traffic policy) leaves.
async fn check_client_view(
    destination_addr: &str,
    client: &ClientPod,
    authority: &str,
    out: &mut AxisReport,
) {
    let source = format!(
        "Destination.Get {authority} as the client's node {}",
        client.node
    );
    let view = async {
        let mut grpc = DestinationClient::connect(destination_addr.to_string()).await?;
        let request = GetDestination {
            scheme: "k8s".into(),
            path: authority.to_string(),
            context_token: client.token(PROBE_POD),
        };
        let mut stream = grpc.get(request).await?.into_inner();
        let mut addrs = 0usize;
        // The first message, then whatever follows it at once.
        let first = tokio::time::timeout(Duration::from_secs(5), stream.message()).await??;
        let mut next = first;
        loop {
            match next.and_then(|u| u.update) {
                Some(update::Update::Add(set)) => addrs += set.addrs.len(),
                Some(update::Update::Remove(set)) => addrs = addrs.saturating_sub(set.addrs.len()),
                Some(update::Update::NoEndpoints(_)) => addrs = 0,
                None => break,
            }
            match tokio::time::timeout(Duration::from_millis(200), stream.message()).await {
                Ok(message) => next = message?,
                Err(_) => break,
            }
        }
        anyhow::Ok(addrs)
    };
    match view.await {
        Ok(0) => out.broken("the client is sent no endpoints (NoEndpoints)", source),
        Ok(n) => out.ok(format!("the client is sent {n} endpoint(s)"), source),
        Err(error) => out.broken(format!("the destination did not answer: {error:#}"), source),
    }
}

/// The client's own `Get` stream of the target on the destination's admin port.
async fn check_discovery(
    args: &ExplainArgs,
    client: &ClientPod,
    target: &Target,
    out: &mut AxisReport,
) {
    let base = args.destination_introspection_addr.trim_end_matches('/');
    let fqdn = format!("{}.{}.svc", target.name, target.namespace);
    let path = format!(
        "/streams?kind=Get&pod={}&namespace={}&target={fqdn}",
        client.name, client.namespace
    );
    let source = format!("GET {base}{path}");
    let page = match http_get_json(base, &path).await {
        Ok(page) => page,
        Err(error) => {
            out.broken(
                format!("the destination's admin port did not answer: {error:#}"),
                source,
            );
            return;
        }
    };
    let port = format!(":{}", target.port);
    let streams: Vec<&Value> = page["streams"]
        .as_array()
        .map(|s| {
            s.iter()
                .filter(|s| s["path"].as_str().is_some_and(|p| p.ends_with(&port)))
                .collect()
        })
        .unwrap_or_default();
    let Some(stream) = streams.first() else {
        out.broken(
            format!(
                "no Get stream from Pod {}/{} for {fqdn}{port} (its proxy is not connected or never asked)",
                client.namespace, client.name
            ),
            source,
        );
        return;
    };
    let now = grpc_stream::registry::now_ms();
    let ago = |ms: &Value| {
        ms.as_u64().map_or("never".into(), |ms| {
            format!("{:.1}s ago", now.saturating_sub(ms) as f64 / 1000.0)
        })
    };
    let (sent, newest) = (&stream["sent_version"], &stream["newest_version"]);
    if sent == newest {
        out.ok(
            format!(
                "stream {} is up to date (version {sent}, {} update(s), last {})",
                stream["id"],
                stream["updates"],
                ago(&stream["last_write_ms"])
            ),
            source,
        );
    } else {
        out.note(
            format!(
                "stream {} has sent version {sent} of {newest} (last write {})",
                stream["id"],
                ago(&stream["last_write_ms"])
            ),
            source,
        );
    }
    let audit_source = format!("GET {base}/audit");
    match http_get_json(base, "/audit").await {
        Ok(audit) => {
            let id = &stream["id"];
            let behind = audit["streams_behind"]
                .as_array()
                .and_then(|b| b.iter().find(|s| &s["id"] == id));
            let wrong = audit["group_mismatches"].as_array().and_then(|m| {
                m.iter().find(|m| {
                    m["target"] == format!("{}/{}", target.namespace, target.name).as_str()
                })
            });
            if let Some(m) = wrong {
                out.broken(
                    format!(
                        "what the stream is sent differs from the index: only sent {}, only in the index {}",
                        m["only_published"], m["only_in_index"]
                    ),
                    audit_source,
                );
            } else if let Some(b) = behind {
                out.broken(
                    format!(
                        "stream {id} is behind by {} ms (a slow or stalled client)",
                        b["behind_ms"]
                    ),
                    audit_source,
                );
            } else {
                out.ok("what it was sent matches the index (audit)", audit_source);
            }
        }
        Err(error) => out.broken(format!("the audit did not answer: {error:#}"), audit_source),
    }
}

/// The outbound policy the client gets, and the inbound decision on a ready target pod.
async fn check_policy(
    args: &ExplainArgs,
    client: &ClientPod,
    authority: &str,
    ready_pods: &[ReadyPod],
    out: &mut AxisReport,
) {
    let source = format!("OutboundPolicies.Get {authority}");
    let outbound = async {
        let mut grpc = OutboundPoliciesClient::connect(args.policy_addr.clone()).await?;
        let spec = TrafficSpec {
            source_workload: client.workload(),
            target: Some(traffic_spec::Target::Authority(authority.to_string())),
        };
        anyhow::Ok(grpc.get(spec).await?.into_inner())
    };
    match outbound.await {
        Ok(policy) => {
            let kind = match policy.protocol.as_ref().and_then(|p| p.kind.as_ref()) {
                Some(proxy_protocol::Kind::Detect(d)) => format!(
                    "protocol detection, {} HTTP/1 route(s)",
                    d.http1.as_ref().map_or(0, |h| h.routes.len())
                ),
                Some(proxy_protocol::Kind::Http1(h)) => {
                    format!("HTTP/1, {} route(s)", h.routes.len())
                }
                Some(proxy_protocol::Kind::Http2(h)) => {
                    format!("HTTP/2, {} route(s)", h.routes.len())
                }
                Some(proxy_protocol::Kind::Grpc(g)) => format!("gRPC, {} route(s)", g.routes.len()),
                Some(proxy_protocol::Kind::Opaque(o)) => {
                    format!("opaque, {} route(s)", o.routes.len())
                }
                Some(proxy_protocol::Kind::Tls(t)) => format!("TLS, {} route(s)", t.routes.len()),
                None => "no protocol".into(),
            };
            out.ok(format!("outbound policy: {kind}"), source);
        }
        Err(error) => out.broken(format!("no outbound policy: {error:#}"), source),
    }

    let Some(target_pod) = ready_pods.first() else {
        out.note(
            "no ready target pod to check inbound policy on",
            "EndpointSlices",
        );
        return;
    };
    let source = format!(
        "InboundServerPolicies.GetPort Pod {}/{} port {}",
        target_pod.namespace, target_pod.name, target_pod.port
    );
    let inbound = async {
        let mut grpc = InboundServerPoliciesClient::connect(args.policy_addr.clone()).await?;
        let spec = PortSpec {
            workload: serde_json::json!({"ns": target_pod.namespace, "pod": target_pod.name})
                .to_string(),
            port: u32::from(target_pod.port),
        };
        anyhow::Ok(grpc.get_port(spec).await?.into_inner())
    };
    let server = match inbound.await {
        Ok(server) => server,
        Err(error) => {
            out.broken(
                format!("no inbound policy for the target pod: {error:#}"),
                source,
            );
            return;
        }
    };
    let Some(ip) = client.ip else {
        out.note(
            "the client pod has no IP yet; inbound policy not checked",
            source,
        );
        return;
    };
    let who = match &client.identity {
        Some(id) => format!("identity {id}"),
        None => "no mesh identity (not meshed)".into(),
    };
    let decision = authz::decide(
        &server,
        &authz::Client {
            identity: client.identity.clone(),
            ip,
        },
    );
    let server_name = authz::server_name(&server);
    match decision {
        authz::Decision::Allowed { by, route } => {
            let route = route.map(|r| format!(" on {r}")).unwrap_or_default();
            out.ok(
                format!("{server_name} lets the client in ({who}): allowed by {by}{route}"),
                source,
            );
        }
        authz::Decision::Denied { considered } => {
            let considered = if considered.is_empty() {
                "it has no authorizations".to_string()
            } else {
                format!("none of {} allows it", considered.join(", "))
            };
            out.broken(
                format!("{server_name} denies the client ({who}): {considered}"),
                source,
            );
        }
    }
}

/// The ServiceProfile of the target (client namespace first), whether it
/// validates, and whether the client's `GetProfile` stream is sent it.
async fn check_profiles(
    kube: &Client,
    args: &ExplainArgs,
    client: &ClientPod,
    target: &Target,
    out: &mut AxisReport,
) -> anyhow::Result<()> {
    let fqdn = format!(
        "{}.{}.svc.{}",
        target.name, target.namespace, args.cluster_domain
    );
    let mut found = None;
    let mut namespaces = vec![&client.namespace];
    if target.namespace != client.namespace {
        namespaces.push(&target.namespace);
    }
    for ns in namespaces.iter().copied() {
        let sp = Api::<ServiceProfile>::namespaced(kube.clone(), ns)
            .get_opt(&fqdn)
            .await
            .with_context(|| format!("reading ServiceProfile {ns}/{fqdn}"))?;
        if let Some(sp) = sp {
            found = Some((ns.clone(), sp));
            break;
        }
    }
    let Some((ns, sp)) = found else {
        let namespaces: Vec<&str> = namespaces.iter().map(|ns| ns.as_str()).collect();
        out.note(
            format!(
                "no ServiceProfile {fqdn} in {}: default routes",
                namespaces.join(" or ")
            ),
            "ServiceProfiles",
        );
        return Ok(());
    };
    let source = format!("ServiceProfile {ns}/{fqdn}");
    match profile_rules(&sp, target.port) {
        Ok(rules) => out.ok(
            format!("it exists and validates ({} route(s))", rules.routes.len()),
            source.clone(),
        ),
        Err(error) => {
            out.broken(format!("it exists but does not validate: {error}"), source);
            return Ok(());
        }
    }
    let base = args.destination_introspection_addr.trim_end_matches('/');
    let path = format!(
        "/streams?kind=GetProfile&pod={}&namespace={}&target={}.{}.svc",
        client.name, client.namespace, target.name, target.namespace
    );
    let stream_source = format!("GET {base}{path}");
    match http_get_json(base, &path).await {
        Ok(page) => match page["streams"].as_array().and_then(|s| s.first()) {
            Some(stream) if stream["sent_version"] == stream["newest_version"] => out.ok(
                format!(
                    "the client's GetProfile stream {} is sent it (version {})",
                    stream["id"], stream["sent_version"]
                ),
                stream_source,
            ),
            Some(stream) => out.broken(
                format!(
                    "the client's GetProfile stream {} has sent version {} of {}",
                    stream["id"], stream["sent_version"], stream["newest_version"]
                ),
                stream_source,
            ),
            None => out.broken(
                "no GetProfile stream from the client receives it",
                stream_source,
            ),
        },
        Err(error) => out.broken(
            format!("the destination's admin port did not answer: {error:#}"),
            stream_source,
        ),
    }
    Ok(())
}

/// GET `path` of an `http://host:port` base, as JSON.
async fn http_get_json(base: &str, path: &str) -> anyhow::Result<Value> {
    let authority = base
        .strip_prefix("http://")
        .with_context(|| format!("{base:?} is not an http:// address"))?;
    let stream = tokio::net::TcpStream::connect(authority)
        .await
        .with_context(|| format!("connecting to {authority}"))?;
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let request = http::Request::get(path)
        .header(http::header::HOST, authority)
        .body(http_body_util::Empty::<bytes::Bytes>::new())?;
    let response =
        tokio::time::timeout(Duration::from_secs(10), sender.send_request(request)).await??;
    let status = response.status();
    let body = http_body_util::BodyExt::collect(response.into_body())
        .await?
        .to_bytes();
    if !status.is_success() {
        bail!("{status}: {}", String::from_utf8_lossy(&body).trim());
    }
    serde_json::from_slice(&body).context("the answer is not JSON")
}
