//! The built-in tools, useful out of the box and safe to hand to a model: exact
//! arithmetic, the current time, read-only SQL over SQLite, ranked search over a folder
//! of documents with line citations, reading files under one root, and demo weather.
//!
//! Safety is enforced by the layer that owns the resource, never by pattern matching:
//! SQLite itself refuses writes (read-only open, `query_only`, no attached databases, a
//! statement must be read-only), and `read_file` resolves symlinks and checks the real
//! path is under the root.

use std::fs;
use std::path::{Component, Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Map, Value, json};

use super::docs::DocIndex;
use super::{ToolError, ToolResult, ToolSource, ToolSpec, calculator};
use crate::deadline::Deadline;

use super::sql::Sql;
/// The most bytes `read_file` returns.
pub const READ_MAX_BYTES: usize = 64 << 10;

/// The weather the demo answers from.
pub const DEMO_WEATHER: &str = include_str!("../../demo/weather.json");

/// Which built-in tools to offer. `calculator` and `current_time` are always there.
#[derive(Debug, Clone, Default)]
pub struct BuiltinConfig {
    /// A SQLite database for `sql_query`, opened read-only.
    pub db: Option<PathBuf>,
    /// A folder of text and Markdown files for `search_docs`.
    pub docs: Option<PathBuf>,
    /// The folder `read_file` may read under.
    pub files_root: Option<PathBuf>,
    /// Offer `get_weather`, answering from `demo/weather.json`.
    pub demo: bool,
}

/// The built-in tools as a source.
pub struct Builtin {
    db: Option<Sql>,
    docs: Option<DocIndex>,
    root: Option<PathBuf>,
    demo: bool,
}

impl std::fmt::Debug for Builtin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Builtin")
            .field("db", &self.db.is_some())
            .field("docs", &self.docs)
            .field("root", &self.root)
            .field("demo", &self.demo)
            .finish()
    }
}

impl Builtin {
    /// Opens the database, indexes the documents and resolves the files root.
    pub fn new(cfg: &BuiltinConfig) -> Result<Self, ToolError> {
        let db = cfg.db.as_deref().map(Sql::open).transpose()?;
        let docs = cfg.docs.as_deref().map(DocIndex::build).transpose()?;
        let root = cfg
            .files_root
            .as_deref()
            .map(|r| {
                fs::canonicalize(r)
                    .map_err(|e| ToolError::Config(format!("`files_root` {}: {e}", r.display())))
            })
            .transpose()?;
        Ok(Builtin {
            db,
            docs,
            root,
            demo: cfg.demo,
        })
    }

    /// The specs of the tools this configuration offers.
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut specs = vec![
            ToolSpec::new(
                "calculator",
                "Exact arithmetic: numbers, + - * / // % ** and parentheses.",
                json!({"type": "object",
                       "properties": {"expression": {"type": "string", "maxLength": 500,
                                      "description": "e.g. (12.5 * 4) - 3"}},
                       "required": ["expression"]}),
            )
            .with_examples(["What is 12.5 * 4 - 3?", "How much is 17% of 2,340?"]),
            ToolSpec::new(
                "current_time",
                "The current date and time, in UTC or at a UTC offset; only for questions about the date or time.",
                json!({"type": "object",
                       "properties": {"utc_offset": {"type": "string",
                                      "pattern": "^[+-][0-9]{2}:[0-9]{2}$",
                                      "description": "e.g. +09:00; UTC when absent"}}}),
            )
            .with_examples(["What is the date today?"]),
        ];
        if self.db.is_some() {
            specs.push(
                ToolSpec::new(
                    "sql_query",
                    "Run one read-only SQL SELECT on the database; at most 100 rows.",
                    json!({"type": "object",
                       "properties": {"sql": {"type": "string", "maxLength": 2000}},
                       "required": ["sql"]}),
                )
                .with_examples(["Which tables are in the database?"]),
            );
        }
        if self.docs.is_some() {
            specs.push(
                ToolSpec::new(
                    "search_docs",
                    "Search the documents; each hit cites its file and line.",
                    json!({"type": "object",
                       "properties": {"query": {"type": "string", "maxLength": 300},
                                      "limit": {"type": "integer", "minimum": 1, "maximum": 10}},
                       "required": ["query"]}),
                )
                .with_examples(["What do the documents say about installing?"]),
            );
        }
        if self.root.is_some() {
            specs.push(
                ToolSpec::new(
                    "read_file",
                    "Read a text file by its path relative to the files root.",
                    json!({"type": "object",
                       "properties": {"path": {"type": "string", "maxLength": 500}},
                       "required": ["path"]}),
                )
                .with_examples(["What does README.md say?"]),
            );
        }
        if self.demo {
            specs.push(
                ToolSpec::new(
                    "get_weather",
                    "Current weather for a city.",
                    json!({"type": "object",
                       "properties": {"city": {"type": "string", "maxLength": 100}},
                       "required": ["city"]}),
                )
                .with_examples(["What is the weather in Paris?"]),
            );
        }
        // Every built-in tool only reads (`sql_query` opens its database read-only).
        specs.into_iter().map(ToolSpec::reading_only).collect()
    }

    /// Runs one tool. Every failure is a result the model reads.
    pub fn run(&self, name: &str, args: &Map<String, Value>) -> ToolResult {
        let text = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
        match name {
            "calculator" => match calculator::evaluate_read(text("expression")) {
                Ok(v) => ToolResult::ok(v.to_string()),
                Err(e) => ToolResult::err(e.to_string()),
            },
            "current_time" => current_time(args.get("utc_offset").and_then(Value::as_str)),
            "sql_query" => match &self.db {
                Some(db) => db.query(text("sql")),
                None => ToolResult::err("sql_query has no database configured"),
            },
            "search_docs" => match &self.docs {
                Some(docs) => {
                    let limit = args
                        .get("limit")
                        .and_then(Value::as_u64)
                        .unwrap_or(5)
                        .clamp(1, 10);
                    docs.search(text("query"), limit as usize)
                }
                None => ToolResult::err("search_docs has no document folder configured"),
            },
            "read_file" => match &self.root {
                Some(root) => read_file(root, text("path")),
                None => ToolResult::err("read_file has no root folder configured"),
            },
            "get_weather" if self.demo => weather(text("city")),
            _ => ToolResult::err(format!("unknown tool {name}")),
        }
    }
}

