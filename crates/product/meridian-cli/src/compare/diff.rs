//! Field-by-field differences between two answers: each leaf or subtree
//! present on one side only, or different on both, with its path
//! (`protocol.http1.routes[0].rules[1]`, `addrs[10.0.0.7:8080].weight`,
//! `labels["app"]`).

use super::tree::Node;

/// One difference: where, and what each side holds there (`None`: absent).
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    pub path: String,
    pub a: Option<Node>,
    pub b: Option<Node>,
}

/// Every difference between `a` and `b`, in path order.
pub fn diff(a: &Node, b: &Node) -> Vec<Difference> {
    let mut out = Vec::new();
    walk("", a, b, &mut out);
    out
}

fn walk(path: &str, a: &Node, b: &Node, out: &mut Vec<Difference>) {
    match (a, b) {
        (Node::Fields(x), Node::Fields(y)) => {
            keyed(x, y, |k| field_path(path, k), out);
        }
        (Node::Map(x), Node::Map(y)) => keyed(x, y, |k| format!("{path}[{k:?}]"), out),
        (Node::Set(x), Node::Set(y)) => keyed(x, y, |k| format!("{path}[{k}]"), out),
        (Node::List(x), Node::List(y)) => {
            for i in 0..x.len().max(y.len()) {
                let here = format!("{path}[{i}]");
                match (x.get(i), y.get(i)) {
                    (Some(p), Some(q)) => walk(&here, p, q, out),
                    (p, q) => out.push(Difference {
                        path: here,
                        a: p.cloned(),
                        b: q.cloned(),
                    }),
                }
            }
        }
        (p, q) if p == q => {}
        (p, q) => out.push(Difference {
            path: path.to_string(),
            a: Some(p.clone()),
            b: Some(q.clone()),
        }),
    }
}

fn field_path(path: &str, name: &str) -> String {
    if path.is_empty() {
        name.to_string()
    } else {
        format!("{path}.{name}")
    }
}

fn keyed(
    x: &std::collections::BTreeMap<String, Node>,
    y: &std::collections::BTreeMap<String, Node>,
    path: impl Fn(&str) -> String,
    out: &mut Vec<Difference>,
) {
    let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
    for k in keys {
        match (x.get(k), y.get(k)) {
            (Some(p), Some(q)) => walk(&path(k), p, q, out),
            (p, q) => out.push(Difference {
                path: path(k),
                a: p.cloned(),
                b: q.cloned(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn s(text: &str) -> Node {
        Node::Str(text.into())
    }

    #[test]
    fn equal_trees_have_no_difference() {
        let t = Node::fields(&[("a", Node::Bool(true)), ("b", Node::List(vec![s("x")]))]);
        assert!(diff(&t, &t.clone()).is_empty());
    }

    #[test]
    fn leaves_lists_maps_and_sets_name_their_paths() {
        let set = |keys: &[&str]| {
            Node::Set(
                keys.iter()
                    .map(|k| (k.to_string(), Node::fields(&[("weight", Node::Uint(1))])))
                    .collect(),
            )
        };
        let map = |v: &str| Node::Map(BTreeMap::from([("app".to_string(), s(v))]));
        let a = Node::fields(&[
            ("opaque_protocol", Node::Bool(true)),
            (
                "protocol",
                Node::fields(&[(
                    "http1",
                    Node::fields(&[("routes", Node::List(vec![s("r0"), s("r1")]))]),
                )]),
            ),
            ("addrs", set(&["10.0.0.1:80", "10.0.0.2:80"])),
            ("labels", map("web")),
        ]);
        let b = Node::fields(&[
            ("opaque_protocol", Node::Bool(false)),
            (
                "protocol",
                Node::fields(&[(
                    "http1",
                    Node::fields(&[("routes", Node::List(vec![s("r0")]))]),
                )]),
            ),
            ("addrs", set(&["10.0.0.1:80"])),
            ("labels", map("db")),
        ]);
        let got: Vec<(String, String, String)> = diff(&a, &b)
            .into_iter()
            .map(|d| {
                let show = |n: Option<Node>| n.map_or("(absent)".into(), |n| n.to_string());
                (d.path, show(d.a), show(d.b))
            })
            .collect();
        let want = [
            ("addrs[10.0.0.2:80]", "{weight: 1}", "(absent)"),
            ("labels[\"app\"]", "\"web\"", "\"db\""),
            ("opaque_protocol", "true", "false"),
            ("protocol.http1.routes[1]", "\"r1\"", "(absent)"),
        ];
        let want: Vec<(String, String, String)> = want
            .iter()
            .map(|(p, a, b)| (p.to_string(), a.to_string(), b.to_string()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_oneof_switch_is_one_difference_per_member() {
        let a = Node::fields(&[("protocol", Node::fields(&[("opaque", Node::fields(&[]))]))]);
        let b = Node::fields(&[(
            "protocol",
            Node::fields(&[("detect", Node::fields(&[("timeout", s("10s"))]))]),
        )]);
        let paths: Vec<String> = diff(&a, &b).into_iter().map(|d| d.path).collect();
        assert_eq!(paths, ["protocol.detect", "protocol.opaque"]);
    }

    #[test]
    fn different_kinds_at_the_root() {
        let d = diff(&s("x"), &Node::Uint(1));
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].path, "");
    }
}
