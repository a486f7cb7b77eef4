//! The command line's flags, parsed by clap: what each subcommand takes, with the
//! environment fallbacks that are a contract (`OLLAMA_HOST`, `TOOLLOOP_MODEL`,
//! `TOOLLOOP_TOOLS`, `OPENAI_API_KEY`), and the flag each library setting is called
//! here ([`with_flags`]). Defaults come from [`Config::default`].

use std::path::PathBuf;

use crate::{BuiltinConfig, Config, ToolSetup};
use clap::{Args, Parser, Subcommand};

/// Make small local models use tools reliably.
#[derive(Debug, Parser)]
#[command(name = "toolloop", version, about, long_about = None)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

/// Where tools come from.
#[derive(Debug, Args, Clone, Default)]
pub struct ToolArgs {
    /// HTTP tool API base URL (repeatable). With no tool flag at all, TOOLLOOP_TOOLS
    /// (comma-separated URLs) is used, else the tool server at http://localhost:5000
    /// (`toolloop serve-tools`); `ask`, `chat` and `web` take --no-tools for none.
    #[arg(long = "tools", value_name = "URL", value_delimiter = ',', value_parser = parse_url)]
    pub tools: Vec<String>,
    /// MCP server: a URL (Streamable HTTP) or a command line (stdio). Repeatable.
    #[arg(long = "mcp", value_name = "CMD_OR_URL", value_parser = parse_mcp)]
    pub mcp: Vec<String>,
    /// Use the built-in tools in-process.
    #[arg(long)]
    pub builtin: bool,
    #[command(flatten)]
    pub builtin_opts: BuiltinArgs,
    /// Run this tool's calls without asking (repeatable). A tool that only reads never
    /// asks.
    #[arg(long, value_name = "TOOL")]
    pub allow: Vec<String>,
    /// Never run this tool's calls (repeatable).
    #[arg(long, value_name = "TOOL")]
    pub deny: Vec<String>,
    /// Run every call that would ask, unasked (not a --deny tool's).
    #[arg(long)]
    pub yes: bool,
    /// The tool's class, over what its server says: TOOL=read-only, writes, idempotent
    /// or destructive, with ,local or ,open-world (repeatable).
    #[arg(long = "class", value_name = "TOOL=CLASS", value_parser = parse_class)]
    pub classes: Vec<(String, crate::tools::ToolClass)>,
}

/// `TOOL=CLASS`.
fn parse_class(s: &str) -> Result<(String, crate::tools::ToolClass), String> {
    let (tool, class) = s
        .split_once('=')
        .ok_or_else(|| format!("expected TOOL=CLASS, got {s:?}"))?;
    Ok((tool.trim().to_string(), class.parse()?))
}

/// Options of the built-in tools.
#[derive(Debug, Args, Clone, Default)]
pub struct BuiltinArgs {
    /// SQLite database for the read-only sql_query tool.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
    /// Folder of text/Markdown files for the search_docs tool.
    #[arg(long, value_name = "DIR")]
    pub docs: Option<PathBuf>,
    /// Folder the read_file tool may read under.
    #[arg(long, value_name = "DIR")]
    pub files_root: Option<PathBuf>,
    /// Offer the demo get_weather tool.
    #[arg(long)]
    pub demo: bool,
}

impl BuiltinArgs {
    pub fn config(&self) -> BuiltinConfig {
        BuiltinConfig {
            db: self.db.clone(),
            docs: self.docs.clone(),
            files_root: self.files_root.clone(),
            demo: self.demo,
        }
    }
}

impl ToolArgs {
    /// The person's permissions: the file (`TOOLLOOP_PERMISSIONS`, else
    /// `toolloop/permissions.json` in the config folder) with the flags over it.
    pub fn permissions(&self) -> Result<crate::Permissions, String> {
        let mut p = crate::Permissions::load()?;
        p.allow.extend(self.allow.iter().cloned());
        p.deny.extend(self.deny.iter().cloned());
        p.yes |= self.yes;
        p.classes.extend(self.classes.iter().cloned());
        Ok(p)
    }

