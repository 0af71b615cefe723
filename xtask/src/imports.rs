//! `cargo xtask imports`: no import circle between the modules of any crate
//! of the workspace. Reads every `crates/*/*/src` file, takes the `crate::…`
//! and `super::…` paths outside comments and test code, and looks for
//! cycles (strongly connected components) among the files, and among each
//! crate's top-level modules. A file naming its own ancestor (a child using
//! what its parent `mod.rs` defines or re-exports) is not counted: the
//! parent declares the child, so that edge is the module tree itself.
//!
//! It also checks the floors of the two controllers ([`FLOORS`]): a
//! top-level module of a floor uses only its own floor and the floors above
//! it, never one below (`core` never uses `index`, `proto` never `grpc`).
//!
//! `cargo xtask test` runs it after the tests.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::Path,
};

use anyhow::{Context, bail};

use crate::paths::workspace_root;

/// A module by its path in the crate (`["index", "cluster"]`; the root is `[]`).
type ModPath = Vec<String>;

/// The floors of each controller crate, top to bottom, as its `lib.rs`
/// lists them. The modules beside them (runtime, admin, metrics, …) use
/// any floor and are not checked.
pub const FLOORS: &[(&str, &[&str])] = &[
    (
        "destination",
        &[
            "config",
            "core",
            "k8s",
            "proto",
            "index",
            "multicluster",
            "metrics",
            "grpc",
        ],
    ),
    (
        "policy-controller",
        &["core", "k8s", "index", "proto", "metrics", "grpc"],
    ),
];

pub fn run() -> anyhow::Result<()> {
    let mut circles = Vec::new();
    let mut upward_uses = Vec::new();
    let mut checked = 0;
    for src in crate_sources()? {
        let name = src
            .parent()
            .and_then(Path::file_name)
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let graph = file_graph(&src)?;
        checked += 1;
        for cycle in cycles(&graph) {
            circles.push(format!("{name}: files {}", join(&cycle)));
        }
        let top = top_level(&graph);
        for cycle in cycles(&top) {
            circles.push(format!("{name}: modules {}", join(&cycle)));
        }
        if let Some((_, floors)) = FLOORS.iter().find(|(krate, _)| *krate == name) {
            for (from, to) in upward(&top, floors) {
                upward_uses.push(format!("{name}: {from} uses {to}, a floor below it"));
            }
        }
    }
    if !circles.is_empty() || !upward_uses.is_empty() {
        bail!(
            "import circles or floors broken:\n  {}",
            [circles, upward_uses].concat().join("\n  ")
        );
    }
    println!(
        "imports: no circle in the modules of {checked} crates; the floors of {} hold",
        FLOORS.len()
    );
    Ok(())
}

/// The uses from a floor's module of a module on a floor below it.
fn upward(top: &BTreeMap<ModPath, BTreeSet<ModPath>>, floors: &[&str]) -> Vec<(String, String)> {
    let floor = |m: &ModPath| {
        m.first()
            .and_then(|name| floors.iter().position(|f| f == name))
    };
    let mut out = Vec::new();
    for (from, targets) in top {
        let Some(level) = floor(from) else { continue };
        for to in targets {
            if floor(to).is_some_and(|below| below > level) {
                out.push((from.join("::"), to.join("::")));
            }
        }
    }
    out
}

/// The `src/` of every crate: `crates/<group>/<crate>/src`.
fn crate_sources() -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    let crates = workspace_root().join("crates");
    for group in fs::read_dir(&crates).context("reading crates/")? {
        let group = group?.path();
        if !group.is_dir() {
            continue;
        }
        for entry in fs::read_dir(&group).with_context(|| format!("reading {group:?}"))? {
            let src = entry?.path().join("src");
            if src.is_dir() {
                out.push(src);
            }
        }
    }
    out.sort();
    Ok(out)
}

fn join(cycle: &[ModPath]) -> String {
    let names: Vec<String> = cycle
        .iter()
        .map(|m| {
            if m.is_empty() {
                "crate".into()
            } else {
                m.join("::")
            }
        })
        .collect();
    names.join(" <-> ")
}