impl ToolSource for Builtin {
    fn label(&self) -> String {
        "built-in tools".into()
    }

    fn list(&mut self, _deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.specs())
    }

    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        _deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        Ok(self.run(name, arguments))
    }
}

fn current_time(offset: Option<&str>) -> ToolResult {
    let minutes = match offset {
        None | Some("") | Some("Z") | Some("UTC") => 0,
        Some(o) => match parse_offset(o) {
            Some(m) => m,
            None => return ToolResult::err(format!("bad utc_offset {o:?}: use +HH:MM or -HH:MM")),
        },
    };
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    ToolResult::ok(format_time(now, minutes))
}

fn parse_offset(o: &str) -> Option<i64> {
    let b = o.as_bytes();
    if b.len() != 6 || !matches!(b[0], b'+' | b'-') || b[3] != b':' {
        return None;
    }
    let h: i64 = o[1..3].parse().ok()?;
    let m: i64 = o[4..6].parse().ok()?;
    if h > 14 || m > 59 {
        return None;
    }
    let total = h * 60 + m;
    Some(if b[0] == b'-' { -total } else { total })
}

/// ISO 8601 for a Unix time at an offset in minutes.
pub fn format_time(unix: i64, offset_minutes: i64) -> String {
    let t = unix + offset_minutes * 60;
    let days = t.div_euclid(86_400);
    let secs = t.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    let zone = if offset_minutes == 0 {
        "Z".to_string()
    } else {
        let sign = if offset_minutes < 0 { '-' } else { '+' };
        let a = offset_minutes.abs();
        format!("{sign}{:02}:{:02}", a / 60, a % 60)
    };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}{zone}",
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