    pub fn setup(&self) -> ToolSetup {
        let uses_builtin_opts = self.builtin_opts.db.is_some()
            || self.builtin_opts.docs.is_some()
            || self.builtin_opts.files_root.is_some()
            || self.builtin_opts.demo;
        let mut http: Vec<String> = self.tools.clone();
        // The environment stands in for --tools only when no tool flag is given, so an
        // exported TOOLLOOP_TOOLS does not clash with an explicit --builtin or --mcp.
        if http.is_empty()
            && self.mcp.is_empty()
            && !self.builtin
            && !uses_builtin_opts
            && let Ok(env) = std::env::var("TOOLLOOP_TOOLS")
        {
            http = env.split(',').map(str::to_string).collect();
        }
        ToolSetup {
            http: http
                .into_iter()
                .map(|u| u.trim().to_string())
                .filter(|u| !u.is_empty())
                .collect(),
            mcp: self.mcp.clone(),
            builtin: (self.builtin || uses_builtin_opts).then(|| self.builtin_opts.config()),
        }
    }
}

/// A positive, finite number of seconds.
fn parse_secs(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && v > 0.0 && v <= 1e7 => Ok(v),
        _ => Err(format!("expected a positive number of seconds, got {s:?}")),
    }
}

/// An `http://` or `https://` URL with a host.
fn parse_url(s: &str) -> Result<String, String> {
    let t = s.trim();
    let ok = (t.starts_with("http://") || t.starts_with("https://"))
        && t.parse::<ureq::http::Uri>()
            .is_ok_and(|u| u.host().is_some_and(|h| !h.is_empty()));
    if ok {
        Ok(t.to_string())
    } else {
        Err(format!(
            "expected a URL starting with http:// or https://, got {s:?}"
        ))
    }
}

/// `NAME=on|off`, NAME a check's name or `all`.
fn parse_check(s: &str) -> Result<(String, bool), String> {
    let (name, level) = s
        .split_once('=')
        .ok_or_else(|| format!("expected NAME=on or NAME=off, got {s:?}"))?;
    let on = match level.trim() {
        "on" => true,
        "off" => false,
        other => return Err(format!("expected on or off after {name}=, got {other:?}")),
    };
    let name = name.trim();
    if name != "all" {
        crate::CheckLevels::default()
            .set(name, on)
            .map_err(|e| format!("{e} (or all)"))?;
    }
    Ok((name.to_string(), on))
}

/// Any `OLLAMA_HOST` form that makes a usable address.
fn parse_ollama_host(s: &str) -> Result<String, String> {
    parse_url(&crate::backend::ollama::parse_host(s))
        .map(|_| s.to_string())
        .map_err(|_| format!("expected an address such as 127.0.0.1:11434, got {s:?}"))
}

/// An MCP server: a URL (checked as one) or a command line.
fn parse_mcp(s: &str) -> Result<String, String> {
    if s.trim().starts_with("http://") || s.trim().starts_with("https://") {
        parse_url(s)
    } else if s.trim().is_empty() {
        Err("the MCP server is empty: give a URL or a command line".into())
    } else {
        Ok(s.to_string())
    }
}

/// A sampling temperature: finite, from 0 to 5.
fn parse_temperature(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=5.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a temperature from 0 to 5, got {s:?}")),
    }
}

/// A probability, from 0 to 1.
fn parse_probability(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(v) if v.is_finite() && (0.0..=1.0).contains(&v) => Ok(v),
        _ => Err(format!("expected a probability from 0 to 1, got {s:?}")),
    }
}

/// A question with something in it.
fn parse_question(s: &str) -> Result<String, String> {
    if s.trim().is_empty() {
        Err("the question is empty".into())
    } else {
        Ok(s.to_string())
    }
}

/// Which model server to talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum BackendKind {
    /// Ollama's native API.
    Ollama,
    /// Any OpenAI-compatible server (llama-server, vLLM, LM Studio, Ollama's /v1).
    Openai,
    /// Google's Gemini API (key in GEMINI_API_KEY or --key-file; model default
    /// gemini-2.5-flash).
    Gemini,
}

