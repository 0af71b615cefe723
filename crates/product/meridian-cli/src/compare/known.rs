//! The deliberate differences between Meridian and Linkerd 2.20 that
//! compare can see, as data: each names the README bullet that documents
//! it (section "Where Meridian differs from Linkerd") and recognises the
//! pair of answers it explains, whichever side runs Meridian. The README
//! bullets compare never sees are listed in `NOT_ASKED` with the reason;
//! a test keeps both lists and the README in step.

use super::question::{Answer, Api, Question};
use super::tree::Node;

/// One documented, deliberate difference.
pub struct Known {
    pub id: &'static str,
    /// The bold title of its README bullet.
    pub readme: &'static str,
    /// What Meridian answers, and what the original answers.
    pub summary: &'static str,
    /// A defect of the original rather than a choice: recognised only on
    /// the side `--original` names, as the same pair of answers from two
    /// Meridians (configured differently) is a real difference.
    defect: bool,
    /// Whether it explains `meridian` (the side answering as Meridian
    /// does) against `original`.
    applies: fn(&Question, &Answer, &Answer) -> bool,
}

/// The side that runs Linkerd's own controllers (`--original`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Side {
    A,
    B,
}

/// Where the README documents them.
pub const README_SECTION: &str = "README.md, \"Where Meridian differs from Linkerd\"";

/// How recent an object must be for the original's cache to miss it.
const WATCH_LAG: std::time::Duration = std::time::Duration::from_secs(60);

pub const KNOWN: &[Known] = &[
    Known {
        id: "get-no-endpoints",
        readme: "Fail fast",
        defect: false,
        summary: "for a Service with no ready endpoints Meridian sends NoEndpoints; \
                  the original sends nothing (or removes what it sent)",
        applies: |q, meridian, original| {
            q.api == Api::Get
                && get_state(meridian).is_some_and(|(addrs, none)| addrs == 0 && none.is_some())
                && get_state(original).is_some_and(|(addrs, none)| addrs == 0 && none.is_none())
        },
    },
    Known {
        id: "watch-lag",
        readme: "No answer depends on whether a watch has caught up.",
        defect: false,
        summary: "for an object created a moment before, the original answers NotFound \
                  from caches that have not seen it; Meridian checks with the API server",
        applies: |q, meridian, original| {
            q.age.is_some_and(|age| age < WATCH_LAG)
                && matches!(meridian, Answer::Value(_))
                && original.code() == Some(tonic::Code::NotFound)
        },
    },
    Known {
        id: "original-forgets-opaque-ports",
        readme: "A Service's opaque ports are not forgotten",
        defect: true,
        summary: "Meridian marks the Service's opaque port opaque on every GetProfile; \
                  the original forgets a Service's opaque ports once its last profile \
                  stream ended (a defect of the original), so a later stream says false",
        applies: |q, meridian, original| {
            q.api == Api::GetProfile
                && service_profile_opaque(meridian) == Some(true)
                && service_profile_opaque(original) == Some(false)
                && only_opaque_differs(meridian, original)
        },
    },
];

/// The README's other bullets, and why compare never sees them (checked
/// against the README by the tests).
#[cfg(test)]
const NOT_ASKED: &[(&str, &str)] = &[
    (
        "Metrics name only what exists",
        "compare reads answers, not metrics",
    ),
    (
        "Slow subscribers are coalesced, not disconnected",
        "compare reads every message at once",
    ),
    (
        "Shared, pre-encoded updates",
        "how updates are encoded, not what they say",
    ),
    (
        "Proper status codes",
        "compare asks well-formed names only, and reads the status, not the meridian-reason trailer",
    ),
    (
        "No answer before the first sync",
        "compare asks running servers (an unsynced one answers Unavailable, reported as a failure)",
    ),
    (
        "Streams end with `OK` on SIGTERM",
        "compare does not stop either side",
    ),
    (
        "Linked clusters follow their Secrets",
        "what happens when a Secret changes, not the answers",
    ),
    (
        "Stricter ServiceProfile admission",
        "admission is not asked",
    ),
    (
        "Policy admission decides as the original, in Meridian's words",
        "admission is not asked",
    ),
    (
        "Routes Meridian cannot serve say so in their status",
        "route status is not asked (both leave such routes out of their answers)",
    ),
    (
        "`enableEndpointSlices: false` is not served",
        "such a destination is never ready to be asked",
    ),
    (
        "Metrics the original has that Meridian does not",
        "metrics are not asked",
    ),
    (
        "Traces go out over OTLP, profiles are two",
        "traces and profiles are not asked",
    ),
];