fn read_file(root: &Path, rel: &str) -> ToolResult {
    if rel.trim().is_empty() {
        return ToolResult::err("path is empty");
    }
    if rel.chars().any(|c| c.is_control()) {
        return ToolResult::err("refused: the path contains control characters");
    }
    let p = Path::new(rel);
    if p.is_absolute() || rel.starts_with('\\') || rel.contains(':') {
        return ToolResult::err("refused: give a path relative to the files root");
    }
    if p.components().any(|c| {
        matches!(
            c,
            Component::ParentDir | Component::RootDir | Component::Prefix(_)
        )
    }) {
        return ToolResult::err("refused: '..' is not allowed in paths");
    }
    // Walked one component at a time, each link resolved and checked against the root
    // before anything past it is looked at: resolving the whole path at once would answer
    // "no such file" or "refused" for paths behind a link that leaves the root, and so
    // tell which files exist outside it.
    let mut real = root.to_path_buf();
    for part in p.components() {
        let next = real.join(part);
        real = match fs::symlink_metadata(&next) {
            Err(_) => return ToolResult::err(format!("no such file: {rel}")),
            Ok(m) if m.file_type().is_symlink() => match fs::canonicalize(&next) {
                Ok(target) if target.starts_with(root) => target,
                _ => return ToolResult::err("refused: the path leads outside the files root"),
            },
            Ok(_) => next,
        };
    }
    if !real.is_file() {
        return ToolResult::err(format!("not a file: {rel}"));
    }
    let mut buf = Vec::new();
    let read = fs::File::open(&real).and_then(|f| {
        use std::io::Read;
        f.take(READ_MAX_BYTES as u64 + 1).read_to_end(&mut buf)
    });
    if let Err(e) = read {
        return ToolResult::err(format!("cannot read {rel}: {e}"));
    }
    let cut = buf.len() > READ_MAX_BYTES;
    buf.truncate(READ_MAX_BYTES);
    let mut text = String::from_utf8_lossy(&buf).into_owned();
    if cut {
        text.push_str(&format!("…[file cut at {READ_MAX_BYTES} bytes]"));
    }
    ToolResult::ok(text)
}

/// The demo's cities as German, French, Spanish and Japanese write them, the languages
/// toolloop's own sets ask in: a person asking "Wie ist das Wetter in Tokio?" of the demo
/// is answered for Tokyo, as a real weather service would answer them, rather than told
/// that "Tokio" is unknown (the model wrote it as the person did, twice). The record
/// names the city as the demo knows it.
const DEMO_CITY_NAMES: [(&str, &[&str]); 5] = [
    ("Tokyo", &["Tokio", "東京"]),
    ("Paris", &["París", "パリ"]),
    (
        "New York",
        &["Nueva York", "New York City", "NYC", "ニューヨーク"],
    ),
    ("Sydney", &["Sídney", "シドニー"]),
    ("Oslo", &["オスロ"]),
];

fn weather(city: &str) -> ToolResult {
    let all: Map<String, Value> = serde_json::from_str(DEMO_WEATHER).unwrap_or_default();
    let wanted = city.trim().to_lowercase();
    let known_as = |k: &str| {
        let other = DEMO_CITY_NAMES.iter().find(|(c, _)| *c == k);
        let other: &[&str] = other.map_or(&[], |(_, n)| n);
        std::iter::once(k)
            .chain(other.iter().copied())
            .any(|n| n.to_lowercase() == wanted)
    };
    match all.iter().find(|(k, _)| known_as(k)) {
        Some((_, v)) => ToolResult::ok(v.clone()),
        None => ToolResult::err(format!(
            "no weather for {city:?}; known cities: {}",
            all.keys().cloned().collect::<Vec<_>>().join(", ")
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn time_formatting() {
        assert_eq!(format_time(0, 0), "1970-01-01T00:00:00Z");
        assert_eq!(format_time(1_700_000_000, 540), "2023-11-15T07:13:20+09:00");
        assert_eq!(format_time(951_782_400, -330), "2000-02-28T18:30:00-05:30");
        assert_eq!(parse_offset("+09:00"), Some(540));
        assert_eq!(parse_offset("-05:30"), Some(-330));
        assert_eq!(parse_offset("9"), None);
    }

    #[test]
    fn weather_is_case_insensitive_and_unknown_cities_say_which_exist() {
        assert!(weather("tokyo").ok);
        // As the person wrote it in another language: the record says which city it is.
        for (name, city) in [
            ("Tokio", "Tokyo"),
            ("パリ", "Paris"),
            ("nueva york", "New York"),
        ] {
            let r = weather(name);
            assert!(r.ok && r.content["city"] == city, "{name}: {r:?}");
        }
        let e = weather("Atlantis");
        assert!(!e.ok);
        assert!(e.error.unwrap().contains("Tokyo"));
    }

    #[test]
    fn the_calculator_says_how_it_read_a_percent_and_thousands() {
        let tools = Builtin::new(&BuiltinConfig::default()).unwrap();
        let args = |e: &str| json!({"expression": e}).as_object().unwrap().clone();
        let r = tools.run("calculator", &args("17% of 2,340"));
        assert!(r.ok, "{r:?}");
        assert_eq!(r.content, "397.8 (read 17% as 0.17, 2,340 as 2340)");
        assert_eq!(tools.run("calculator", &args("2^20")).content, "1048576");
        let r = tools.run("calculator", &args("100 + 10%"));
        assert!(!r.ok);
    }
}