/// The model, the server and the run's limits.
#[derive(Debug, Args, Clone)]
pub struct ModelArgs {
    /// Model name.
    #[arg(long, env = "TOOLLOOP_MODEL", default_value_t = Config::default().model)]
    pub model: String,
    /// Model server protocol.
    #[arg(long, value_enum, default_value = "ollama")]
    pub backend: BackendKind,
    /// Ollama's address (any OLLAMA_HOST form).
    #[arg(long, env = "OLLAMA_HOST", default_value_t = Config::default().ollama_host,
          value_parser = parse_ollama_host)]
    pub ollama_host: String,
    /// Base URL of an OpenAI-compatible server, with --backend openai.
    #[arg(long, value_name = "URL", default_value_t = Config::default().base_url,
          value_parser = parse_url)]
    pub base_url: String,
    /// Most model turns.
    #[arg(long, default_value_t = Config::default().max_iterations, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub max_iterations: u32,
    /// One deadline for the whole run, in seconds (raise it for slow CPU models).
    #[arg(long, value_name = "SECS", default_value_t = Config::default().timeout.as_secs_f64(),
          value_parser = parse_secs, allow_negative_numbers = true)]
    pub timeout: f64,
    /// Extra instructions appended to the system prompt.
    #[arg(long, value_name = "TEXT")]
    pub system: Option<String>,
    /// Most tokens per reply (num_predict / max_tokens).
    #[arg(long, value_name = "N", default_value_t = Config::default().options.num_predict.unwrap_or_default(),
          value_parser = clap::value_parser!(u32).range(1..))]
    pub num_predict: u32,
    /// Context window in tokens (Ollama's num_ctx).
    #[arg(long, value_name = "N", default_value_t = Config::default().options.num_ctx.unwrap_or_default(),
          value_parser = clap::value_parser!(u32).range(256..))]
    pub num_ctx: u32,
    /// Sampling temperature.
    #[arg(long, default_value_t = Config::default().options.temperature.unwrap_or_default(),
          value_parser = parse_temperature, allow_negative_numbers = true)]
    pub temperature: f64,
    /// Read the model server's API key from FILE (default: OPENAI_API_KEY, or
    /// GEMINI_API_KEY with --backend gemini); a file keeps it out of the process list.
    #[arg(long, value_name = "FILE")]
    pub key_file: Option<PathBuf>,
    /// Append every event to FILE as one JSON line.
    #[arg(long, value_name = "FILE")]
    pub transcript: Option<PathBuf>,
    /// Save the model's raw replies to FILE; --replay FILE plays them back.
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Play the replies --record saved as the model, offline (no model server): the
    /// recorded run again, with the same question and tools, as a test would.
    #[arg(long, value_name = "FILE", conflicts_with = "record")]
    pub replay: Option<PathBuf>,
    /// Show the full trace on stderr.
    #[arg(short, long)]
    pub verbose: bool,
    /// How the model decides between a tool and an answer: probability (the kind first; a
    /// call the model was unsure of is declined, or questioned by meaning, by thresholds
    /// `toolloop calibrate` measures for the model), direct (the kind first, taken as it is) or reason (one short reason
    /// first, then the kind).
    #[arg(long, value_enum, default_value = "probability")]
    pub decide: DecideArg,
    /// The language the answer is asked for in after the tools' results: auto (the
    /// question's own, where it is surely not English), off (the model's choice), or a
    /// language named in English (German).
    #[arg(long, value_name = "auto|off|LANGUAGE", default_value = "auto", value_parser = parse_answer_language)]
    pub answer_language: crate::AnswerLanguage,
    /// The date the model is told it is where a tool takes a date: auto (this
    /// computer's, as each run starts), off (none), or a day as YYYY-MM-DD.
    #[arg(long, value_name = "auto|off|YYYY-MM-DD", default_value = "auto", value_parser = parse_today)]
    pub today: crate::Today,
    /// Turn a check on or off: NAME=on|off, NAME being one that `toolloop checks` lists,
    /// or `all`. Repeatable; later ones win.
    #[arg(long = "check", value_name = "NAME=on|off", value_parser = parse_check)]
    pub checks: Vec<(String, bool)>,
    /// With --decide probability: the least probability the model must give a tool call
    /// (default: the model's calibrated value, else 0.5).
    #[arg(long, value_name = "P", value_parser = parse_probability, allow_negative_numbers = true)]
    pub tool_threshold: Option<f64>,
    /// The calibration file to read the model's thresholds from (default
    /// $TOOLLOOP_CALIBRATION, else ~/.config/toolloop/calibration.json).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// The most tool calls the first model turn may carry, side by side; later turns
    /// carry one (1: the several-call form is neither in the prompt nor in the schema).
    #[arg(long, value_name = "N", default_value_t = Config::default().max_calls_per_turn,
          value_parser = clap::value_parser!(u32).range(1..=8))]
    pub max_calls_per_turn: u32,
    /// Do not start a call of a read-only tool (the built-in tools, an MCP tool with
    /// readOnlyHint) while its turn is still being written and judged: wait for the
    /// whole turn, as tools that change things always do.
    #[arg(long)]
    pub no_early_calls: bool,
}

