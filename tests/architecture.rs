//! The shape of `src/` that `docs/ARCHITECTURE.md` describes, checked: no module imports
//! one that imports it back (directly or through others), and no file grows past what
//! one sitting reads.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SRC: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src");

/// The library's top-level modules, as `lib.rs` declares them.
fn modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(Path::new(SRC).join("lib.rs")).unwrap();
    lib.lines()
        .filter_map(|l| {
            let l = l.trim();
            let rest = l.strip_prefix("pub mod ").or(l.strip_prefix("mod "))?;
            Some(rest.trim_end_matches(';').to_string())
        })
        .collect()
}

/// Every `.rs` file of a module: `src/NAME.rs` with the parts it includes from
/// `src/NAME_*.rs`, or everything under `src/NAME/`.
fn files_of(module: &str) -> Vec<std::path::PathBuf> {
    let file = Path::new(SRC).join(format!("{module}.rs"));
    if file.exists() {
        let prefix = format!("{module}_");
        let mut files = vec![file];
        for e in std::fs::read_dir(SRC).unwrap().flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with(&prefix) && name.ends_with(".rs") {
                files.push(e.path());
            }
        }
        return files;
    }
    let mut out = Vec::new();
    let mut stack = vec![Path::new(SRC).join(module)];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out
}

/// Which top-level modules each module's code names as `crate::NAME` (comments aside).
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mods = modules();
    let mut g = BTreeMap::new();
    for m in &mods {
        let mut deps = BTreeSet::new();
        for f in files_of(m) {
            let text = std::fs::read_to_string(&f).unwrap();
            for line in text.lines().filter(|l| !l.trim_start().starts_with("//")) {
                for part in line.split("crate::").skip(1) {
                    let name: String = part
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    if name != *m && mods.contains(&name) {
                        deps.insert(name);
                    }
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
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
        for d in &g[m] {
            visit(d, g, path, done);
        }
        path.pop();
        done.insert(m.to_string());
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        visit(m, &g, &mut Vec::new(), &mut done);
    }
    // The leaves that the ending and validation live in stay leaves.
    assert!(g["ending"].is_empty(), "ending imports {:?}", g["ending"]);
    assert!(
        g["validate"].is_empty(),
        "validate imports {:?}",
        g["validate"]
    );
}

#[test]
fn no_source_file_is_longer_than_one_sitting() {
    let mut stack = vec![Path::new(SRC).to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") && !p.ends_with("repair.rs") {
                let lines = std::fs::read_to_string(&p).unwrap().lines().count();
                assert!(lines <= 620, "{} has {lines} lines", p.display());
            }
        }
    }
}

#[test]
fn the_engine_reads_in_one_sitting() {
    let text = std::fs::read_to_string(Path::new(SRC).join("engine.rs")).unwrap();
    let start = text.find("pub struct Engine").unwrap();
    let body = text.find("impl Engine {").unwrap();
    let end = body + text[body..].find("\n}\n").unwrap();
    let lines = text[start..end].lines().count();
    // "About 400": the state machine, the decision gate and the grounding hook (which can
    // turn a call with invented values into a question for the person).
    assert!(lines <= 450, "Engine and its impl take {lines} lines");
}
