//! Model backends: the seam between the loop and a model server.
//!
//! Each backend takes the history, the schema and generation options and returns the
//! reply's text, why generation stopped, token usage and durations. Wire types stay
//! private to each backend's module; what crosses the seam is normalised here (rig's
//! pattern). Ollama's native API is the default (`ollama`); every OpenAI-compatible
//! server (llama-server, vLLM, LM Studio, Ollama's `/v1`) shares `openai`; `scripted`
//! replays turns from code or from a recording, for tests and the offline demo.
//!
//! Imports only the leaf modules (`message`, `deadline`, `http`): a backend knows nothing
//! of the loop, the turn or the tools.

pub(crate) mod gemini;
pub(crate) mod ollama;
pub(crate) mod openai;
pub(crate) mod scripted;

pub use gemini::{GEMINI_BASE_URL, Gemini};
pub use ollama::{Ollama, parse_host};
pub use openai::OpenAi;
pub use scripted::{Recorder, Scripted, ScriptedReply, SeenRequests};

use std::ops::ControlFlow;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::deadline::{Deadline, StopHandle};
pub use crate::message::{
    AnswerEnd, ChatReply, Message, Role, StopReason, Timings, TokenLogprob, Usage,
};

/// Generation options. `None` leaves the server's default.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenOptions {
    /// Sampling temperature; 0 makes the grammar-constrained reply deterministic.
    pub temperature: Option<f64>,
    /// Context window in tokens (Ollama's `num_ctx`). Ollama silently drops the oldest
    /// messages beyond it, so the loop watches the prompt size against it.
    pub num_ctx: Option<u32>,
    /// The most tokens to generate (`num_predict`, `max_tokens`). Bounded by default: a
    /// small model can repeat itself until the context is full.
    pub num_predict: Option<u32>,
    /// Sampling seed.
    pub seed: Option<i64>,
    /// Top-k sampling.
    pub top_k: Option<u32>,
    /// Top-p sampling.
    pub top_p: Option<f64>,
    /// Stop sequences.
    pub stop: Vec<String>,
    /// How long Ollama keeps the model loaded after the request (`keep_alive`, e.g. `5m`).
    pub keep_alive: Option<String>,
    /// The longest one model request may take, within the run's deadline.
    pub request_timeout: Duration,
    /// Ask for the log-probabilities of this many alternatives per generated token.
    pub top_logprobs: Option<u32>,
    /// A question beside the run's turns (the fit question), not a turn. A llama-server
    /// with two slots or more answers it in its last slot (another idle slot where the turn
    /// went to that one), so the slot holding the turns keeps them for the next turn's
    /// prompt cache. Never read from a configuration file.
    #[serde(skip)]
    pub aside: bool,
    /// Stops the generation once the log-probabilities streamed so far satisfy this, and
    /// the reply comes back with [`StopReason::Stopped`]. The fit question is read at one
    /// token, the first where "yes" and "no" carry most of the probability; Qwen2.5-Coder
    /// 0.5B gives that at its first token and wrote 13 more. Never read from a
    /// configuration file.
    #[serde(skip)]
    pub stop_once: Option<StopOnce>,
    /// The reply's beginning, already written: a server that can continue a reply under the
    /// schema (llama-server) is sent it as the assistant's message and generates only the
    /// rest, and the reply's text then begins with it. Another server is asked for a whole
    /// reply, as if it were not set. A turn asked again for one call more keeps the calls
    /// it made this way instead of writing them again. Never read from a configuration
    /// file.
    #[serde(skip)]
    pub prefill: Option<String>,
    /// Where an answer's reply has nothing left to choose, and what the schema forces after
    /// it. A server that reports its counts on every token (llama-server, asked for
    /// `timings_per_token`, and known to be one from the preflight or an earlier question
    /// aside) stops there, and the reply's text is completed with the rest; another writes
    /// the rest itself, as if it were not set. An answer's `content` is followed by an
    /// empty `thought` and the object's close, six tokens with the end of the reply that
    /// Qwen2.5-Coder 0.5B wrote one by one at its usual pace. Never read from a
    /// configuration file.
    #[serde(skip)]
    pub answer_end: Option<AnswerEnd>,
}

