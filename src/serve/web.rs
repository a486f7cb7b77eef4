//! `toolloop web`: a page to ask, watch every step of a run as it happens, and answer the
//! model's questions; and the small HTTP API under it (`schemas/web_api.openapi.json`).
//!
//! The API: start a run in a conversation, stream its events as Server-Sent Events (one
//! JSON object per event, the transcript's shapes), answer a pending `clarify`, stop a
//! run, list the tools, read a conversation. The page (`web/`) is compiled into the
//! binary and fetches nothing from elsewhere, so it works with no network.
//!
//! What the server guards against, beyond the bounds every toolloop server keeps
//! ([`crate::serve::bounds`]):
//! - **other sites**: a page the person visits could otherwise drive their tools through
//!   the browser. A request whose `Host` is not the address served (DNS rebinding) or
//!   whose `Origin` is another site is refused with 403, and there is no CORS at all;
//! - **running out**: at most a set number of runs in progress (503 beyond it), one at a
//!   time per conversation (409), request bodies capped (413);
//! - **what models and tools write**: answers and non-JSON results are rendered as
//!   Markdown and sanitised on the server ([`crate::serve::markdown`]); the page puts every
//!   other string in as text, never as HTML, and a Content-Security-Policy lets only the
//!   page's own script run.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Path, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use crate::checks::CheckLevels;
use crate::serve::bounds::{BodyError, Bound, Bounds, Hosts, Serving, read_body};

pub mod runs;

pub use runs::{MakeBackend, Runs, StartError};

/// The largest request body: a question or an answer, not a document.
pub const MAX_BODY: usize = 64 << 10;
/// The longest question or answer accepted, in bytes.
pub const MAX_TEXT: usize = 16 << 10;

const PAGE: &str = include_str!("../../web/index.html");
const SCRIPT: &str = include_str!("../../web/app.js");
const STYLE: &str = include_str!("../../web/app.css");

/// Only the page's own files; no inline script, no frames, nothing from elsewhere.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; base-uri 'none'; form-action 'none'; \
                   frame-ancestors 'none'";

/// A web server bound to its address, not yet serving.
pub struct WebServer {
    bound: Bound,
    addr: SocketAddr,
    runs: Arc<Runs>,
    hosts: Hosts,
}

/// A web server serving on background threads; dropping it stops it.
pub struct RunningWeb {
    serving: Serving,
    url: String,
}

impl RunningWeb {
    /// The page's address.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until the process ends.
    pub fn wait(self) {
        self.serving.wait();
    }
}

