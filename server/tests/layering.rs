//! The dependency order of docs/architecture.md ("The dependency order") and lib.rs, checked on the sources: each module of the library names only the
//! modules below it (node → book → state → ingest / publish → ws, with audit and config beside them), so no stage
//! reaches back up the pipeline; and the state module keeps its locks private.

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
    // Settings come before the stages in the order; ingest reads its `[nats]` section from there.
    ("ingest", &["node", "book", "state", "config::NatsConfig"]),
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
    let text = std::fs::read_to_string(file).unwrap();
    let start =
        text.find(&format!("pub struct {name} {{")).unwrap_or_else(|| panic!("no struct {name} in {}", file.display()));
    let body = &text[start..start + text[start..].find("\n}").unwrap()];
    body.lines()
        .skip(1)
        .map(str::trim)
        .filter(|l| l.starts_with("pub ") && l.contains(": "))
        .map(str::to_string)
        .collect()
}

#[test]
fn hub_and_state_have_no_public_fields() {
    // Other stages talk to them through methods: what they hold and how they lock it can change behind those.
    for (file, name) in [("publish/hub.rs", "Hub"), ("state/mod.rs", "Shared")] {
        let open = public_fields(&src().join(file), name);
        assert!(open.is_empty(), "{name} has public fields: {open:?}");
    }
}