/// `--today`: `auto`, `off` or a date.
fn parse_today(s: &str) -> Result<crate::Today, String> {
    match s {
        "auto" => Ok(crate::Today::Clock),
        "off" => Ok(crate::Today::Off),
        day => chrono::NaiveDate::parse_from_str(day, "%Y-%m-%d")
            .map(crate::Today::On)
            .map_err(|_| "auto, off, or a day as YYYY-MM-DD (2026-12-07)".into()),
    }
}

/// `--answer-language`: a name of letters, so that the line naming it is told apart from
/// a tool's data (`crate::message::own_lines`).
fn parse_answer_language(s: &str) -> Result<crate::AnswerLanguage, String> {
    match s {
        "auto" => Ok(crate::AnswerLanguage::Auto),
        "off" => Ok(crate::AnswerLanguage::Off),
        name if !name.is_empty()
            && name.chars().count() <= 40
            && name
                .chars()
                .all(|c| c.is_alphabetic() || c == ' ' || c == '-') =>
        {
            Ok(crate::AnswerLanguage::Named(name.to_string()))
        }
        _ => Err("auto, off, or a language named in English in letters (German)".into()),
    }
}

/// `--decide`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DecideArg {
    /// The kind is the first thing the model writes.
    Direct,
    /// One short reason first, then the kind.
    Reason,
    /// The kind first; a call the model gave too little probability is declined.
    Probability,
}

impl From<DecideArg> for crate::turn::schema::Decide {
    fn from(d: DecideArg) -> Self {
        match d {
            DecideArg::Direct => crate::turn::schema::Decide::Direct,
            DecideArg::Reason => crate::turn::schema::Decide::Reason,
            DecideArg::Probability => crate::turn::schema::Decide::Probability,
        }
    }
}

/// The exit codes of a command that runs a question (`ask`, `chat`, `demo`), for `--help`.
const RUN_EXIT_CODES: &str = "Exit codes: 0 answered; 1 runtime error (server down, model \
missing, a guardrail blocked the run); 2 usage error (a bad flag or value); 3 no answer within \
--max-iterations; 4 --timeout passed; 5 the model asked a question and nobody was there to \
answer (stdin is not a terminal); 6 a tool call cut at the token limit twice, so not run \
(raise --num-predict); 7 the model's replies stayed invalid after every re-ask, or wrote \
back toolloop's own text (the prompt's placeholder for an answer, an instruction to the \
model) as the answer; 130 interrupted (Ctrl-C or SIGTERM).";