impl WebServer {
    /// Binds `addr` (`127.0.0.1:0` for a free port) to serve `runs`. The `Host` values
    /// accepted are the address itself; on loopback `localhost` with its port too; bound
    /// to every interface, any IP address with its port (never another name).
    pub fn bind(addr: &str, runs: Runs) -> std::io::Result<Self> {
        let listener = std::net::TcpListener::bind(addr)?;
        let bounds = Bounds {
            max_body: MAX_BODY,
            ..Bounds::default()
        };
        let bound = crate::serve::bounds::bind(listener, &bounds)?;
        let addr = bound.addr()?;
        let hosts = Hosts::serving(addr);
        Ok(WebServer {
            bound,
            addr,
            runs: Arc::new(runs),
            hosts,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Serves on background threads.
    pub fn spawn(self) -> RunningWeb {
        let url = format!("http://{}", self.addr);
        let hosts = Arc::new(self.hosts);
        let router = router(Arc::clone(&self.runs)).layer(middleware::from_fn(
            move |req: Request, next: Next| {
                let hosts = Arc::clone(&hosts);
                async move { guard(&hosts, req, next).await }
            },
        ));
        RunningWeb {
            serving: self.bound.serve(router),
            url,
        }
    }
}

/// Everything `toolloop web` does before it serves: connects the tools, checks the
/// model server has the model (so a server that is down is said now, not at the first
/// question), and binds `addr`.
#[cfg_attr(not(feature = "cli"), allow(dead_code))]
pub fn start(
    config: crate::config::Config,
    addr: SocketAddr,
    max_runs: usize,
) -> Result<RunningWeb, crate::run::orchestrator::OrchestratorError> {
    use crate::run::orchestrator::OrchestratorError;
    let runs = Runs::from_config(config, max_runs)?;
    let server = WebServer::bind(&addr.to_string(), runs)
        .map_err(|e| OrchestratorError::Config(super::cannot_listen(&addr, &e)))?;
    Ok(server.spawn())
}

fn router(runs: Arc<Runs>) -> Router {
    Router::new()
        .route(
            "/",
            get(|| async { file(PAGE, "text/html; charset=utf-8") }),
        )
        .route(
            "/app.js",
            get(|| async { file(SCRIPT, "text/javascript; charset=utf-8") }),
        )
        .route(
            "/app.css",
            get(|| async { file(STYLE, "text/css; charset=utf-8") }),
        )
        .route("/favicon.ico", get(|| async { StatusCode::NO_CONTENT }))
        .route("/api/tools", get(tools))
        .route("/api/conversations", post(new_conversation))
        .route(
            "/api/conversations/{id}",
            get(conversation).delete(forget_conversation),
        )
        .route("/api/conversations/{id}/runs", post(start_run))
        .route("/api/runs/{id}/events", get(events))
        .route("/api/runs/{id}/answer", post(answer))
        .route("/api/runs/{id}/approve", post(approve))
        .route("/api/runs/{id}/stop", post(stop))
        .route("/api/runs/{id}/transcript", get(transcript))
        .fallback(|| async { fail(StatusCode::NOT_FOUND, "no such page or API path") })
        .with_state(runs)
}

/// Refuses requests from elsewhere, and sets the headers every response carries.
async fn guard(hosts: &Hosts, req: Request, next: Next) -> Response {
    if let Some(why) = hosts.refuses(req.headers()) {
        return fail(StatusCode::FORBIDDEN, why);
    }
    let mut response = next.run(req).await;
    let h = response.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.entry(header::CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    response
}

/// A JSON body (axum's own `Json` needs a feature the tool server does not).
struct Js(Value);

impl IntoResponse for Js {
    fn into_response(self) -> Response {
        (
            [(header::CONTENT_TYPE, "application/json")],
            self.0.to_string(),
        )
            .into_response()
    }
}

fn file(body: &'static str, kind: &'static str) -> Response {
    ([(header::CONTENT_TYPE, kind)], body).into_response()
}

fn fail(status: StatusCode, message: &str) -> Response {
    (status, Js(json!({"error": message}))).into_response()
}

async fn tools(State(runs): State<Arc<Runs>>) -> Response {
    let checks: Vec<Value> = crate::checks::all()
        .map(|c| json!({"name": c.name, "on": runs.checks().is_on(c.name), "what": c.what}))
        .collect();
    let body = json!({"model": runs.model(), "tools": runs.catalogue().specs(), "checks": checks});
    Js(body).into_response()
}

async fn new_conversation(State(runs): State<Arc<Runs>>) -> Response {
    match runs.new_conversation() {
        Some(id) => (StatusCode::CREATED, Js(json!({"id": id}))).into_response(),
        None => fail(
            StatusCode::SERVICE_UNAVAILABLE,
            "every conversation kept has a run in progress; try again when one ends",
        ),
    }
}

async fn conversation(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> Response {
    match runs.conversation(&id) {
        Some(c) => Js(c).into_response(),
        None => no_conversation(),
    }
}

async fn forget_conversation(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> Response {
    match runs.forget(&id) {
        true => StatusCode::NO_CONTENT.into_response(),
        false => no_conversation(),
    }
}

fn no_conversation() -> Response {
    fail(
        StatusCode::NOT_FOUND,
        "no such conversation (it may have been forgotten); start a new one",
    )
}

fn no_run() -> Response {
    fail(StatusCode::NOT_FOUND, "no such run")
}

/// Reads a JSON body `{"<field>": "text"}` within the caps, or the response saying why not.
async fn text_field(headers: &HeaderMap, body: Body, field: &str) -> Result<String, Response> {
    let value = json_body(headers, body).await?;
    text_of(&value, field).map_err(|r| *r)
}

/// The run's own check levels from `{"checks": {"NAME": true|false}}`, over the server's;
/// an error says what is wrong with them.
fn checks_of(value: &Value, defaults: &CheckLevels) -> Result<Option<CheckLevels>, String> {
    let Some(set) = value.get("checks") else {
        return Ok(None);
    };
    let set = set
        .as_object()
        .ok_or("\"checks\" is an object of check names and true or false")?;
    let mut levels = defaults.clone();
    for (name, on) in set {
        let on = on
            .as_bool()
            .ok_or_else(|| format!("\"checks\".\"{name}\" must be true or false"))?;
        levels.set(name, on)?;
    }
    Ok(Some(levels))
}

/// Reads a JSON body within the caps, or the response saying why not.
async fn json_body(headers: &HeaderMap, body: Body) -> Result<Value, Response> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(fail(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the body as application/json",
        ));
    }
    let bytes = match read_body(body, MAX_BODY, Duration::from_secs(30)).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return Err(fail(
                StatusCode::PAYLOAD_TOO_LARGE,
                "the body is larger than 64 KiB",
            ));
        }
        Err(BodyError::TooSlow) => {
            return Err(fail(
                StatusCode::REQUEST_TIMEOUT,
                "the body did not arrive in time",
            ));
        }
        Err(BodyError::Broken) => {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                "cannot read the request body",
            ));
        }
    };
    serde_json::from_slice(&bytes).map_err(|e| {
        fail(
            StatusCode::BAD_REQUEST,
            &format!("the body is not valid JSON: {e}"),
        )
    })
}

