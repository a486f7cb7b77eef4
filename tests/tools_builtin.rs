//! The built-in tools, including the security corpora: every write attempt against
//! `sql_query` is refused with the database unchanged, and every path escape against
//! `read_file` is refused.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};
use toolloop::tools::ToolResult;
use toolloop::tools::{Builtin, BuiltinConfig};

/// A directory of the test's own, removed with everything in it when the test ends.
fn tmp(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("toolloop-{name}-"))
        .tempdir()
        .unwrap()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn make_db(dir: &Path) -> PathBuf {
    let path = dir.join("shop.db");
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "CREATE TABLE orders (id INTEGER PRIMARY KEY, item TEXT, status TEXT, price REAL);
         CREATE INDEX orders_status ON orders (status);",
    )
    .unwrap();
    for i in 1..=150 {
        conn.execute(
            "INSERT INTO orders (item, status, price) VALUES (?1, ?2, ?3)",
            rusqlite::params![
                format!("item {i}"),
                if i % 2 == 0 { "shipped" } else { "pending" },
                i as f64 * 1.5
            ],
        )
        .unwrap();
    }
    path
}

/// The built-in tools over a fresh copy of the shop database, in its own folder, which
/// goes when the second value is dropped.
fn sql_tool(name: &str) -> (Builtin, tempfile::TempDir) {
    let dir = tmp(name);
    let db = make_db(dir.path());
    let tool = Builtin::new(&BuiltinConfig {
        db: Some(db),
        ..Default::default()
    })
    .unwrap();
    (tool, dir)
}

#[test]
fn sql_reads_with_column_names_and_at_most_100_rows() {
    let (t, _dir) = sql_tool("sql-read");
    let r = t.run(
        "sql_query",
        &args(json!({"sql": "SELECT id, status FROM orders WHERE id = 42"})),
    );
    assert_eq!(
        r,
        ToolResult::ok(
            json!({"columns": ["id", "status"], "rows": [{"id": 42, "status": "shipped"}],
                               "row_count": 1, "truncated": false})
        )
    );
    let r = t.run("sql_query", &args(json!({"sql": "SELECT * FROM orders"})));
    assert_eq!(r.content["row_count"], 100);
    assert_eq!(r.content["truncated"], true);
}

#[test]
fn every_write_attempt_is_refused_and_the_database_is_unchanged() {
    let dir_guard = tmp("sql-write");
    let dir = dir_guard.path().to_path_buf();
    let db = make_db(&dir);
    let before = std::fs::read(&db).unwrap();
    let escape = dir.join("evil.db");
    let copy = dir.join("copy.db");
    let t = Builtin::new(&BuiltinConfig {
        db: Some(db.clone()),
        ..Default::default()
    })
    .unwrap();
    let attacks = [
        "INSERT INTO orders (item, status, price) VALUES ('x', 'y', 1)".to_string(),
        "UPDATE orders SET status = 'refunded'".into(),
        "DELETE FROM orders".into(),
        "DROP TABLE orders".into(),
        "CREATE TABLE x (a)".into(),
        "CREATE TEMP TABLE x (a)".into(),
        "ALTER TABLE orders ADD COLUMN y".into(),
        "REPLACE INTO orders (id, item) VALUES (1, 'z')".into(),
        "INSERT OR IGNORE INTO orders (id) VALUES (999)".into(),
        "WITH c AS (SELECT 1) INSERT INTO orders (item) SELECT 'cte' FROM c".into(),
        format!("ATTACH DATABASE '{}' AS evil", escape.display()),
        "PRAGMA user_version = 5".into(),
        "PRAGMA query_only = OFF".into(),
        "PRAGMA journal_mode = DELETE".into(),
        "SELECT load_extension('/tmp/evil.so')".into(),
        "SELECT 1; DELETE FROM orders".into(),
        "SELECT 1; ATTACH DATABASE 'x.db' AS y".into(),
        format!("VACUUM INTO '{}'", copy.display()),
        "VACUUM".into(),
        "BEGIN; DELETE FROM orders; COMMIT".into(),
        "REINDEX".into(),
        "ANALYZE".into(),
        "CREATE TRIGGER t AFTER INSERT ON orders BEGIN DELETE FROM orders; END".into(),
    ];
    for sql in &attacks {
        let r = t.run("sql_query", &args(json!({ "sql": sql })));
        assert!(!r.ok, "not refused: {sql} -> {r:?}");
        // A later read still works: nothing was left half-open.
        let check = t.run(
            "sql_query",
            &args(json!({"sql": "SELECT count(*) AS n FROM orders"})),
        );
        assert_eq!(check.content["rows"][0]["n"], 150, "after {sql}");
    }
    drop(t);
    assert_eq!(
        std::fs::read(&db).unwrap(),
        before,
        "the database file changed"
    );
    assert!(!escape.exists(), "ATTACH created a file");
    assert!(!copy.exists(), "VACUUM INTO created a file");
}

