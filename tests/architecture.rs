//! The shape of `src/` that `docs/ARCHITECTURE.md` describes, checked: the folders follow
//! a run's path and import only in the allowed direction, no module imports one that
//! imports it back (directly or through others), no `#[path]` includes, and no file grows
//! past what one sitting reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// Every `.rs` file under `src/`, with its module path (`run::engine::calls`), the
/// binary's `main.rs` and `lib.rs` left out.
fn modules() -> BTreeMap<String, PathBuf> {
    let mut out = BTreeMap::new();
    let mut stack = vec![PathBuf::from(SRC)];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
                continue;
            }
            if p.extension().is_none_or(|x| x != "rs") {
                continue;
            }
            let rel = p.strip_prefix(SRC).unwrap().with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.last().is_some_and(|l| l == "mod") {
                parts.pop();
            }
            if parts == ["main"] || parts == ["lib"] {
                continue;
            }
            out.insert(parts.join("::"), p);
        }
    }
    out
}

/// The code lines of a file: comments, doc comments and `#[cfg(test)]` modules' bodies
/// are not imports the library makes.
fn code_lines(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut in_tests = false;
    for line in text.lines() {
        let t = line.trim_start();
        if t.starts_with("#[cfg(test)]") {
            in_tests = true;
        }
        if in_tests || t.starts_with("//") {
            continue;
        }
        out.push(line);
    }
    out
}

/// The module a path written in `from` names: the longest known module it starts with.
fn resolve(from: &str, written: &str, mods: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut parts: Vec<&str> = written.split("::").collect();
    let mut base: Vec<&str> = Vec::new();
    match parts.first() {
        Some(&"crate") => {
            parts.remove(0);
        }
        Some(&"super") => {
            base = from.split("::").collect();
            // A file's own module is `from`; `super` is its parent.
            while parts.first() == Some(&"super") {
                parts.remove(0);
                base.pop();
            }
        }
        _ => return None,
    }
    base.extend(parts);
    while !base.is_empty() {
        let name = base.join("::");
        if mods.contains_key(&name) {
            return Some(name);
        }
        base.pop();
    }
    None
}

/// Which modules each module imports (`crate::…` and `super::…` paths in its code).
/// A folder's `mod.rs` re-exporting its children (`pub use child::…`) aggregates them;
/// it is not counted as an import.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut g = BTreeMap::new();
    for (m, path) in &mods {
        let text = std::fs::read_to_string(path).unwrap();
        let mut deps = BTreeSet::new();
        for line in code_lines(&text) {
            let t = line.trim_start();
            if t.starts_with("pub use ") && !t.contains("crate::") && !t.contains("super::") {
                continue;
            }
            for key in ["crate::", "super::"] {
                for (at, _) in line.match_indices(key) {
                    let before = line[..at].chars().last();
                    if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                        continue;
                    }
                    let written: String = line[at..]
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                        .collect();
                    if let Some(d) = resolve(m, written.trim_end_matches(':'), &mods)
                        && d != *m
                        && !m.starts_with(&format!("{d}::"))
                    {
                        deps.insert(d);
                    }
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

fn folder(module: &str) -> &str {
    module.split("::").next().unwrap()
}

#[test]
fn no_module_imports_one_that_imports_it_back() {
    let g = graph();
    // Depth-first search for a back edge; the path says where the cycle is.
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) {
        if let Some(i) = path.iter().position(|p| p == m) {
            panic!("import cycle: {} -> {m}", path[i..].join(" -> "));
        }
        if done.contains(m) {
            return;
        }
        path.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            visit(d, g, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        visit(m, &g, &mut Vec::new(), &mut done);
    }
}

#[test]
fn folders_import_only_in_the_direction_of_a_run() {
    // What each folder must never import.
    let forbidden: &[(&str, &[&str])] = &[
        (
            "turn",
            &["backend", "tools", "checks", "run", "serve", "eval", "cli"],
        ),
        (
            "checks",
            &["backend", "tools", "run", "serve", "eval", "cli"],
        ),
        ("run", &["serve", "eval", "cli"]),
        (
            "backend",
            &["turn", "checks", "run", "tools", "serve", "eval", "cli"],
        ),
        ("tools", &["checks", "run", "serve", "eval", "cli"]),
        ("serve", &["eval", "cli"]),
        ("eval", &["serve", "cli"]),
    ];
    let mut wrong = Vec::new();
    for (m, deps) in graph() {
        for d in deps {
            let (from, to) = (folder(&m), folder(&d));
            if from == to {
                continue;
            }
            let banned = forbidden
                .iter()
                .find(|(f, _)| *f == from)
                .is_some_and(|(_, b)| b.contains(&to));
            if banned || (to == "cli" && from != "cli") {
                wrong.push(format!("{m} imports {d}"));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "imports against the direction of a run:\n{}",
        wrong.join("\n")
    );
}

#[test]
fn leaves_stay_leaves() {
    let g = graph();
    for leaf in [
        "deadline",
        "validate",
        "message",
        "tool_spec",
        "run::ending",
        "tools::mcp::wire",
    ] {
        let deps: Vec<_> = g[leaf].iter().filter(|d| folder(d) != "deadline").collect();
        assert!(deps.is_empty(), "{leaf} imports {deps:?}");
    }
}

#[test]
fn no_file_is_included_by_path() {
    for path in modules().values() {
        let text = std::fs::read_to_string(path).unwrap();
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("#[path")),
            "{} includes a file by #[path]: split by concern into ordinary modules",
            path.display()
        );
    }
}

#[test]
fn each_folder_says_what_it_owns_and_may_import() {
    for e in std::fs::read_dir(SRC).unwrap().flatten() {
        let dir = e.path();
        if !dir.is_dir() {
            continue;
        }
        let text = std::fs::read_to_string(dir.join("mod.rs")).unwrap();
        let doc: String = text
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .collect::<Vec<_>>()
            .join("\n");
        assert!(
            doc.to_lowercase().contains("import"),
            "{}/mod.rs does not open with what it owns and what it may import",
            dir.display()
        );
    }
}
