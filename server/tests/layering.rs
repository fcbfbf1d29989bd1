//! The dependency order of docs/architecture.md ("The dependency order") and lib.rs, checked on the sources: each
//! module of the library names only the modules below it (node → book → state → ingest / publish → ws, with audit
//! and config beside them), so no stage reaches back up the pipeline; no two files of one module import each other
//! (directly or round a circle); and the state module keeps its locks private.

use std::path::{Path, PathBuf};

/// Per top-level module: the other top-level modules it may name (`crate::X`). A `X::Y` entry allows only that
/// submodule. Tests next to the code (`*tests.rs`, `mod tests`) are held to the same rule.
const ALLOWED: &[(&str, &[&str])] = &[
    ("node", &[]),
    ("config", &["node"]),
    ("book", &["node"]),
    // The state owns what ingest and the rest share (health, the source board), so it names nothing of ingest.
    ("state", &["node", "book"]),
    ("audit", &["node", "state"]),
    // Settings come before the stages in the order; ingest reads its `[nats]` section and its sources (parsed and
    // resolved against the settings: `config::Source`) from there.
    ("ingest", &["node", "book", "state", "config::NatsConfig", "config::NatsTarget", "config::Source"]),
    // The history store sits between the state it is fed from and the publisher that feeds and reads it.
    ("store", &["node", "state"]),
    ("publish", &["node", "book", "state", "audit", "store"]),
    // The simulator checks its own output with the replay engine.
    ("sim", &["node", "book", "ingest::replay"]),
    ("ws", &["node", "book", "state", "ingest", "publish", "audit", "config", "store"]),
];

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    if dir.is_file() {
        out.push(dir.to_path_buf());
        return;
    }
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// Every `crate::a::b` path in `text` (comments included: a doc link up the pipeline is a dependency too), as
/// (`a`, `a::b`).
fn crate_paths(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        if text[..i].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue; // e.g. `hlbook_crate::`
        }
        let rest = &text[i + "crate::".len()..];
        let ident = |s: &str| s.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap_or("").to_string();
        let top = ident(rest);
        let sub = rest[top.len()..].strip_prefix("::").map(ident).unwrap_or_default();
        out.push((top.clone(), format!("{top}::{sub}")));
    }
    out
}

#[test]
fn modules_import_only_downstream_layers() {
    let mut broken = Vec::new();
    for (module, allowed) in ALLOWED {
        let mut files = Vec::new();
        let dir = src().join(module);
        let root = if dir.is_dir() { dir } else { src().join(format!("{module}.rs")) };
        rust_files(&root, &mut files);
        assert!(!files.is_empty(), "no sources for {module}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for (top, path) in crate_paths(&text) {
                let ok = top == *module || allowed.iter().any(|a| *a == top || *a == path);
                if !ok {
                    broken.push(format!("{}: crate::{path}", f.strip_prefix(src()).unwrap().display()));
                }
            }
        }
    }
    broken.sort();
    broken.dedup();
    assert!(broken.is_empty(), "imports up the pipeline (see docs/architecture.md):\n{}", broken.join("\n"));
}

#[test]
fn the_state_imports_nothing_from_ingest() {
    // Ingest writes into the state; a path back would make the two one module in all but name.
    let mut files = Vec::new();
    rust_files(&src().join("state"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        let ingest: Vec<_> = crate_paths(&text).into_iter().filter(|(top, _)| top == "ingest").collect();
        assert!(ingest.is_empty(), "{} names ingest: {ingest:?}", f.display());
    }
}

#[test]
fn the_rule_catches_an_upward_import() {
    let found = crate_paths("use crate::ws::WsContext;\n/// see [`crate::publish::Hub`]\nlet x = mycrate::ws;");
    assert_eq!(found, [("ws".into(), "ws::WsContext".into()), ("publish".into(), "publish::Hub".into())]);
}

#[test]
fn the_state_keeps_its_locks_private() {
    let mut files = Vec::new();
    rust_files(&src().join("state"), &mut files);
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for line in text.lines().map(str::trim) {
            let public_field = line.starts_with("pub ") && !line.starts_with("pub fn") && line.contains(": ");
            let lock = ["Mutex<", "RwLock<", "Condvar", "Atomic"].iter().any(|l| line.contains(l));
            assert!(!(public_field && lock), "{}: a public lock field: {line}", f.display());
        }
    }
}

