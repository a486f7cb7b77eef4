//! The `toolloop` command line: glue over the library. Exit codes are mapped here, in one
//! place (see DESIGN.md, "Command line").

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use std::io::IsTerminal;

use toolloop::backend::ollama::Ollama;
use toolloop::backend::openai::OpenAi;
use toolloop::backend::scripted::Recorder;
use toolloop::backend::{Backend, GenOptions};
use toolloop::deadline::Deadline;
use toolloop::display::Progress;
use toolloop::events::Transcript;
use toolloop::orchestrator::{
    ClarifyHandler, Conversation, Orchestrator, OrchestratorError, Outcome, StopKind,
};
use toolloop::repair;
use toolloop::schema::{self, CallSchema, Narrowing};
use toolloop::server::ToolServer;
use toolloop::tools::ToolSetup;
use toolloop::tools::builtin::{Builtin, BuiltinConfig};

/// Make small local models use tools reliably.
#[derive(Debug, Parser)]
#[command(name = "toolloop", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// Where tools come from.
#[derive(Debug, Args, Clone, Default)]
struct ToolArgs {
    /// HTTP tool API base URL (repeatable). When no tool flag is given, TOOLLOOP_TOOLS
    /// (comma-separated URLs) is used.
    #[arg(long = "tools", value_name = "URL", value_delimiter = ',')]
    tools: Vec<String>,
    /// MCP server: a URL (Streamable HTTP) or a command line (stdio). Repeatable.
    #[arg(long = "mcp", value_name = "CMD_OR_URL")]
    mcp: Vec<String>,
    /// Use the built-in tools in-process.
    #[arg(long)]
    builtin: bool,
    #[command(flatten)]
    builtin_opts: BuiltinArgs,
}

/// Options of the built-in tools.
#[derive(Debug, Args, Clone, Default)]
struct BuiltinArgs {
    /// SQLite database for the read-only sql_query tool.
    #[arg(long, value_name = "FILE")]
    db: Option<PathBuf>,
    /// Folder of text/Markdown files for the search_docs tool.
    #[arg(long, value_name = "DIR")]
    docs: Option<PathBuf>,
    /// Folder the read_file tool may read under.
    #[arg(long, value_name = "DIR")]
    files_root: Option<PathBuf>,
    /// Offer the demo get_weather tool.
    #[arg(long)]
    demo: bool,
}

impl BuiltinArgs {
    fn config(&self) -> BuiltinConfig {
        BuiltinConfig {
            db: self.db.clone(),
            docs: self.docs.clone(),
            files_root: self.files_root.clone(),
            demo: self.demo,
        }
    }
}

