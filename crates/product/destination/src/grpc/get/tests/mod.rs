//! `Get` streams over a real index, without a server: a stream that fell
//! behind, and (in [`node_groups`]) streams of nodes the index does not know.

use linkerd2_proxy_api::destination::{Update, update};

use super::*;
use crate::core::FilterKey;
use crate::index::tests::{get::web_slice, index, pod, service, subscribe};
use k8s_index::Index as _;

#[test]
fn a_stream_that_fell_behind_gets_one_diff_to_the_newest_state() {
    let mut idx = index();
    idx.apply(service("web", "10.96.0.1"));
    idx.apply(pod("web-0", "10.0.0.1"));
    idx.apply(pod("web-1", "10.0.0.2"));
    idx.apply(web_slice(&[("web-0", "10.0.0.1", true)]));
    let mut rx = subscribe(&mut idx, "web", FilterKey::default());
    let mut cursor = StreamCursor::new();
    let decode = |frames: crate::proto::frames::Frames| -> Vec<Update> {
        frames
            .iter()
            .map(|f| grpc_stream::decode_request(f).expect("a valid frame"))
            .collect()
    };
    let (first, _) = cursor.advance(rx.borrow_and_update().clone());
    let first = decode(first);
    assert!(matches!(
        first[..],
        [Update {
            update: Some(update::Update::Add(_))
        }]
    ));

    // Three changes while the stream is not reading…
    idx.apply(web_slice(&[
        ("web-0", "10.0.0.1", true),
        ("web-1", "10.0.0.2", true),
    ]));
    idx.apply(web_slice(&[("web-1", "10.0.0.2", true)]));
    idx.apply(web_slice(&[("web-1", "10.0.0.2", false)]));
    idx.apply(web_slice(&[("web-1", "10.0.0.2", true)]));
    // …then it catches up in one step: web-0 removed, web-1 added.
    let (updates, coalesced) = cursor.advance(rx.borrow_and_update().clone());
    let updates = decode(updates);
    assert!(coalesced);
    let kinds: Vec<&str> = updates
        .iter()
        .map(|u| match &u.update {
            Some(update::Update::Add(set)) => {
                assert_eq!(set.addrs.len(), 1);
                "add"
            }
            Some(update::Update::Remove(set)) => {
                assert_eq!(set.addrs.len(), 1);
                "remove"
            }
            _ => "other",
        })
        .collect();
    assert_eq!(kinds, ["add", "remove"]);
    // A stream that keeps up reuses the group's precomputed step.
    idx.apply(web_slice(&[]));
    let (updates, coalesced) = cursor.advance(rx.borrow_and_update().clone());
    let updates = decode(updates);
    assert!(!coalesced);
    assert_eq!(updates.len(), 1);
    assert!(matches!(
        updates[0].update,
        Some(update::Update::NoEndpoints(ref n)) if n.exists
    ));
}

mod node_groups;
