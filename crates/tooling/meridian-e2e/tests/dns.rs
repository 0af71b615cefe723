//! Names, as users use them: pods resolve Services through the cluster DNS
//! (CoreDNS as `kube-system/kube-dns` on the local real node, or the
//! cluster's own). The test app calls a Service by name; a headless
//! Service's pods resolve one record per ready endpoint and by
//! `hostname.subdomain`; a Service deleted and re-created resolves again;
//! the names every meshed proxy uses for the control plane resolve to the
//! Meridian pod; and nothing outside the cluster's zones resolves.
//!
//! `#[ignore]`d like the `pod` suite: `cargo xtask e2e` runs them with a
//! cluster. Each test prints what `getent`/`nslookup` answered.

#![allow(clippy::unwrap_used)]

use std::{collections::BTreeSet, net::IpAddr};

use k8s_openapi::api::core::v1::{Pod, Service};
use kube::Api;
use meridian_e2e::{
    Cluster, DESTINATION_DEPLOYMENT,
    dns::{DnsUtils, eventually, first_column_ips},
    http_container, http_workload,
};

/// The pod IP of `ns/name`.
async fn pod_ip(cluster: &Cluster, ns: &str, name: &str) -> IpAddr {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), ns);
    pods.get(name)
        .await
        .expect("pod")
        .status
        .and_then(|s| s.pod_ip)
        .and_then(|ip| ip.parse().ok())
        .unwrap_or_else(|| panic!("{ns}/{name} has no IP"))
}

/// The ClusterIP of Service `ns/name`.
async fn cluster_ip(cluster: &Cluster, ns: &str, name: &str) -> IpAddr {
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), ns);
    services
        .get(name)
        .await
        .expect("service")
        .spec
        .and_then(|s| s.cluster_ip)
        .and_then(|ip| ip.parse().ok())
        .unwrap_or_else(|| panic!("{ns}/{name} has no ClusterIP"))
}

/// The first pod of `app=<app>`.
async fn first_pod(cluster: &Cluster, ns: &str, app: &str) -> String {
    cluster
        .pod_names(ns, app)
        .await
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("no pod of {ns}/{app}"))
}

