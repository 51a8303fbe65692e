//! The crate's modules depend on each other without a cycle: each top-level module of `src/`
//! names the others it uses (`crate::name`), tests excluded, and the graph must be acyclic,
//! so every module can be read, tested and changed on top of the ones below it. The same holds
//! inside every folder: between its own file (`mod.rs`, or `name.rs` beside `name/`) and its
//! children, and between sibling children, by the paths they name (`super::`, `crate::`, a
//! child's bare name in the folder's own file). And every `mod.rs` declares and re-exports only.

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

/// A module's path in the crate from its file (`src/report/csv.rs` -> `report::csv`,
/// `src/timing/mod.rs` -> `timing`); None for the crate's root files.
fn module_path(rel: &Path) -> Option<Vec<String>> {
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let last = parts.pop()?;
    let stem = last.strip_suffix(".rs")?;
    let root = parts.is_empty() && matches!(stem, "lib" | "main");
    if stem != "mod" {
        parts.push(stem.to_string());
    }
    (!root && !parts.is_empty()).then_some(parts)
}

/// The paths a `use` tree names, from the text just after its first `::` (`a::{b, c::D}` ->
/// `a::b`, `a::c::D`); `*` names the module itself.
fn use_tree(text: &str) -> (Vec<Vec<String>>, usize) {
    let mut at = 0;
    let bytes: Vec<char> = text.chars().collect();
    let mut prefix: Vec<String> = Vec::new();
    loop {
        while at < bytes.len() && bytes[at].is_whitespace() {
            at += 1;
        }
        if at < bytes.len() && bytes[at] == '{' {
            at += 1;
            let mut all = Vec::new();
            loop {
                let rest: String = bytes[at..].iter().collect();
                let (paths, used) = use_tree(&rest);
                at += used;
                all.extend(paths.into_iter().map(|p| [prefix.clone(), p].concat()));
                while at < bytes.len() && bytes[at].is_whitespace() {
                    at += 1;
                }
                match bytes.get(at) {
                    Some(',') => at += 1,
                    Some('}') => return (all, at + 1),
                    _ => return (all, at),
                }
                while at < bytes.len() && bytes[at].is_whitespace() {
                    at += 1;
                }
                if bytes.get(at) == Some(&'}') {
                    return (all, at + 1);
                }
            }
        }
        let ident: String = bytes[at..]
            .iter()
            .take_while(|c| c.is_ascii_alphanumeric() || **c == '_' || **c == '*')
            .collect();
        at += ident.chars().count();
        if !ident.is_empty() && ident != "*" && ident != "self" {
            prefix.push(ident);
        }
        if bytes.get(at) == Some(&':') && bytes.get(at + 1) == Some(&':') {
            at += 2;
            continue;
        }
        return (vec![prefix], at);
    }
}

/// The absolute paths (from the crate's root) that the code of module `me` names through
/// `crate::`, `super::` or, where `me` has children (`children`), a child's bare name.
fn named(code: &str, me: &[String], children: &BTreeSet<String>) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let chars: Vec<(usize, char)> = code.char_indices().collect();
    for (n, &(i, _)) in chars.iter().enumerate() {
        let before = n.checked_sub(1).map(|b| chars[b].1);
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[i..];
        let (base, after) = if let Some(after) = rest.strip_prefix("crate::") {
            (Vec::new(), after)
        } else if rest.starts_with("super::") {
            let mut base = me.to_vec();
            let mut after = rest;
            while let Some(a) = after.strip_prefix("super::") {
                base.pop();
                after = a;
            }
            (base, after)
        } else {
            let ident: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            if !children.contains(&ident) || !rest[ident.len()..].starts_with("::") {
                continue;
            }
            (me.to_vec(), rest)
        };
        for path in use_tree(after).0 {
            found.push([base.clone(), path].concat());
        }
    }
    found
}

/// Per folder of `src/` (a module with children), the graph over its own file (`mod`) and its
/// children: which uses which, where a use of anything inside a child counts as the child's,
/// and a use of an item of the folder's own file as `mod`'s. Tests are left out as `uses`
/// leaves them out, and so are test modules declared in a file of their own (`mod tests;`).
fn folder_graphs() -> BTreeMap<String, BTreeMap<String, BTreeSet<String>>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut modules: BTreeMap<Vec<String>, String> = BTreeMap::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        if entry.path().extension().is_none_or(|e| e != "rs") {
            continue;
        }
        let rel = entry.path().strip_prefix(&src).unwrap();
        if let Some(path) = module_path(rel) {
            modules.insert(path, std::fs::read_to_string(entry.path()).unwrap());
        }
    }
    let children = |of: &[String]| -> BTreeSet<String> {
        modules
            .keys()
            .filter(|k| k.len() == of.len() + 1 && k.starts_with(of))
            .map(|k| k[of.len()].clone())
            .collect()
    };
    let test_only = |path: &[String]| -> bool {
        (1..path.len()).any(|depth| {
            let parent = modules.get(&path[..depth]).map_or("", String::as_str);
            let name = &path[depth];
            ["mod", "pub mod", "pub(crate) mod", "pub(super) mod"]
                .iter()
                .any(|m| parent.contains(&format!("#[cfg(test)]\n{m} {name};")))
        })
    };
    let mut graphs: BTreeMap<String, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for (me, text) in &modules {
        if text.contains("#![cfg(test)]") || test_only(me) {
            continue;
        }
        let code = without_tests(text);
        for target in named(&code, me, &children(me)) {
            // Every folder that holds both `me` and `target`, from the outermost.
            for depth in 1..=me.len().min(target.len()) {
                let folder = &me[..depth];
                if !target.starts_with(folder) || children(folder).is_empty() {
                    continue;
                }
                let node = |path: &[String]| match path.get(depth) {
                    Some(child) if children(folder).contains(child) => child.clone(),
                    _ => "mod".to_string(),
                };
                let (from, to) = (node(me), node(&target));
                if from != to {
                    graphs
                        .entry(folder.join("::"))
                        .or_default()
                        .entry(from)
                        .or_default()
                        .insert(to);
                }
            }
        }
    }
    graphs
}