/// The known difference that explains `a` against `b`, and whether side
/// `b` is the one answering as Meridian; `original` is the side the user
/// said runs Linkerd's own controllers, if any.
pub fn explain(
    question: &Question,
    a: &Answer,
    b: &Answer,
    original: Option<Side>,
) -> Option<(&'static Known, bool)> {
    KNOWN.iter().find_map(|k| {
        // A defect of the original needs the original's side named.
        let may = |b_is_meridian: bool| {
            !k.defect || original == Some(if b_is_meridian { Side::A } else { Side::B })
        };
        if may(false) && (k.applies)(question, a, b) {
            Some((k, false))
        } else if may(true) && (k.applies)(question, b, a) {
            Some((k, true))
        } else {
            None
        }
    })
}

/// `opaque_protocol` of a Service's profile (not an endpoint's).
fn service_profile_opaque(answer: &Answer) -> Option<bool> {
    let Answer::Value(node) = answer else {
        return None;
    };
    if node.field("endpoint").is_some() {
        return None;
    }
    match node.field("opaque_protocol") {
        Some(Node::Bool(opaque)) => Some(*opaque),
        _ => None,
    }
}

/// Whether two answers differ in `opaque_protocol` and nothing else.
fn only_opaque_differs(a: &Answer, b: &Answer) -> bool {
    let (Answer::Value(a), Answer::Value(b)) = (a, b) else {
        return false;
    };
    let differences = super::diff::diff(a, b);
    !differences.is_empty() && differences.iter().all(|d| d.path == "opaque_protocol")
}

/// (endpoints, NoEndpoints' `exists` if the state ends with one) of a `Get` answer.
fn get_state(answer: &Answer) -> Option<(usize, Option<bool>)> {
    let Answer::Value(node) = answer else {
        return None;
    };
    let addrs = match node.field("addrs") {
        Some(Node::Set(addrs)) => addrs.len(),
        _ => return None,
    };
    let exists = match node.field("no_endpoints").and_then(|n| n.field("exists")) {
        Some(Node::Bool(exists)) => Some(*exists),
        _ => None,
    };
    Some((addrs, exists))
}

#[cfg(test)]
mod tests {
    use std::{collections::BTreeSet, time::Duration};

    use super::*;
    use crate::compare::question::Request;

    fn get(age: Option<Duration>) -> Question {
        Question {
            api: Api::Get,
            target: "web.demo.svc.cluster.local:80".into(),
            request: Request::Destination {
                path: "web.demo.svc.cluster.local:80".into(),
                token: String::new(),
            },
            client: "demo/meridian-compare".into(),
            age,
        }
    }

    fn state(addrs: usize, none: Option<bool>) -> Answer {
        let mut fields = std::collections::BTreeMap::new();
        fields.insert(
            "addrs".to_string(),
            Node::Set(
                (0..addrs)
                    .map(|i| (format!("10.0.0.{i}:80"), Node::Fields(Default::default())))
                    .collect(),
            ),
        );
        if let Some(exists) = none {
            fields.insert(
                "no_endpoints".to_string(),
                Node::Fields([("exists".to_string(), Node::Bool(exists))].into()),
            );
        }
        Answer::Value(Node::Fields(fields))
    }

    fn not_found() -> Answer {
        Answer::Status {
            code: tonic::Code::NotFound,
            message: "Service web.demo not found".into(),
        }
    }