/// The fields of `struct NAME` in `file` that are `pub` (not `pub(super)`/`pub(crate)`).
fn public_fields(file: &Path, name: &str) -> Vec<String> {
    shared_fields(file, name).into_iter().filter(|l| l.starts_with("pub ")).collect()
}

/// The fields of `struct NAME` in `file` visible outside its file in any way (`pub`, `pub(super)`, `pub(crate)`).
fn shared_fields(file: &Path, name: &str) -> Vec<String> {
    let text = std::fs::read_to_string(file).unwrap();
    let start =
        text.find(&format!("pub struct {name} {{")).unwrap_or_else(|| panic!("no struct {name} in {}", file.display()));
    let body = &text[start..start + text[start..].find("\n}").unwrap()];
    body.lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| (l.starts_with("pub ") || l.starts_with("pub(")) && l.contains(": "))
        .map(str::to_string)
        .collect()
}

#[test]
fn hub_and_ws_context_keep_every_field_to_themselves() {
    // The pass, the workers and the ws modules call methods: each part's state stays behind them (#45).
    for (file, name) in [("publish/hub.rs", "Hub"), ("ws/context.rs", "WsContext")] {
        let open = shared_fields(&src().join(file), name);
        assert!(open.is_empty(), "{name} shares fields: {open:?}");
    }
}

#[test]
fn hub_and_state_have_no_public_fields() {
    // Other stages talk to them through methods: what they hold and how they lock it can change behind those.
    for (file, name) in [("publish/hub.rs", "Hub"), ("state/mod.rs", "Shared")] {
        let open = public_fields(&src().join(file), name);
        assert!(open.is_empty(), "{name} has public fields: {open:?}");
    }
}

