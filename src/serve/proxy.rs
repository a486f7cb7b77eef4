//! `toolloop proxy`: toolloop's turn for any OpenAI or Ollama client.
//!
//! A client (Open WebUI, an agent framework, a script on the `openai` or `ollama` package)
//! sends its chat request with `tools` here instead of to its model server. The proxy runs
//! toolloop's turn on it — the schema narrowed to those tools, repair, validation, the
//! checks' decision — against the upstream server, and answers in the client's API: calls
//! as `tool_calls` for the client to run, or the answer as `content`. It runs no tool: the
//! client sends the results back as `tool` messages, and they become the turn's history
//! ([`crate::run::orchestrator::Orchestrator::run_after_rounds`]).
//!
//! A request without tools is not toolloop's business: it goes to the upstream unchanged,
//! streamed as it comes back. Nothing is kept between requests, so any number of proxies
//! can stand behind a load balancer.
//!
//! Bounds, as every toolloop server keeps them ([`crate::serve::bounds`]): headers, bodies
//! and time; `Host` and `Origin` checked; a key required beyond loopback. A client that
//! goes away mid-stream stops its run, which cuts the upstream request off.

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::config::{BackendKind, Config};
use crate::deadline::{Deadline, StopHandle};
use crate::run::ending::Ending;
use crate::run::events::Event;
use crate::run::orchestrator::{Orchestrator, OrchestratorError};
use crate::serve::bounds::{BodyError, Bounds, Hosts, Serving, read_body};
use crate::tool_spec::ToolSpec;
use crate::tools::{ToolError, ToolResult, ToolSource};

pub(crate) mod wire;

use wire::{Api, Reply, Tokens};

/// The largest request body: a conversation with its tool results.
pub const MAX_BODY: usize = 8 << 20;
/// The most upstream bytes passed through for one request without tools.
const MAX_PASSED: usize = 64 << 20;
/// The response header that says what toolloop's checks did, each line JSON-quoted.
pub const CHECKS_HEADER: &str = "x-toolloop-checks";

/// What the proxy serves with.
#[derive(Debug, Clone)]
pub struct ProxySettings {
    /// The upstream, the checks and every other setting of a run (as `ask` takes them).
    pub config: Config,
    /// The key a client must send (`Authorization: Bearer KEY`); `None`: none.
    pub api_key: Option<String>,
}

struct Proxy {
    settings: ProxySettings,
    hosts: Hosts,
    agent: ureq::Agent,
}

/// A proxy serving on background threads; dropping it stops it.
pub struct RunningProxy {
    serving: Serving,
    url: String,
}

impl RunningProxy {
    /// Where it listens (`http://127.0.0.1:PORT`).
    pub fn url(&self) -> &str {
        &self.url
    }

    /// Serves until the process ends.
    pub fn wait(self) {
        self.serving.wait();
    }
}

/// Binds `addr` and serves. An address beyond loopback needs a key: anyone who reaches
/// the proxy can use the model.
pub fn start(settings: ProxySettings, addr: &str) -> Result<RunningProxy, String> {
    let listener =
        std::net::TcpListener::bind(addr).map_err(|e| super::cannot_listen(&addr, &e))?;
    let bounds = Bounds {
        max_body: MAX_BODY,
        // A run can take minutes on a CPU model; a body is sent at once.
        ..Bounds::default()
    };
    let bound = crate::serve::bounds::bind(listener, &bounds).map_err(|e| e.to_string())?;
    let local = bound.addr().map_err(|e| e.to_string())?;
    if !local.ip().is_loopback() && settings.api_key.is_none() {
        return Err(format!(
            "{local} can be reached from other machines: give a key (`api_key`) that clients must send"
        ));
    }
    let agent = ureq::Agent::config_builder()
        .http_status_as_error(false)
        .timeout_global(Some(settings.config.timeout))
        .build()
        .new_agent();
    let proxy = Arc::new(Proxy {
        hosts: Hosts::serving(local),
        settings,
        agent,
    });
    let guarded = Arc::clone(&proxy);
    let router =
        router(Arc::clone(&proxy)).layer(middleware::from_fn(move |req: Request, next: Next| {
            let proxy = Arc::clone(&guarded);
            async move { guard(&proxy, req, next).await }
        }));
    Ok(RunningProxy {
        serving: bound.serve(router),
        url: format!("http://{local}"),
    })
}