/// The non-empty, bounded string `field` of a JSON body.
fn text_of(value: &Value, field: &str) -> Result<String, Box<Response>> {
    let text = value[field].as_str().map(str::trim).unwrap_or("");
    if text.is_empty() {
        return Err(Box::new(fail(
            StatusCode::BAD_REQUEST,
            &format!("the body needs a non-empty \"{field}\" string"),
        )));
    }
    if text.len() > MAX_TEXT {
        return Err(Box::new(fail(
            StatusCode::PAYLOAD_TOO_LARGE,
            &format!("\"{field}\" is longer than 16 KiB"),
        )));
    }
    Ok(text.to_string())
}

async fn start_run(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let body = match json_body(&headers, body).await {
        Ok(v) => v,
        Err(r) => return r,
    };
    let question = match text_of(&body, "question") {
        Ok(q) => q,
        Err(r) => return *r,
    };
    let checks = match checks_of(&body, runs.checks()) {
        Ok(c) => c,
        Err(e) => return fail(StatusCode::BAD_REQUEST, &e),
    };
    match runs.start(&id, question, checks) {
        Ok(run) => (
            StatusCode::ACCEPTED,
            Js(json!({
                "run": run.id,
                "events": format!("/api/runs/{}/events", run.id),
            })),
        )
            .into_response(),
        Err(StartError::NoConversation) => no_conversation(),
        Err(StartError::Busy(run)) => (
            StatusCode::CONFLICT,
            Js(json!({
                "error": "this conversation has a run in progress; stop it or wait for it",
                "run": run,
            })),
        )
            .into_response(),
        Err(StartError::Full) => {
            let mut r = fail(
                StatusCode::SERVICE_UNAVAILABLE,
                "as many runs as allowed are in progress; try again in a moment",
            );
            r.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
            r
        }
    }
}

/// The run's events from the start (or after `Last-Event-ID`), then live, as SSE; the
/// stream ends after the run's last event.
async fn events(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Response {
    let Some(run) = runs.run(&id) else {
        return no_run();
    };
    let from = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .map_or(0, |n| n + 1);
    let changed = run.subscribe();
    // Dropped with the stream, when the page goes away.
    let watching = run.watched();
    let stream = futures_util::stream::unfold(
        (
            run,
            changed,
            from,
            Vec::<Value>::new().into_iter(),
            watching,
        ),
        |(run, mut changed, mut next, mut pending, watching)| async move {
            loop {
                if let Some(e) = pending.next() {
                    let sse = SseEvent::default().id(next.to_string()).data(e.to_string());
                    next += 1;
                    return Some((
                        Ok::<_, std::convert::Infallible>(sse),
                        (run, changed, next, pending, watching),
                    ));
                }
                changed.borrow_and_update();
                let (fresh, finished) = run.events_from(next);
                if !fresh.is_empty() {
                    pending = fresh.into_iter();
                    continue;
                }
                if finished {
                    return None;
                }
                if changed.changed().await.is_err() {
                    return None;
                }
            }
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(Duration::from_secs(15)))
        .into_response()
}

async fn answer(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(run) = runs.run(&id) else {
        return no_run();
    };
    let text = match text_field(&headers, body, "answer").await {
        Ok(t) => t,
        Err(r) => return r,
    };
    match run.answer(text) {
        true => (StatusCode::ACCEPTED, Js(json!({"answered": true}))).into_response(),
        false => fail(StatusCode::CONFLICT, "the run is not waiting for an answer"),
    }
}

async fn approve(
    State(runs): State<Arc<Runs>>,
    Path(id): Path<String>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let Some(run) = runs.run(&id) else {
        return no_run();
    };
    let text = match text_field(&headers, body, "answer").await {
        Ok(t) => t,
        Err(r) => return r,
    };
    let answer = match text.as_str() {
        "yes" => crate::Answer::Yes,
        "no" => crate::Answer::No,
        "always" => crate::Answer::Always,
        "without" => crate::Answer::Without,
        _ => {
            return fail(
                StatusCode::BAD_REQUEST,
                "\"answer\" is \"yes\", \"no\", \"always\" or \"without\"",
            );
        }
    };
    match run.approve(answer) {
        true => (StatusCode::ACCEPTED, Js(json!({"approved": text}))).into_response(),
        false => fail(
            StatusCode::CONFLICT,
            "no call of the run is waiting for approval",
        ),
    }
}

async fn stop(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> Response {
    let Some(run) = runs.run(&id) else {
        return no_run();
    };
    run.stop();
    let finished = run.finished();
    (StatusCode::ACCEPTED, Js(json!({"stopping": !finished}))).into_response()
}

async fn transcript(State(runs): State<Arc<Runs>>, Path(id): Path<String>) -> Response {
    let Some(run) = runs.run(&id) else {
        return no_run();
    };
    let disposition = format!("attachment; filename=\"toolloop-{id}.jsonl\"");
    let mut r = (
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        run.transcript(),
    )
        .into_response();
    if let Ok(v) = HeaderValue::from_str(&disposition) {
        r.headers_mut().insert(header::CONTENT_DISPOSITION, v);
    }
    r
}
