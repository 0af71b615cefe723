//! `MissConfirmer` against the real local API server, one outcome at a time:
//! a miss the API server agrees with (`Absent`), a Service created and
//! checked before the index shows it (`CaughtUp` once the watch delivers
//! it), an object the index never shows (`Lagging` after the bound), an API
//! server that cannot be asked (`Unconfirmed`), and the field-selector
//! lists the controllers use (`spec.clusterIP`, `status.podIP`,
//! `metadata.name` with a label selector); then what a flood of misses
//! costs (the per-kind request budget, names no object can have) and the
//! Service ranges that settle addresses without a request.

use std::time::Duration;

use k8s_index::{
    Confirmation, IndexMetrics, MissConfirmer, ObjectCache, ObjectKey, Query, ServiceCidrs,
    SharedIndex, confirm::CHECKS_PER_SECOND, resources,
};
use k8s_openapi::api::core::v1::{Pod, Service, ServicePort, ServiceSpec};
use kube::api::{ObjectMeta, PostParams};
use prometheus_client::registry::Registry;
use test_support::TestEnv;

fn service(name: &str) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            ports: Some(vec![ServicePort {
                port: 80,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    }
}

fn named(env: &TestEnv, name: &str) -> Query {
    Query::Named {
        namespace: env.ns.clone(),
        name: name.into(),
    }
}

fn holds(index: &SharedIndex<ObjectCache<Service>>, env: &TestEnv, name: &str) -> bool {
    index
        .read()
        .get(&ObjectKey::new(Some(&env.ns), name))
        .is_some()
}

#[tokio::test]
async fn each_outcome_against_the_api_server() {
    let env = TestEnv::new("confirm").await;
    let metrics = IndexMetrics::register(&mut Registry::default());
    let confirmer = MissConfirmer::new(env.client.clone(), &metrics, &mut Registry::default())
        .with_wait(Duration::from_secs(2));

    // The API server has no such Service either.
    let index = SharedIndex::<ObjectCache<Service>>::default();
    let outcome = confirmer
        .confirm::<Service>("services", named(&env, "nope"), || {
            holds(&index, &env, "nope")
        })
        .await;
    assert_eq!(outcome, Confirmation::Absent);

    // A Service created while no watch runs: the index never shows it.
    env.api::<Service>()
        .create(&PostParams::default(), &service("web"))
        .await
        .expect("create");
    let outcome = confirmer
        .confirm::<Service>("services", named(&env, "web"), || {
            holds(&index, &env, "web")
        })
        .await;
    assert_eq!(outcome, Confirmation::Lagging);

    // With a watch, the index catches up and the check says so.
    let watch = resources::services(env.client.clone(), index.clone(), &metrics);
    let _synced = watch.spawn();
    env.api::<Service>()
        .create(&PostParams::default(), &service("late"))
        .await
        .expect("create");
    let outcome = confirmer
        .confirm::<Service>("services", named(&env, "late"), || {
            holds(&index, &env, "late")
        })
        .await;
    assert_eq!(outcome, Confirmation::CaughtUp);
    assert!(holds(&index, &env, "late"));

    // By ClusterIP, as the controllers ask.
    let created = env
        .api::<Service>()
        .create(&PostParams::default(), &service("by-ip"))
        .await
        .expect("create");
    let ip = created
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP");
    let by_ip = Query::Selected {
        namespace: None,
        fields: format!("spec.clusterIP={ip}"),
        labels: None,
    };
    let outcome = confirmer
        .confirm::<Service>("services", by_ip, || holds(&index, &env, "by-ip"))
        .await;
    assert_eq!(outcome, Confirmation::CaughtUp);
    // Outside the local cluster's Service range (10.0.0.0/24, which the
    // tests running beside this one may fill): no Service can have it.
    let nobody = Query::Selected {
        namespace: None,
        fields: "spec.clusterIP=192.0.2.254".into(),
        labels: None,
    };
    let outcome = confirmer
        .confirm::<Service>("services", nobody, || false)
        .await;
    assert_eq!(outcome, Confirmation::Absent);

    // Pods by IP, and by name with the meshed label the policy controller's
    // watch selects (an unmeshed pod is a miss the API server agrees with).
    let spec = env
        .pod("plain")
        .label("app", "web")
        .port(Some("http"), 8080);
    let (_, pod_ip) = env.create_ready_pod(&spec).await;
    let by_pod_ip = Query::Selected {
        namespace: None,
        fields: format!("status.podIP={pod_ip}"),
        labels: None,
    };
    let outcome = confirmer.confirm::<Pod>("pods", by_pod_ip, || true).await;
    assert_eq!(outcome, Confirmation::CaughtUp);
    let meshed_plain = Query::Selected {
        namespace: Some(env.ns.clone()),
        fields: "metadata.name=plain".into(),
        labels: Some(resources::CONTROL_PLANE_NS_LABEL.into()),
    };
    let outcome = confirmer
        .confirm::<Pod>("pods", meshed_plain, || false)
        .await;
    assert_eq!(outcome, Confirmation::Absent);

    // An API server that cannot be asked: the index's answer stands.
    let (kubeconfig, _closed) = env.cluster().unreachable_kubeconfig(&env.ns);
    let config = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kubeconfig).expect("kubeconfig"),
        &Default::default(),
    )
    .await
    .expect("config");
    let unreachable = MissConfirmer::new(
        kube::Client::try_from(config).expect("client"),
        &metrics,
        &mut Registry::default(),
    )
    .with_wait(Duration::from_secs(2));
    let outcome = unreachable
        .confirm::<Service>("services", named(&env, "web"), || false)
        .await;
    assert!(
        matches!(outcome, Confirmation::Unconfirmed(_)),
        "{outcome:?}"
    );
}