/// The exit codes of every other command, for `--help`.
const EXIT_CODES: &str = "Exit codes: 0 done; 1 runtime error (a server or file that could \
not be reached or read); 2 usage error (a bad flag or value); 130 interrupted (Ctrl-C or SIGTERM).";

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Ask one question; the answer goes to stdout.
    ///
    /// Example: toolloop ask "What is 12.5 * 4?" --builtin
    #[command(after_help = RUN_EXIT_CODES)]
    Ask {
        /// The question; `-` (or none, with stdin not a terminal) reads it from stdin.
        #[arg(value_parser = parse_question)]
        query: Option<String>,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        tools: ToolArgs,
        /// Run without any tools.
        #[arg(long, conflicts_with_all = ["tools", "mcp", "builtin"])]
        no_tools: bool,
        /// Print one JSON object (answer, stop_reason, iterations, steps, usage).
        #[arg(long)]
        json: bool,
    },
    /// A conversation at the terminal; /tools, /reset, /exit.
    ///
    /// Example: toolloop chat --builtin --demo
    #[command(after_help = RUN_EXIT_CODES)]
    Chat {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        tools: ToolArgs,
        /// Run without any tools.
        #[arg(long, conflicts_with_all = ["tools", "mcp", "builtin"])]
        no_tools: bool,
    },
    /// Run the offline demo: no server, no model, about a second.
    ///
    /// Example: toolloop demo
    #[command(after_help = RUN_EXIT_CODES)]
    Demo {
        /// Print the outcome as JSON.
        #[arg(long)]
        json: bool,
        /// Show the full trace on stderr.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Score a model on a BFCL-format tool-calling dataset (file or folder).
    ///
    /// Example: toolloop eval ~/.cache/toolloop/bfcl --limit 20 --backend openai
    #[command(after_help = EXIT_CODES)]
    Eval {
        /// A BFCL_*.json file (possible answers in possible_answer/ beside it) or a folder
        /// of them (scripts/bfcl-data.sh fetches five: simple_python, multiple, irrelevance,
        /// parallel, parallel_multiple).
        path: PathBuf,
        #[command(flatten)]
        model: ModelArgs,
        /// At most N cases per category.
        #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        limit: Option<u32>,
        /// Only this category (e.g. simple_python, multiple, irrelevance).
        #[arg(long)]
        category: Option<String>,
        /// Only one half: tuning (cases with an even number) or validation (odd). The
        /// summary reports both halves either way.
        #[arg(long, value_enum)]
        half: Option<crate::eval::Half>,
        /// Send no schema: measure what the constraint buys.
        #[arg(long)]
        no_constraint: bool,
        /// Ask the server with its own tool calling (OpenAI `tools`), without toolloop's
        /// loop: the baseline to compare with. Needs --backend openai.
        #[arg(long, conflicts_with = "no_constraint")]
        native_tools: bool,
        /// Run N cases at once (start the server with N slots, e.g. llama-server -np N).
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=64))]
        jobs: u32,
        /// Print the summary and every case as JSON.
        #[arg(long)]
        json: bool,
        /// Judge the first replies recorded in REPORT (an earlier `eval --json`) again
        /// under today's checks and this command's flags, without a model; repeatable.
        /// It prints the cases that moved and the counts before and after, as text; the
        /// flags that choose or run cases are refused with it, not passed over.
        #[arg(long, value_name = "REPORT", conflicts_with_all = [
            "native_tools", "no_constraint", "json", "limit", "category", "half", "jobs"])]
        rescore: Vec<PathBuf>,
    },
    /// Measure the decision's thresholds for your model on your server and save them.
    ///
    /// Runs a labelled set (by default the built-in everyday set: 90 requests, 30 that
    /// need no tool, 20 not in English) through the loop once, with the fit question put
    /// to every call it could be put to (one whose tool shares no word with the request,
    /// or with a required value nobody said), and picks on the set's tuning half the thresholds that decline the
    /// most needless calls while keeping 97% of right ones; the validation half shows
    /// whether they hold. The tuning half's questioned calls (about a quarter of the
    /// set) are run once more, to measure how much the model's answer to the fit
    /// question moves between two asks, and right calls are kept by twice that spread
    /// (--margin). The bar also stays under a floor drawn from how the tuning half's
    /// right calls spread, which 90% of right calls like them clear (--floor): one set's
    /// lowest right call is not another's.
    /// It costs about two model requests per case (and one per tool, the tool's own
    /// leaning), and a quarter more for the second asking: minutes for a small model on
    /// a CPU, less on a GPU (--dry-run says how many requests). The result goes to the
    /// calibration file (--calibration), keyed by model and server, where ask, chat,
    /// eval and web read it.
    ///
    /// Example: toolloop calibrate --backend openai --model qwen2.5-coder-0.5b
    #[command(after_help = EXIT_CODES)]
    Calibrate {
        /// A labelled set in BFCL's format (a BFCL_*.json file with possible_answer/ beside
        /// it, or a folder of them); irrelevance cases are the ones that need no tool.
        data: Option<PathBuf>,
        #[command(flatten)]
        model: ModelArgs,
        /// Run N cases at once (start the server with N slots).
        #[arg(long, value_name = "N", default_value_t = 1,
              value_parser = clap::value_parser!(u32).range(1..=64))]
        jobs: u32,
        /// Keep right calls by this many times the fit answer's spread between two asks.
        /// 0 sets the bar just under the lowest right call of this run (or at the
        /// right calls' floor, when that is lower), which declines more needless calls and,
        /// where the server's answers move, right ones too.
        #[arg(long, value_name = "Z", default_value_t = crate::eval::calibrate::NOISE_Z,
              value_parser = margin)]
        margin: f64,
        /// Hold the bar on the fit under the floor that this share of right calls like the
        /// tuning half's clear (from 0.5 to 0.999). `off` holds it under nothing, which
        /// declines more needless calls and more right calls of requests unlike the set's.
        #[arg(long, value_name = "LEVEL|off", default_value_t = crate::eval::calibrate::PREDICT,
              value_parser = floor_level)]
        floor: f64,
        /// Print the entry written as JSON.
        #[arg(long)]
        json: bool,
        /// Say what would be measured, where, and where it would be saved, and send the
        /// server nothing.
        #[arg(long, conflicts_with = "no_save")]
        dry_run: bool,
        /// Measure and print, but save nothing.
        #[arg(long)]
        no_save: bool,
    },
    /// List the checks between the model's reply and the tool, with their defaults; with
    /// a name, that check's whole doc. Set them with --check NAME=on|off.
    ///
    /// Example: toolloop checks tool-fit
    #[command(after_help = EXIT_CODES)]
    Checks {
        /// One check's name.
        name: Option<String>,
        /// Machine-readable output.
        #[arg(long, conflicts_with = "markdown")]
        json: bool,
        /// Every check's doc as the Markdown page `docs/checks.md`.
        #[arg(long, conflicts_with = "name")]
        markdown: bool,
    },
    /// Check the setup before a first question: the model server and the model, whether
    /// the model is calibrated and what that changes, and the tools; a line each.
    ///
    /// Example: toolloop doctor --backend openai --base-url http://127.0.0.1:8080/v1 --builtin
    #[command(after_help = EXIT_CODES)]
    Doctor {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        tools: ToolArgs,
        /// Check no tools.
        #[arg(long)]
        no_tools: bool,
    },
    /// List the tool catalogue.
    ///
    /// Example: toolloop tools --builtin --demo --json
    #[command(after_help = EXIT_CODES)]
    Tools {
        #[command(flatten)]
        tools: ToolArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Serve a web page to ask, watch every step live, and answer the model's questions.
    ///
    /// Example: toolloop web --builtin --demo   (then open http://127.0.0.1:8700)
    #[command(after_help = EXIT_CODES)]
    Web(WebCommand),
    /// Serve toolloop's turn to any OpenAI or Ollama client: POST /v1/chat/completions
    /// and /api/chat with `tools` get calls checked and repaired by toolloop; the client
    /// runs its tools. Requests without tools pass through to the model server.
    ///
    /// Example: toolloop proxy --addr 127.0.0.1:11500 --backend openai --base-url http://127.0.0.1:8080/v1
    #[command(after_help = EXIT_CODES)]
    Proxy(ProxyCommand),
    /// Serve the built-in tools over the HTTP tool API.
    ///
    /// Example: toolloop serve-tools --addr 127.0.0.1:5000 --db shop.db --docs ./docs
    #[command(after_help = EXIT_CODES)]
    ServeTools {
        /// Address to listen on.
        #[arg(long, default_value = "127.0.0.1:5000")]
        addr: String,
        #[command(flatten)]
        opts: BuiltinArgs,
    },
    /// Read broken JSON on stdin and print the repaired JSON on stdout.
    ///
    /// Example: echo "{'a': 1," | toolloop repair -v
    #[command(after_help = EXIT_CODES)]
    Repair {
        /// Print what was fixed to stderr.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print CALL_SCHEMA; with tool flags, the schema `ask` sends for those tools, shaped
    /// by the same --decide and --max-calls-per-turn.
    ///
    /// Example: toolloop schema --builtin --max-calls-per-turn 1
    #[command(after_help = EXIT_CODES)]
    Schema {
        #[command(flatten)]
        tools: ToolArgs,
        /// How the model decides, as for `ask` (it orders the schema's fields).
        #[arg(long, value_enum, default_value = "probability")]
        decide: DecideArg,
        /// The most tool calls one turn may carry, as for `ask` (1: no `tool_calls`).
        #[arg(long, value_name = "N", default_value_t = Config::default().max_calls_per_turn,
              value_parser = clap::value_parser!(u32).range(1..=8))]
        max_calls_per_turn: u32,
    },
}