/// `/http-test get TARGET` in the app pod: the body, once it answers 200
/// from an address in `via`.
async fn app_gets(cluster: &Cluster, ns: &str, pod: &str, target: &str, via: IpAddr) -> String {
    eventually(&format!("{pod} calling {target}"), || async {
        let (ok, out) = cluster.exec(ns, pod, &["/http-test", "get", target]);
        if ok && out.contains(&format!("connected to {via} ")) {
            Ok(out)
        } else {
            Err(out)
        }
    })
    .await
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn an_app_calls_a_service_by_its_dns_name() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-dns-app").await;
    let other = cluster.namespace("e2e-dns-other").await;
    for (namespace, app, replicas) in [
        (&ns.name, "web", 2),
        (&ns.name, "client", 1),
        (&other.name, "client", 1),
    ] {
        cluster.kubectl_ok(
            &["apply", "-f", "-"],
            Some(&http_workload(&cluster, namespace, app, replicas, &[])),
        );
    }
    for (namespace, app) in [
        (&ns.name, "web"),
        (&ns.name, "client"),
        (&other.name, "client"),
    ] {
        cluster.wait_deployment_ready(namespace, app).await;
    }
    let web_ip = cluster_ip(&cluster, &ns.name, "web").await;
    let client = first_pod(&cluster, &ns.name, "client").await;

    // The short name (search path `<ns>.svc.cluster.local`), the
    // namespace-qualified and the fully qualified names, with and without a
    // port: the app reaches one of web's pods through the ClusterIP.
    for target in [
        "web".to_string(),
        format!("web.{}", ns.name),
        format!("web.{}.svc", ns.name),
        format!("web.{}.svc.cluster.local:80/", ns.name),
        format!("web.{}.svc.cluster.local.", ns.name),
    ] {
        let out = app_gets(&cluster, &ns.name, &client, &target, web_ip).await;
        eprintln!("$ kubectl exec {client} -- /http-test get {target}\n{out}");
        assert!(out.starts_with("hello from web-"), "{out}");
    }
    // Both replicas answer through the name (kube-proxy balances the
    // ClusterIP the name resolved to).
    let mut seen = BTreeSet::new();
    for _ in 0..60 {
        let (ok, out) = cluster.exec(&ns.name, &client, &["/http-test", "get", "web"]);
        assert!(ok, "{out}");
        if let Some(name) = out
            .lines()
            .next()
            .and_then(|l| l.strip_prefix("hello from "))
        {
            seen.insert(name.to_string());
        }
        if seen.len() == 2 {
            break;
        }
    }
    assert_eq!(seen.len(), 2, "both web pods answer by name: {seen:?}");

    // From another namespace, the short name is not web (the search path
    // is that namespace's); `web.<ns>` is.
    let foreign = first_pod(&cluster, &other.name, "client").await;
    let (ok, out) = cluster.exec(&other.name, &foreign, &["/http-test", "get", "web"]);
    assert!(!ok && out.contains("does not resolve"), "{out}");
    let out = app_gets(
        &cluster,
        &other.name,
        &foreign,
        &format!("web.{}", ns.name),
        web_ip,
    )
    .await;
    assert!(out.starts_with("hello from web-"), "{out}");

    // SRV for the named port, and the A record, as nslookup shows them.
    let tools = DnsUtils::start(&cluster, &ns.name).await;
    let fqdn = format!("web.{}.svc.cluster.local", ns.name);
    let (ok, out) = tools.nslookup(&[&fqdn]);
    eprintln!("$ kubectl exec dnsutils -- nslookup {fqdn}\n{out}");
    assert!(ok && out.contains(&format!("Address: {web_ip}")), "{out}");
    let srv = format!("_http._tcp.{fqdn}");
    let (ok, out) = tools.nslookup(&["-type=SRV", &srv]);
    eprintln!("$ kubectl exec dnsutils -- nslookup -type=SRV {srv}\n{out}");
    assert!(ok && out.contains(&format!("80 {fqdn}")), "{out}");
    let (ok, out) = tools.getent("hosts", "web");
    eprintln!("$ kubectl exec dnsutils -- getent hosts web\n{out}");
    assert!(ok, "{out}");
    assert_eq!(
        out.split_whitespace().collect::<Vec<_>>(),
        [web_ip.to_string(), fqdn],
        "{out}"
    );
}