impl ToolArgs {
    fn setup(&self) -> ToolSetup {
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

/// Which model server to talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum BackendKind {
    /// Ollama's native API.
    Ollama,
    /// Any OpenAI-compatible server (llama-server, vLLM, LM Studio, Ollama's /v1).
    Openai,
}

/// The model, the server and the run's limits.
#[derive(Debug, Args, Clone)]
struct ModelArgs {
    /// Model name.
    #[arg(long, env = "TOOLLOOP_MODEL", default_value = "gemma3:4b")]
    model: String,
    /// Model server protocol.
    #[arg(long, value_enum, default_value = "ollama")]
    backend: BackendKind,
    /// Ollama's address (any OLLAMA_HOST form).
    #[arg(long, env = "OLLAMA_HOST", default_value = "http://localhost:11434")]
    ollama_host: String,
    /// Base URL of an OpenAI-compatible server, with --backend openai.
    #[arg(long, value_name = "URL", default_value = "http://127.0.0.1:8080/v1")]
    base_url: String,
    /// Most model turns.
    #[arg(long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    max_iterations: u32,
    /// One deadline for the whole run, in seconds (raise it for slow CPU models).
    #[arg(long, value_name = "SECS", default_value = "30", value_parser = parse_secs)]
    timeout: f64,
    /// Extra instructions appended to the system prompt.
    #[arg(long, value_name = "TEXT")]
    system: Option<String>,
    /// Most tokens per reply (num_predict / max_tokens).
    #[arg(long, value_name = "N", default_value_t = 512)]
    num_predict: u32,
    /// Context window in tokens (Ollama's num_ctx).
    #[arg(long, value_name = "N", default_value_t = 8192)]
    num_ctx: u32,
    /// Sampling temperature.
    #[arg(long, default_value_t = 0.0)]
    temperature: f64,
    /// Append every event to FILE as one JSON line.
    #[arg(long, value_name = "FILE")]
    transcript: Option<PathBuf>,
    /// Save the model's raw replies to FILE, to replay the session offline.
    #[arg(long, value_name = "FILE")]
    record: Option<PathBuf>,
    /// Show the full trace on stderr.
    #[arg(short, long)]
    verbose: bool,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Ask one question; the answer goes to stdout.
    ///
    /// Example: toolloop ask "What is 12.5 * 4?" --builtin
    Ask {
        /// The question.
        query: String,
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        tools: ToolArgs,
        /// Run without any tools.
        #[arg(long)]
        no_tools: bool,
        /// Print one JSON object (answer, stop_reason, iterations, steps, usage).
        #[arg(long)]
        json: bool,
    },
    /// A conversation at the terminal; /tools, /reset, /exit.
    ///
    /// Example: toolloop chat --builtin --demo
    Chat {
        #[command(flatten)]
        model: ModelArgs,
        #[command(flatten)]
        tools: ToolArgs,
        /// Run without any tools.
        #[arg(long)]
        no_tools: bool,
    },
    /// Run the offline demo: no server, no model, about a second.
    ///
    /// Example: toolloop demo
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
    Eval {
        /// A BFCL_*.json file (possible answers in possible_answer/ beside it) or a folder
        /// of them (scripts/bfcl-data.sh fetches three).
        path: PathBuf,
        #[command(flatten)]
        model: ModelArgs,
        /// At most N cases per category.
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// Only this category (e.g. simple_python, multiple, irrelevance).
        #[arg(long)]
        category: Option<String>,
        /// Send no schema: measure what the constraint buys.
        #[arg(long)]
        no_constraint: bool,
        /// Print the summary and every case as JSON.
        #[arg(long)]
        json: bool,
    },
    /// List the tool catalogue.
    ///
    /// Example: toolloop tools --builtin --demo --json
    Tools {
        #[command(flatten)]
        tools: ToolArgs,
        /// Machine-readable output.
        #[arg(long)]
        json: bool,
    },
    /// Serve the built-in tools over the HTTP tool API.
    ///
    /// Example: toolloop serve-tools --addr 127.0.0.1:5000 --db shop.db --docs ./docs
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
    Repair {
        /// Print what was fixed to stderr.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print CALL_SCHEMA; with tool flags, the schema narrowed to those tools.
    ///
    /// Example: toolloop schema --builtin
    Schema {
        #[command(flatten)]
        tools: ToolArgs,
    },
}

/// Exit codes, a contract (DESIGN.md): 0 answered, 1 runtime error, 2 usage error (clap),
/// 3 max iterations reached, 4 timeout, 5 clarification needed but nobody to ask.
const EXIT_RUNTIME: u8 = 1;
const EXIT_MAX_ITERATIONS: u8 = 3;
const EXIT_TIMEOUT: u8 = 4;
const EXIT_CLARIFY: u8 = 5;

fn exit_for_stop(stop: StopKind) -> u8 {
    match stop {
        StopKind::Completed | StopKind::ToolFailureDegraded => 0,
        StopKind::MaxIterations => EXIT_MAX_ITERATIONS,
        StopKind::Timeout => EXIT_TIMEOUT,
        StopKind::ClarificationNeeded => EXIT_CLARIFY,
        StopKind::Blocked => EXIT_RUNTIME,
    }
}

fn exit_for_error(e: &OrchestratorError) -> u8 {
    match e {
        OrchestratorError::MaxIterationsReached { .. } => EXIT_MAX_ITERATIONS,
        OrchestratorError::Timeout { .. } => EXIT_TIMEOUT,
        OrchestratorError::ClarificationNeeded { .. } => EXIT_CLARIFY,
        _ => EXIT_RUNTIME,
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Ask {
            query,
            model,
            tools,
            no_tools,
            json,
        } => run_ask(&query, &model, &tools, no_tools, json),
        Command::Chat {
            model,
            tools,
            no_tools,
        } => run_chat(&model, &tools, no_tools),
        Command::Demo { json, verbose } => run_demo(json, verbose),
        Command::Eval {
            path,
            model,
            limit,
            category,
            no_constraint,
            json,
        } => run_eval(
            &path,
            &model,
            limit,
            category.as_deref(),
            no_constraint,
            json,
        ),
        Command::Repair { verbose } => run_repair(verbose),
        Command::Schema { tools } => run_schema(&tools),
        Command::Tools { tools, json } => run_tools(&tools, json),
        Command::ServeTools { addr, opts } => run_serve(&addr, &opts),
    }
}

/// Logging from `RUST_LOG` (default: warnings). The HTTP and TLS layers are capped at
/// `info` whatever `RUST_LOG` says: at `trace` ureq dumps raw request bytes, headers and
/// all, and the `Authorization` header carries `OPENAI_API_KEY`.
fn init_logging() {
    let mut builder =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn"));
    for module in ["ureq", "ureq_proto", "rustls"] {
        builder.filter_module(module, log::LevelFilter::Info);
    }
    builder.init();
}

/// Builds the orchestrator a command line asks for. The tools are connected within the
/// run's deadline; with no tool flags the seed's default tool server is used.
fn build(
    model: &ModelArgs,
    tools: &ToolArgs,
    no_tools: bool,
    deadline: Deadline,
    clarify: Option<Box<dyn ClarifyHandler>>,
) -> Result<Orchestrator, OrchestratorError> {
    let mut setup = tools.setup();
    if setup.is_empty() && !no_tools {
        setup.http.push("http://localhost:5000".into());
    }
    if no_tools {
        setup = ToolSetup::default();
    }
    let catalogue = setup
        .connect(deadline)
        .map_err(|error| OrchestratorError::Tools {
            error,
            steps: Vec::new(),
        })?;
    let backend: Box<dyn Backend> = match model.backend {
        BackendKind::Ollama => Box::new(Ollama::new(&model.ollama_host, &model.model)),
        BackendKind::Openai => Box::new(OpenAi::new(
            &model.base_url,
            &model.model,
            std::env::var("OPENAI_API_KEY").ok(),
        )),
    };
    let backend: Box<dyn Backend> =
        match &model.record {
            Some(path) => Box::new(Recorder::new(backend, path).map_err(|error| {
                OrchestratorError::Backend {
                    error,
                    steps: Vec::new(),
                }
            })?),
            None => backend,
        };
    let options = GenOptions {
        temperature: Some(model.temperature),
        num_ctx: Some(model.num_ctx),
        num_predict: Some(model.num_predict),
        ..GenOptions::default()
    };
    let mut builder = Orchestrator::builder()
        .boxed_backend(backend)
        .catalogue(catalogue)
        .max_iterations(model.max_iterations)
        .timeout(Duration::from_secs_f64(model.timeout))
        .options(options)
        .system(model.system.clone())
        .observer(Progress::new(model.verbose));
    if let Some(path) = &model.transcript {
        let t = Transcript::open(path).map_err(|e| {
            OrchestratorError::Config(format!("--transcript {}: {e}", path.display()))
        })?;
        builder = builder.observer(t);
    }
    if let Some(c) = clarify {
        builder = builder.boxed_clarify_handler(c);
    }
    builder.build()
}

/// Asks the person at the terminal: the question on stderr, the answer from stdin.
fn ask_person(question: &str, missing: &[String]) -> Option<String> {
    if missing.is_empty() {
        eprintln!("? {question}");
    } else {
        eprintln!("? {question} (missing: {})", missing.join(", "));
    }
    eprint!("> ");
    let mut line = String::new();
    match std::io::stdin().read_line(&mut line) {
        Ok(n) if n > 0 => Some(line.trim().to_string()),
        _ => None,
    }
}

fn outcome_json(o: &Outcome) -> serde_json::Value {
    let mut v = serde_json::json!({
        "answer": o.answer,
        "stop_reason": o.stop_reason,
        "iterations": o.iterations,
        "steps": o.steps,
        "usage": o.usage,
        "ms": o.elapsed.as_millis() as u64,
    });
    if let Some(q) = &o.question {
        v["question"] = serde_json::json!(q);
        v["missing_params"] = serde_json::json!(o.missing_params);
    }
    if let Some(r) = &o.blocked_reason {
        v["blocked_reason"] = serde_json::json!(r);
    }
    v
}

fn print_stdout(text: &str) -> bool {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|_| out.flush()).is_ok()
}

/// Says on stderr why a run gave no answer.
fn explain(o: &Outcome, model: &ModelArgs) {
    match o.stop_reason {
        StopKind::MaxIterations => eprintln!(
            "toolloop: no answer after {} iterations; raise --max-iterations or simplify the question",
            o.iterations
        ),
        StopKind::Timeout => eprintln!(
            "toolloop: no answer within {}s; raise --timeout (small models on a CPU are slow)",
            model.timeout
        ),
        StopKind::ClarificationNeeded => {
            let missing = if o.missing_params.is_empty() {
                String::new()
            } else {
                format!(" (missing: {})", o.missing_params.join(", "))
            };
            eprintln!(
                "toolloop: the model needs more information: {}{missing}",
                o.question.as_deref().unwrap_or("")
            );
        }
        StopKind::Blocked => eprintln!(
            "toolloop: blocked: {}",
            o.blocked_reason.as_deref().unwrap_or("")
        ),
        StopKind::ToolFailureDegraded => {
            eprintln!("toolloop: a tool was unavailable; the model answered without it")
        }
        StopKind::Completed => {}
    }
}

fn run_ask(
    query: &str,
    model: &ModelArgs,
    tools: &ToolArgs,
    no_tools: bool,
    json: bool,
) -> ExitCode {
    let deadline = Deadline::after(Duration::from_secs_f64(model.timeout));
    let clarify: Option<Box<dyn ClarifyHandler>> = std::io::stdin()
        .is_terminal()
        .then(|| Box::new(ask_person) as Box<dyn ClarifyHandler>);
    let result = build(model, tools, no_tools, deadline, clarify)
        .and_then(|mut o| o.run_with_deadline(query, &[], deadline));
    match result {
        Ok(outcome) => {
            let code = exit_for_stop(outcome.stop_reason);
            let printed = if json {
                print_stdout(&serde_json::to_string(&outcome_json(&outcome)).unwrap_or_default())
            } else {
                outcome.answer.as_deref().is_none_or(print_stdout)
            };
            explain(&outcome, model);
            if !printed {
                return ExitCode::from(EXIT_RUNTIME);
            }
            ExitCode::from(code)
        }
        Err(e) => {
            if json {
                print_stdout(
                    &serde_json::json!({"error": e.to_string(), "stop_reason": "error", "steps": e.steps()})
                        .to_string(),
                );
            }
            eprintln!("toolloop: {e}");
            ExitCode::from(exit_for_error(&e))
        }
    }
}

/// Reads the person's lines: with line editing on a terminal, plain lines otherwise.
enum Input {
    Editor(Box<rustyline::DefaultEditor>),
    Plain,
}

impl Input {
    fn new() -> Self {
        if std::io::stdin().is_terminal()
            && let Ok(e) = rustyline::DefaultEditor::new()
        {
            return Input::Editor(Box::new(e));
        }
        Input::Plain
    }