/// `toolloop web`: the model and tools as for `ask`, and where to serve.
#[derive(Debug, Args)]
pub struct WebCommand {
    #[command(flatten)]
    pub model: ModelArgs,
    #[command(flatten)]
    pub tools: ToolArgs,
    /// Run without any tools.
    #[arg(long, conflicts_with_all = ["tools", "mcp", "builtin"])]
    pub no_tools: bool,
    #[command(flatten)]
    pub web: WebArgs,
}

/// `toolloop proxy`: the model server as for `ask`, and where to serve.
#[derive(Debug, Args)]
pub struct ProxyCommand {
    #[command(flatten)]
    pub model: ModelArgs,
    /// Address to listen on; one beyond loopback needs --api-key.
    #[arg(long, default_value = "127.0.0.1:11500")]
    pub addr: String,
    /// The key clients must send (Authorization: Bearer KEY).
    #[arg(long, env = "TOOLLOOP_PROXY_KEY", hide_env_values = true)]
    pub api_key: Option<String>,
    /// A client's tool's class, for the decision: TOOL=read-only, writes, idempotent or
    /// destructive (repeatable). A call to one that writes needs more evidence.
    #[arg(long = "class", value_name = "TOOL=CLASS", value_parser = parse_class)]
    pub classes: Vec<(String, crate::tools::ToolClass)>,
}