/// 500 distinct absent names of one namespace, asked in waves of 100 at
/// once: the misses waiting for a slot share its request (one list of the
/// namespace), so every one is answered `Absent` and the API server is
/// asked at most at the budget's rate.
#[tokio::test]
async fn a_flood_of_names_shares_requests_within_the_budget() {
    let env = TestEnv::new("confirm-flood").await;
    let metrics = IndexMetrics::register(&mut Registry::default());
    let confirmer = MissConfirmer::new(env.client.clone(), &metrics, &mut Registry::default());
    env.api::<Service>()
        .create(&PostParams::default(), &service("present"))
        .await
        .expect("create");
    let started = std::time::Instant::now();
    let mut outcomes = Vec::new();
    for wave in 0..5 {
        let asks = (0..100).map(|i| {
            let confirmer = confirmer.clone();
            let query = named(&env, &format!("absent-{wave}-{i}"));
            async move {
                confirmer
                    .confirm::<Service>("services", query, || false)
                    .await
            }
        });
        outcomes.extend(futures::future::join_all(asks).await);
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let elapsed = started.elapsed().as_secs_f64();
    assert!(
        outcomes.iter().all(|o| *o == Confirmation::Absent),
        "{outcomes:?}"
    );
    let requests = confirmer.requests("services");
    let allowed = (CHECKS_PER_SECOND * elapsed).ceil() as u64 + 1;
    assert!(requests <= allowed, "{requests} requests in {elapsed:.2} s");
    assert!(requests >= 5, "each wave asked at least once: {requests}");
    assert_eq!(confirmer.pending(), 0, "no slot is left registered");

    // A name that exists, asked beside absent ones, is found in the shared
    // answer (and waited for in the index, which never shows it here).
    let confirmer = confirmer.with_wait(Duration::from_millis(300));
    let asks = ["present", "absent-x", "absent-y"].map(|name| {
        let confirmer = confirmer.clone();
        let query = named(&env, name);
        async move {
            confirmer
                .confirm::<Service>("services", query, || false)
                .await
        }
    });
    let outcomes = futures::future::join_all(asks).await;
    assert_eq!(outcomes[0], Confirmation::Lagging, "{outcomes:?}");
    assert_eq!(outcomes[1..], [Confirmation::Absent, Confirmation::Absent]);
}

/// 500 distinct field selections (no request answers two) asked at once:
/// the API server is asked at most at the budget's rate, every other miss
/// is refused at once (`Busy`, answered `UNAVAILABLE` by the controllers),
/// and none is answered from the index unchecked.
#[tokio::test]
async fn a_flood_of_selections_costs_the_budget_and_no_more() {
    let env = TestEnv::new("confirm-select-flood").await;
    let metrics = IndexMetrics::register(&mut Registry::default());
    let confirmer = MissConfirmer::new(env.client.clone(), &metrics, &mut Registry::default());
    let started = std::time::Instant::now();
    let asks = (0..500).map(|i| {
        let confirmer = confirmer.clone();
        let query = Query::Selected {
            namespace: Some(env.ns.clone()),
            fields: format!("metadata.name=absent-{i}"),
            labels: None,
        };
        async move {
            confirmer
                .confirm::<Service>("services", query, || false)
                .await
        }
    });
    let outcomes = futures::future::join_all(asks).await;
    let elapsed = started.elapsed().as_secs_f64();
    let asked = outcomes
        .iter()
        .filter(|o| **o == Confirmation::Absent)
        .count() as u64;
    let busy = outcomes
        .iter()
        .filter(|o| **o == Confirmation::Busy)
        .count() as u64;
    assert_eq!(asked + busy, 500, "{outcomes:?}");
    assert_eq!(asked, confirmer.requests("services"), "one request each");
    let allowed = (CHECKS_PER_SECOND * elapsed).ceil() as u64 + 1;
    assert!(asked <= allowed, "{asked} requests in {elapsed:.2} s");
    assert!(asked >= 1, "the first had a slot");
    assert_eq!(confirmer.pending(), 0, "no slot is left registered");
}

/// Names no object can have are settled without asking; so is an address
/// outside every ServiceCIDR, read from the local API server's own ranges.
#[tokio::test]
async fn facts_settle_misses_without_a_request() {
    let env = TestEnv::new("confirm-facts").await;
    let metrics = IndexMetrics::register(&mut Registry::default());
    let cidrs = ServiceCidrs::default();
    let follow = tokio::spawn(cidrs.follow(env.client.clone(), &metrics));
    let confirmer = MissConfirmer::new(env.client.clone(), &metrics, &mut Registry::default())
        .with_service_cidrs(cidrs.clone());

    // Nothing is settled before the ranges are listed.
    for name in ["Upper", "a/b", "x?watch=true", "-dash", &"n".repeat(300)] {
        let outcome = confirmer
            .confirm::<Service>("services", named(&env, name), || false)
            .await;
        assert_eq!(outcome, Confirmation::Settled, "{name}");
    }

    tokio::time::timeout(Duration::from_secs(30), async {
        while !cidrs.known() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
    .expect("the API server's ServiceCIDRs are listed");
    let created = env
        .api::<Service>()
        .create(&PostParams::default(), &service("ranged"))
        .await
        .expect("create");
    let ip: std::net::IpAddr = created
        .spec
        .and_then(|s| s.cluster_ip)
        .expect("a ClusterIP")
        .parse()
        .expect("an address");
    assert!(cidrs.may_be_cluster_ip(ip), "{ip} is in a ServiceCIDR");
    assert!(!confirmer.settled_not_cluster_ip(ip));
    // A pod-network or outside address is no ClusterIP.
    for outside in ["192.0.2.10", "2001:db8::1"] {
        let outside = outside.parse().expect("ip");
        assert!(confirmer.settled_not_cluster_ip(outside), "{outside}");
    }
    follow.abort();
}

/// A burst of Services created a moment ago, all asked for at once: more
/// misses than the budget has slots, yet none is refused, for those
/// without a slot are answered once the watch shows their Service (no
/// request); the API server is asked no more than the budget allows.
#[tokio::test]
async fn a_burst_of_new_objects_is_answered_beyond_the_budget() {
    let env = TestEnv::new("confirm-burst").await;
    let metrics = IndexMetrics::register(&mut Registry::default());
    let confirmer = MissConfirmer::new(env.client.clone(), &metrics, &mut Registry::default());
    let index = SharedIndex::<ObjectCache<Service>>::default();
    let watch = resources::services(env.client.clone(), index.clone(), &metrics);
    let mut synced = watch.spawn();
    synced.wait_for(|s| *s).await.expect("synced");
    let names: Vec<String> = (0..30).map(|i| format!("burst-{i}")).collect();
    let services = env.api::<Service>();
    futures::future::join_all(names.iter().map(|name| {
        let services = services.clone();
        async move {
            services
                .create(&PostParams::default(), &service(name))
                .await
                .expect("create")
        }
    }))
    .await;
    let outcomes = futures::future::join_all(names.iter().map(|name| {
        let (confirmer, index, env) = (&confirmer, &index, &env);
        async move {
            confirmer
                .confirm::<Service>("services", named(env, name), || holds(index, env, name))
                .await
        }
    }))
    .await;
    let busy = outcomes
        .iter()
        .filter(|o| **o == Confirmation::Busy)
        .count();
    assert_eq!(busy, 0, "{outcomes:?}");
    assert!(
        outcomes.iter().all(|o| *o == Confirmation::CaughtUp),
        "{outcomes:?}"
    );
}
