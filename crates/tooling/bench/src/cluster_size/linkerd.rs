//! `meridian-bench compare-linkerd`: the cluster-size benchmark with
//! Linkerd 2.20's own binaries beside Meridian's, on the same fixtures in
//! the same run, and one table of ratios at the end.
//!
//! The original's binaries are handed in (`--linkerd-bin <dir>` holding the
//! Go `controller` and the Rust `policy-controller`, built from their
//! public source outside this repository); without them the benchmark
//! says SKIP and succeeds. They are started with the chart's arguments
//! ([`start`]) and the control plane's Deployment their leases name
//! ([`control_plane`]).

use std::{path::PathBuf, time::Duration};

use k8s_openapi::api::{apps::v1::Deployment, core::v1::Namespace, discovery::v1::EndpointSlice};
use kube::{Api, api::PostParams};
use serde_json::json;

use super::{
    Row, fixtures,
    measure::{Binary, Flavor, Kind, MESHED_HTTP2_CLIENT_PARAMS, OPAQUE_PORTS},
};
use crate::common::Server;

#[derive(clap::Args)]
pub struct CompareArgs {
    /// A directory holding Linkerd 2.20's `controller` (Go) and
    /// `policy-controller` (Rust) binaries. Without it: SKIP.
    #[arg(long, env = "MERIDIAN_LINKERD_BIN")]
    linkerd_bin: Option<PathBuf>,
    #[command(flatten)]
    size: super::Args,
}

/// Label of the original's rows.
const LABEL: &str = "linkerd-2.20";

pub async fn run(mut args: CompareArgs) -> anyhow::Result<()> {
    let Some(dir) = args.linkerd_bin.take() else {
        println!(
            "SKIP compare-linkerd: no --linkerd-bin (or MERIDIAN_LINKERD_BIN): a directory holding Linkerd 2.20's `controller` and `policy-controller`, built from linkerd/linkerd2 (tag version-2.20) outside this repository (docs/performance.md)"
        );
        return Ok(());
    };
    let missing: Vec<String> = ["controller", "policy-controller"]
        .iter()
        .map(|name| dir.join(name))
        .filter(|path| !path.is_file())
        .map(|path| path.display().to_string())
        .collect();
    if !missing.is_empty() {
        println!(
            "SKIP compare-linkerd: {} not found (--linkerd-bin {} must hold Linkerd 2.20's `controller` and `policy-controller`)",
            missing.join(" and "),
            dir.display()
        );
        return Ok(());
    }
    let mut size = args.size;
    if size.pods.is_empty() {
        size.pods = vec![10_000];
    }
    for (bins, name) in [
        (&mut size.destination_bin, "controller"),
        (&mut size.policy_bin, "policy-controller"),
    ] {
        bins.push(Binary {
            label: LABEL.into(),
            path: dir.join(name),
            flavor: Flavor::Linkerd,
        });
    }
    let rows = super::measure_all(size).await?;
    print_ratios(&rows);
    Ok(())
}

/// What a real cluster has and Linkerd's binaries need to start: the
/// `kubernetes` Service's EndpointSlice (which the API server publishes in
/// a cluster with nodes; Linkerd's destination exits if no EndpointSlice
/// exists), the control plane's namespace and the `linkerd-destination`
/// Deployment in it (Linkerd's policy controller makes it the owner of its
/// status Lease and does not start without it). Idempotent.
pub async fn control_plane(client: &kube::Client) -> anyhow::Result<()> {
    let slice: EndpointSlice = serde_json::from_value(json!({
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": "kubernetes"},
        },
        "addressType": "IPv4",
        // An address of the documentation range (RFC 5737): no one
        // connects to it; the API server refuses loopback ones.
        "endpoints": [{"addresses": ["192.0.2.1"], "conditions": {"ready": true}}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}],
    }))?;
    ignore_conflict(
        Api::<EndpointSlice>::namespaced(client.clone(), "default")
            .create(&PostParams::default(), &slice)
            .await,
    )?;
    let ns = fixtures::CONTROL_PLANE_NS;
    let mut namespace = Namespace::default();
    namespace.metadata.name = Some(ns.into());
    ignore_conflict(
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &namespace)
            .await,
    )?;
    let labels = json!({"linkerd.io/control-plane-component": "destination"});
    let deployment: Deployment = serde_json::from_value(json!({
        "metadata": {"name": "linkerd-destination", "labels": labels},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "destination", "image": "destination"}]},
            },
        },
    }))?;
    ignore_conflict(
        Api::<Deployment>::namespaced(client.clone(), ns)
            .create(&PostParams::default(), &deployment)
            .await,
    )?;
    Ok(())
}