/// A module's code without its tests: test modules declared in files of their own
/// (`#[cfg(test)] mod tests;`) dropped, and everything from the first other `#[cfg(test)]` on.
fn without_tests(text: &str) -> String {
    let mut kept = Vec::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let declares = |next: &str| {
            let next = next.trim();
            next.contains("mod ") && next.ends_with(';')
        };
        if line.trim() == "#[cfg(test)]" && lines.peek().is_some_and(|next| declares(next)) {
            lines.next();
            continue;
        }
        kept.push(line);
    }
    let code = kept.join("\n");
    code.split("#[cfg(test)]")
        .next()
        .unwrap_or(&code)
        .to_string()
}

#[test]
fn folders_form_no_cycle() {
    let graphs = folder_graphs();
    assert!(graphs.contains_key("pipeline") && graphs.contains_key("timing"));
    let mut cycles = Vec::new();
    for (folder, graph) in &graphs {
        let mut done = BTreeSet::new();
        for node in graph.keys() {
            if let Some(found) = cycle(graph, node, &mut Vec::new(), &mut done) {
                cycles.push(format!("{folder}: {}", found.join(" -> ")));
                break;
            }
        }
    }
    assert!(
        cycles.is_empty(),
        "cycles inside folders:\n{}",
        cycles.join("\n")
    );
}

#[test]
fn a_folder_reader_resolves_super_groups_and_children() {
    let me = ["a".to_string(), "b".to_string()];
    let found = named(
        "use super::{c::X, Y};\nuse crate::d::{self, e::Z};\nfn f() { super::super::g::h(); }",
        &me,
        &BTreeSet::new(),
    );
    let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["a::c::X", "a::Y", "d", "d::e::Z", "g::h"]);
    let kids = ["k".to_string()].into();
    let found = named("pub use k::K;\nfn f() { kk::x(); k::y(); }", &me, &kids);
    let found: Vec<String> = found.iter().map(|p| p.join("::")).collect();
    assert_eq!(found, ["a::b::k::K", "a::b::k::y"]);
}

/// What a `mod.rs` holds besides declarations and re-exports (comments and attributes aside):
/// each statement that is not `mod`/`use`, with any visibility, shortened.
fn not_declarations(text: &str) -> Vec<String> {
    let code: String = text
        .lines()
        .filter(|line| !line.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut rest = code.as_str();
    let mut bare = String::new();
    while let Some(i) = rest.find('#') {
        bare.push_str(&rest[..i]);
        let after = &rest[i..];
        rest = after.find(']').map_or("", |end| &after[end + 1..]);
    }
    bare.push_str(rest);
    bare.split(';')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .filter(|s| {
            let s = s.strip_prefix("pub").map_or(*s, |v| {
                v.trim_start()
                    .strip_prefix('(')
                    .and_then(|v| v.split_once(')'))
                    .map_or(v, |(_, v)| v)
                    .trim_start()
            });
            !(s.starts_with("mod ") || s.starts_with("use "))
        })
        .map(|s| s.chars().take(60).collect())
        .collect()
}

/// The design's rule: a folder's `mod.rs` declares its children and re-exports, and holds no
/// code of its own (the code lives in files named for what it does).
#[test]
fn every_mod_rs_declares_and_reexports_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut found = Vec::new();
    for entry in walkdir::WalkDir::new(&src) {
        let entry = entry.unwrap();
        if entry.file_name() == "mod.rs" {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            for statement in not_declarations(&text) {
                found.push(format!("{}: {statement}", entry.path().display()));
            }
        }
    }
    assert!(
        found.is_empty(),
        "mod.rs with code of its own:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_declaration_reader_passes_declarations_and_names_code() {
    let text =
        "//! doc; with a semicolon\n#![allow(x)]\npub mod a;\nmod b;\n#[cfg(test)]\nmod tests;\n\
                pub(crate) use a::{X, Y};\npub use b::*;\nconst N: usize = 4;\npub fn f() {}\n";
    assert_eq!(
        not_declarations(text),
        ["const N: usize = 4", "pub fn f() {}"]
    );
}