/// Which modules each file's module uses (resolved to the files that exist).
fn file_graph(src: &Path) -> anyhow::Result<BTreeMap<ModPath, BTreeSet<ModPath>>> {
    let mut uses = BTreeMap::new();
    for file in rust_files(src)? {
        let Some(module) = module_path(src, &file) else {
            continue;
        };
        let text = fs::read_to_string(&file).with_context(|| format!("reading {file:?}"))?;
        uses.insert(module.clone(), used_paths(&module, &code_of(&text)));
    }
    Ok(resolve_uses(&uses))
}

/// Each module's uses resolved to the longest module that has a file,
/// without self-references and without uses of the module's own ancestors.
fn resolve_uses(
    uses: &BTreeMap<ModPath, BTreeSet<ModPath>>,
) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let files: BTreeSet<ModPath> = uses.keys().cloned().collect();
    let resolve = |path: &ModPath| -> Option<ModPath> {
        (0..=path.len())
            .rev()
            .map(|n| path[..n].to_vec())
            .find(|prefix| files.contains(prefix))
    };
    uses.iter()
        .map(|(module, paths)| {
            let targets = paths
                .iter()
                .filter_map(resolve)
                .filter(|target| target != module && !module.starts_with(target))
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

/// The same graph between a crate's top-level modules.
fn top_level(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> BTreeMap<ModPath, BTreeSet<ModPath>> {
    let mut top: BTreeMap<ModPath, BTreeSet<ModPath>> = BTreeMap::new();
    for (from, targets) in graph {
        let Some(from) = from.first() else { continue };
        for to in targets.iter().filter_map(|t| t.first()) {
            if to != from {
                top.entry(vec![from.clone()])
                    .or_default()
                    .insert(vec![to.clone()]);
            }
        }
    }
    top
}

fn rust_files(dir: &Path) -> anyhow::Result<Vec<std::path::PathBuf>> {
    let mut out = Vec::new();
    for entry in fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            out.extend(rust_files(&path)?);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    Ok(out)
}

/// A file's module path; `None` for binaries and test modules.
fn module_path(src: &Path, file: &Path) -> Option<ModPath> {
    let rel = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.first().is_some_and(|p| p == "bin") || parts.iter().any(|p| p == "tests") {
        return None;
    }
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || p == "main")
    {
        parts.pop();
    }
    Some(parts)
}

/// The code of a file without comments and without its test module (from
/// the first `#[cfg(test)]` on, which is where this workspace keeps them).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or_default();
    text.lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths named by `crate::…` and `super::…` (including the
/// members of `crate::{a, b::c}` groups), made absolute.
fn used_paths(module: &ModPath, code: &str) -> BTreeSet<ModPath> {
    let mut out = BTreeSet::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent(module))] {
        let mut rest = code;
        while let Some(at) = rest.find(prefix) {
            let preceded_by_ident = rest[..at]
                .chars()
                .next_back()
                .is_some_and(|c| c.is_alphanumeric() || c == '_');
            rest = &rest[at + prefix.len()..];
            if preceded_by_ident {
                continue;
            }
            if let Some(group) = rest.strip_prefix('{') {
                for member in group_members(group) {
                    if let Some(name) = ident(member.trim()) {
                        out.insert([base.clone(), vec![name]].concat());
                    }
                }
            } else if let Some(name) = ident(rest) {
                out.insert([base.clone(), vec![name]].concat());
            }
        }
    }
    out
}

/// The top-level members of a `{…}` use group (`group` starts after its
/// `{`): `core::{A, B}, index` is `core::{A, B}` and `index`.
fn group_members(group: &str) -> Vec<&str> {
    let mut members = Vec::new();
    let (mut depth, mut start) = (0usize, 0);
    for (i, c) in group.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                members.push(&group[start..i]);
                return members;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&group[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    members.push(&group[start..]);
    members
}

/// The module `super` names from `module` (a file's module path).
fn parent(module: &ModPath) -> ModPath {
    module[..module.len().saturating_sub(1)].to_vec()
}

fn ident(s: &str) -> Option<String> {
    let name: String = s
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty() && name.starts_with(|c: char| c.is_lowercase() || c == '_')).then_some(name)
}

/// Strongly connected components of more than one module (Tarjan).
fn cycles(graph: &BTreeMap<ModPath, BTreeSet<ModPath>>) -> Vec<Vec<ModPath>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<ModPath, BTreeSet<ModPath>>,
        index: BTreeMap<&'g ModPath, (usize, usize)>,
        stack: Vec<&'g ModPath>,
        next: usize,
        found: Vec<Vec<ModPath>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g ModPath) {
            self.index.insert(v, (self.next, self.next));
            self.next += 1;
            self.stack.push(v);
            for w in self.graph.get(v).into_iter().flatten() {
                match self.index.get(w).copied() {
                    None => {
                        self.visit(w);
                        let low_w = self.index[w].1;
                        let entry = self.index.get_mut(v).expect("visited");
                        entry.1 = entry.1.min(low_w);
                    }
                    Some((index_w, _)) if self.stack.contains(&w) => {
                        let entry = self.index.get_mut(v).expect("visited");
                        entry.1 = entry.1.min(index_w);
                    }
                    Some(_) => {}
                }
            }
            let (index_v, low_v) = self.index[v];
            if index_v == low_v {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    component.push(w.clone());
                    if w == v {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut tarjan = Tarjan {
        graph,
        index: BTreeMap::new(),
        stack: Vec::new(),
        next: 0,
        found: Vec::new(),
    };
    for v in graph.keys() {
        if !tarjan.index.contains_key(v) {
            tarjan.visit(v);
        }
    }
    tarjan.found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(path: &str) -> ModPath {
        path.split("::")
            .filter(|p| !p.is_empty())
            .map(String::from)
            .collect()
    }

    #[test]
    fn nested_groups_name_each_top_level_member() {
        let used = used_paths(&m("grpc"), "use crate::{core::{A, B}, index::X, proto};");
        assert_eq!(
            used,
            [m("core"), m("index"), m("proto")].into_iter().collect()
        );
    }

    #[test]
    fn a_use_of_a_floor_below_is_reported() {
        let floors = ["core", "k8s", "index", "grpc"];
        let top: BTreeMap<ModPath, BTreeSet<ModPath>> = [
            (m("k8s"), [m("core")].into_iter().collect()),
            (m("index"), [m("k8s"), m("grpc")].into_iter().collect()),
            (m("runtime"), [m("grpc"), m("index")].into_iter().collect()),
        ]
        .into_iter()
        .collect();
        assert_eq!(
            upward(&top, &floors),
            [("index".to_string(), "grpc".to_string())]
        );
    }

    #[test]
    fn paths_are_read_from_code_only() {
        let code = code_of(
            "//! see [`crate::proto`]\nuse crate::{core::A, k8s};\nuse super::cluster::X;\nfn f() { my_crate::x(); }\n#[cfg(test)]\nmod tests { use crate::grpc; }",
        );
        let used = used_paths(&m("index::endpoints"), &code);
        assert_eq!(
            used,
            [m("core"), m("k8s"), m("index::cluster")]
                .into_iter()
                .collect()
        );
    }

    #[test]
    fn a_circle_is_found_and_a_child_naming_its_parent_is_not_one() {
        let uses: BTreeMap<ModPath, BTreeSet<ModPath>> = [
            (m("index"), [m("index::cluster::ClusterState")].into()),
            (
                m("index::cluster"),
                [m("index::Touched"), m("k8s::pods")].into(),
            ),
            (m("k8s"), [m("core::endpoint")].into()),
            (m("core"), BTreeSet::new()),
        ]
        .into_iter()
        .collect();
        let graph = resolve_uses(&uses);
        assert_eq!(graph[&m("index::cluster")], [m("k8s")].into());
        assert!(cycles(&graph).is_empty());
        assert!(cycles(&top_level(&graph)).is_empty());
        let mut circular = uses.clone();
        circular.insert(m("core"), [m("index::cluster::Touched")].into());
        let graph = resolve_uses(&circular);
        assert_eq!(
            cycles(&graph),
            vec![vec![m("core"), m("index::cluster"), m("k8s")]]
        );
        assert_eq!(cycles(&top_level(&graph)).len(), 1);
    }
}