fn ignore_conflict<T>(result: kube::Result<T>) -> anyhow::Result<()> {
    match result {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 409 => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Starts Linkerd's own binary as `kind` with the chart's arguments (less
/// TLS for the admission server, which the benchmark does not use), on
/// loopback ports of its own; `HOSTNAME` is what the pod would have.
pub async fn start(
    cluster: &local_cluster::Cluster,
    kind: Kind,
    bin: &Binary,
) -> anyhow::Result<(Server, Duration)> {
    let (grpc, admin) = (crate::common::free_addr()?, crate::common::free_addr()?);
    let kubeconfig = cluster.kubeconfig_path().display().to_string();
    let ns = fixtures::CONTROL_PLANE_NS;
    let args: Vec<String> = match kind {
        Kind::Destination => vec![
            "destination".into(),
            format!("-addr={grpc}"),
            format!("-metrics-addr={admin}"),
            format!("-kubeconfig={kubeconfig}"),
            format!("-controller-namespace={ns}"),
            "-outbound-transport-mode=transparent".into(),
            "-enable-h2-upgrade=true".into(),
            "-log-level=warn".into(),
            "-enable-endpoint-slices=true".into(),
            "-cluster-domain=cluster.local".into(),
            "-identity-trust-domain=cluster.local".into(),
            format!("-default-opaque-ports={OPAQUE_PORTS}"),
            "-enable-ipv6=true".into(),
            format!("--meshed-http2-client-params={MESHED_HTTP2_CLIENT_PARAMS}"),
        ],
        Kind::Policy => vec![
            format!("--kubeconfig={kubeconfig}"),
            format!("--admin-addr={admin}"),
            format!("--grpc-addr={grpc}"),
            format!("--control-plane-namespace={ns}"),
            "--admission-controller-disabled".into(),
            "--cluster-networks=10.0.0.0/8,100.64.0.0/10,172.16.0.0/12,192.168.0.0/16,fd00::/8"
                .into(),
            "--identity-domain=cluster.local".into(),
            "--cluster-domain=cluster.local".into(),
            "--default-policy=all-unauthenticated".into(),
            "--log-level=warn".into(),
            format!("--default-opaque-ports={OPAQUE_PORTS}"),
        ],
    };
    let name = format!("{}-{}", kind.name(), bin.label);
    let env = [("HOSTNAME".to_string(), format!("{name}-0"))];
    let started = std::time::Instant::now();
    let server =
        crate::common::spawn_server(cluster, &name, &bin.path, args, &env, (grpc, admin)).await?;
    Ok((server, started.elapsed()))
}

/// One axis of the table: its name and each side's figure (a cost: the
/// ratio original / Meridian is Meridian's lead).
struct Axis {
    name: String,
    /// One figure per Meridian build (`--destination-bin LABEL=…`), in
    /// the order they were named.
    meridian: Vec<Option<f64>>,
    linkerd: Option<f64>,
    unit: &'static str,
}

/// Prints, at the largest size, each axis for each Meridian build and for
/// Linkerd 2.20, with the ratios: one column per build, so a change is
/// seen beside the original in the same run (`--destination-bin
/// before=… --destination-bin after=…`, likewise `--policy-bin`).
fn print_ratios(rows: &[Row]) {
    let Some(pods) = rows.iter().map(|r| r.pods).max() else {
        return;
    };
    let at_size = || rows.iter().filter(|r| r.pods == pods);
    let mut builds: Vec<&str> = Vec::new();
    for r in at_size().filter(|r| r.flavor == Flavor::Meridian) {
        if !builds.contains(&r.label.as_str()) {
            builds.push(&r.label);
        }
    }
    let find = |kind: Kind, flavor: Flavor, label: Option<&str>| {
        at_size()
            .find(|r| r.kind == kind && r.flavor == flavor && label.is_none_or(|l| r.label == l))
    };
    let mut axes = Vec::new();
    for kind in [Kind::Destination, Kind::Policy] {
        let linkerd = find(kind, Flavor::Linkerd, None);
        let axis = |name: &str, unit: &'static str, f: &dyn Fn(&Row) -> Option<f64>| Axis {
            name: format!("{} {name}", kind.name()),
            meridian: builds
                .iter()
                .map(|b| find(kind, Flavor::Meridian, Some(b)).and_then(f))
                .collect(),
            linkerd: linkerd.and_then(f),
            unit,
        };
        let mb = |b: u64| b as f64 / 1e6;
        axes.push(axis("CPU from start to Ready", "s", &|r| {
            Some(r.idle.ready_cpu)
        }));
        axes.push(axis("CPU from start until first quiet", "s", &|r| {
            r.idle.listed_cpu
        }));
        axes.push(axis("RSS, settled", "MB", &|r| Some(mb(r.idle.rss.total))));
        axes.push(axis("heap in use, settled", "MB", &|r| r.idle.heap.map(mb)));
        axes.push(axis("peak RSS until settled", "MB", &|r| {
            Some(mb(r.idle.peak_rss))
        }));
        for (i, to) in ["not Ready", "Ready"].iter().enumerate() {
            axes.push(axis(
                &format!("CPU per readiness flip → {to}"),
                "ms",
                &|r| r.bursts.get(i).map(|b| b.per_flip_ms().0),
            ));
        }
        if kind == Kind::Destination {
            axes.push(axis("RSS per Get + GetProfile pair", "B", &|r| {
                r.streams
                    .as_ref()
                    .map(|s| s.memory.per_stream(s.streams) as f64)
            }));
            axes.push(axis("RSS per idle proxy connection", "B", &|r| {
                r.streams
                    .as_ref()
                    .map(|s| s.memory.per_connection(s.connections) as f64)
            }));
            axes.push(axis("server CPU per endpoint change", "ms", &|r| {
                r.streams.as_ref().map(|s| s.per_change_ms.0)
            }));
            for q in [50.0, 99.0] {
                axes.push(axis(&format!("write → last stream p{q}"), "ms", &|r| {
                    r.streams
                        .as_ref()
                        .map(|s| s.fan_out.last_from_write(q).as_secs_f64() * 1000.0)
                }));
            }
        }
    }
    // The pod's two containers together (a figure either lacks: none).
    type Figure<'a> = &'a dyn Fn(&Row) -> Option<f64>;
    let pod = |f: Figure<'_>, flavor: Flavor, label: Option<&str>| {
        let d = find(Kind::Destination, flavor, label)?;
        let p = find(Kind::Policy, flavor, label)?;
        Some(f(d)? + f(p)?)
    };
    let listed: Figure<'_> = &|r| r.idle.listed_cpu;
    let rss: Figure<'_> = &|r| Some(r.idle.rss.total as f64 / 1e6);
    for (name, unit, f) in [
        ("CPU from start until first quiet", "s", listed),
        ("RSS, settled", "MB", rss),
    ] {
        axes.push(Axis {
            name: format!("pod (destination + policy-controller) {name}"),
            meridian: builds
                .iter()
                .map(|b| pod(f, Flavor::Meridian, Some(b)))
                .collect(),
            linkerd: pod(f, Flavor::Linkerd, None),
            unit,
        });
    }
    println!(
        "\nside by side at {pods} pods: Meridian and Linkerd 2.20 on the same fixtures, in this run (the ratio is Linkerd / Meridian: above 1, Meridian costs less; issue 36's target is 5)"
    );
    print!("{}", ratio_table(&builds, &axes));
    for r in at_size() {
        if let Some(s) = &r.streams {
            println!(
                "  {} [{}]: missed updates {}, streams that failed to open or ended early {}, connections that ended {}, change writes that failed {}",
                r.kind.name(),
                r.label,
                s.fan_out.missed(),
                s.unexpected_streams,
                s.unexpected_connections,
                s.change_errors
            );
        }
    }
}

/// The Markdown table of `axes`: a column per Meridian build, Linkerd's,
/// then a ratio per build (one build: the columns are named plainly).
fn ratio_table(builds: &[&str], axes: &[Axis]) -> String {
    let named = |prefix: &str| -> Vec<String> {
        match builds {
            [_] => vec![prefix.to_string()],
            _ => builds.iter().map(|b| format!("{prefix} [{b}]")).collect(),
        }
    };
    let ratios: Vec<String> = named("Meridian")
        .iter()
        .map(|m| format!("Linkerd / {m}"))
        .collect();
    let mut header = vec!["axis".to_string()];
    header.extend(named("Meridian"));
    header.push("Linkerd 2.20".into());
    header.extend(ratios);
    let mut out = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for a in axes {
        let fig = |v: Option<f64>| v.map_or("–".to_string(), |v| format_figure(v, a.unit));
        let ratio = |m: Option<f64>| match (m, a.linkerd) {
            (Some(m), Some(l)) if m > 0.0 => format!("{:.2}×", l / m),
            _ => "–".into(),
        };
        let mut cells = vec![a.name.clone()];
        cells.extend(a.meridian.iter().map(|m| fig(*m)));
        cells.push(fig(a.linkerd));
        cells.extend(a.meridian.iter().map(|m| ratio(*m)));
        out.push_str(&format!("| {} |\n", cells.join(" | ")));
    }
    out
}

fn format_figure(v: f64, unit: &str) -> String {
    match unit {
        "B" => format!("{v:.0} B"),
        "s" => format!("{v:.2} s"),
        _ => format!("{v:.1} {unit}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn axis(meridian: Vec<Option<f64>>, linkerd: Option<f64>) -> Axis {
        Axis {
            name: "destination RSS, settled".into(),
            meridian,
            linkerd,
            unit: "MB",
        }
    }

    #[test]
    fn one_build_is_named_plainly() {
        let table = ratio_table(&["this"], &[axis(vec![Some(40.0)], Some(640.0))]);
        assert_eq!(
            table,
            "| axis | Meridian | Linkerd 2.20 | Linkerd / Meridian |\n|---|---|---|---|\n\
             | destination RSS, settled | 40.0 MB | 640.0 MB | 16.00× |\n"
        );
    }

    #[test]
    fn each_build_has_its_figure_and_its_ratio() {
        let table = ratio_table(
            &["before", "after"],
            &[axis(vec![Some(100.0), None], Some(600.0))],
        );
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| axis | Meridian [before] | Meridian [after] | Linkerd 2.20 | Linkerd / Meridian [before] | Linkerd / Meridian [after] |"
        );
        assert_eq!(lines[1], "|---|---|---|---|---|---|");
        assert_eq!(
            lines[2],
            "| destination RSS, settled | 100.0 MB | – | 600.0 MB | 6.00× | – |"
        );
    }
}