fn router(proxy: Arc<Proxy>) -> Router {
    Router::new()
        .route(
            "/v1/chat/completions",
            post(|s: State<Arc<Proxy>>, r: Request| chat(s, r, Api::OpenAi)),
        )
        .route(
            "/api/chat",
            post(|s: State<Arc<Proxy>>, r: Request| chat(s, r, Api::Ollama)),
        )
        .route("/v1/models", get(models))
        .route("/api/tags", get(tags))
        .route("/api/version", get(version))
        .route("/api/show", post(show))
        .with_state(proxy)
}

/// Which API a path belongs to, for the shape of an error.
fn api_of(path: &str) -> Api {
    match path.starts_with("/api/") {
        true => Api::Ollama,
        false => Api::OpenAi,
    }
}

async fn guard(proxy: &Proxy, req: Request, next: Next) -> Response {
    let api = api_of(req.uri().path());
    if let Some(why) = proxy.hosts.refuses(req.headers()) {
        return failure(api, 403, why, None);
    }
    if let Some(key) = &proxy.settings.api_key {
        let given = req
            .headers()
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(key.as_str()) {
            return failure(
                api,
                401,
                "a key is required: Authorization: Bearer KEY",
                None,
            );
        }
    }
    next.run(req).await
}

fn failure(api: Api, status: u16, message: &str, param: Option<&str>) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY);
    json_response(code, &wire::error_body(api, status, message, param))
}

fn json_response(status: StatusCode, body: &Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// The upstream's address for `path` in `api`: a llama-server's `/v1` base, or Ollama's
/// host (whose OpenAI-compatible API is under `/v1`).
fn upstream(config: &Config, api: Api, path: &str) -> Option<String> {
    match (config.backend, api) {
        (BackendKind::OpenAi, Api::OpenAi) => Some(format!(
            "{}{}",
            config.base_url.trim_end_matches('/'),
            path.trim_start_matches("/v1")
        )),
        (BackendKind::Ollama, _) => Some(format!(
            "{}{path}",
            crate::backend::parse_host(&config.ollama_host)
        )),
        // Ollama's API in front of a server that does not speak it; Gemini speaks neither,
        // so every request there is toolloop's turn.
        (BackendKind::OpenAi, Api::Ollama) | (BackendKind::Gemini, _) => None,
    }
}

async fn chat(State(proxy): State<Arc<Proxy>>, req: Request, api: Api) -> Response {
    let body = match read_body(req.into_body(), MAX_BODY, Duration::from_secs(30)).await {
        Ok(b) => b,
        Err(BodyError::TooLarge) => {
            return failure(
                api,
                413,
                &format!("the body is over {MAX_BODY} bytes"),
                None,
            );
        }
        Err(_) => return failure(api, 400, "the body did not arrive", None),
    };
    let value: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return failure(api, 400, &format!("the body is not JSON: {e}"), None),
    };
    let path = match api {
        Api::OpenAi => "/v1/chat/completions",
        Api::Ollama => "/api/chat",
    };
    let passes = !wire::has_tools(&value);
    if passes && let Some(url) = upstream(&proxy.settings.config, api, path) {
        return pass_through(proxy, url, body, api).await;
    }
    let request = match wire::read(&value, api) {
        Ok(r) => r,
        Err(e) => return failure(api, 400, &e.message, e.param),
    };
    run_turn(proxy, request, api).await
}

