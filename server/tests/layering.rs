//! The maps of the sources, checked on the sources. docs/architecture.md ("The dependency order") and lib.rs state
//! the same two lines, and so does this file:
//!
//! The data path: the node's files → `node` (parse) → `ingest` (whole blocks, in order) → `book` (exact L4 books, in
//! `state`) → `publish` (frames, serialized once) → `ws` (clients).
//!
//! The dependency order: `node` → `config` → `book` → `state` → `store` → `ingest` → `audit` → `publish` → `ws` →
//! `cli`, with `sim` beside them.
//!
//! Checked here: each module of the library names only modules before it (the `ALLOWED` rules below, in that order),
//! and the binaries only `cli` (`main.rs`) and `sim` (`bin/hlsim.rs`); no two files of one module import each other
//! (directly or round a circle); the state keeps its locks private; no two public types share a name; and every map
//! (lib.rs, README.md, docs/architecture.md, this file) says the same.

use std::path::{Path, PathBuf};

/// Per top-level module: the other top-level modules it may name (`crate::X`). A `X::Y` entry allows only that
/// submodule. Tests next to the code (`*tests.rs`, `mod tests`) are held to the same rule.
const ALLOWED: &[(&str, &[&str])] = &[
    ("node", &[]),
    ("config", &["node"]),
    ("book", &["node"]),
    // The state owns what ingest and the rest share (health, the source board), so it names nothing of ingest.
    ("state", &["node", "book"]),
    // The history store sits between the state it is fed from and the publisher that feeds and reads it.
    ("store", &["node", "state"]),
    // Settings come before the stages in the order; ingest reads its `[nats]` section and its sources (parsed and
    // resolved against the settings: `config::Source`) from there.
    ("ingest", &["node", "book", "state", "config::NatsConfig", "config::NatsTarget", "config::Source"]),
    ("audit", &["node", "state"]),
    ("publish", &["node", "book", "state", "audit", "store"]),
    ("ws", &["node", "book", "state", "ingest", "publish", "audit", "config", "store"]),
    // The commands put the stages together.
    ("cli", &["node", "config", "book", "state", "store", "ingest", "audit", "publish", "ws"]),
    // The simulator checks its own output with the replay engine and the side stream reader (misc_events).
    ("sim", &["node", "book", "ingest::replay", "ingest::side"]),
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

/// Every type `text` declares with any `pub` (`pub`, `pub(crate)`, `pub(super)`, `pub(in …)`): struct, enum,
/// union, trait or type alias.
fn public_types(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim_start) {
        let Some(rest) = line.strip_prefix("pub") else { continue };
        let rest = match rest.strip_prefix('(') {
            Some(r) => r.split_once(')').map_or("", |(_, after)| after),
            None => rest,
        };
        let mut words = rest.split_whitespace();
        if let (Some("struct" | "enum" | "union" | "trait" | "type"), Some(name)) = (words.next(), words.next()) {
            let name: String = name.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            out.push(name);
        }
    }
    out
}

#[test]
fn no_two_public_types_share_a_name() {
    // A name used twice makes a reader (and a `use`) ask which one is meant: each says what it is instead.
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let mut seen: std::collections::BTreeMap<String, Vec<String>> = std::collections::BTreeMap::new();
    for f in &files {
        let module = module_of(f);
        for name in public_types(&std::fs::read_to_string(f).unwrap()) {
            seen.entry(name).or_default().push(module.clone());
        }
    }
    let twice: Vec<String> =
        seen.iter().filter(|(_, at)| at.len() > 1).map(|(name, at)| format!("{name}: {}", at.join(", "))).collect();
    assert!(files.len() > 100 && seen.len() > 100, "the source tree was not read");
    assert!(twice.is_empty(), "public types sharing a name:\n{}", twice.join("\n"));
}

#[test]
fn the_type_name_check_finds_every_kind_of_public_type() {
    let text = "pub struct A {\n    pub(crate) enum B,\npub(super) type C<T> = T;\n  pub(in crate::x) trait D: Send {}\n\
                pub union E {}\nstruct F;\npub fn g() {}\npub(crate) mod h;\n";
    assert_eq!(public_types(text), ["A", "B", "C", "D", "E"]);
}

/// The two lines every map states in the same words (lib.rs, README.md, docs/architecture.md and this file's doc).
const DATA_PATH: &str = "The data path: the node's files → `node` (parse) → `ingest` (whole blocks, in order) → `book` \
    (exact L4 books, in `state`) → `publish` (frames, serialized once) → `ws` (clients).";