/// Where and how `toolloop web` serves.
#[derive(Debug, Args)]
pub struct WebArgs {
    /// Address to listen on (loopback unless --allow-remote).
    #[arg(long, default_value = "127.0.0.1:8700")]
    pub addr: String,
    /// Allow an address other machines can reach: anyone who can reach it can use the
    /// model and the tools.
    #[arg(long)]
    pub allow_remote: bool,
    /// The most runs in progress at once; more are answered 503.
    #[arg(long, value_name = "N", default_value_t = 4,
          value_parser = clap::value_parser!(u32).range(1..=64))]
    pub max_runs: u32,
}

/// The library's names of settings, as they appear in its messages, and this program's
/// flag for each.
pub const FLAGS: [(&str, &str); 13] = [
    ("`mcp`", "--mcp"),
    ("`addr`", "--addr"),
    ("`max_iterations`", "--max-iterations"),
    ("`timeout`", "--timeout"),
    ("`ollama_host`", "--ollama-host"),
    ("`base_url`", "--base-url"),
    ("`model`", "--model"),
    ("`tools`", "--tools"),
    ("`builtin`", "--builtin"),
    ("`db`", "--db"),
    ("`docs`", "--docs"),
    ("`files_root`", "--files-root"),
    ("`api_key`", "--api-key"),
];

/// A library message with the settings it names written as this program's flags.
pub fn with_flags(message: impl std::fmt::Display) -> String {
    FLAGS
        .iter()
        .fold(message.to_string(), |m, (setting, flag)| {
            m.replace(setting, flag)
        })
}

/// `--margin`: a number of spreads from 0 to 4.
fn margin(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(z) if (0.0..=4.0).contains(&z) => Ok(z),
        _ => Err(format!(
            "{text:?} is not a margin: give a number from 0 to 4 (default 2)"
        )),
    }
}

/// `--floor`: a share of right calls from 0.5 to 0.999, or `off` (read as 0).
fn floor_level(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        _ if text.eq_ignore_ascii_case("off") => Ok(0.0),
        Ok(level) if (0.5..=0.999).contains(&level) => Ok(level),
        _ => Err(format!(
            "{text:?} is not a floor: give a share of right calls from 0.5 to 0.999, or off (default 0.9)"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_settings_become_flags() {
        assert_eq!(
            with_flags("no answer within 1s; raise `timeout`"),
            "no answer within 1s; raise --timeout"
        );
        assert_eq!(
            with_flags("start it with `ollama serve`, or set OLLAMA_HOST / `ollama_host`"),
            "start it with `ollama serve`, or set OLLAMA_HOST / --ollama-host"
        );
    }
}