    fn read(&mut self, prompt: &str) -> Option<String> {
        match self {
            Input::Editor(e) => match e.readline(prompt) {
                Ok(line) => {
                    let _ = e.add_history_entry(line.as_str());
                    Some(line)
                }
                Err(_) => None,
            },
            Input::Plain => {
                eprint!("{prompt}");
                let mut line = String::new();
                match std::io::stdin().read_line(&mut line) {
                    Ok(n) if n > 0 => Some(line.trim_end_matches(['\n', '\r']).to_string()),
                    _ => None,
                }
            }
        }
    }
}

fn run_chat(model: &ModelArgs, tools: &ToolArgs, no_tools: bool) -> ExitCode {
    let clarify = |question: &str, missing: &[String]| -> Option<String> {
        if missing.is_empty() {
            eprintln!("? {question}");
        } else {
            eprintln!("? {question} (missing: {})", missing.join(", "));
        }
        Input::new().read("answer> ")
    };
    let connect = Deadline::after(Duration::from_secs_f64(model.timeout));
    let orchestrator = match build(model, tools, no_tools, connect, Some(Box::new(clarify))) {
        Ok(o) => o,
        Err(e) => return fail(e),
    };
    let names = orchestrator.catalogue().names();
    let mut chat = Conversation::new(orchestrator);
    let mut input = Input::new();
    eprintln!(
        "toolloop chat with {} tools; /tools lists them, /reset forgets, /exit leaves.",
        names.len()
    );
    while let Some(line) = input.read("you> ") {
        let line = line.trim();
        match line {
            "" => continue,
            "/exit" | "/quit" => break,
            "/reset" => {
                chat.reset();
                eprintln!("(conversation forgotten)");
                continue;
            }
            "/tools" => {
                for spec in chat.orchestrator().catalogue().specs() {
                    eprintln!("  {}", toolloop::prompt::signature(&spec));
                }
                continue;
            }
            _ if line.starts_with('/') => {
                eprintln!("unknown command {line}; use /tools, /reset or /exit");
                continue;
            }
            _ => {}
        }
        match chat.ask(line) {
            Ok(outcome) => {
                if let Some(a) = &outcome.answer {
                    print_stdout(a);
                }
                explain(&outcome, model);
            }
            Err(e) => eprintln!("toolloop: {e}"),
        }
    }
    ExitCode::SUCCESS
}

fn run_eval(
    path: &std::path::Path,
    model: &ModelArgs,
    limit: Option<usize>,
    category: Option<&str>,
    no_constraint: bool,
    json: bool,
) -> ExitCode {
    use toolloop::eval;
    let mut cases = match eval::load(path) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    if let Some(cat) = category {
        cases.retain(|c| c.category == cat);
        if cases.is_empty() {
            return fail(format!("no case of category {cat} in {}", path.display()));
        }
    }
    if let Some(n) = limit {
        let mut seen = std::collections::HashMap::<String, usize>::new();
        cases.retain(|c| {
            let k = seen.entry(c.category.clone()).or_default();
            *k += 1;
            *k <= n
        });
    }
    let mut backend: Box<dyn Backend> = match model.backend {
        BackendKind::Ollama => Box::new(Ollama::new(&model.ollama_host, &model.model)),
        BackendKind::Openai => Box::new(OpenAi::new(
            &model.base_url,
            &model.model,
            std::env::var("OPENAI_API_KEY").ok(),
        )),
    };
    if let Err(e) = backend.preflight(Deadline::after(Duration::from_secs(30))) {
        return fail(e);
    }
    let options = GenOptions {
        temperature: Some(model.temperature),
        num_ctx: Some(model.num_ctx),
        num_predict: Some(model.num_predict),
        ..GenOptions::default()
    };
    let constraint = if no_constraint {
        eval::Constraint::Off
    } else {
        eval::Constraint::Narrowed
    };
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(cases.len() as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} {elapsed}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    let mut results = Vec::with_capacity(cases.len());
    for case in &cases {
        bar.set_message(case.id.clone());
        let r = eval::run_case(
            backend.as_mut(),
            case,
            &options,
            constraint,
            Duration::from_secs_f64(model.timeout),
        );
        if model.verbose {
            bar.suspend(|| {
                eprintln!(
                    "{} {} {}",
                    if r.pass { "PASS" } else { "FAIL" },
                    r.id,
                    r.reason.as_deref().unwrap_or("")
                )
            });
        }
        results.push(r);
        bar.inc(1);
    }
    bar.finish_and_clear();
    let summary = eval::summarize(&results);
    if json {
        print_stdout(&eval::report_json(&results).to_string());
    } else {
        let mut out = format!(
            "{:<16} {:>6} {:>9} {:>13} {:>10} {:>9}\n",
            "category", "cases", "accuracy", "invalid turns", "iterations", "s/case"
        );
        for s in &summary {
            out.push_str(&format!(
                "{:<16} {:>6} {:>8.1}% {:>12.1}% {:>10.2} {:>9.2}\n",
                s.category,
                s.cases,
                s.accuracy * 100.0,
                s.invalid_turn_rate * 100.0,
                s.mean_iterations,
                s.mean_ms / 1000.0
            ));
        }
        print!("{out}");
    }
    let errors = results.iter().filter(|r| r.error.is_some()).count();
    if errors > 0 {
        eprintln!("toolloop: {errors} cases could not run (see --json for why)");
    }
    ExitCode::SUCCESS
}

fn run_demo(json: bool, verbose: bool) -> ExitCode {
    eprintln!(
        "toolloop demo: a scripted model and the built-in tools on 127.0.0.1; no server needed."
    );
    eprintln!("you> {}", toolloop::demo::QUESTION);
    let result = toolloop::demo::run(
        Box::new(Progress::new(verbose)),
        Box::new(|line| eprintln!("{line}")),
        150,
    );
    match result {
        Ok(outcome) => {
            let ok = if json {
                print_stdout(&serde_json::to_string(&outcome_json(&outcome)).unwrap_or_default())
            } else {
                outcome.answer.as_deref().is_none_or(print_stdout)
            };
            if !ok {
                return ExitCode::from(EXIT_RUNTIME);
            }
            ExitCode::from(exit_for_stop(outcome.stop_reason))
        }
        Err(e) => fail(e),
    }
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("toolloop: {message}");
    ExitCode::from(EXIT_RUNTIME)
}

fn run_schema(tools: &ToolArgs) -> ExitCode {
    let setup = tools.setup();
    if setup.is_empty() {
        print!("{}", schema::call_schema_json());
        return ExitCode::SUCCESS;
    }
    match setup.connect(Deadline::after(Duration::from_secs(30))) {
        Ok(catalogue) => {
            let narrowed = CallSchema::for_tools(&catalogue.specs(), Narrowing::PerTool);
            println!(
                "{}",
                serde_json::to_string_pretty(narrowed.as_value()).unwrap_or_default()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}

fn run_tools(tools: &ToolArgs, json: bool) -> ExitCode {
    let setup = tools.setup();
    if setup.is_empty() {
        return fail("no tools named: use --tools URL, --mcp CMD_OR_URL or --builtin");
    }
    let catalogue = match setup.connect(Deadline::after(Duration::from_secs(30))) {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let specs = catalogue.specs();
    let mut out = std::io::stdout().lock();
    let written = if json {
        writeln!(
            out,
            "{}",
            serde_json::to_string_pretty(&serde_json::json!({ "tools": specs }))
                .unwrap_or_default()
        )
    } else {
        specs.iter().try_for_each(|s| {
            let params: Vec<String> = s.input_schema["properties"]
                .as_object()
                .map(|p| p.keys().cloned().collect())
                .unwrap_or_default();
            writeln!(out, "{}({})  {}", s.name, params.join(", "), s.description)
        })
    };
    if written.is_err() {
        return ExitCode::from(EXIT_RUNTIME);
    }
    ExitCode::SUCCESS
}

fn run_serve(addr: &str, opts: &BuiltinArgs) -> ExitCode {
    let tools = match Builtin::new(&opts.config()) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let names: Vec<String> = tools.specs().into_iter().map(|s| s.name).collect();
    let server = match ToolServer::bind(addr, Box::new(tools)) {
        Ok(s) => s,
        Err(e) => return fail(e),
    };
    eprintln!(
        "toolloop: serving {} tools ({}) on {}",
        names.len(),
        names.join(", "),
        server.url()
    );
    server.run();
    ExitCode::SUCCESS
}

fn run_repair(verbose: bool) -> ExitCode {
    let mut raw = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut raw) {
        return fail(format!("cannot read stdin: {e}"));
    }
    let text = String::from_utf8_lossy(&raw);
    if verbose && matches!(text, std::borrow::Cow::Owned(_)) {
        eprintln!("toolloop: input is not valid UTF-8; invalid bytes became U+FFFD");
    }
    match repair::repair_to_string(&text) {
        Ok((json, fixes)) => {
            if verbose {
                for fix in fixes.to_vec() {
                    eprintln!("fixed: {fix}");
                }
            }
            let mut out = std::io::stdout().lock();
            if writeln!(out, "{json}").and_then(|_| out.flush()).is_err() {
                return ExitCode::from(EXIT_RUNTIME);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail(e),
    }
}