const DEPENDENCY_ORDER: &str = "The dependency order: `node` → `config` → `book` → `state` → `store` → `ingest` → \
    `audit` → `publish` → `ws` → `cli`, with `sim` beside them.";

/// `text` with comment markers dropped and every run of whitespace made one space, so a wrapped line compares.
fn prose(text: &str) -> String {
    let lines = text.lines().map(|l| l.trim_start().trim_start_matches("//!").trim_start_matches("///"));
    lines.collect::<Vec<_>>().join(" ").split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The modules of the dependency order, in order (`sim` last, beside them).
fn order() -> Vec<String> {
    let mut out: Vec<String> = DEPENDENCY_ORDER.split('`').skip(1).step_by(2).map(str::to_string).collect();
    assert_eq!(out.pop().as_deref(), Some("sim"));
    out
}

#[test]
fn every_map_states_the_same_order() {
    let repo = src().join("../..");
    let maps = [
        ("server/src/lib.rs", std::fs::read_to_string(src().join("lib.rs")).unwrap()),
        ("README.md", std::fs::read_to_string(repo.join("README.md")).unwrap()),
        ("docs/architecture.md", std::fs::read_to_string(repo.join("docs/architecture.md")).unwrap()),
        ("server/tests/layering.rs", include_str!("layering.rs").to_string()),
    ];
    for (name, text) in &maps {
        let text = prose(text);
        for line in [DATA_PATH, DEPENDENCY_ORDER] {
            assert!(text.contains(&prose(line)), "{name} does not say, in these words: {line}");
        }
    }
    // This file's rules, lib.rs's module table and architecture.md's module sections go in that order.
    let rules: Vec<&str> = ALLOWED.iter().map(|(m, _)| *m).filter(|m| *m != "sim").collect();
    assert_eq!(rules, order(), "layering.rs's ALLOWED, against the dependency order");
    let table: Vec<String> =
        maps[0].1.lines().filter_map(|l| l.strip_prefix("//! | `")?.split('`').next().map(str::to_string)).collect();
    let mut want = order();
    want.push("sim".into());
    assert_eq!(table, want, "lib.rs's module table");
    let sections: Vec<String> =
        maps[2].1.lines().filter_map(|l| l.strip_prefix("## `")?.split('`').next().map(str::to_string)).collect();
    assert_eq!(sections, want, "docs/architecture.md's module sections");
    // lib.rs declares exactly these modules.
    let mut declared: Vec<String> =
        maps[0].1.lines().filter_map(|l| l.strip_prefix("pub mod ")?.strip_suffix(';').map(str::to_string)).collect();
    declared.sort();
    want.sort();
    assert_eq!(declared, want, "lib.rs's modules");
}

#[test]
fn every_rule_names_only_modules_before_it() {
    let order = order();
    for (module, allowed) in ALLOWED {
        let at = order.iter().position(|m| m == module).unwrap_or(order.len());
        for a in *allowed {
            let top = a.split("::").next().unwrap();
            let before = order.iter().position(|m| m == top).is_some_and(|i| i < at);
            assert!(before, "{module} may name {a}, which is not before it in the dependency order");
        }
    }
}

#[test]
fn the_binaries_are_thin() {
    // `main.rs` parses the command line and calls `cli`; `hlsim` calls `sim`: everything else is the library's.
    for (file, only) in [("main.rs", "cli"), ("bin/hlsim.rs", "sim")] {
        let text = std::fs::read_to_string(src().join(file)).unwrap();
        for (i, _) in text.match_indices("hlbook::") {
            let rest = &text[i + "hlbook::".len()..];
            let module = rest.split(|c: char| !(c.is_alphanumeric() || c == '_')).next().unwrap();
            assert_eq!(module, only, "{file} names hlbook::{module}");
        }
        assert!(!text.contains("crate::"), "{file} reaches into its own crate");
    }
}

/// Where a file's unit tests are, by the one convention (docs/testing.md): in `mod tests` at its end, or, when that
/// would take it past ~500 lines, in `<stem>_tests.rs` beside it, declared there with `#[path]` (`<stem>` is the
/// folder's name for a `mod.rs`); a module's further test files add a word, `<stem>_<what>_tests.rs`. Returns what
/// breaks it.
fn test_file_breaches(files: &[PathBuf]) -> Vec<String> {
    let mut out = Vec::new();
    for f in files {
        let name = f.file_name().unwrap().to_string_lossy().to_string();
        if name == "tests.rs" || name.starts_with("tests_") {
            out.push(format!("{}: name a test file after the file it tests", f.display()));
            continue;
        }
        if !name.ends_with("_tests.rs") {
            continue;
        }
        let declared_by = files.iter().find(|g| {
            g.parent() == f.parent() && std::fs::read_to_string(g).unwrap().contains(&format!("#[path = \"{name}\"]"))
        });
        let Some(g) = declared_by else {
            out.push(format!("{}: no file beside it declares it with #[path]", f.display()));
            continue;
        };
        let g_name = g.file_stem().unwrap().to_string_lossy().to_string();
        let stem = match g_name.as_str() {
            "mod" => g.parent().unwrap().file_name().unwrap().to_string_lossy().to_string(),
            s => s.trim_end_matches("_tests").to_string(),
        };
        if !name.starts_with(&format!("{stem}_")) {
            out.push(format!("{}: declared by {}, so its name starts with {stem}_", f.display(), g.display()));
        }
    }
    out
}

#[test]
fn unit_tests_follow_one_convention() {
    let mut files = Vec::new();
    rust_files(&src(), &mut files);
    let breaches = test_file_breaches(&files);
    assert!(breaches.is_empty(), "test files off the convention:\n{}", breaches.join("\n"));
}

#[test]
fn the_convention_check_finds_a_stray_test_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        std::fs::write(dir.path().join(name), text).unwrap();
        dir.path().join(name)
    };
    let files = [
        file("a.rs", "#[cfg(test)]\n#[path = \"a_tests.rs\"]\nmod tests;\n"),
        file("a_tests.rs", "#[path = \"a_more_tests.rs\"]\nmod more;\n"),
        file("a_more_tests.rs", ""),
        file("b_tests.rs", ""),
        file("tests.rs", ""),
        file("c.rs", "#[path = \"d_tests.rs\"]\nmod tests;\n"),
        file("d_tests.rs", ""),
    ];
    let found = test_file_breaches(&files);
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("b_tests.rs: no file beside it"), "{found:?}");
    assert!(found[1].contains("tests.rs: name a test file"), "{found:?}");
    assert!(found[2].contains("d_tests.rs: declared by"), "{found:?}");
}