/// A test on the log-probabilities streamed so far, which stops the generation once it
/// holds ([`GenOptions::stop_once`]).
///
/// ```
/// use toolloop::backend::{StopOnce, TokenLogprob};
///
/// fn any(tokens: &[TokenLogprob]) -> bool { !tokens.is_empty() }
/// assert!(!StopOnce(any).reached(&[]));
/// ```
#[derive(Clone, Copy)]
pub struct StopOnce(pub fn(&[TokenLogprob]) -> bool);

impl StopOnce {
    /// Whether the generation stops after `tokens`.
    pub fn reached(&self, tokens: &[TokenLogprob]) -> bool {
        (self.0)(tokens)
    }
}

impl PartialEq for StopOnce {
    fn eq(&self, other: &Self) -> bool {
        std::ptr::fn_addr_eq(self.0, other.0)
    }
}

impl std::fmt::Debug for StopOnce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StopOnce")
    }
}

/// What the loop asks of a backend.
#[derive(Debug, Clone, Copy)]
pub struct ChatRequest<'a> {
    /// The history, oldest first.
    pub messages: &'a [Message],
    /// The JSON Schema the reply must follow, or `None` for free text.
    pub schema: Option<&'a Value>,
    /// Generation options.
    pub options: &'a GenOptions,
}

/// Receives the reply's text as it streams in; `Break` stops the generation there (the
/// connection is closed, which both servers take as a cancel) and the reply comes back
/// with [`StopReason::Stopped`].
pub type TextSink<'a> = &'a mut dyn FnMut(&str) -> ControlFlow<()>;

/// A sink that takes the text and never stops the stream.
///
/// ```
/// use toolloop::backend::{Backend, ChatRequest, GenOptions, Message, keep_going};
/// use toolloop::backend::Scripted;
/// use toolloop::Deadline;
///
/// let mut model = Scripted::new(["{\"kind\": \"final_answer\", \"thought\": \"\", \"content\": \"hi\"}"]);
/// let messages = [Message::user("hello")];
/// let request = ChatRequest { messages: &messages, schema: None, options: &GenOptions::default() };
/// let reply = model.chat(&request, Deadline::none(), &mut keep_going)?;
/// assert!(reply.text.contains("hi"));
/// # Ok::<(), toolloop::backend::BackendError>(())
/// ```
pub fn keep_going(_text: &str) -> ControlFlow<()> {
    ControlFlow::Continue(())
}

/// The largest reply accepted, streamed or not: a server that streams without end must
/// not grow the client without bound within the deadline.
pub(crate) const MAX_REPLY: usize = 64 << 20;

/// The error for a reply past [`MAX_REPLY`].
pub(crate) fn reply_too_large() -> BackendError {
    BackendError::InvalidResponse {
        detail: "the reply is larger than 64 MiB".into(),
    }
}

/// One entry of an OpenAI-style `logprobs.content` array (Ollama uses the same shape).
pub(crate) fn token_logprob(v: &Value) -> TokenLogprob {
    TokenLogprob {
        token: v["token"].as_str().unwrap_or_default().to_string(),
        logprob: v["logprob"].as_f64().unwrap_or(f64::NEG_INFINITY),
        top: v["top_logprobs"]
            .as_array()
            .map(|top| {
                top.iter()
                    .map(|t| {
                        let token = t["token"].as_str().unwrap_or_default().to_string();
                        (token, t["logprob"].as_f64().unwrap_or(f64::NEG_INFINITY))
                    })
                    .collect()
            })
            .unwrap_or_default(),
    }
}

/// The model's file as a server names it ([`Backend::model_file`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModelFile {
    /// The SHA-256 of its GGUF file, in hex: Ollama names a model's weights by it.
    Sha256(String),
    /// Where the file is on the server's machine: llama-server's `model_path`, which is
    /// this machine's when the server runs here.
    Path(std::path::PathBuf),
}

/// The model file the server says it runs, as a name to read the model's family from
/// (llama-server's `model_path`, read at the preflight), where it names one. llama-server
/// answers to any model name: the file is what runs, whatever name was asked for.
pub(crate) fn served_file(backend: &dyn Backend) -> Option<String> {
    match backend.model_file()? {
        ModelFile::Path(path) => Some(path.to_string_lossy().into_owned()),
        ModelFile::Sha256(_) => None,
    }
}

/// A model server.
pub trait Backend: Send {
    /// A short description for messages: `ollama gemma3:4b at http://127.0.0.1:11434`.
    fn describe(&self) -> String;