/// Sends `body` to `url` as it came and streams back what the upstream answers.
async fn pass_through(proxy: Arc<Proxy>, url: String, body: Bytes, api: Api) -> Response {
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(16);
    let (head_tx, head_rx) = tokio::sync::oneshot::channel::<Result<(u16, String), String>>();
    let agent = proxy.agent.clone();
    tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let sent = agent
            .post(&url)
            .header("Content-Type", "application/json")
            .send(&body[..]);
        let resp = match sent {
            Ok(r) => r,
            Err(e) => {
                let _ = head_tx.send(Err(format!("the upstream at {url} is not reachable: {e}")));
                return;
            }
        };
        let status = resp.status().as_u16();
        let kind = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or("application/json")
            .to_string();
        if head_tx.send(Ok((status, kind))).is_err() {
            return;
        }
        let mut reader = resp.into_body().into_reader();
        let mut buf = vec![0u8; 16 << 10];
        let mut passed = 0usize;
        loop {
            match reader.read(&mut buf) {
                Ok(0) => return,
                Ok(n) => {
                    passed += n;
                    // The client went away: dropping the reader closes the upstream request.
                    if passed > MAX_PASSED
                        || tx
                            .blocking_send(Ok(Bytes::copy_from_slice(&buf[..n])))
                            .is_err()
                    {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.blocking_send(Err(e));
                    return;
                }
            }
        }
    });
    match head_rx.await {
        Ok(Ok((status, kind))) => {
            let stream = tokio_stream(rx);
            let mut response = Response::new(Body::from_stream(stream));
            *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::OK);
            if let Ok(v) = HeaderValue::from_str(&kind) {
                response.headers_mut().insert(header::CONTENT_TYPE, v);
            }
            response
        }
        Ok(Err(message)) => failure(api, 502, &message, None),
        Err(_) => failure(api, 502, "the upstream request failed", None),
    }
}

/// A receiver as a body stream.
fn tokio_stream<T: Send + 'static>(
    mut rx: mpsc::Receiver<T>,
) -> impl futures_util::Stream<Item = T> + Send + 'static {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

/// The tools of a client's request: listed for the run, never called by it (the run
/// hands its calls back).
struct HandBack(Vec<ToolSpec>);

impl ToolSource for HandBack {
    fn label(&self) -> String {
        "the proxy's client".into()
    }

    fn list(&mut self, _deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.0.clone())
    }

    fn call(
        &self,
        name: &str,
        _arguments: &serde_json::Map<String, Value>,
        _deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        Err(ToolError::Config(format!(
            "{name} is the client's to run; the proxy runs no tool"
        )))
    }
}

/// What the run sends the response while it goes on.
enum Item {
    /// A piece of the answer as the model writes it.
    Text(String),
    /// How the run ended.
    End(Box<Ended>),
}

struct Ended {
    reply: Reply,
    tokens: Tokens,
    checks: Vec<String>,
    took: Duration,
    model: String,
}

