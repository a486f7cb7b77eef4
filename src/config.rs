//! Every setting of a run and every default, in one place.
//!
//! [`Config`] holds the model, Ollama's address, the tools, the iteration limit and one
//! deadline for the run, with the rest of what a run needs beside them. Its
//! `impl Default` is the only place a default is written: the engine reads a config as it
//! is, the backends' [`GenOptions`] take theirs from it, and the command line's flags start from
//! it. [`Config::backend`] builds the model backend a config names, for the command line
//! and for [`crate::run_loop`] alike.

use std::path::PathBuf;
use std::time::Duration;

use crate::backend::ollama::Ollama;
use crate::backend::openai::OpenAi;
use crate::backend::scripted::Recorder;
use crate::backend::{Backend, BackendError, GenOptions};
use crate::calibration::{CalibrationFile, Thresholds};
use crate::checks::CheckLevels;
use crate::tools::ToolSetup;
use crate::turn::schema::{Decide, Narrowing};

/// Ollama's own default address (what its client uses for an empty `OLLAMA_HOST`).
/// `127.0.0.1` rather than `localhost`: Ollama listens on IPv4 loopback, and
/// `localhost` may resolve to `::1` first.
pub use crate::backend::ollama::DEFAULT_HOST as DEFAULT_OLLAMA_HOST;
/// The tool server used when no tool flag is given.
pub const DEFAULT_TOOLS_URL: &str = "http://localhost:5000";
/// llama-server's default address, for the OpenAI-compatible backend.
pub const DEFAULT_BASE_URL: &str = "http://127.0.0.1:8080/v1";

/// Alternatives asked for per token under [`Decide::Probability`]: enough that every kind
/// the grammar allows is among them when the model gives it any weight.
pub const DECISION_TOP_LOGPROBS: u32 = 20;

/// Which protocol the model server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum BackendKind {
    /// Ollama's native API at [`Config::ollama_host`].
    #[default]
    Ollama,
    /// Any OpenAI-compatible server at [`Config::base_url`] (llama-server, vLLM, LM
    /// Studio, Ollama's `/v1`).
    OpenAi,
    /// Google's Gemini API at [`Config::base_url`], with [`Config::api_key`].
    Gemini,
}

/// The settings of a run, with their defaults.
///
/// ```
/// use std::time::Duration;
/// use toolloop::Config;
///
/// let c = Config::default();
/// assert_eq!(c.model, "gemma3:4b");
/// assert_eq!(c.max_iterations, 10);
/// assert_eq!(c.timeout, Duration::from_secs(30));
/// assert_eq!(c.thresholds().map(|t| t.p_min), Some(0.5));
/// ```
#[derive(Debug, Clone)]
pub struct Config {
    /// The model (default `gemma3:4b`).
    pub model: String,
    /// The model server's protocol (default Ollama).
    pub backend: BackendKind,
    /// Ollama's address, in any `OLLAMA_HOST` form (default `http://127.0.0.1:11434`).
    pub ollama_host: String,
    /// An OpenAI-compatible server's base URL (default `http://127.0.0.1:8080/v1`).
    pub base_url: String,
    /// The key for an OpenAI-compatible server, sent as a bearer token, or for the Gemini
    /// API.
    pub api_key: Option<String>,
    /// Save the model's raw replies here, to replay the session offline.
    pub record: Option<PathBuf>,
    /// Where the tools come from (default: the HTTP tool API at `http://localhost:5000`).
    pub tools: ToolSetup,
    /// The most model turns (default 10).
    pub max_iterations: u32,
    /// One deadline for the whole run (default 30 s): each model and tool call gets only
    /// what is left of it.
    pub timeout: Duration,
    /// The longest that connecting the tool sources may take when an orchestrator is
    /// built (default 10 s).
    pub connect_timeout: Duration,
    /// Generation options; `options.num_ctx` is also the window the history is kept in.
    pub options: GenOptions,
    /// Extra instructions appended to the system prompt.
    pub system: Option<String>,
    /// How the schema is narrowed to the catalogue (default: one variant per tool).
    pub narrowing: Narrowing,
    /// How the model decides between a tool and an answer (see [`Decide`]).
    pub decide: Decide,
    /// Which checks between the model's reply and the tool run ([`crate::checks`];
    /// default: each check's own default).
    pub checks: CheckLevels,
    /// Under [`Decide::Probability`], the thresholds the decision step declines calls by
    /// ([`Thresholds`]). `None` (the default): the entry for this model and server in the
    /// calibration file ([`Config::calibration`]), read when an orchestrator is built,
    /// else [`Thresholds::default`].
    pub thresholds: Option<Thresholds>,
    /// The calibration file `toolloop calibrate` writes (default
    /// `$TOOLLOOP_CALIBRATION`, else `~/.config/toolloop/calibration.json`); `None`:
    /// read none.
    pub calibration: Option<PathBuf>,
    /// The file each tool's leaning is kept in between processes: the model's answer to
    /// the fit question with no request, which `tool-fit` reads the answer for a request
    /// against. Read when an orchestrator is built, written when a leaning is asked.
    /// `None` (the default): each process asks its tools' leanings afresh. `toolloop ask`,
    /// `chat` and `web` keep them in [`crate::leanings_path`]
    /// (`~/.cache/toolloop/leanings.json`).
    pub leanings: Option<PathBuf>,
    /// Invalid replies in a row that are fed back before the run gives up (default 2).
    pub max_invalid_retries: u32,
    /// Repeats of one identical call before only an answer is allowed (default 3). A turn
    /// whose calls are all repeats (or bring results the model was already shown) allows
    /// only an answer next whatever this says; this bounds a call repeated alongside new
    /// ones.
    pub max_repeats: u32,
    /// The most tool calls the first model turn of a run may carry (default 8; later turns
    /// carry one; 1 leaves the several-call form out of the schema and the prompt). The
    /// calls of a turn run side by side; a turn that brings nothing new ends the calling.
    pub max_calls_per_turn: u32,
    /// Tool-reported errors in a row before the tool is declared unavailable (default 3).
    pub max_tool_failures: u32,
    /// The cap on a tool result as text for the model, in characters (default 4000).
    pub result_cap: usize,
    /// Start a call of a tool that only reads ([`crate::tools::ToolSpec::read_only`]) as
    /// soon as the model has written it, while the rest of its turn is written and
    /// judged (default on). The turn is judged as before: a call it does not make is let
    /// go, and said so; one it makes takes the result already under way.
    pub early_calls: bool,
    /// Which calls run without asking, which never run, and the person's class for a
    /// tool ([`crate::Permissions`]). A call of a tool that is not read-only runs only
    /// when these or the run's approver allow it.
    pub permissions: crate::Permissions,
    /// The language the answer is asked for in, after the tools' results (default: the
    /// question's own, where it is surely not English).
    pub answer_language: AnswerLanguage,
    /// The date the model is told it is, in the system prompt where a tool takes a date
    /// (default: the computer's own, read as each run starts).
    pub today: Today,
}