/// docs/architecture.md's "Where each feature lives": per row, the feature, the words its file names carry, and
/// the files it lists (from `server/`, `*` allowed in a file name).
fn feature_rows() -> Vec<(String, Vec<String>, Vec<String>)> {
    let doc = std::fs::read_to_string(src().join("../../docs/architecture.md")).unwrap();
    let at = doc.find("## Where each feature lives").expect("docs/architecture.md: the feature table");
    let ticked = |cell: &str| cell.split('`').skip(1).step_by(2).map(str::to_string).collect::<Vec<_>>();
    let rows = doc[at..].lines().skip_while(|l| !l.starts_with("| ---")).skip(1).take_while(|l| l.starts_with('|'));
    rows.map(|row| {
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let files = [ticked(cells[3]), ticked(cells[4])].concat();
        (cells[1].to_string(), ticked(cells[2]), files)
    })
    .collect()
}

#[test]
fn the_feature_table_names_every_file_of_each_feature() {
    let server = src().join("..");
    let rows = feature_rows();
    assert!(rows.len() >= 8, "{} feature rows", rows.len());
    let mut sources = Vec::new();
    rust_files(&src(), &mut sources);
    for (feature, words, files) in &rows {
        for f in files {
            let found = match f.rsplit_once('/') {
                Some((dir, pattern)) if pattern.contains('*') => {
                    let (head, tail) = pattern.split_once('*').unwrap();
                    std::fs::read_dir(server.join(dir)).unwrap().flatten().any(|e| {
                        let n = e.file_name().to_string_lossy().to_string();
                        n.starts_with(head) && n.ends_with(tail)
                    })
                }
                _ => server.join(f).is_file(),
            };
            assert!(found, "{feature}: {f} does not exist");
        }
        for s in &sources {
            let rel = format!("src/{}", s.strip_prefix(src()).unwrap().display());
            let named = words
                .iter()
                .any(|w| rel.rsplit('/').next().unwrap().contains(w.as_str()) || rel.contains(&format!("/{w}/")));
            assert!(!named || files.contains(&rel), "{feature}: {rel} carries its name but is not in its row");
        }
    }
}