/// Runs the turn on a blocking thread; the response streams or waits for its end.
async fn run_turn(proxy: Arc<Proxy>, request: wire::Request, api: Api) -> Response {
    let (tx, mut rx) = mpsc::channel::<Item>(64);
    let stop = StopHandle::default();
    let streams = request.stream;
    let include_usage = request.include_usage;
    let model = match request.model.is_empty() {
        true => proxy.settings.config.model.clone(),
        false => request.model.clone(),
    };
    let settings = proxy.settings.clone();
    let watch = stop.clone();
    tokio::task::spawn_blocking(move || {
        let ended = turn(&settings, request, &tx, &watch);
        let _ = tx.blocking_send(Item::End(Box::new(ended)));
    });
    let id = format!("chatcmpl-{}", response_id());
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    if !streams {
        // The answer's pieces are in its ending too.
        while let Some(item) = rx.recv().await {
            if let Item::End(ended) = item {
                return whole(api, &id, created, *ended);
            }
        }
        return failure(api, 500, "the run ended without a reply", None);
    }
    // The first item decides the status: a run that failed before writing anything is
    // an error response, not a stream with an error inside.
    let first = rx.recv().await;
    if let Some(Item::End(ended)) = &first
        && let Reply::Failed(status, message) = &ended.reply
    {
        return failure(api, *status, message, None);
    }
    let (out_tx, out_rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    tokio::spawn(async move {
        let mut state = Streamed {
            api,
            id,
            model,
            created,
            include_usage,
            text: String::new(),
            began: false,
        };
        let mut next = first;
        while let Some(item) = next {
            let done = matches!(item, Item::End(_));
            for piece in state.pieces(item) {
                if out_tx.send(Ok(Bytes::from(piece))).await.is_err() {
                    // The client went away: the run stops, and with it the upstream request.
                    stop.stop();
                    return;
                }
            }
            if done {
                return;
            }
            next = rx.recv().await;
        }
    });
    let kind = match api {
        Api::OpenAi => "text/event-stream",
        Api::Ollama => "application/x-ndjson",
    };
    let mut response = Response::new(Body::from_stream(tokio_stream(out_rx)));
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(kind));
    response
        .headers_mut()
        .insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    response
}

/// A response id: the time in nanoseconds and a counter, so two at once differ.
fn response_id() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    format!("{nanos:x}{:x}", COUNT.fetch_add(1, Ordering::Relaxed))
}

/// A whole (not streamed) response.
fn whole(api: Api, id: &str, created: u64, ended: Ended) -> Response {
    if let Reply::Failed(status, message) = &ended.reply {
        return failure(api, *status, message, None);
    }
    let body = match api {
        Api::OpenAi => wire::openai_completion(
            id,
            &ended.model,
            created,
            &ended.reply,
            ended.tokens,
            &ended.checks,
        ),
        Api::Ollama => wire::ollama_whole(
            &ended.model,
            &ended.reply,
            ended.tokens,
            ended.took.as_nanos() as u64,
            &ended.checks,
        ),
    };
    let mut response = json_response(StatusCode::OK, &body);
    if let Some(v) = checks_header(&ended.checks) {
        response.headers_mut().insert(CHECKS_HEADER, v);
    }
    response
}

/// The checks' lines as one header value: each JSON-quoted, non-ASCII escaped (a header
/// is ASCII), joined by commas.
fn checks_header(lines: &[String]) -> Option<HeaderValue> {
    if lines.is_empty() {
        return None;
    }
    let quoted: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut out = String::new();
            for c in Value::String(l.clone()).to_string().chars() {
                match c.is_ascii() && !c.is_ascii_control() {
                    true => out.push(c),
                    false => {
                        let mut units = [0u16; 2];
                        for u in c.encode_utf16(&mut units) {
                            out.push_str(&format!("\\u{u:04x}"));
                        }
                    }
                }
            }
            out
        })
        .collect();
    HeaderValue::from_str(&quoted.join(", ")).ok()
}

/// A streamed response's pieces, in the client's API.
struct Streamed {
    api: Api,
    id: String,
    /// The model the client named (or the proxy's own): the ending may name another.
    model: String,
    created: u64,
    include_usage: bool,
    /// The answer's text sent so far.
    text: String,
    began: bool,
}