    /// The model and the server's address, as the calibration file keys them
    /// ([`crate::CalibrationFile`]); `None` (the default) for a backend that is not a
    /// model server (a script, a test double).
    fn identity(&self) -> Option<(String, String)> {
        None
    }

    /// The model's file as the server named it in its answer to the preflight
    /// ([`ModelFile`]), which the calibrations shipped with toolloop are keyed by; `None`
    /// (the default) before the preflight, and where the server does not say.
    fn model_file(&self) -> Option<ModelFile> {
        None
    }

    /// Checks that the server is up and the model is there, before a run starts, so that
    /// the person gets "start the server" or "pull the model" at once.
    fn preflight(&mut self, _deadline: Deadline) -> Result<(), BackendError> {
        Ok(())
    }

    /// Sends one request and returns the whole reply; text chunks also go to `sink` as
    /// they arrive.
    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError>;

    /// Takes the run's stop handle, so that a request in flight ends with
    /// [`BackendError::Stopped`] the moment the run is stopped, even before the server
    /// has sent anything. The default ignores it: such a backend's run then stops at the
    /// next piece of the reply, or when the reply is complete.
    fn watch(&mut self, _stop: &StopHandle) {}
}

impl<B: Backend + ?Sized> Backend for Box<B> {
    fn describe(&self) -> String {
        (**self).describe()
    }
    fn identity(&self) -> Option<(String, String)> {
        (**self).identity()
    }
    fn model_file(&self) -> Option<ModelFile> {
        (**self).model_file()
    }
    fn preflight(&mut self, deadline: Deadline) -> Result<(), BackendError> {
        (**self).preflight(deadline)
    }
    fn chat(
        &mut self,
        request: &ChatRequest<'_>,
        deadline: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        (**self).chat(request, deadline, sink)
    }
    fn watch(&mut self, stop: &StopHandle) {
        (**self).watch(stop)
    }
}

/// Why a model request failed. Each message says what to do about it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// Nothing listens at the server's address.
    #[error("{server} is not running at {url}: {hint}")]
    NotRunning {
        /// `Ollama` or `the model server`.
        server: String,
        /// The address tried.
        url: String,
        /// What to do: `start it with `ollama serve``.
        hint: String,
    },
    /// Something answers at the address, but not as Ollama does: an OpenAI-compatible
    /// server (llama-server, vLLM), or a web server.
    #[error("{url} is not Ollama: {answered}; {hint}")]
    NotOllama {
        /// The address tried.
        url: String,
        /// What answered, as far as it could be told.
        answered: String,
        /// What to do: the flags for an OpenAI-compatible server, or Ollama's address.
        hint: String,
    },
    /// The server does not have the model.
    #[error("model '{model}' not found: {hint}")]
    ModelNotFound {
        /// The model asked for.
        model: String,
        /// What to do, e.g. `run ollama pull gemma3:4b`.
        hint: String,
    },
    /// The server refused the request (HTTP 400).
    #[error("the server rejected the request: {message}")]
    BadRequest {
        /// The server's own words.
        message: String,
    },
    /// The server refused the credentials (HTTP 401/403, or Google's bad-key 400).
    #[error("the server refused the credentials (HTTP {status}): {message}; check {key}")]
    Unauthorized {
        /// 401 or 403 (or 400 where Google says the key is bad).
        status: u16,
        /// Where the key came from: the variable, or `--key-file`.
        key: &'static str,
        /// The server's own words.
        message: String,
    },
    /// The server stayed busy (HTTP 503/429) until the deadline.
    #[error(
        "the server is busy or still loading the model ({message}); retried until the deadline; try again later"
    )]
    Busy {
        /// The server's own words.
        message: String,
    },
    /// The server needs a key and none was given.
    #[error("{server} needs an API key: {hint}")]
    MissingKey {
        /// Which server.
        server: String,
        /// Where the key goes.
        hint: String,
    },
    /// The API's quota is used up (Gemini's HTTP 429 `RESOURCE_EXHAUSTED`), and did not
    /// free up before the deadline.
    #[error("the API's quota is used up: {message}; wait, or see the plan's limits")]
    Quota {
        /// The server's own words.
        message: String,
    },
    /// The provider blocked the request or the reply (Gemini's `SAFETY`, `RECITATION`,
    /// `PROHIBITED_CONTENT`…): nothing a retry would change.
    #[error("the provider blocked the request or its reply ({reason}); rephrase the request")]
    Blocked {
        /// The provider's reason.
        reason: String,
    },
    /// Any other HTTP error status.
    #[error("the server failed (HTTP {status}): {message}")]
    Server {
        /// The HTTP status.
        status: u16,
        /// The server's own words.
        message: String,
    },
    /// An error reported inside a streamed reply after it began.
    #[error("the server failed while replying: {message}")]
    Stream {
        /// The server's own words.
        message: String,
    },
    /// The reply could not be read: not JSON, not UTF-8, or cut off.
    #[error("unreadable reply from the server: {detail}")]
    InvalidResponse {
        /// What was wrong.
        detail: String,
    },
    /// The run's deadline passed during the request.
    #[error("model request timed out after {waited:?}; raise `timeout` for slow models")]
    Timeout {
        /// How long the request ran.
        waited: Duration,
    },
    /// The run was stopped ([`StopHandle`]) while the request was in flight; its
    /// connection was closed, which both servers take as a cancel.
    #[error("the request was cancelled: the run was stopped")]
    Stopped,
    /// A network failure other than the above.
    #[error("cannot talk to the server at {url}: {detail}")]
    Transport {
        /// The address.
        url: String,
        /// What failed.
        detail: String,
    },
    /// The scripted backend has no more replies.
    #[error("the scripted model has no reply left (after {used} replies)")]
    ScriptExhausted {
        /// Replies given so far.
        used: usize,
    },
    /// A recording could not be read or written.
    #[error("recording {path}: {detail}")]
    Recording {
        /// The file.
        path: String,
        /// What failed.
        detail: String,
    },
}