#[test]
fn a_runaway_query_is_stopped() {
    let (t, _dir) = sql_tool("sql-slow");
    let r = t.run(
        "sql_query",
        &args(json!({"sql": "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"})),
    );
    assert!(!r.ok);
    assert!(r.error.unwrap().contains("was stopped"));
}

#[test]
fn a_missing_database_is_a_clear_config_error() {
    let err = Builtin::new(&BuiltinConfig {
        db: Some("/nonexistent/x.db".into()),
        ..Default::default()
    })
    .unwrap_err();
    assert_eq!(err.to_string(), "`db` /nonexistent/x.db: no such file");
}

#[test]
fn read_file_refuses_every_escape() {
    let base_guard = tmp("files");
    let base = base_guard.path().to_path_buf();
    let root = base.join("root");
    std::fs::create_dir_all(root.join("notes")).unwrap();
    std::fs::write(root.join("notes/a.txt"), "hello").unwrap();
    std::fs::write(base.join("secret.txt"), "TOP SECRET").unwrap();
    std::fs::create_dir_all(base.join("outside")).unwrap();
    std::fs::write(base.join("outside/s.txt"), "TOP SECRET").unwrap();
    // Symlinks created now, at run time.
    std::os::unix::fs::symlink(base.join("secret.txt"), root.join("link.txt")).unwrap();
    std::os::unix::fs::symlink(base.join("outside"), root.join("outdir")).unwrap();
    std::os::unix::fs::symlink("/etc/passwd", root.join("passwd")).unwrap();
    std::os::unix::fs::symlink(root.join("notes/a.txt"), root.join("inside.txt")).unwrap();
    let mut t = Builtin::new(&BuiltinConfig {
        files_root: Some(root.clone()),
        ..Default::default()
    })
    .unwrap();
    let read = |t: &mut Builtin, p: &str| t.run("read_file", &args(json!({ "path": p })));
    assert_eq!(read(&mut t, "notes/a.txt"), ToolResult::ok("hello"));
    assert_eq!(read(&mut t, "inside.txt"), ToolResult::ok("hello"));
    assert!(
        !read(&mut t, "./notes/../notes/a.txt").ok,
        "'..' is refused even inside"
    );
    for p in [
        "../secret.txt",
        "notes/../../secret.txt",
        "..",
        "/etc/passwd",
        &base.join("secret.txt").display().to_string(),
        "link.txt",
        "outdir/s.txt",
        "passwd",
        "C:\\Windows\\win.ini",
        "\\\\server\\share",
        "notes/\u{0}a.txt",
        "notes/a.txt\n../../secret.txt",
        "",
        "notes",
    ] {
        let r = read(&mut t, p);
        assert!(!r.ok, "not refused: {p:?} -> {r:?}");
        assert!(!format!("{r:?}").contains("TOP SECRET"), "{p:?} leaked");
    }
    // Behind a link that leaves the root, a file that exists and one that does not get
    // the same answer: nothing outside is looked at.
    assert_eq!(
        read(&mut t, "outdir/s.txt"),
        read(&mut t, "outdir/missing.txt")
    );
    assert_eq!(
        read(&mut t, "outdir/s.txt").error.as_deref(),
        Some("refused: the path leads outside the files root")
    );
}