impl Streamed {
    fn pieces(&mut self, item: Item) -> Vec<String> {
        let (api, id, created) = (self.api, self.id.clone(), self.created);
        let id = id.as_str();
        match item {
            Item::Text(piece) => {
                self.text.push_str(&piece);
                let model = self.model.clone();
                vec![self.text_piece(&piece, &model)]
            }
            Item::End(ended) => {
                let model = ended.model.as_str();
                let mut out = Vec::new();
                match &ended.reply {
                    Reply::Text(text) => {
                        // What the stream did not carry yet (all of it, for a question back).
                        let rest = text.strip_prefix(self.text.as_str()).unwrap_or(text);
                        if !rest.is_empty() {
                            out.push(self.text_piece(rest, model));
                        }
                    }
                    Reply::Calls(calls) => match api {
                        Api::OpenAi => out.extend(
                            wire::openai_call_chunks(id, model, created, calls)
                                .iter()
                                .map(sse),
                        ),
                        Api::Ollama => out.push(ndjson(&wire::ollama_message(
                            model,
                            "",
                            Some(wire::ollama_calls(calls)),
                        ))),
                    },
                    Reply::Failed(_, message) => {
                        let error = wire::error_body(api, 502, message, None);
                        out.push(match api {
                            Api::OpenAi => sse(&error),
                            Api::Ollama => ndjson(&error),
                        });
                    }
                }
                match api {
                    Api::OpenAi => {
                        let finish = match ended.reply {
                            Reply::Calls(_) => "tool_calls",
                            _ => "stop",
                        };
                        let mut last =
                            wire::openai_chunk(id, model, created, json!({}), Some(finish));
                        last["toolloop"] = json!({"checks": ended.checks});
                        out.push(sse(&last));
                        if self.include_usage {
                            out.push(sse(&wire::openai_usage_chunk(
                                id,
                                model,
                                created,
                                ended.tokens,
                            )));
                        }
                        out.push("data: [DONE]\n\n".into());
                    }
                    Api::Ollama => out.push(ndjson(&wire::ollama_done(
                        model,
                        ended.tokens,
                        ended.took.as_nanos() as u64,
                        &ended.checks,
                    ))),
                }
                out
            }
        }
    }

    fn text_piece(&mut self, piece: &str, model: &str) -> String {
        match self.api {
            Api::OpenAi => {
                let mut delta = json!({"content": piece});
                if !self.began {
                    delta["role"] = json!("assistant");
                }
                self.began = true;
                sse(&wire::openai_chunk(
                    &self.id,
                    model,
                    self.created,
                    delta,
                    None,
                ))
            }
            Api::Ollama => ndjson(&wire::ollama_message(model, piece, None)),
        }
    }
}

fn sse(v: &Value) -> String {
    format!("data: {v}\n\n")
}

fn ndjson(v: &Value) -> String {
    format!("{v}\n")
}

/// The run for one request, on a blocking thread: the client's model first, the proxy's
/// own `--model` when the upstream has not the client's.
fn turn(
    settings: &ProxySettings,
    request: wire::Request,
    tx: &mpsc::Sender<Item>,
    stop: &StopHandle,
) -> Ended {
    let started = Instant::now();
    let ours = settings.config.model.clone();
    let named = match request.model.is_empty() {
        true => ours.clone(),
        false => request.model.clone(),
    };
    let mut result = run_once(settings, &request, &named, tx, stop);
    if let Err(OrchestratorError::Backend {
        error: crate::backend::BackendError::ModelNotFound { .. },
        ..
    }) = &result
        && named != ours
    {
        log::info!("the upstream has no model {named}; asking {ours}");
        result = run_once(settings, &request, &ours, tx, stop);
    }
    let model = named;
    match result {
        Ok(mut outcome) => {
            if let Some(schema) = &request.format {
                formatted(settings, &request, &model, schema, &mut outcome, started);
            }
            let cut = wire::StopCut::new(&request.stop);
            match &mut outcome.ending {
                Ending::Answer { content: text, .. } | Ending::Clarify { question: text, .. } => {
                    *text = cut.whole(text);
                }
                _ => {}
            }
            let checks: Vec<String> = outcome
                .checks
                .iter()
                .filter_map(Event::check_line)
                .collect();
            for line in &checks {
                eprintln!("toolloop proxy: {line}");
            }
            Ended {
                reply: Reply::of(&outcome.ending),
                tokens: Tokens {
                    prompt: outcome.usage.prompt_tokens,
                    completion: outcome.usage.completion_tokens,
                },
                checks,
                took: started.elapsed(),
                model,
            }
        }
        Err(e) => {
            let status = match &e {
                OrchestratorError::Backend {
                    error: crate::backend::BackendError::ModelNotFound { .. },
                    ..
                } => 404,
                OrchestratorError::Backend {
                    error: crate::backend::BackendError::Timeout { .. },
                    ..
                } => 504,
                OrchestratorError::Config(_) => 400,
                _ => 502,
            };
            Ended {
                reply: Reply::Failed(status, e.to_string()),
                tokens: Tokens::default(),
                checks: Vec::new(),
                took: started.elapsed(),
                model,
            }
        }
    }
}