/// A module's path from its file: `publish/candles/keeper.rs` → `publish::candles::keeper`, `x/mod.rs` → `x`.
fn module_of(file: &Path) -> String {
    let rel = file.strip_prefix(src()).unwrap().with_extension("");
    let mut parts: Vec<String> = rel.iter().map(|p| p.to_string_lossy().into_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// `text` without its `#[cfg(test)] mod tests { .. }` (at the file's end by our style): test code may reach
/// anywhere in its layer.
fn without_tests(text: &str) -> &str {
    text.find("#[cfg(test)]\nmod tests").map_or(text, |i| &text[..i])
}

/// Every module path `text` names relative to `module` (`super::`, `self::`, `crate::`), groups (`{a, b::C}`)
/// spread out, as full paths such as `publish::hub::Hub`.
fn named_paths(module: &str, is_mod_rs: bool, text: &str) -> Vec<String> {
    let ident = |c: char| c.is_alphanumeric() || c == '_';
    let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
    let mut out = Vec::new();
    for (prefix, base) in [("crate::", String::new()), ("super::", parent.to_string()), ("self::", module.to_string())]
    {
        for (i, _) in text.match_indices(prefix) {
            if text[..i].ends_with(ident) || (prefix == "self::" && !is_mod_rs) {
                continue;
            }
            let rest = &text[i + prefix.len()..];
            let len = rest.find(|c: char| !(ident(c) || c == ':')).unwrap_or(rest.len());
            let head = rest[..len].trim_end_matches(':');
            let join = |tail: &str| {
                [base.as_str(), tail].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("::")
            };
            if (rest[len..].starts_with('{') && rest[..len].ends_with("::")) || (len == 0 && rest.starts_with('{')) {
                let group = &rest[len + 1..rest[len..].find('}').map_or(rest.len(), |e| len + e)];
                for item in group.split(',').map(str::trim).filter(|s| !s.is_empty()) {
                    let item = item.split_whitespace().next().unwrap_or("");
                    out.push(join(
                        &[head, item].iter().filter(|s| !s.is_empty()).copied().collect::<Vec<_>>().join("::"),
                    ));
                }
            } else {
                out.push(join(head));
            }
        }
    }
    out
}

/// The file-level imports inside one layer: module → the modules of the same layer it names. A `mod.rs` naming
/// its own submodules declares them, so that is not counted.
fn layer_graph(layer: &str) -> std::collections::BTreeMap<String, std::collections::BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(&src().join(layer), &mut files);
    files.retain(|f| !f.to_string_lossy().ends_with("tests.rs"));
    let modules: std::collections::BTreeSet<String> = files.iter().map(|f| module_of(f)).collect();
    let mut graph = std::collections::BTreeMap::new();
    for f in &files {
        let module = module_of(f);
        let is_mod_rs = f.file_name().is_some_and(|n| n == "mod.rs");
        let text = std::fs::read_to_string(f).unwrap();
        let mut to = std::collections::BTreeSet::new();
        for path in named_paths(&module, is_mod_rs, without_tests(&text)) {
            let parts: Vec<&str> = path.split("::").collect();
            let Some(target) = (1..=parts.len()).rev().map(|n| parts[..n].join("::")).find(|m| modules.contains(m))
            else {
                continue;
            };
            let inside = is_mod_rs && target.starts_with(&format!("{module}::"));
            if target != module && !inside {
                to.insert(target);
            }
        }
        graph.insert(module, to);
    }
    graph
}

/// The circles of `graph`: groups of two or more modules that each reach all the others (Tarjan's algorithm).
fn circles(graph: &std::collections::BTreeMap<String, std::collections::BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        graph: &'a std::collections::BTreeMap<String, std::collections::BTreeSet<String>>,
        index: std::collections::HashMap<&'a str, (usize, usize)>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, (n, n));
        w.stack.push(v);
        for t in w.graph.get(v).into_iter().flatten() {
            match w.index.get(t.as_str()).copied() {
                None => {
                    visit(w, t);
                    let low = w.index[t.as_str()].1.min(w.index[v].1);
                    w.index.get_mut(v).unwrap().1 = low;
                }
                Some((ti, _)) if w.stack.contains(&t.as_str()) => {
                    let low = ti.min(w.index[v].1);
                    w.index.get_mut(v).unwrap().1 = low;
                }
                Some(_) => {}
            }
        }
        let (i, low) = w.index[v];
        if i == low {
            let at = w.stack.iter().rposition(|s| *s == v).unwrap();
            let group: Vec<String> = w.stack.drain(at..).map(str::to_string).collect();
            if group.len() > 1 {
                w.out.push(group);
            }
        }
    }
    let mut w = Walk { graph, index: Default::default(), stack: Vec::new(), out: Vec::new() };
    for v in graph.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out.iter_mut().for_each(|g| g.sort());
    w.out
}

#[test]
fn no_two_files_of_a_layer_import_each_other() {
    // A circle makes its files one module in all but name: none can be read or changed without the others.
    let mut found = Vec::new();
    for (layer, _) in ALLOWED {
        if !src().join(layer).is_dir() {
            continue;
        }
        for group in circles(&layer_graph(layer)) {
            found.push(group.join(" ↔ "));
        }
    }
    assert!(found.is_empty(), "files that import each other:\n{}", found.join("\n"));
}

#[test]
fn the_circle_check_finds_a_circle() {
    let g = |edges: &[(&str, &str)]| {
        let mut m = std::collections::BTreeMap::<String, std::collections::BTreeSet<String>>::new();
        for (a, b) in edges {
            m.entry(a.to_string()).or_default().insert(b.to_string());
            m.entry(b.to_string()).or_default();
        }
        m
    };
    assert_eq!(circles(&g(&[("a", "b"), ("b", "c"), ("c", "a"), ("c", "d")])), [["a", "b", "c"]]);
    assert!(circles(&g(&[("a", "b"), ("b", "c"), ("a", "c")])).is_empty());
    let named = named_paths("ws::conn", false, "use super::{passthrough::Answer, WsContext};\nuse crate::ws::info::X;");
    assert_eq!(named, ["ws::info::X", "ws::passthrough::Answer", "ws::WsContext"]);
}