/// A StatefulSet's pods behind a headless Service (`db`).
fn headless_workload(cluster: &Cluster, ns: &str) -> String {
    let set = serde_json::json!({
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "db", "namespace": ns},
        "spec": {
            "serviceName": "db",
            "replicas": 2,
            "podManagementPolicy": "Parallel",
            "selector": {"matchLabels": {"app": "db"}},
            "template": {
                "metadata": {"labels": {"app": "db"}},
                "spec": {
                    "terminationGracePeriodSeconds": 1,
                    "containers": [http_container(cluster)],
                },
            },
        },
    });
    let service = serde_json::json!({
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "db", "namespace": ns},
        "spec": {
            "clusterIP": "None",
            "selector": {"app": "db"},
            "ports": [{"name": "http", "port": 8080, "targetPort": "http"}],
        },
    });
    format!(
        "{}\n---\n{}",
        serde_yaml::to_string(&set).unwrap(),
        serde_yaml::to_string(&service).unwrap()
    )
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn a_headless_services_pods_resolve_one_record_per_ready_endpoint() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-dns-headless").await;
    cluster.kubectl_ok(
        &["apply", "-f", "-"],
        Some(&headless_workload(&cluster, &ns.name)),
    );
    let tools = DnsUtils::start(&cluster, &ns.name).await;
    let both = eventually("both db pods Ready", || async {
        let ready = cluster.ready_pod_ips(&ns.name, "app=db").await;
        if ready.len() == 2 {
            Ok(ready)
        } else {
            Err(format!("{ready:?}"))
        }
    })
    .await;
    let db0 = pod_ip(&cluster, &ns.name, "db-0").await;
    let db1 = pod_ip(&cluster, &ns.name, "db-1").await;
    let name = format!("db.{}.svc.cluster.local", ns.name);

    // The Service name: one A record per ready endpoint.
    eventually(&format!("{name} -> {both:?}"), || async {
        let found = tools.addresses(&name);
        if found == both {
            Ok(())
        } else {
            Err(format!("{found:?}"))
        }
    })
    .await;
    let (_, out) = tools.nslookup(&[&name]);
    eprintln!("$ kubectl exec dnsutils -- nslookup {name}\n{out}");
    assert_eq!(out.matches("Address: 10.").count(), 2, "{out}");

    // Each pod by `hostname.subdomain`, short (search path) and in full.
    for (pod, ip) in [("db-0", db0), ("db-1", db1)] {
        let (found, out) = tools.getent("hosts", &format!("{pod}.db"));
        eprintln!("$ kubectl exec dnsutils -- getent hosts {pod}.db\n{out}");
        assert!(found, "{out}");
        assert_eq!(
            out.split_whitespace().take(2).collect::<Vec<_>>(),
            [ip.to_string(), format!("{pod}.{name}")],
            "{out}"
        );
    }
    // SRV: one target per pod, by hostname, with the named port.
    let srv = format!("_http._tcp.{name}");
    let (ok, out) = tools.nslookup(&["-type=SRV", &srv]);
    eprintln!("$ kubectl exec dnsutils -- nslookup -type=SRV {srv}\n{out}");
    assert!(ok, "{out}");
    for pod in ["db-0", "db-1"] {
        assert!(out.contains(&format!("8080 {pod}.{name}")), "{out}");
    }

    // db-1 turns unready (its readiness probe fails): its records go.
    let (ok, out) = cluster.exec(&ns.name, "db-1", &["/http-test", "ready", "fail"]);
    assert!(ok, "{out}");
    eventually(&format!("{name} -> only db-0"), || async {
        let found = tools.addresses(&name);
        if found == BTreeSet::from([db0]) {
            Ok(())
        } else {
            Err(format!("{found:?}"))
        }
    })
    .await;
    let full = format!("db-1.{name}");
    eventually(&format!("{full} gone"), || async {
        match tools.getent("hosts", &full) {
            (false, _) => Ok(()),
            (true, out) => Err(out),
        }
    })
    .await;
    let (_, out) = tools.getent("ahostsv4", &name);
    eprintln!("with db-1 unready:\n$ kubectl exec dnsutils -- getent ahostsv4 {name}\n{out}");

    // ... and come back when it recovers.
    let (ok, out) = cluster.exec(&ns.name, "db-1", &["/http-test", "ready", "ok"]);
    assert!(ok, "{out}");
    eventually(&format!("{name} -> both again"), || async {
        let found = tools.addresses(&name);
        if found == BTreeSet::from([db0, db1]) {
            Ok(())
        } else {
            Err(format!("{found:?}"))
        }
    })
    .await;
    // (Its name may stay negatively cached for the records' TTL.)
    eventually(&format!("{full} back"), || async {
        match tools.getent("hosts", &full) {
            (true, out) if first_column_ips(&out) == BTreeSet::from([db1]) => Ok(()),
            (_, out) => Err(out),
        }
    })
    .await;
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn a_service_deleted_and_recreated_resolves_again() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-dns-recreate").await;
    cluster.run_http_workload(&ns.name, "web", 1, &[]).await;
    let tools = DnsUtils::start(&cluster, &ns.name).await;
    let app = first_pod(&cluster, &ns.name, "web").await;
    let first = cluster_ip(&cluster, &ns.name, "web").await;
    let out = app_gets(&cluster, &ns.name, &app, "web", first).await;
    assert!(out.starts_with("hello from web-"), "{out}");

    cluster.kubectl_ok(&["delete", "service", "-n", &ns.name, "web"], None);
    eventually("web to stop resolving", || async {
        match tools.getent("hosts", "web") {
            (false, _) => Ok(()),
            (true, out) => Err(out),
        }
    })
    .await;
    let (ok, out) = cluster.exec(&ns.name, &app, &["/http-test", "get", "web"]);
    eprintln!("deleted:\n$ kubectl exec {app} -- /http-test get web\n{out}");
    assert!(!ok && out.contains("web does not resolve"), "{out}");

    // Re-created from the same manifest (a ClusterIP is allocated anew).
    let manifests = http_workload(&cluster, &ns.name, "web", 1, &[]);
    let service = manifests.split("\n---\n").nth(1).expect("the Service");
    cluster.kubectl_ok(&["create", "-f", "-"], Some(service));
    let second = cluster_ip(&cluster, &ns.name, "web").await;
    let (found, out) = eventually("web to resolve to the new Service", || async {
        match tools.getent("hosts", "web") {
            (true, out) if first_column_ips(&out) == BTreeSet::from([second]) => Ok((true, out)),
            (_, out) => Err(out),
        }
    })
    .await;
    eprintln!(
        "re-created (ClusterIP {first} before, {second} now):\n$ kubectl exec dnsutils -- getent hosts web\n{out}"
    );
    assert!(found);
    let out = app_gets(&cluster, &ns.name, &app, "web", second).await;
    assert!(out.starts_with("hello from web-"), "{out}");
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn the_control_plane_names_proxies_use_resolve_to_the_meridian_pod() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-dns-cp").await;
    cluster.run_http_workload(&ns.name, "client", 1, &[]).await;
    cluster
        .wait_deployment_ready(&cluster.control_plane_ns, DESTINATION_DEPLOYMENT)
        .await;
    let cp = cluster.control_plane_ns.clone();
    let meridian = cluster
        .ready_pod_ips(&cp, "linkerd.io/control-plane-component=destination")
        .await;
    assert_eq!(meridian.len(), 1, "{meridian:?}");
    let tools = DnsUtils::start(&cluster, &ns.name).await;
    // The headless names an injected proxy dials (`…-headless…:8086`,
    // `linkerd-policy…:8090`) give the pod itself; `linkerd-dst` its
    // ClusterIP.
    for service in ["linkerd-dst-headless", "linkerd-policy"] {
        let name = format!("{service}.{cp}.svc.cluster.local.");
        eventually(&format!("{name} -> {meridian:?}"), || async {
            let found = tools.addresses(&name);
            if found == meridian {
                Ok(())
            } else {
                Err(format!("{found:?}"))
            }
        })
        .await;
    }
    let dst = cluster_ip(&cluster, &cp, "linkerd-dst").await;
    let (found, out) = tools.getent("hosts", &format!("linkerd-dst.{cp}"));
    assert!(
        found && first_column_ips(&out) == BTreeSet::from([dst]),
        "{out}"
    );
    // An app reaches the pod's admin port by the headless name.
    let client = first_pod(&cluster, &ns.name, "client").await;
    let pod_ip = *meridian.iter().next().unwrap();
    let target = format!("linkerd-dst-headless.{cp}.svc.cluster.local:9996/ping");
    let out = app_gets(&cluster, &ns.name, &client, &target, pod_ip).await;
    eprintln!("$ kubectl exec {client} -- /http-test get {target}\n{out}");
}