/// An answer that does not follow the client's format (`response_format`, Ollama's
/// `format`) written again under it: the client's conversation, its calls and results
/// included, sent to the upstream with the format as the reply's schema. One request more,
/// only for an answer that is not already such JSON.
fn formatted(
    settings: &ProxySettings,
    request: &wire::Request,
    model: &str,
    schema: &Value,
    outcome: &mut crate::run::orchestrator::Outcome,
    started: Instant,
) {
    let (Ending::Answer { content: text, .. } | Ending::Clarify { question: text, .. }) =
        &mut outcome.ending
    else {
        return;
    };
    if wire::follows(text, schema) {
        return;
    }
    let mut config = settings.config.clone();
    config.model = model.to_string();
    let left = config.timeout.saturating_sub(started.elapsed());
    let mut options = config.options.clone();
    options.request_timeout = left;
    options.keep_alive = request.keep_alive.clone().or(options.keep_alive);
    if let Some(t) = request.temperature {
        options.temperature = Some(t);
    }
    let messages = wire::conversation(request);
    let asked = config.backend().and_then(|mut backend| {
        backend.chat(
            &crate::backend::ChatRequest {
                messages: &messages,
                schema: Some(schema),
                options: &options,
            },
            Deadline::after(left),
            &mut crate::backend::keep_going,
        )
    });
    match asked {
        Ok(reply) => {
            eprintln!("toolloop proxy: the answer was written again under the client's format");
            outcome.usage.prompt_tokens += reply.usage.prompt_tokens;
            outcome.usage.completion_tokens += reply.usage.completion_tokens;
            *text = reply.text;
        }
        // The answer toolloop has is still an answer; the client sees it did not follow.
        Err(e) => eprintln!(
            "toolloop proxy: the answer could not be written under the client's format: {e}"
        ),
    }
}

fn run_once(
    settings: &ProxySettings,
    request: &wire::Request,
    model: &str,
    tx: &mpsc::Sender<Item>,
    stop: &StopHandle,
) -> Result<crate::run::orchestrator::Outcome, OrchestratorError> {
    let mut config = settings.config.clone();
    config.model = model.to_string();
    config.system = match (&config.system, &request.system) {
        (Some(ours), Some(theirs)) => Some(format!("{ours}\n\n{theirs}")),
        (ours, theirs) => theirs.clone().or(ours.clone()),
    };
    // The client's tools are the only ones: none of the settings' own is connected.
    config.tools = crate::tools::ToolSetup::default();
    // Calls are handed back at once; none is started while the reply streams.
    config.early_calls = false;
    // The rounds so far count as turns of this run; two more let it call once more and
    // answer.
    config.max_iterations = config.max_iterations.max(request.rounds.len() as u32 + 2);
    if let Some(t) = request.temperature {
        config.options.temperature = Some(t);
    }
    if let Some(n) = request.max_tokens {
        config.options.num_predict = Some(n);
    }
    if request.one_call {
        config.max_calls_per_turn = 1;
    }
    if let Some(s) = request.seed {
        config.options.seed = Some(s as i64);
    }
    let mut specs = request.tools.clone();
    match &request.choice {
        wire::Choice::None => specs.clear(),
        wire::Choice::Named(name) => specs.retain(|s| &s.name == name),
        wire::Choice::Required => {
            for check in ["tool-probability", "tool-fit"] {
                let _ = config.checks.set(check, false);
            }
        }
        wire::Choice::Auto => {}
    }
    // The proxy cannot know what a client's tool does, and the client runs and approves
    // its own calls: they are decided as calls of tools that read, unless the person's
    // settings (`--class`) say otherwise.
    let specs: Vec<ToolSpec> = specs
        .into_iter()
        .map(|s| match s.annotations.is_empty() {
            true => s.reading_only(),
            false => s,
        })
        .collect();
    let backend = config
        .backend()
        .map_err(|e| OrchestratorError::backend(e, Vec::new()))?;
    if let Some(k) = &request.keep_alive {
        config.options.keep_alive = Some(k.clone());
    }
    let sender = tx.clone();
    let mut cut = wire::StopCut::new(&request.stop);
    // An answer under the client's format may be written again: none of it streams
    // before it is known to follow the format.
    let quiet = request.format.is_some();
    let mut orchestrator = Orchestrator::builder()
        .settings(config)
        .backend(backend)
        .source(HandBack(specs))
        .preflight(false)
        .stop_handle(stop.clone())
        .observer(move |e: &Event| {
            if let Event::AnswerText { text } = e
                && !quiet
            {
                let piece = cut.push(text);
                if !piece.is_empty() {
                    let _ = sender.blocking_send(Item::Text(piece));
                }
            }
        })
        .build()?;
    orchestrator.hand_back = true;
    let deadline = Deadline::after(orchestrator.config().timeout);
    orchestrator.run_after_rounds(
        &request.query,
        &request.earlier,
        request.rounds.clone(),
        deadline,
    )
}

