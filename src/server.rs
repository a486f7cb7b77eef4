//! The built-in tool server: the HTTP tool API (`schemas/tool_api.openapi.json`) over any
//! [`ToolSource`], synchronous, on a few threads. `toolloop serve-tools` runs it; tests and
//! the offline demo start it in-process on a free port of 127.0.0.1.
//!
//! It checks what a client could get wrong before a tool runs: an unknown tool is a 404,
//! arguments that fail the tool's schema a 400 with the reason, a body that is not a JSON
//! object a 400, a body over 1 MiB a 413.

use std::collections::HashMap;
use std::io::Read;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use serde_json::{Map, Value, json};

use crate::deadline::Deadline;
use crate::tools::{ToolError, ToolSource, ToolSpec};

/// The largest request body accepted.
pub const MAX_BODY: usize = 1 << 20;
const WORKERS: usize = 4;

struct Shared {
    source: Mutex<Box<dyn ToolSource>>,
    specs: Vec<ToolSpec>,
    validators: HashMap<String, Arc<jsonschema::Validator>>,
}

/// A tool server bound to an address, not yet serving.
pub struct ToolServer {
    http: Arc<tiny_http::Server>,
    shared: Arc<Shared>,
    addr: SocketAddr,
}

/// A server running on background threads; dropping it stops them.
///
/// ```
/// use toolloop::server::ToolServer;
/// use toolloop::tools::builtin::{Builtin, BuiltinConfig};
///
/// let tools = Builtin::new(&BuiltinConfig::default())?;
/// let server = ToolServer::bind("127.0.0.1:0", Box::new(tools))?.spawn();
/// assert!(server.url().starts_with("http://127.0.0.1:"));
/// # Ok::<(), toolloop::tools::ToolError>(())
/// ```
pub struct RunningServer {
    http: Arc<tiny_http::Server>,
    threads: Vec<JoinHandle<()>>,
    url: String,
}

impl ToolServer {
    /// Lists the source's tools and binds `addr` (`127.0.0.1:0` for a free port).
    pub fn bind(addr: &str, mut source: Box<dyn ToolSource>) -> Result<Self, ToolError> {
        let specs = source.list(Deadline::none())?;
        let validators = specs
            .iter()
            .filter_map(|s| {
                crate::validate::compile(&s.input_schema)
                    .ok()
                    .map(|v| (s.name.clone(), v))
            })
            .collect();
        let http = tiny_http::Server::http(addr)
            .map_err(|e| ToolError::Config(format!("cannot listen on {addr}: {e}")))?;
        let addr = http
            .server_addr()
            .to_ip()
            .ok_or_else(|| ToolError::Config(format!("{addr} is not an IP address")))?;
        Ok(ToolServer {
            http: Arc::new(http),
            shared: Arc::new(Shared {
                source: Mutex::new(source),
                specs,
                validators,
            }),
            addr,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL clients use.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Serves until the process ends.
    pub fn run(self) {
        let mut running = self.spawn();
        for t in std::mem::take(&mut running.threads) {
            let _ = t.join();
        }
    }

    /// Serves on background threads.
    pub fn spawn(self) -> RunningServer {
        let url = self.url();
        let threads = (0..WORKERS)
            .map(|_| {
                let http = Arc::clone(&self.http);
                let shared = Arc::clone(&self.shared);
                std::thread::spawn(move || {
                    while let Ok(req) = http.recv() {
                        handle(&shared, req);
                    }
                })
            })
            .collect();
        RunningServer {
            http: self.http,
            threads,
            url,
        }
    }
}

impl RunningServer {
    /// The base URL clients use.
    pub fn url(&self) -> &str {
        &self.url
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        for _ in &self.threads {
            self.http.unblock();
        }
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

fn respond(req: tiny_http::Request, status: u16, body: &Value) {
    respond_with(req, status, body, None);
}

/// A JSON response; a 405 names the methods that are allowed (`Allow`, RFC 9110).
fn respond_with(req: tiny_http::Request, status: u16, body: &Value, allow: Option<&str>) {
    let bytes = serde_json::to_vec(body).unwrap_or_default();
    let header = tiny_http::Header::from_bytes("Content-Type", "application/json")
        .expect("static header is valid");
    let mut resp = tiny_http::Response::from_data(bytes)
        .with_status_code(status)
        .with_header(header);
    if let Some(methods) = allow
        && let Ok(h) = tiny_http::Header::from_bytes("Allow", methods)
    {
        resp.add_header(h);
    }
    let _ = req.respond(resp);
}

fn fail(req: tiny_http::Request, status: u16, message: &str) {
    respond(req, status, &json!({"ok": false, "error": message}));
}

fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn handle(shared: &Shared, mut req: tiny_http::Request) {
    let path = req.url().split('?').next().unwrap_or("").to_string();
    let method = req.method().clone();
    use tiny_http::Method::{Get, Post};
    match (&method, path.as_str()) {
        (Get, "/health") => respond(req, 200, &json!({"status": "ok"})),
        (Get, "/tools") => respond(req, 200, &json!({"tools": shared.specs})),
        (Post, p) if p.starts_with("/tools/") => {
            let Some(name) = percent_decode(&p["/tools/".len()..]) else {
                return fail(req, 400, "the tool name in the path is not valid");
            };
            if !shared.specs.iter().any(|s| s.name == name) {
                let names: Vec<&str> = shared.specs.iter().map(|s| s.name.as_str()).collect();
                let msg = format!(
                    "unknown tool '{name}'; available tools: {}",
                    names.join(", ")
                );
                return fail(req, 404, &msg);
            }
            let mut body = Vec::new();
            let read = req
                .as_reader()
                .take(MAX_BODY as u64 + 1)
                .read_to_end(&mut body);
            if read.is_err() {
                return fail(req, 400, "cannot read the request body");
            }
            if body.len() > MAX_BODY {
                return fail(req, 413, "arguments larger than 1 MiB");
            }
            let args: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
                Map::new()
            } else {
                match serde_json::from_slice::<Value>(&body) {
                    Ok(Value::Object(m)) => m,
                    Ok(_) => return fail(req, 400, "the body must be a JSON object of arguments"),
                    // serde_json's own words say what is wrong: a syntax error with its
                    // line and column, or nesting past its recursion limit.
                    Err(e) => return fail(req, 400, &format!("the body is not valid JSON: {e}")),
                }
            };
            if let Some(v) = shared.validators.get(&name)
                && let Some(problems) =
                    crate::validate::describe_errors(v, &Value::Object(args.clone()), true)
            {
                return fail(req, 400, &format!("invalid arguments: {problems}"));
            }
            let result = match shared.source.lock() {
                Ok(source) => source.call(&name, &args, Deadline::none()),
                Err(_) => return fail(req, 500, "the tool crashed earlier; restart the server"),
            };
            match result {
                Ok(r) => respond(req, 200, &serde_json::to_value(r).unwrap_or(Value::Null)),
                Err(e) => fail(req, 500, &e.to_string()),
            }
        }
        (_, "/health" | "/tools") => respond_with(
            req,
            405,
            &json!({"ok": false, "error": "method not allowed"}),
            Some("GET"),
        ),
        (_, p) if p.starts_with("/tools/") => respond_with(
            req,
            405,
            &json!({"ok": false, "error": "method not allowed"}),
            Some("POST"),
        ),
        _ => fail(
            req,
            404,
            "not found: the API has /health, /tools and /tools/{name}",
        ),
    }
}
