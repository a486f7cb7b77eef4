//! `sql_query`'s database: SQLite opened read-only, behind the `sqlite` feature (SQLite
//! is compiled from source, which a library user who needs no SQL should not pay for).

use std::path::Path;
#[cfg(feature = "sqlite")]
use std::sync::mpsc::RecvTimeoutError;
#[cfg(feature = "sqlite")]
use std::time::{Duration, Instant};

#[cfg(feature = "sqlite")]
use serde_json::{Map, Value, json};

use super::{ToolError, ToolResult};

/// The most rows `sql_query` returns.
#[cfg(feature = "sqlite")]
pub const SQL_MAX_ROWS: usize = 100;
/// The most text of one value in a reply; longer values are cut with a marker, as
/// `read_file` cuts files. One `printf('%.*c', 40000000, 'x')` once took the server out of
/// memory while the reply was serialised.
#[cfg(feature = "sqlite")]
pub const SQL_VALUE_MAX: usize = 4000;
/// Once the values of a reply pass this many bytes, no more rows are read.
#[cfg(feature = "sqlite")]
pub const SQL_MAX_BYTES: usize = 64 << 10;

/// A text value, cut to [`SQL_VALUE_MAX`] bytes (at a character boundary) with a marker.
#[cfg(feature = "sqlite")]
fn cut_value(t: &[u8]) -> String {
    if t.len() <= SQL_VALUE_MAX {
        return String::from_utf8_lossy(t).into_owned();
    }
    let mut end = SQL_VALUE_MAX;
    while end > 0 && (t[end] & 0xC0) == 0x80 {
        end -= 1;
    }
    format!(
        "{}…[cut at {end} of {} bytes]",
        String::from_utf8_lossy(&t[..end]),
        t.len()
    )
}

/// SQLite's heap limit (process-wide), in bytes.
#[cfg(feature = "sqlite")]
const SQL_HEAP_LIMIT: i64 = 512 << 20;

/// The longest a SQL query may run.
#[cfg(feature = "sqlite")]
const SQL_TIME_LIMIT: Duration = Duration::from_secs(5);

/// A read-only SQLite database: connections opened as queries need them, kept for the
/// next query. A SQLite connection serves one query at a time, and a slow query must
/// delay only itself, so concurrent queries each get their own.
#[cfg(feature = "sqlite")]
pub struct Sql {
    path: std::path::PathBuf,
    idle: std::sync::Mutex<Vec<rusqlite::Connection>>,
}

/// The most idle connections kept.
#[cfg(feature = "sqlite")]
const SQL_IDLE: usize = 4;

#[cfg(feature = "sqlite")]
impl Sql {
    /// Opens `path` read-only, with an authorizer that allows reading and nothing else.
    pub fn open(path: &Path) -> Result<Self, ToolError> {
        let first = Self::connect(path)?;
        Ok(Sql {
            path: path.to_path_buf(),
            idle: std::sync::Mutex::new(vec![first]),
        })
    }

    fn connect(path: &Path) -> Result<rusqlite::Connection, ToolError> {
        use rusqlite::OpenFlags;
        let err = |e: String| ToolError::Config(format!("`db` {}: {e}", path.display()));
        if !path.is_file() {
            return Err(err("no such file".into()));
        }
        let mut conn = rusqlite::Connection::open_with_flags(
            path,
            OpenFlags::SQLITE_OPEN_READ_ONLY | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .map_err(|e| err(e.to_string()))?;
        conn.pragma_update(None, "query_only", true)
            .map_err(|e| err(e.to_string()))?;
        // A sort of large rows spilled gigabytes into temporary files: temporary storage
        // stays in memory, and SQLite's heap is bounded, so a query fails with "out of
        // memory" instead of taking the disk or the machine.
        conn.pragma_update(None, "temp_store", "MEMORY")
            .map_err(|e| err(e.to_string()))?;
        conn.pragma_update(None, "hard_heap_limit", SQL_HEAP_LIMIT)
            .map_err(|e| err(e.to_string()))?;
        // No other database can be attached, so nothing writable can be reached.
        conn.set_limit(rusqlite::limits::Limit::SQLITE_LIMIT_ATTACHED, 0)
            .map_err(|e| err(e.to_string()))?;
        conn.query_row("SELECT count(*) FROM sqlite_schema", [], |_| Ok(()))
            .map_err(|e| err(format!("not a readable SQLite database: {e}")))?;
        // SQLite's authorizer allows reading and nothing else, so no statement can even be
        // prepared that changes a setting (`PRAGMA query_only = OFF`), attaches a file or
        // loads an extension.
        conn.authorizer(Some(|ctx: rusqlite::hooks::AuthContext<'_>| {
            use rusqlite::hooks::{AuthAction, Authorization};
            match ctx.action {
                AuthAction::Select | AuthAction::Read { .. } | AuthAction::Recursive => {
                    Authorization::Allow
                }
                AuthAction::Pragma {
                    pragma_value: None, ..
                } => Authorization::Allow,
                AuthAction::Function { function_name }
                    if !function_name.eq_ignore_ascii_case("load_extension") =>
                {
                    Authorization::Allow
                }
                _ => Authorization::Deny,
            }
        }))
        .map_err(|e| err(e.to_string()))?;
        Ok(conn)
    }