async fn models(State(proxy): State<Arc<Proxy>>) -> Response {
    let config = &proxy.settings.config;
    match upstream(config, Api::OpenAi, "/v1/models") {
        Some(url) => get_upstream(proxy, url, Api::OpenAi, None).await,
        None => failure(Api::OpenAi, 404, "no model list upstream", None),
    }
}

async fn tags(State(proxy): State<Arc<Proxy>>) -> Response {
    let config = proxy.settings.config.clone();
    match upstream(&config, Api::Ollama, "/api/tags") {
        Some(url) => get_upstream(proxy, url, Api::Ollama, None).await,
        // An OpenAI-compatible upstream: its models, as Ollama lists them.
        None => {
            let url = upstream(&config, Api::OpenAi, "/v1/models").unwrap_or_default();
            let listed = fetch(&proxy.agent, url, None).await;
            match listed {
                Ok((200, body)) => {
                    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                    let models: Vec<Value> = v["data"]
                        .as_array()
                        .map(|d| {
                            d.iter()
                                .filter_map(|m| m["id"].as_str())
                                .map(|id| json!({"name": id, "model": id}))
                                .collect()
                        })
                        .unwrap_or_default();
                    json_response(StatusCode::OK, &json!({"models": models}))
                }
                Ok((status, _)) => {
                    failure(Api::Ollama, status, "the upstream has no model list", None)
                }
                Err(message) => failure(Api::Ollama, 502, &message, None),
            }
        }
    }
}

async fn version(State(proxy): State<Arc<Proxy>>) -> Response {
    let config = proxy.settings.config.clone();
    match upstream(&config, Api::Ollama, "/api/version") {
        Some(url) => get_upstream(proxy, url, Api::Ollama, None).await,
        None => json_response(
            StatusCode::OK,
            &json!({"version": format!("toolloop-{}", env!("CARGO_PKG_VERSION"))}),
        ),
    }
}