/// The date the system prompt tells the model it is, where a tool takes a date
/// ([`crate::turn::prompt::dated`]). A model knows no date of its own: asked about a
/// flight "today" or a meeting "tomorrow", it writes a day of its training data.
///
/// ```
/// use chrono::NaiveDate;
/// use toolloop::Today;
///
/// let day = NaiveDate::from_ymd_opt(2026, 12, 7).unwrap();
/// assert_eq!(Today::On(day).date(), Some(day));
/// assert_eq!(Today::Off.date(), None);
/// assert!(Today::Clock.date().is_some());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Today {
    /// The computer's local date as each run starts (default): a server left running
    /// overnight tells the new day.
    #[default]
    Clock,
    /// No date in the prompt.
    Off,
    /// This date, whatever the clock says: for tests and for measuring on data sets
    /// written for a fixed day.
    On(chrono::NaiveDate),
}

impl Today {
    /// The date a run starting now tells the model, if any.
    pub fn date(&self) -> Option<chrono::NaiveDate> {
        match self {
            Today::Clock => Some(chrono::Local::now().date_naive()),
            Today::Off => None,
            Today::On(day) => Some(*day),
        }
    }
}

/// The language the final answer is asked for in. Tool results and toolloop's own lines
/// are in English, and a small model answers in the language it read last unless the
/// line after the results names the question's language.
///
/// ```
/// use toolloop::{AnswerLanguage, Config};
///
/// let config = Config { answer_language: AnswerLanguage::Named("Dutch".into()), ..Config::default() };
/// assert_eq!(config.answer_language.for_question("Wie spät ist es?"), Some(("Dutch".to_string(), false)));
/// assert_eq!(AnswerLanguage::Auto.for_question("¿Cuál es la capital de Alemania?"), Some(("Spanish".to_string(), true)));
/// assert_eq!(AnswerLanguage::Auto.for_question("What is the capital of Germany?"), None);
/// assert_eq!(AnswerLanguage::Off.for_question("¿Cuál es la capital de Alemania?"), None);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum AnswerLanguage {
    /// The question's language, where it is surely one other than English (default);
    /// otherwise nothing is said.
    #[default]
    Auto,
    /// Nothing said: the model answers in whatever language it picks.
    Off,
    /// This language, named as a person would in English ("German").
    Named(String),
}

