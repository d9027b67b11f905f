//! The shell's layer rule, checked on its source (no server needed): `src/shell/` is four
//! layers — `server` < `execution` < `features` < `commands` — and a file may name a module of
//! its own layer or of a layer below, never one above; and no modules import each other in a
//! circle. `src/shell/mod.rs` and `src/lib.rs` are the top (the module's entry points) and may
//! name any layer.
//!
//! An import is any path into the shell a file names outside comments: `crate::shell::…`
//! (also grouped, `crate::shell::{a::b, c::d}`), `super::…` and `super::super::…`. Each edge
//! is between modules (`features::wait`), one per file.
//!
//! [`ALLOWED`] lists the edges that still break the rule, each with what removes it; the test
//! also fails when a listed edge no longer exists, so the list only shrinks.
//!
//! Also: no layer above the server has `unsafe` code or raw `RedisModule_*` calls, and the
//! features name no raw bindings at all.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layers, lowest first.
const LAYERS: [&str; 4] = ["server", "execution", "features", "commands"];

/// Edges that break the rule (an import upward, or an edge that closes a circle), as
/// `(from, to)` modules, each with what removes it; empty: the shell reads one way.
const ALLOWED: &[(&str, &str)] = &[];

type Module = String;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The rank of a module's layer (`server::api` → 0); the top (`shell`) ranks above them all.
fn rank(module: &str) -> usize {
    let layer = module.split("::").next().unwrap_or("");
    LAYERS.iter().position(|l| *l == layer).unwrap_or(LAYERS.len())
}

/// The source without comments (line comments, doc comments and block comments), so that
/// prose naming a module is not an import. String literals are kept: the shell's hold no paths.
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while !rest.is_empty() {
        if rest.starts_with("//") {
            let end = rest.find('\n').unwrap_or(rest.len());
            rest = &rest[end..];
        } else if rest.starts_with("/*") {
            let end = rest.find("*/").map_or(rest.len(), |e| e + 2);
            rest = &rest[end..];
        } else {
            let c = rest.chars().next().unwrap_or(' ');
            out.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    out
}

/// Splits `a::b, c::{d, e}, f` at its top-level commas.
fn split_group(body: &str) -> Vec<&str> {
    let (mut parts, mut depth, mut start) = (Vec::new(), 0, 0);
    for (i, c) in body.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&body[start..]);
    parts
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first two segments of a path (`server::api::Api` → `server::api`), or one when the
/// path names a layer only.
fn module_of(path: &str) -> Option<Module> {
    let segments: Vec<&str> = path
        .split("::")
        .map(str::trim)
        .take_while(|s| !s.is_empty() && s.chars().all(is_ident))
        .collect();
    match segments.as_slice() {
        [] => None,
        [layer] => Some((*layer).to_string()),
        [layer, module, ..] => Some(format!("{layer}::{module}")),
    }
}

/// The length of the `{…}` group `text` starts with, braces included.
fn group_end(text: &str) -> usize {
    let mut depth = 0;
    for (i, c) in text.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
    }
    text.len()
}

/// The paths a `use` tree names: `{a::b, c::{d, e}}` → `a::b`, `c::d`, `c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    match tree.find('{') {
        None => vec![tree.to_string()],
        Some(open) => {
            let (head, group) = tree.split_at(open);
            let body = &group[1..group_end(group) - 1];
            split_group(body)
                .into_iter()
                .flat_map(expand)
                .map(|p| {
                    if p == "self" {
                        head.trim_end_matches("::").to_string()
                    } else {
                        format!("{head}{p}")
                    }
                })
                .collect()
        }
    }
}