#[test]
fn read_file_caps_large_files() {
    let root_guard = tmp("bigfile");
    let root = root_guard.path().to_path_buf();
    std::fs::write(root.join("big.txt"), "a".repeat(200_000)).unwrap();
    let t = Builtin::new(&BuiltinConfig {
        files_root: Some(root),
        ..Default::default()
    })
    .unwrap();
    let r = t.run("read_file", &args(json!({"path": "big.txt"})));
    let text = r.content.as_str().unwrap();
    assert!(text.ends_with("…[file cut at 65536 bytes]"));
}

#[test]
fn search_docs_ranks_and_cites_file_and_line() {
    let docs_guard = tmp("docs");
    let docs = docs_guard.path().to_path_buf();
    std::fs::write(
        docs.join("returns.md"),
        "# Returns\n\nOrders can be returned within 30 days.\nRefunds take 5 days.\n\nShipping is free.\n",
    )
    .unwrap();
    std::fs::create_dir_all(docs.join("sub")).unwrap();
    std::fs::write(
        docs.join("sub/faq.txt"),
        "Shipping takes 3 days.\n\nReturn labels are printed online.\n",
    )
    .unwrap();
    std::fs::write(docs.join("image.png"), [0u8, 1, 2]).unwrap();
    let t = Builtin::new(&BuiltinConfig {
        docs: Some(docs),
        ..Default::default()
    })
    .unwrap();
    let r = t.run(
        "search_docs",
        &args(json!({"query": "how many days for refunds?"})),
    );
    let top = &r.content["hits"][0];
    assert_eq!(top["file"], "returns.md");
    assert_eq!(top["line"], 3);
    assert!(
        top["text"]
            .as_str()
            .unwrap()
            .contains("Refunds take 5 days.")
    );
    let r = t.run(
        "search_docs",
        &args(json!({"query": "shipping", "limit": 1})),
    );
    assert_eq!(r.content["hits"].as_array().unwrap().len(), 1);
    let r = t.run("search_docs", &args(json!({"query": "zebra"})));
    assert_eq!(r.content["hits"], json!([]));
}

#[test]
fn search_docs_finds_other_forms_of_a_word_and_says_what_it_skipped() {
    let docs_guard = tmp("docs-stem");
    let docs = docs_guard.path().to_path_buf();
    std::fs::write(
        docs.join("returns.md"),
        "# Returns\n\nItems can be returned within 30 days.\n",
    )
    .unwrap();
    std::fs::write(
        docs.join("shipping.md"),
        "Shipping is free over 50 euros.\n",
    )
    .unwrap();
    std::fs::write(docs.join("huge.txt"), vec![b'a'; (2 << 20) + 1]).unwrap();
    let t = Builtin::new(&BuiltinConfig {
        docs: Some(docs),
        ..Default::default()
    })
    .unwrap();
    let r = t.run("search_docs", &args(json!({"query": "return policy"})));
    let hits = r.content["hits"].as_array().unwrap();
    assert!(!hits.is_empty(), "{}", r.content);
    assert!(
        hits.iter().all(|h| h["file"] == "returns.md"),
        "{}",
        r.content
    );
    assert!(
        hits.iter().any(|h| h["text"]
            .as_str()
            .unwrap()
            .contains("returned within 30 days")),
        "{}",
        r.content
    );
    assert_eq!(
        r.content["skipped"],
        "1 file(s) over 2 MiB and 0 file(s) past the first 5000 were not indexed"
    );
}

#[test]
fn calculator_and_time() {
    let t = Builtin::new(&BuiltinConfig::default()).unwrap();
    assert_eq!(
        t.run(
            "calculator",
            &args(json!({"expression": "(2 + 3) * 4 ** 2"}))
        ),
        ToolResult::ok("80")
    );
    let r = t.run(
        "calculator",
        &args(json!({"expression": "__import__('os').system('ls')"})),
    );
    assert!(!r.ok);
    let r = t.run("current_time", &args(json!({"utc_offset": "+09:00"})));
    assert!(r.content.as_str().unwrap().ends_with("+09:00"));
    let r = t.run("current_time", &Map::new());
    assert!(r.content.as_str().unwrap().ends_with('Z'));
    let names: Vec<String> = t.specs().into_iter().map(|s| s.name).collect();
    assert_eq!(
        names,
        ["calculator", "current_time"],
        "only configured tools are offered"
    );
}

