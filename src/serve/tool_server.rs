//! The built-in tool server: the HTTP tool API (`schemas/tool_api.openapi.json`) over any
//! [`ToolSource`]. `toolloop serve-tools` runs it; tests and the offline demo start it
//! in-process on a free port of 127.0.0.1.
//!
//! It checks what a client could get wrong before a tool runs: an unknown tool is a 404,
//! arguments that fail the tool's schema a 400 with the reason, a body that is not a JSON
//! object a 400, a body over 1 MiB a 413. What a hostile client could do to the server
//! itself (huge headers, endless bodies, idle connections) is bounded by [`crate::serve::bounds`].
//! Each call runs on its own blocking thread, so a slow tool delays only its own caller.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State, rejection::PathRejection};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Map, Value, json};

use crate::deadline::Deadline;
use crate::serve::bounds::{BodyError, Bound, Bounds, Serving, read_body};
use crate::tools::{ToolError, ToolSource, ToolSpec};

/// The largest request body accepted.
pub const MAX_BODY: usize = 1 << 20;
/// The longest one tool call may take on the server; the tools bound themselves more
/// tightly (`sql_query` 5 s), this is for tools that would not.
pub const CALL_LIMIT: Duration = Duration::from_secs(120);

struct Shared {
    source: Box<dyn ToolSource>,
    specs: Vec<ToolSpec>,
    validators: HashMap<String, Arc<jsonschema::Validator>>,
}

/// A tool server bound to an address, not yet serving.
pub struct ToolServer {
    bound: Bound,
    shared: Arc<Shared>,
    addr: SocketAddr,
    bounds: Bounds,
}

/// A server running on background threads; dropping it stops them.
///
/// ```
/// use toolloop::serve::ToolServer;
/// use toolloop::tools::{Builtin, BuiltinConfig};
///
/// let tools = Builtin::new(&BuiltinConfig::default())?;
/// let server = ToolServer::bind("127.0.0.1:0", Box::new(tools))?.spawn();
/// assert!(server.url().starts_with("http://127.0.0.1:"));
/// # Ok::<(), toolloop::tools::ToolError>(())
/// ```
pub struct RunningServer {
    serving: Serving,
    url: String,
}

impl ToolServer {
    /// Lists the source's tools and binds `addr` (`127.0.0.1:0` for a free port).
    pub fn bind(addr: &str, source: Box<dyn ToolSource>) -> Result<Self, ToolError> {
        let bounds = Bounds {
            max_body: MAX_BODY,
            ..Bounds::default()
        };
        Self::bind_with(addr, source, bounds)
    }

    /// [`ToolServer::bind`] within other bounds than the defaults (tests shorten the
    /// timeouts). The event loop starts here, so a failure to start it is an error.
    pub fn bind_with(
        addr: &str,
        mut source: Box<dyn ToolSource>,
        bounds: Bounds,
    ) -> Result<Self, ToolError> {
        let specs = source.list(Deadline::none())?;
        let validators = specs
            .iter()
            .filter_map(|s| {
                crate::validate::compile(&s.input_schema)
                    .ok()
                    .map(|v| (s.name.clone(), v))
            })
            .collect();
        let listener = std::net::TcpListener::bind(addr)
            .map_err(|e| ToolError::Config(super::cannot_listen(&addr, &e)))?;
        let cannot = |e: std::io::Error| ToolError::Config(super::cannot_listen(&addr, &e));
        let bound = crate::serve::bounds::bind(listener, &bounds).map_err(cannot)?;
        let addr = bound.addr().map_err(cannot)?;
        Ok(ToolServer {
            bound,
            shared: Arc::new(Shared {
                source,
                specs,
                validators,
            }),
            addr,
            bounds,
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
        let running = self.spawn();
        let RunningServer { serving, .. } = running;
        serving.wait();
    }

    /// Serves on background threads.
    ///
    /// # Panics
    /// When the operating system refuses one more thread.
    pub fn spawn(self) -> RunningServer {
        let url = self.url();
        let max_body = self.bounds.max_body;
        let body_timeout = self.bounds.body_timeout;
        let router = Router::new()
            .route(
                "/health",
                get(|| async { reply(StatusCode::OK, json!({"status": "ok"})) })
                    .fallback(|| async { not_allowed("GET") }),
            )
            .route(
                "/tools",
                get(|State(s): State<Arc<Shared>>| async move {
                    reply(StatusCode::OK, json!({"tools": s.specs}))
                })
                .fallback(|| async { not_allowed("GET") }),
            )
            .route(
                "/tools/{name}",
                post(
                    move |state: State<Arc<Shared>>,
                          name: Result<Path<String>, PathRejection>,
                          body: Body| {
                        call(state, name, body, max_body, body_timeout)
                    },
                )
                .fallback(|| async { not_allowed("POST") }),
            )
            .fallback(|| async {
                fail(
                    StatusCode::NOT_FOUND,
                    "not found: the API has /health, /tools and /tools/{name}",
                )
            })
            .with_state(self.shared);
        let serving = self.bound.serve(router);
        RunningServer { serving, url }
    }
}

impl RunningServer {
    /// The base URL clients use.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.serving.addr()
    }
}

fn reply(status: StatusCode, body: Value) -> Response {
    let bytes = serde_json::to_vec(&body).unwrap_or_default();
    (
        status,
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        )],
        bytes,
    )
        .into_response()
}