/// Every shell module a source text names, given the module path of `super` and of
/// `super::super` for that file (`None` where they are not inside the shell).
fn imports(text: &str, parent: &str, grandparent: Option<&str>) -> BTreeSet<Module> {
    let code = strip_comments(text);
    let mut found = BTreeSet::new();
    let mut prefixes = vec![("crate::shell::".to_string(), String::new())];
    if let Some(gp) = grandparent {
        prefixes.push(("super::super::".to_string(), gp.to_string()));
    }
    prefixes.push(("super::".to_string(), parent.to_string()));
    for (prefix, base) in &prefixes {
        let mut from = 0;
        while let Some(at) = code[from..].find(prefix.as_str()) {
            let start = from + at;
            from = start + prefix.len();
            let before = code[..start].chars().next_back();
            if before.is_some_and(|c| is_ident(c) || c == ':') {
                continue; // part of a longer path (`super::super::` seen as `super::`)
            }
            let rest = &code[from..];
            if prefix == "super::" && rest.starts_with("super::") {
                continue; // `super::super::`, seen by its own prefix
            }
            let paths = if rest.starts_with('{') {
                expand(&rest[..group_end(rest)])
            } else {
                let end = rest.find(|c: char| !(is_ident(c) || c == ':')).unwrap_or(rest.len());
                vec![rest[..end].to_string()]
            };
            for path in paths {
                let path = path.trim();
                if path.is_empty() || path == "self" || path == "*" {
                    continue;
                }
                let full =
                    if base.is_empty() { path.to_string() } else { format!("{base}::{path}") };
                if let Some(module) = module_of(&full) {
                    found.insert(module);
                }
            }
        }
    }
    found
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).expect("read_dir") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            files.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    files
}

/// The module a shell file is (`src/shell/features/wait.rs` → `features::wait`;
/// `src/shell/features/mod.rs` → `features`; `src/shell/mod.rs` → `shell`).
fn module_of_file(shell: &Path, file: &Path) -> Module {
    let relative = file.strip_prefix(shell).expect("under src/shell");
    let mut parts: Vec<String> =
        relative.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.is_empty() {
        "shell".to_string()
    } else {
        parts.join("::")
    }
}

/// The import graph of the shell: module → the modules it names (itself excluded).
fn graph() -> BTreeMap<Module, BTreeSet<Module>> {
    let shell = root().join("src/shell");
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for file in rust_files(&shell) {
        let module = module_of_file(&shell, &file);
        let is_mod_rs = file.file_name().is_some_and(|n| n == "mod.rs");
        // `super` of `a::b` (a file `a/b.rs`) is `a`; of `a/mod.rs` it is the shell.
        let segments: Vec<&str> = module.split("::").collect();
        let parent_depth =
            if is_mod_rs { segments.len().saturating_sub(1) } else { segments.len() - 1 };
        let parent =
            if module == "shell" { String::new() } else { segments[..parent_depth].join("::") };
        let grandparent = (parent_depth >= 1).then(|| segments[..parent_depth - 1].join("::"));
        let text = std::fs::read_to_string(&file).expect("read");
        let named = imports(&text, &parent, grandparent.as_deref());
        let entry = edges.entry(module.clone()).or_default();
        for to in named {
            // A module naming its own child (a layer's `mod.rs`) or itself is no edge.
            if to != module && !to.starts_with(&format!("{module}::")) && to.contains("::") {
                entry.insert(to);
            }
        }
    }
    edges
}

/// Upward imports: from a lower layer to a higher one.
fn upward(edges: &BTreeMap<Module, BTreeSet<Module>>) -> BTreeSet<(Module, Module)> {
    let mut found = BTreeSet::new();
    for (from, tos) in edges {
        for to in tos {
            if rank(to) > rank(from) {
                found.insert((from.clone(), to.clone()));
            }
        }
    }
    found
}

/// The circles of a graph: its strongly connected components of more than one module
/// (Tarjan's algorithm), each sorted.
fn circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<Module, BTreeSet<Module>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<Module>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let i = w.index.len();
        w.index.insert(v, i);
        w.low.insert(v, i);
        w.stack.push(v);
        w.on_stack.insert(v);
        if let Some(tos) = w.edges.get(v) {
            for to in tos {
                let to = to.as_str();
                if !w.index.contains_key(to) {
                    visit(w, to);
                    let low = w.low[v].min(w.low[to]);
                    w.low.insert(v, low);
                } else if w.on_stack.contains(to) {
                    let low = w.low[v].min(w.index[to]);
                    w.low.insert(v, low);
                }
            }
        }
        if w.low[v] == w.index[v] {
            let mut component = Vec::new();
            while let Some(top) = w.stack.pop() {
                w.on_stack.remove(top);
                component.push(top.to_string());
                if top == v {
                    break;
                }
            }
            if component.len() > 1 {
                component.sort();
                w.found.push(component);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    let nodes: BTreeSet<&str> = edges
        .iter()
        .flat_map(|(from, tos)| {
            std::iter::once(from.as_str()).chain(tos.iter().map(String::as_str))
        })
        .collect();
    for v in nodes {
        if !w.index.contains_key(v) {
            visit(&mut w, v);
        }
    }
    w.found
}

fn without_allowed(
    edges: &BTreeMap<Module, BTreeSet<Module>>,
) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut kept = edges.clone();
    for (from, to) in ALLOWED {
        if let Some(tos) = kept.get_mut(*from) {
            tos.remove(*to);
        }
    }
    kept
}