/// Maps a failure below HTTP to the backend's error: nobody listening, out of time, or
/// anything else on the way.
pub(crate) fn transport_error(
    f: crate::http::Failure,
    started: std::time::Instant,
    url: &str,
    not_running: impl FnOnce() -> BackendError,
) -> BackendError {
    match f {
        crate::http::Failure::Unreachable => not_running(),
        crate::http::Failure::Timeout => BackendError::Timeout {
            waited: started.elapsed(),
        },
        crate::http::Failure::Other(detail) => BackendError::Transport {
            url: url.to_string(),
            detail,
        },
    }
}

/// How many times a request is sent again after an error that may pass (a 5xx other than
/// busy, 408, 409, a refused connection to a server this process never reached): the
/// official OpenAI client's count. More would only delay the message a person needs when
/// the server is down or broken for good.
pub(crate) const RETRIES: u32 = 2;

/// What went wrong with a request that may be sent again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fault {
    /// The server answered with this HTTP status.
    Status(u16),
    /// Nothing accepted the connection.
    Refused,
}

/// One request's retries ([`Retries::again`]).
#[derive(Debug, Default)]
pub(crate) struct Retries {
    busy: u32,
    failed: u32,
}

impl Retries {
    /// How long to wait before sending the request again after `fault`, or `None`: it is not
    /// sent again. A busy or loading server (429, 503) is waited for until the deadline, and
    /// so is a refused connection to a server that answered this process before (`reached`):
    /// Ollama and llama-server refuse connections while they restart. A 408, 409, any other
    /// 5xx (Ollama answers 500 while a runner starts), or a refused connection to a server
    /// never reached is tried [`RETRIES`] times more. Any other status is final.
    pub(crate) fn again(
        &mut self,
        fault: Fault,
        reached: bool,
        deadline: &Deadline,
    ) -> Option<Duration> {
        let until_deadline = match fault {
            Fault::Status(429 | 503) => true,
            Fault::Refused => reached,
            Fault::Status(408 | 409 | 500..=599) => false,
            Fault::Status(_) => return None,
        };
        let attempt = match until_deadline {
            true => &mut self.busy,
            false if self.failed < RETRIES => &mut self.failed,
            false => return None,
        };
        let wait = backoff(*attempt, deadline)?;
        *attempt += 1;
        Some(wait)
    }

    /// How many times the request was sent again, for the message when it failed after all.
    pub(crate) fn sent_again(&self) -> u32 {
        self.busy + self.failed
    }
}