fn fail(status: StatusCode, message: &str) -> Response {
    reply(status, json!({"ok": false, "error": message}))
}

/// A 405 names the methods that are allowed (`Allow`, RFC 9110).
fn not_allowed(allow: &'static str) -> Response {
    let mut r = fail(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static(allow));
    r
}

async fn call(
    State(shared): State<Arc<Shared>>,
    name: Result<Path<String>, PathRejection>,
    body: Body,
    max_body: usize,
    body_timeout: Duration,
) -> Response {
    let Ok(Path(name)) = name else {
        return fail(
            StatusCode::BAD_REQUEST,
            "the tool name in the path is not valid",
        );
    };
    if !shared.specs.iter().any(|s| s.name == name) {
        let names: Vec<&str> = shared.specs.iter().map(|s| s.name.as_str()).collect();
        let msg = format!(
            "unknown tool '{name}'; available tools: {}",
            names.join(", ")
        );
        return fail(StatusCode::NOT_FOUND, &msg);
    }
    let body = match read_body(body, max_body, body_timeout).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return fail(StatusCode::PAYLOAD_TOO_LARGE, "arguments larger than 1 MiB");
        }
        Err(BodyError::TooSlow) => {
            return fail(
                StatusCode::REQUEST_TIMEOUT,
                "the request body did not arrive in time",
            );
        }
        Err(BodyError::Broken) => {
            return fail(StatusCode::BAD_REQUEST, "cannot read the request body");
        }
    };
    let args: Map<String, Value> = if body.iter().all(u8::is_ascii_whitespace) {
        Map::new()
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    "the body must be a JSON object of arguments",
                );
            }
            // serde_json's own words say what is wrong: a syntax error with its line and
            // column, or nesting past its recursion limit.
            Err(e) => {
                return fail(
                    StatusCode::BAD_REQUEST,
                    &format!("the body is not valid JSON: {e}"),
                );
            }
        }
    };
    if let Some(v) = shared.validators.get(&name)
        && let Some(problems) =
            crate::validate::describe_errors(v, &Value::Object(args.clone()), true)
    {
        return fail(
            StatusCode::BAD_REQUEST,
            &format!("invalid arguments: {problems}"),
        );
    }
    let job = tokio::task::spawn_blocking(move || {
        shared
            .source
            .call(&name, &args, Deadline::after(CALL_LIMIT))
    });
    match job.await {
        Ok(Ok(r)) => reply(
            StatusCode::OK,
            serde_json::to_value(r).unwrap_or(Value::Null),
        ),
        Ok(Err(e)) => fail(StatusCode::INTERNAL_SERVER_ERROR, &e.to_string()),
        Err(_) => fail(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the tool crashed while it ran",
        ),
    }
}