    #[test]
    fn no_endpoints_against_silence_either_way_round() {
        let q = get(None);
        let (k, b_is_meridian) =
            explain(&q, &state(0, Some(true)), &state(0, None), None).expect("known");
        assert_eq!((k.id, b_is_meridian), ("get-no-endpoints", false));
        let (k, b_is_meridian) =
            explain(&q, &state(0, None), &state(0, Some(true)), None).expect("known");
        assert_eq!((k.id, b_is_meridian), ("get-no-endpoints", true));
        // Endpoints on one side are a real difference.
        assert!(explain(&q, &state(0, Some(true)), &state(1, None), None).is_none());
    }

    #[test]
    fn missing_service_and_watch_lag() {
        // Both answer NotFound for a Service that does not exist: an open
        // stream against NotFound is a real difference.
        assert!(explain(&get(None), &state(0, Some(false)), &not_found(), None).is_none());
        // NotFound against an answer is explained by watch lag only for a new object.
        let profile = |age| Question {
            api: Api::GetProfile,
            ..get(age)
        };
        let answer = Answer::Value(Node::Fields(Default::default()));
        assert!(
            explain(
                &profile(Some(Duration::from_secs(600))),
                &answer,
                &not_found(),
                None
            )
            .is_none()
        );
        let (k, _) = explain(
            &profile(Some(Duration::from_secs(2))),
            &answer,
            &not_found(),
            None,
        )
        .expect("known");
        assert_eq!(k.id, "watch-lag");
    }

    #[test]
    fn a_service_profile_that_forgot_its_opaque_port() {
        let profile = |opaque: bool, routes: usize| {
            let fields = [
                ("opaque_protocol".to_string(), Node::Bool(opaque)),
                (
                    "fully_qualified_name".to_string(),
                    Node::Str("db.demo.svc.cluster.local".into()),
                ),
                (
                    "routes".to_string(),
                    Node::List(vec![Node::Str("GET /".into()); routes]),
                ),
            ];
            Answer::Value(Node::Fields(fields.into_iter().collect()))
        };
        let q = Question {
            api: Api::GetProfile,
            ..get(None)
        };
        let a = Some(Side::A);
        let (k, b_is_meridian) =
            explain(&q, &profile(false, 0), &profile(true, 0), a).expect("known");
        assert_eq!(
            (k.id, b_is_meridian),
            ("original-forgets-opaque-ports", true)
        );
        // Without the original's side named (two Meridians may simply be
        // configured differently), or with Meridian saying false, it is a
        // real difference; so is one in anything else.
        assert!(explain(&q, &profile(false, 0), &profile(true, 0), None).is_none());
        assert!(explain(&q, &profile(true, 0), &profile(false, 0), a).is_none());
        assert!(explain(&q, &profile(false, 0), &profile(true, 1), a).is_none());
        // An endpoint's profile takes its opaque ports elsewhere.
        let endpoint = |opaque| {
            let Answer::Value(Node::Fields(mut fields)) = profile(opaque, 0) else {
                unreachable!()
            };
            fields.insert("endpoint".into(), Node::Fields(Default::default()));
            Answer::Value(Node::Fields(fields))
        };
        assert!(explain(&q, &endpoint(false), &endpoint(true), a).is_none());
    }

    /// Every bullet of the README's section is either a known difference
    /// or listed as one compare never sees, and nothing else is.
    #[test]
    fn the_readme_section_and_these_lists_agree() {
        let readme =
            std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../README.md"))
                .expect("README.md");
        let section = readme
            .split("\n## Where Meridian differs from Linkerd\n")
            .nth(1)
            .and_then(|rest| rest.split("\n## ").next())
            .expect("the README section");
        let bullets: BTreeSet<&str> = section
            .lines()
            .filter_map(|l| l.strip_prefix("- **"))
            .filter_map(|l| l.split_once("**").map(|(title, _)| title))
            .map(|t| t.strip_suffix(':').unwrap_or(t))
            .collect();
        let listed: BTreeSet<&str> = KNOWN
            .iter()
            .map(|k| k.readme)
            .chain(NOT_ASKED.iter().map(|(title, _)| *title))
            .collect();
        assert_eq!(bullets, listed);
    }
}