#[test]
fn huge_arguments_and_control_characters_are_refused_cleanly() {
    use toolloop::Deadline;
    use toolloop::tools::{Catalogue, ToolError};
    let dir_guard = tmp("attack-args");
    let dir = dir_guard.path().to_path_buf();
    let db = make_db(&dir);
    let before = std::fs::read(&db).unwrap();
    let builtin = Builtin::new(&BuiltinConfig {
        db: Some(db.clone()),
        ..Default::default()
    })
    .unwrap();
    let c = Catalogue::load(vec![Box::new(builtin)], Deadline::none()).unwrap();
    // Through the catalogue, the tools' own schemas bound every string.
    let huge = "1+".repeat(500_000) + "1";
    let err = c
        .call(
            "calculator",
            &args(json!({ "expression": huge })),
            Deadline::none(),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    let err = c
        .call(
            "sql_query",
            &args(json!({ "sql": format!("SELECT '{}'", "x".repeat(100_000)) })),
            Deadline::none(),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::InvalidArguments { .. }), "{err}");
    // Direct calls, past the schema, still fail cleanly.
    let t = Builtin::new(&BuiltinConfig {
        db: Some(db.clone()),
        ..Default::default()
    })
    .unwrap();
    let r = t.run(
        "calculator",
        &args(json!({ "expression": "2".repeat(10_000) })),
    );
    assert!(!r.ok);
    for sql in [
        "SELECT 1\u{0}; DELETE FROM orders",
        "SELECT 1;\u{1b}[2J DELETE FROM orders",
        "DELETE\u{0b}FROM orders",
        "SELECT count(*) FROM orders\r\n; DROP TABLE orders",
    ] {
        let r = t.run("sql_query", &args(json!({ "sql": sql })));
        assert!(!r.ok, "{sql:?} -> {r:?}");
    }
    for expr in ["1\u{0}+1", "1 + \u{202e}2", "\u{7f}"] {
        assert!(
            !t.run("calculator", &args(json!({ "expression": expr }))).ok,
            "{expr:?}"
        );
    }
    drop(t);
    drop(c);
    assert_eq!(std::fs::read(&db).unwrap(), before);
}

/// 100 rows of 10 MB text once made a 1 GB reply (and 40 MB values took the server out of
/// memory): values are cut with a marker and rows stop once the reply is large enough.
#[test]
fn sql_replies_are_capped_in_bytes() {
    let (t, _dir) = sql_tool("sql-bytes");
    let r = t.run(
        "sql_query",
        &args(json!({"sql": "SELECT printf('%.*c', 10000000, 'x') AS big FROM orders LIMIT 100"})),
    );
    assert!(r.ok, "{r:?}");
    let text = r.content.to_string();
    assert!(text.len() < 200_000, "{} bytes", text.len());
    assert_eq!(r.content["truncated"], true);
    let first = r.content["rows"][0]["big"].as_str().unwrap();
    assert!(
        first.ends_with("…[cut at 4000 of 10000000 bytes]"),
        "{}",
        &first[first.len() - 60..]
    );
}

/// Rows that are each expensive but take few VM steps once outran the 5 s limit (24 s):
/// the limit holds by wall clock.
#[test]
fn sql_time_limit_holds_for_few_costly_steps() {
    let (t, _dir) = sql_tool("sql-wallclock");
    let started = std::time::Instant::now();
    let r = t.run(
        "sql_query",
        &args(json!({"sql": "SELECT length(printf('%.*c', 100000000 + id, 'x')) FROM orders"})),
    );
    let took = started.elapsed();
    assert!(!r.ok, "{r:?}");
    assert!(r.error.as_deref().unwrap().contains("longer than"), "{r:?}");
    assert!(took < std::time::Duration::from_secs(8), "{took:?}");
}
