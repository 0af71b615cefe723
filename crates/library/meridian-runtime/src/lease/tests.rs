//! The election loop against a scripted API server (tokio's paused clock,
//! so the instants asserted are exact), the timings' validation, and the
//! order of leadership logs and publications.

use std::sync::{
    Arc,
    atomic::{AtomicUsize, Ordering},
};

use http::{Method, Request, Response};
use kube::client::Body;

use super::*;

fn params() -> LeaseParams {
    LeaseParams {
        namespace: "ns".into(),
        name: "writer".into(),
        claimant: "me".into(),
        duration: Duration::from_secs(30),
        renew_interval: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(10),
        retry_interval: Duration::from_secs(2),
        timeout: Duration::from_secs(5),
        field_manager: "test".into(),
        component: "test writer",
        owner: None,
        labels: BTreeMap::new(),
    }
}

fn lease_json() -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "writer", "namespace": "ns", "resourceVersion": "1"},
        "spec": {"holderIdentity": "me", "leaseDurationSeconds": 30,
            "renewTime": "2026-01-01T00:00:00.000000Z"},
    }))
    .expect("json")
}

/// A client whose API server answers the first GET after `get_delay`,
/// the first PATCH at once, and then nothing ever again (every later
/// request hangs).
fn scripted_client(get_delay: Duration) -> (kube::Client, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let service = tower::service_fn(move |request: Request<Body>| {
        let n = counted.fetch_add(1, Ordering::SeqCst);
        let method = request.method().clone();
        async move {
            match (n, method) {
                (0, Method::GET) => tokio::time::sleep(get_delay).await,
                (1, Method::PATCH) => {}
                _ => std::future::pending::<()>().await,
            }
            Ok::<_, std::convert::Infallible>(
                Response::builder()
                    .header("content-type", "application/json")
                    .body(Body::from(lease_json()))
                    .expect("response"),
            )
        }
    });
    (kube::Client::new(service, "ns"), calls)
}

/// The instants (from the start) at which `leader` changed, and to what,
/// over the first `within` of the election.
async fn flips(get_delay: Duration, within: Duration) -> Vec<(Duration, bool)> {
    let (client, calls) = scripted_client(get_delay);
    let (leader, mut seen) = watch::channel(false);
    let (_stop, shutdown) = Shutdown::new();
    let start = Instant::now();
    let election = tokio::spawn(run(client, params(), leader, shutdown));
    let mut flips = Vec::new();
    let end = tokio::time::sleep(within);
    tokio::pin!(end);
    loop {
        tokio::select! {
            changed = seen.changed() => {
                if changed.is_err() {
                    break;
                }
                flips.push((start.elapsed(), *seen.borrow_and_update()));
            }
            () = &mut end => break,
        }
    }
    election.abort();
    assert!(calls.load(Ordering::SeqCst) > 2, "rounds went on");
    flips
}

#[tokio::test(start_paused = true)]
async fn a_term_ends_at_its_deadline_counted_from_the_renewals_send() {
    // The first round's GET takes 3 s, its PATCH succeeds: the term runs
    // from the GET's sending (0 s), not from the answer (3 s). Every later
    // round hangs until its 5 s timeout; the deadline passes during one.
    let got = flips(Duration::from_secs(3), Duration::from_secs(40)).await;
    assert_eq!(
        got,
        vec![
            (Duration::from_secs(3), true),
            (Duration::from_secs(10), false)
        ],
        "leads once the round returns, stops 10 s after it was sent"
    );
}

#[tokio::test(start_paused = true)]
async fn a_round_slower_than_the_deadline_begins_no_term() {
    // Answered 11 s after it was sent (the timeout is longer here): its
    // term would already be over.
    let (client, _) = scripted_client(Duration::from_secs(11));
    let (leader, seen) = watch::channel(false);
    let (_stop, shutdown) = Shutdown::new();
    let p = LeaseParams {
        timeout: Duration::from_secs(20),
        ..params()
    };
    let election = tokio::spawn(run(client, p, leader, shutdown));
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert!(!*seen.borrow());
    assert!(!seen.has_changed().unwrap_or(true), "never led");
    election.abort();
}

#[test]
fn timings_that_could_overlap_are_refused() {
    assert_eq!(params().validate(), Ok(()));
    let equal = LeaseParams {
        renew_deadline: Duration::from_secs(30),
        ..params()
    };
    assert!(matches!(
        equal.validate(),
        Err(InvalidLeaseParams::DeadlineNotBeforeExpiry { .. })
    ));
    let slow = LeaseParams {
        renew_interval: Duration::from_secs(10),
        ..params()
    };
    assert!(matches!(
        slow.validate(),
        Err(InvalidLeaseParams::IntervalNotBeforeDeadline { .. })
    ));
    for duration in [Duration::ZERO, Duration::from_millis(30_500)] {
        let odd = LeaseParams {
            duration,
            ..params()
        };
        assert!(matches!(
            odd.validate(),
            Err(InvalidLeaseParams::Duration { .. })
        ));
    }
}

#[tokio::test(start_paused = true)]
async fn invalid_timings_never_lead() {
    let (client, calls) = scripted_client(Duration::ZERO);
    let (leader, seen) = watch::channel(false);
    let (_stop, shutdown) = Shutdown::new();
    let p = LeaseParams {
        renew_deadline: Duration::from_secs(40),
        ..params()
    };
    run(client, p, leader, shutdown).await;
    assert!(!*seen.borrow());
    assert_eq!(calls.load(Ordering::SeqCst), 0);
}

#[test]
fn a_term_is_said_before_it_is_published_and_a_loss_after() {
    let (leader, seen) = watch::channel(false);
    let mut said = Vec::new();
    publish(&leader, true, || said.push(("gain", *seen.borrow())));
    assert!(*seen.borrow());
    publish(&leader, true, || said.push(("again", *seen.borrow())));
    publish(&leader, false, || said.push(("loss", *seen.borrow())));
    assert!(!*seen.borrow());
    publish(&leader, false, || said.push(("again", *seen.borrow())));
    // When each line was said, followers still saw no term (gain) and
    // already saw none (loss); an unchanged state is not said at all.
    assert_eq!(said, vec![("gain", false), ("loss", false)]);
}