/// Ollama's model details, with `tools` among the capabilities: through the proxy every
/// model can call tools, which is what a client reads this for.
async fn show(State(proxy): State<Arc<Proxy>>, req: Request) -> Response {
    let body = match read_body(req.into_body(), 64 << 10, Duration::from_secs(30)).await {
        Ok(b) => b,
        Err(_) => return failure(Api::Ollama, 400, "the body did not arrive", None),
    };
    let config = proxy.settings.config.clone();
    let mut shown = match upstream(&config, Api::Ollama, "/api/show") {
        Some(url) => match fetch(&proxy.agent, url, Some(body)).await {
            Ok((200, b)) => serde_json::from_slice(&b).unwrap_or_else(|_| json!({})),
            Ok((status, b)) => {
                let v: Value = serde_json::from_slice(&b).unwrap_or(Value::Null);
                let message = v["error"].as_str().unwrap_or("the upstream refused");
                return failure(Api::Ollama, status, message, None);
            }
            Err(message) => return failure(Api::Ollama, 502, &message, None),
        },
        None => json!({"details": {}, "model_info": {}}),
    };
    let caps = shown["capabilities"]
        .as_array()
        .cloned()
        .unwrap_or_else(|| vec![json!("completion")]);
    let mut caps: Vec<Value> = caps;
    if !caps.iter().any(|c| c == "tools") {
        caps.push(json!("tools"));
    }
    shown["capabilities"] = Value::Array(caps);
    json_response(StatusCode::OK, &shown)
}

/// A GET (or POST of `body`) to the upstream, read whole (at most 4 MiB).
async fn fetch(
    agent: &ureq::Agent,
    url: String,
    body: Option<Bytes>,
) -> Result<(u16, Vec<u8>), String> {
    let agent = agent.clone();
    tokio::task::spawn_blocking(move || {
        let resp = match &body {
            Some(b) => agent
                .post(&url)
                .header("Content-Type", "application/json")
                .send(&b[..]),
            None => agent.get(&url).call(),
        }
        .map_err(|e| format!("the upstream at {url} is not reachable: {e}"))?;
        let status = resp.status().as_u16();
        let (bytes, _) = crate::http::read_capped(resp.into_body().into_reader(), 4 << 20)
            .map_err(|e| format!("the upstream at {url} failed: {e}"))?;
        Ok((status, bytes))
    })
    .await
    .unwrap_or_else(|_| Err("the upstream request failed".into()))
}

async fn get_upstream(proxy: Arc<Proxy>, url: String, api: Api, body: Option<Bytes>) -> Response {
    match fetch(&proxy.agent, url, body).await {
        Ok((status, bytes)) => (
            StatusCode::from_u16(status).unwrap_or(StatusCode::BAD_GATEWAY),
            [(header::CONTENT_TYPE, "application/json")],
            bytes,
        )
            .into_response(),
        Err(message) => failure(api, 502, &message, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_checks_header_is_ascii_and_quotes_each_line() {
        let v = checks_header(&["tool-fit: declined — x".into(), "b \"c\"".into()]).unwrap();
        assert_eq!(
            v.to_str().unwrap(),
            r#""tool-fit: declined \u2014 x", "b \"c\"""#
        );
        assert!(checks_header(&[]).is_none());
    }

    #[test]
    fn requests_go_to_the_upstreams_own_api_or_to_none() {
        let mut config = Config {
            backend: BackendKind::OpenAi,
            base_url: "http://127.0.0.1:8080/v1".into(),
            ..Config::default()
        };
        assert_eq!(
            upstream(&config, Api::OpenAi, "/v1/chat/completions").as_deref(),
            Some("http://127.0.0.1:8080/v1/chat/completions")
        );
        assert_eq!(upstream(&config, Api::Ollama, "/api/chat"), None);
        config.backend = BackendKind::Ollama;
        config.ollama_host = "127.0.0.1:11434".into();
        assert_eq!(
            upstream(&config, Api::OpenAi, "/v1/chat/completions").as_deref(),
            Some("http://127.0.0.1:11434/v1/chat/completions")
        );
    }

    #[test]
    fn no_key_beyond_loopback_is_refused_before_serving() {
        let settings = ProxySettings {
            config: Config::default(),
            api_key: None,
        };
        let e = start(settings, "0.0.0.0:0").err().unwrap();
        assert!(e.contains("give a key"), "{e}");
    }
}