    /// Runs one read-only statement; every failure is a result the model reads.
    pub fn query(&self, sql: &str) -> ToolResult {
        let idle = self.idle.lock().ok().and_then(|mut idle| idle.pop());
        let mut db = match idle.map_or_else(|| Self::connect(&self.path), Ok) {
            Ok(db) => db,
            Err(e) => return ToolResult::err(format!("cannot open the database: {e}")),
        };
        let result = Self::run(&mut db, sql);
        if let Ok(mut idle) = self.idle.lock()
            && idle.len() < SQL_IDLE
        {
            idle.push(db);
        }
        result
    }

    fn run(db: &mut rusqlite::Connection, sql: &str) -> ToolResult {
        use rusqlite::types::ValueRef;
        if sql.trim().is_empty() {
            return ToolResult::err("sql is empty");
        }
        // SQLite reads a C string: a NUL would silently cut the statement short. Other
        // control characters have no business in a query either.
        if sql
            .chars()
            .any(|c| c.is_control() && !matches!(c, '\t' | '\n' | '\r'))
        {
            return ToolResult::err("refused: the SQL contains control characters");
        }
        let started = Instant::now();
        if let Err(e) =
            db.progress_handler(10_000, Some(move || started.elapsed() > SQL_TIME_LIMIT))
        {
            return ToolResult::err(format!("cannot bound the query's time: {e}"));
        }
        // The progress handler runs every 10,000 VM steps, and a query of few but costly
        // steps (200 rows of a 100 MB printf) outran it for 24 s: a watchdog interrupts
        // the query by wall clock whatever it does.
        let (done, finished) = std::sync::mpsc::channel::<()>();
        let interrupt = db.get_interrupt_handle();
        let watchdog = std::thread::spawn(move || {
            if finished.recv_timeout(SQL_TIME_LIMIT) == Err(RecvTimeoutError::Timeout) {
                interrupt.interrupt();
            }
        });
        let result = (|| -> Result<Value, String> {
            let mut stmt = db.prepare(sql).map_err(|e| e.to_string())?;
            if !stmt.readonly() {
                return Err("only read-only statements are allowed".into());
            }
            let columns: Vec<String> = stmt.column_names().map(|c| c.to_string()).collect();
            let mut rows = stmt.query([]).map_err(|e| e.to_string())?;
            let mut out = Vec::new();
            let mut truncated = false;
            let mut bytes = 0;
            while let Some(row) = rows.next().map_err(|e| e.to_string())? {
                if out.len() == SQL_MAX_ROWS || bytes > SQL_MAX_BYTES {
                    truncated = true;
                    break;
                }
                let mut obj = Map::new();
                for (i, name) in columns.iter().enumerate() {
                    let v = match row.get_ref(i).map_err(|e| e.to_string())? {
                        ValueRef::Null => Value::Null,
                        ValueRef::Integer(n) => json!(n),
                        ValueRef::Real(f) => json!(f),
                        ValueRef::Text(t) => {
                            bytes += t.len().min(SQL_VALUE_MAX);
                            json!(cut_value(t))
                        }
                        ValueRef::Blob(b) => json!(format!("<blob of {} bytes>", b.len())),
                    };
                    obj.insert(name.clone(), v);
                }
                out.push(Value::Object(obj));
            }
            Ok(
                json!({"columns": columns, "rows": out, "row_count": out.len(), "truncated": truncated}),
            )
        })();
        let _ = db.progress_handler(0, None::<fn() -> bool>);
        let _ = done.send(());
        let _ = watchdog.join();
        match result {
            Ok(v) => ToolResult::ok(v),
            Err(e) if e.contains("interrupted") => ToolResult::err(format!(
                "query took longer than {SQL_TIME_LIMIT:?} and was stopped"
            )),
            Err(e) => ToolResult::err(format!("refused: {e}")),
        }
    }
}

/// A read-only SQLite database; this build has no SQLite.
#[cfg(not(feature = "sqlite"))]
pub struct Sql(std::convert::Infallible);

#[cfg(not(feature = "sqlite"))]
impl Sql {
    /// Always an error: this build of toolloop has no SQLite.
    pub fn open(path: &Path) -> Result<Self, ToolError> {
        Err(ToolError::Config(format!(
            "`db` {}: this build of toolloop has no SQLite (build it with the `sqlite` feature)",
            path.display()
        )))
    }

    /// Never runs: no `Sql` can exist in this build.
    pub fn query(&self, _sql: &str) -> ToolResult {
        match self.0 {}
    }
}