impl AnswerLanguage {
    /// The language the answer to `question` is asked for in, and whether it was read off
    /// the question (`true`) rather than given; `None`: nothing is said.
    pub fn for_question(&self, question: &str) -> Option<(String, bool)> {
        match self {
            AnswerLanguage::Auto => {
                crate::turn::language::of_question(question).map(|l| (l.to_string(), true))
            }
            AnswerLanguage::Off => None,
            AnswerLanguage::Named(name) => Some((name.clone(), false)),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            model: "gemma3:4b".into(),
            backend: BackendKind::Ollama,
            ollama_host: DEFAULT_OLLAMA_HOST.into(),
            base_url: DEFAULT_BASE_URL.into(),
            api_key: None,
            record: None,
            tools: ToolSetup {
                http: vec![DEFAULT_TOOLS_URL.into()],
                ..ToolSetup::default()
            },
            max_iterations: 10,
            timeout: Duration::from_secs(30),
            connect_timeout: Duration::from_secs(10),
            options: GenOptions {
                temperature: Some(0.0),
                num_ctx: Some(8192),
                // Bounded: a small model can repeat itself until the context is full.
                num_predict: Some(512),
                seed: None,
                top_k: None,
                top_p: None,
                stop: Vec::new(),
                keep_alive: None,
                request_timeout: Duration::from_secs(600),
                top_logprobs: None,
                aside: false,
                stop_once: None,
                prefill: None,
                answer_end: None,
            },
            system: None,
            narrowing: Narrowing::PerTool,
            // Measured best on BFCL with both real models; without log-probabilities from
            // the server it decides as `Direct` does.
            decide: Decide::default(),
            checks: CheckLevels::default(),
            thresholds: None,
            calibration: crate::calibration::default_path(),
            // The command line keeps them ([`crate::leanings_path`]); a library writing in
            // the person's cache folder unasked would surprise, and its tests would
            // depend on the runs before.
            leanings: None,
            max_invalid_retries: 2,
            max_repeats: 3,
            max_calls_per_turn: 8,
            max_tool_failures: 3,
            result_cap: 4000,
            early_calls: true,
            permissions: crate::Permissions::default(),
            answer_language: AnswerLanguage::Auto,
            today: Today::Clock,
        }
    }
}

impl Default for GenOptions {
    fn default() -> Self {
        Config::default().options
    }
}

impl Config {
    /// The generation options requests are sent with: `options`, with the
    /// log-probabilities [`Decide::Probability`] reads.
    pub fn request_options(&self) -> GenOptions {
        let mut o = self.options.clone();
        if self.decide == Decide::Probability {
            o.top_logprobs = o.top_logprobs.or(Some(DECISION_TOP_LOGPROBS));
        }
        o
    }

    /// The thresholds calls are declined by when the model decides by probability
    /// ([`Config::thresholds`], else the defaults), else none: the model's own choice
    /// stands.
    pub fn thresholds(&self) -> Option<Thresholds> {
        (self.decide == Decide::Probability).then(|| self.thresholds.clone().unwrap_or_default())
    }

    /// The address of the model server this config names, as the calibration file keys it.
    pub fn server(&self) -> String {
        match self.backend {
            BackendKind::Ollama => crate::backend::parse_host(&self.ollama_host),
            BackendKind::OpenAi | BackendKind::Gemini => {
                self.base_url.trim_end_matches('/').to_string()
            }
        }
    }

    /// Fills in [`Config::thresholds`] from the calibration file when they are not set:
    /// the entry for this model and server, else the defaults. An unreadable file is an
    /// error that says what to do.
    pub fn calibrated(self) -> Result<Self, String> {
        let key = (self.model.clone(), self.server());
        self.calibrated_for(&key)
    }

    /// Like [`Config::calibrated`], for the model and server `key` names (a backend's own,
    /// `Backend::identity`).
    pub(crate) fn calibrated_for(mut self, key: &(String, String)) -> Result<Self, String> {
        if self.thresholds.is_some() || self.decide != Decide::Probability {
            return Ok(self);
        }
        let file = match &self.calibration {
            Some(path) => CalibrationFile::read(path)?,
            None => CalibrationFile::default(),
        };
        let found = file.lookup(&key.0, &key.1).cloned();
        self.thresholds = Some(found.unwrap_or_else(|| Thresholds {
            outdated_for: file.outdated(&key.0, &key.1).then(|| key.0.clone()),
            ..Thresholds::default()
        }));
        Ok(self)
    }

    /// The model backend this config names, wrapped in a recorder when `record` is set.
    pub fn backend(&self) -> Result<Box<dyn Backend>, BackendError> {
        let backend: Box<dyn Backend> = match self.backend {
            BackendKind::Ollama => Box::new(Ollama::new(&self.ollama_host, &self.model)),
            BackendKind::OpenAi => Box::new(OpenAi::new(
                &self.base_url,
                &self.model,
                self.api_key.clone(),
            )),
            BackendKind::Gemini => Box::new(crate::backend::Gemini::new(
                &self.base_url,
                &self.model,
                self.api_key.clone(),
            )),
        };
        Ok(match &self.record {
            Some(path) => Box::new(Recorder::new(backend, path)?),
            None => backend,
        })
    }
}