#[tokio::test]
#[ignore = "needs a cluster running the Meridian pod: run `cargo xtask e2e`"]
async fn only_cluster_names_resolve_and_nothing_is_forwarded() {
    let cluster = Cluster::from_env().await;
    let ns = cluster.namespace("e2e-dns-zones").await;
    let tools = DnsUtils::start(&cluster, &ns.name).await;
    let (ok, out) = tools.nslookup(&["kubernetes.default.svc.cluster.local"]);
    eprintln!("$ kubectl exec dnsutils -- nslookup kubernetes.default.svc.cluster.local\n{out}");
    assert!(ok && out.contains("Address: 10.0.0.1"), "{out}");
    // Reverse lookups of the Service range are answered.
    let (ok, out) = tools.nslookup(&["10.0.0.1"]);
    eprintln!("$ kubectl exec dnsutils -- nslookup 10.0.0.1\n{out}");
    assert!(
        ok && out.contains("kubernetes.default.svc.cluster.local"),
        "{out}"
    );
    // A name outside the cluster's zones: refused by the cluster DNS,
    // which has no upstream to ask.
    let (ok, out) = tools.nslookup(&["example.com."]);
    eprintln!("$ kubectl exec dnsutils -- nslookup example.com.\n{out}");
    assert!(!ok && out.contains("REFUSED"), "{out}");
    let (found, out) = tools.getent("hosts", "example.com");
    assert!(!found, "{out}");
    // A missing Service: NXDOMAIN from the cluster zone, not REFUSED.
    let missing = format!("nothing.{}.svc.cluster.local.", ns.name);
    let (ok, out) = tools.nslookup(&[&missing]);
    eprintln!("$ kubectl exec dnsutils -- nslookup {missing}\n{out}");
    assert!(!ok && out.contains("NXDOMAIN"), "{out}");
}
