//! The crate's modules depend on each other without a cycle: each top-level module of `src/`
//! names the others it uses (`crate::name`), tests excluded, and the graph must be acyclic,
//! so every module can be read, tested and changed on top of the ones below it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// The top-level module a source file belongs to (`src/report/csv.rs` -> `report`).
fn module_of(rel: &Path) -> Option<String> {
    let first = rel.components().next()?.as_os_str().to_str()?;
    let name = first.strip_suffix(".rs").unwrap_or(first);
    (!matches!(name, "lib" | "main")).then(|| name.to_string())
}

/// The modules a source text names as `crate::x` or in `crate::{x, y}`, outside its tests (a
/// file that is a test module whole, `#![cfg(test)]`, names none).
fn uses(text: &str) -> BTreeSet<String> {
    if text.contains("#![cfg(test)]") {
        return BTreeSet::new();
    }
    let code = text.split("#[cfg(test)]").next().unwrap_or(text);
    let mut found = BTreeSet::new();
    for (i, _) in code.match_indices("crate::") {
        let rest = &code[i + "crate::".len()..];
        let names: Vec<&str> = match rest.strip_prefix('{') {
            Some(group) => group.split('}').next().unwrap_or("").split(',').collect(),
            None => vec![rest],
        };
        for name in names {
            let ident: String = name
                .trim()
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !ident.is_empty() {
                found.insert(ident);
            }
        }
    }
    found
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let Some(module) = module_of(entry.path().strip_prefix(&src).unwrap()) else {
            continue;
        };
        let text = std::fs::read_to_string(entry.path()).unwrap();
        let deps = graph.entry(module.clone()).or_default();
        deps.extend(uses(&text).into_iter().filter(|d| *d != module));
    }
    graph
}

/// A cycle through `node`, as the path that closes it, if there is one.
fn cycle(
    graph: &BTreeMap<String, BTreeSet<String>>,
    node: &str,
    path: &mut Vec<String>,
    done: &mut BTreeSet<String>,
) -> Option<Vec<String>> {
    if let Some(at) = path.iter().position(|n| n == node) {
        let mut found = path[at..].to_vec();
        found.push(node.to_string());
        return Some(found);
    }
    if done.contains(node) {
        return None;
    }
    path.push(node.to_string());
    for next in graph.get(node).into_iter().flatten() {
        if let Some(found) = cycle(graph, next, path, done) {
            return Some(found);
        }
    }
    path.pop();
    done.insert(node.to_string());
    None
}

#[test]
fn modules_form_no_cycle() {
    let graph = graph();
    assert!(graph.contains_key("pipeline") && graph["pipeline"].contains("timing"));
    let mut done = BTreeSet::new();
    for node in graph.keys() {
        if let Some(found) = cycle(&graph, node, &mut Vec::new(), &mut done) {
            panic!("module cycle: {}", found.join(" -> "));
        }
    }
}

#[test]
fn the_reader_sees_uses_and_groups_but_not_tests() {
    let text = "use crate::record::X;\nuse crate::{stats, task::Task};\n#[cfg(test)]\nmod tests { use crate::gate; }";
    let found: Vec<String> = uses(text).into_iter().collect();
    assert_eq!(found, ["record", "stats", "task"]);
    assert!(uses(&format!("#![cfg(test)]\n{text}")).is_empty());
}

#[test]
fn a_cycle_is_found_and_named() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in [("a", "b"), ("b", "c"), ("c", "a"), ("d", "a")] {
        graph.entry(from.into()).or_default().insert(to.into());
    }
    let found = cycle(&graph, "d", &mut Vec::new(), &mut BTreeSet::new()).unwrap();
    assert_eq!(found, ["a", "b", "c", "a"]);
    graph.get_mut("c").unwrap().clear();
    assert!(cycle(&graph, "d", &mut Vec::new(), &mut BTreeSet::new()).is_none());
}