/// After a request that could not be sent: `Ok` when it should be sent again (the wait,
/// said on stderr, is over), else the error for the person. Only a refused connection is
/// sent again ([`Retries::again`]); `reached` says whether `base` answered before.
pub(crate) fn after_unsent(
    retries: &mut Retries,
    failure: crate::http::Failure,
    (base, reached): (&str, bool),
    deadline: &Deadline,
    stop: Option<&StopHandle>,
) -> Result<(), Result<crate::http::Failure, BackendError>> {
    if !matches!(failure, crate::http::Failure::Unreachable) {
        return Err(Ok(failure));
    }
    let Some(wait) = retries.again(Fault::Refused, reached, deadline) else {
        return Err(Ok(failure));
    };
    log::warn!("{base} refused the connection; retrying in {wait:?}");
    match pause(wait, stop) {
        true => Ok(()),
        false => Err(Err(BackendError::Stopped)),
    }
}

/// The line on stderr when a request is sent again after `status`.
pub(crate) fn retrying(base: &str, status: u16, message: &str, wait: Duration) -> String {
    match status {
        429 | 503 => format!(
            "{base} is busy or still loading the model (HTTP {status}: {message}); retrying in {wait:?}"
        ),
        _ => format!("{base} failed (HTTP {status}: {message}); retrying in {wait:?}"),
    }
}

/// The error for a status that was not retried, or failed each time it was.
pub(crate) fn failed(status: u16, message: String, retries: &Retries) -> BackendError {
    let message = match retries.sent_again() {
        0 => message,
        n => format!("{message} (sent {} times)", n + 1),
    };
    BackendError::Server { status, message }
}

/// Waits before retrying a busy server: 250 ms doubling to 4 s, never past the deadline.
pub(crate) fn backoff(attempt: u32, deadline: &Deadline) -> Option<Duration> {
    let wait = Duration::from_millis(250u64 << attempt.min(4));
    let left = deadline.remaining().unwrap_or(Duration::MAX);
    (left > wait).then_some(wait)
}

/// Sleeps `wait` unless the run is stopped first; false when it was.
pub(crate) fn pause(wait: Duration, stop: Option<&StopHandle>) -> bool {
    let until = std::time::Instant::now() + wait;
    loop {
        if stop.is_some_and(StopHandle::is_stopped) {
            return false;
        }
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return true;
        }
        std::thread::sleep(left.min(StopHandle::POLL));
    }
}

/// A request's result as the caller should see it: whatever went wrong once the run was
/// stopped (a shut connection reads as cut off or reset) is the stop.
pub(crate) fn unless_stopped<T>(
    result: Result<T, BackendError>,
    stop: Option<&StopHandle>,
) -> Result<T, BackendError> {
    match result {
        Err(_) if stop.is_some_and(StopHandle::is_stopped) => Err(BackendError::Stopped),
        other => other,
    }
}

#[cfg(test)]
mod retry_tests {
    use super::*;

    fn deadline() -> Deadline {
        Deadline::after(Duration::from_secs(60))
    }

    #[test]
    fn a_failing_server_is_tried_twice_more_and_a_client_error_never() {
        let d = deadline();
        let mut r = Retries::default();
        assert!(r.again(Fault::Status(500), false, &d).is_some());
        assert!(r.again(Fault::Status(502), false, &d).is_some());
        assert_eq!(r.again(Fault::Status(500), false, &d), None);
        assert_eq!(r.sent_again(), 2);
        let mut r = Retries::default();
        for status in [400, 401, 404, 422] {
            assert_eq!(r.again(Fault::Status(status), false, &d), None, "{status}");
        }
    }

    #[test]
    fn a_busy_server_and_one_that_restarts_are_waited_for_until_the_deadline() {
        let d = deadline();
        let mut r = Retries::default();
        for _ in 0..10 {
            assert!(r.again(Fault::Status(503), false, &d).is_some());
            assert!(r.again(Fault::Refused, true, &d).is_some());
        }
        let mut never = Retries::default();
        assert!(never.again(Fault::Refused, false, &d).is_some());
        assert!(never.again(Fault::Refused, false, &d).is_some());
        assert_eq!(never.again(Fault::Refused, false, &d), None);
        let soon = Deadline::after(Duration::from_millis(100));
        assert_eq!(
            Retries::default().again(Fault::Status(503), true, &soon),
            None
        );
    }
}