#[test]
fn no_layer_imports_a_layer_above_it() {
    let edges = without_allowed(&graph());
    let up = upward(&edges);
    assert!(up.is_empty(), "imports from a lower layer to a higher one: {up:#?}");
}

#[test]
fn no_modules_import_each_other_in_a_circle() {
    let edges = without_allowed(&graph());
    let found = circles(&edges);
    assert!(found.is_empty(), "import circles in src/shell: {found:#?}");
}

#[test]
fn every_allowed_edge_still_exists() {
    let edges = graph();
    for (from, to) in ALLOWED {
        assert!(
            edges.get(*from).is_some_and(|tos| tos.contains(*to)),
            "{from} no longer imports {to}: remove the edge from ALLOWED"
        );
    }
}

#[test]
fn the_graph_has_every_layer() {
    let edges = graph();
    for layer in LAYERS {
        assert!(
            edges.keys().any(|m| m.starts_with(&format!("{layer}::"))),
            "no module in src/shell/{layer}/: {:?}",
            edges.keys().collect::<Vec<_>>()
        );
    }
    // The command table reaches down to the call; the checker sees grouped and inline paths.
    assert!(edges["commands::table"].contains("execution::call"), "{:?}", edges["commands::table"]);
}

#[test]
fn the_checker_finds_upward_imports_grouped_paths_and_circles() {
    let text = "use crate::shell::{features::wait, server::{api::Api, reply}};\n\
                // crate::shell::commands::table in a comment is no import\n\
                fn f() { super::call::apply(); super::super::commands::table::x(); }";
    let found = imports(text, "execution", Some(""));
    let expected: BTreeSet<Module> =
        ["features::wait", "server::api", "server::reply", "execution::call", "commands::table"]
            .into_iter()
            .map(String::from)
            .collect();
    assert_eq!(found, expected);

    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    edges.entry("server::key".into()).or_default().insert("execution::call".into());
    edges.entry("execution::call".into()).or_default().insert("server::key".into());
    edges.entry("features::top".into()).or_default().insert("server::reply".into());
    let up: Vec<_> = upward(&edges).into_iter().collect();
    assert_eq!(up, [("server::key".to_string(), "execution::call".to_string())]);
    assert_eq!(circles(&edges), [vec!["execution::call".to_string(), "server::key".to_string()]]);
}

/// The layers above the server reach it only through safe wrappers (`server::reply`, `Api`,
/// `Call`, `server::events`, `server::propagation`, …): no `unsafe` (comments aside), nor raw
/// `RedisModule_*` calls, in `src/shell/execution/`, `features/`, `commands/`, `mod.rs` and
/// `info.rs`.
#[test]
fn only_the_server_layer_has_unsafe_code() {
    let shell = root().join("src/shell");
    let mut files = vec![shell.join("mod.rs"), shell.join("info.rs")];
    for layer in ["execution", "features", "commands"] {
        files.extend(rust_files(&shell.join(layer)));
    }
    for file in files {
        let code = strip_comments(&std::fs::read_to_string(&file).expect("read"));
        for word in ["unsafe", "RedisModule_"] {
            assert!(!code.contains(word), "{} uses `{word}`", file.display());
        }
    }
}

/// The features reach the server only through the server layer's safe types (the waiting
/// room through `server::blocking`/`timers`/`keyspace`, the policy table's storage through
/// `server::snapshot`/`rdb`): no `unsafe` in `src/shell/features/` (comments aside), no raw
/// bindings (`raw::`), no `RedisModule` names.
#[test]
fn the_features_have_no_ffi() {
    let features = root().join("src/shell/features");
    for file in rust_files(&features) {
        let code = strip_comments(&std::fs::read_to_string(&file).expect("read"));
        for word in ["unsafe", "raw::", "RedisModule"] {
            assert!(!code.contains(word), "{} uses `{word}`", file.display());
        }
    }
}
