//! The `toolloop` command line: glue over the library. It parses flags into a
//! [`Config`], calls the library, prints, and exits with the code of the run's ending
//! (`crate::run::ending` holds the codes). Library messages name settings in backticks
//! (`` `timeout` ``); `with_flags` turns them into this program's flags when reporting.
//!
//! May import everything; nothing imports it. `src/main.rs` only calls [`main`].

use std::io::{IsTerminal, Read, Write};

use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;

use crate::Observer;
use crate::cli::display::{AnswerOut, Progress};
use crate::run::ending::{EXIT_RUNTIME, EXIT_USAGE, Ending};
use crate::turn::repair;
use crate::turn::schema::{self, CallSchema, Narrowing};
use crate::{
    BackendKind as LibBackend, ClarifyHandler, Config, Conversation, Deadline, Orchestrator,
    OrchestratorError, Outcome, ToolSetup, Transcript,
};
mod demo;
mod display;
mod eval;
mod flags;
mod serving;
mod signals;

use eval::{run_eval, run_rescore};
use serving::{run_serve, run_web};

use flags::{BackendKind, Cli, Command, ModelArgs, ToolArgs, with_flags};

/// Runs the command line: parses the process arguments, runs the command, and gives
/// the exit code of how it ended.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging();
    match cli.command {
        Command::Ask {
            query,
            model,
            tools,
            no_tools,
            json,
        } => match question(query) {
            Ok(q) => run_ask(&q, &model, &tools, no_tools, json),
            Err(code) => code,
        },
        Command::Chat {
            model,
            tools,
            no_tools,
        } => run_chat(&model, &tools, no_tools),
        Command::Demo { json, verbose } => run_demo(json, verbose),
        Command::Eval {
            path,
            model,
            rescore,
            ..
        } if !rescore.is_empty() => run_rescore(&path, &model, &rescore),
        Command::Eval {
            path,
            model,
            limit,
            category,
            half,
            no_constraint,
            native_tools,
            jobs,
            json,
            rescore: _,
        } => run_eval(
            &path,
            &model,
            (limit.map(|n| n as usize), category.as_deref(), half),
            (no_constraint, native_tools),
            jobs as usize,
            json,
        ),
        Command::Calibrate {
            data,
            model,
            jobs,
            margin,
            floor,
            json,
            dry_run,
            no_save,
        } => eval::run_calibrate(
            data.as_deref(),
            &model,
            (jobs as usize, margin, (floor > 0.0).then_some(floor)),
            (json, dry_run, no_save),
        ),
        Command::Repair { verbose } => run_repair(verbose),
        Command::Schema {
            tools,
            decide,
            max_calls_per_turn,
        } => run_schema(&tools, decide.into(), max_calls_per_turn),
        Command::Tools { tools, json } => run_tools(&tools, json),
        Command::Doctor {
            model,
            tools,
            no_tools,
        } => run_doctor(&model, &tools, no_tools),
        Command::Checks {
            name,
            json,
            markdown,
        } => run_checks(name.as_deref(), json, markdown),
        Command::ServeTools { addr, opts } => run_serve(&addr, &opts),
        Command::Web(w) => run_web(&w.model, &w.tools, w.no_tools, &w.web),
        Command::Proxy(p) => serving::run_proxy(&p),
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
    // A person sees a warning as one of toolloop's own lines; the timestamp and module
    // path are for whoever turned logging up with RUST_LOG.
    if std::env::var_os("RUST_LOG").is_none() {
        builder.format(|out, record| {
            use std::io::Write;
            let level = match record.level() {
                log::Level::Error => "error",
                log::Level::Warn => "warning",
                _ => "note",
            };
            writeln!(out, "toolloop: {level}: {}", record.args())
        });
    }
    builder.init();
}

/// The settings a command line asks for. With no tool flags the default tool server
/// (`http://localhost:5000`) is used (`Config::default().tools`), unless `--no-tools`.
fn config(model: &ModelArgs, tools: &ToolArgs, no_tools: bool) -> Config {
    let defaults = Config::default();
    let setup = tools.setup();
    let tools = match (no_tools, setup.is_empty()) {
        (true, _) => ToolSetup::default(),
        (false, true) => defaults.tools.clone(),
        (false, false) => setup,
    };
    let mut config = Config {
        model: model.model.clone(),
        backend: match model.backend {
            BackendKind::Ollama => LibBackend::Ollama,
            BackendKind::Openai => LibBackend::OpenAi,
            BackendKind::Gemini => LibBackend::Gemini,
        },
        ollama_host: model.ollama_host.clone(),
        base_url: model.base_url.clone(),
        api_key: server_key(model),
        record: model.record.clone(),
        tools,
        max_iterations: model.max_iterations,
        timeout: Duration::from_secs_f64(model.timeout),
        system: model.system.clone(),
        decide: model.decide.into(),
        calibration: model.calibration.clone().or(defaults.calibration.clone()),
        leanings: crate::calibration::leanings_path(),
        max_calls_per_turn: model.max_calls_per_turn,
        early_calls: !model.no_early_calls,
        answer_language: model.answer_language.clone(),
        today: model.today,
        ..defaults
    };
    if model.backend == BackendKind::Gemini {
        // The defaults name a local server and an Ollama model; Google has neither.
        if config.base_url == crate::config::DEFAULT_BASE_URL {
            config.base_url = crate::backend::gemini::GEMINI_BASE_URL.into();
        }
        if config.model == defaults.model {
            config.model = crate::backend::gemini::GEMINI_DEFAULT_MODEL.into();
        }
    }
    config.options.temperature = Some(model.temperature);
    config.options.num_ctx = Some(model.num_ctx);
    config.options.num_predict = Some(model.num_predict);
    if let Some(p_min) = model.tool_threshold {
        let calibrated = config.clone().calibrated().ok().and_then(|c| c.thresholds);
        config.thresholds = Some(crate::Thresholds {
            p_min,
            ..calibrated.unwrap_or_default()
        });
    }
    for (name, on) in &model.checks {
        if name == "all" {
            config.checks.set_all(*on);
        } else {
            // Names were checked when the flag was parsed.
            let _ = config.checks.set(name, *on);
        }
    }
    // The family's defaults are said under -v once the server has said which file it
    // runs (`Event::FamilyDefaults`): llama-server answers to any name.
    config.checks.for_model(&config.model);
    config
}

/// The model server's key: from `--key-file`, else the backend's environment variable.
/// A file that cannot be read leaves no key, and the server's refusal says to check it.
fn server_key(model: &ModelArgs) -> Option<String> {
    if let Some(path) = &model.key_file {
        return match std::fs::read_to_string(path) {
            Ok(key) => Some(key.trim().to_string()),
            Err(e) => {
                eprintln!("toolloop: --key-file {}: {e}", path.display());
                None
            }
        };
    }
    let var = match model.backend {
        BackendKind::Gemini => "GEMINI_API_KEY",
        _ => "OPENAI_API_KEY",
    };
    std::env::var(var).ok()
}

/// Builds the orchestrator a command line asks for; the tools are connected within what
/// is left of the run's deadline.
fn build(
    model: &ModelArgs,
    tools: &ToolArgs,
    no_tools: bool,
    deadline: Deadline,
    clarify: Option<Box<dyn ClarifyHandler>>,
    answer: Option<AnswerOut>,
) -> Result<Orchestrator, OrchestratorError> {
    let interactive = std::io::stdin().is_terminal() && answer.is_some();
    let mut config = config(model, tools, no_tools);
    config.permissions = tools.permissions().map_err(OrchestratorError::Config)?;
    let mut builder = Orchestrator::from_config(&config)?
        .connect_timeout(deadline.remaining().unwrap_or(config.timeout))
        .observer(Progress::new(model.verbose));
    if let Some(path) = &model.replay {
        let recorded = crate::backend::Scripted::from_file(path)
            .map_err(|e| OrchestratorError::Config(format!("--replay: {e}")))?;
        builder = builder.backend(recorded);
    }
    if let Some(a) = answer {
        builder = builder.observer(a);
    }
    if let Some(path) = &model.transcript {
        let t = Transcript::open(path).map_err(|e| {
            OrchestratorError::Config(format!("--transcript {}: {e}", path.display()))
        })?;
        builder = builder.observer(t);
    }
    if let Some(c) = clarify {
        builder = builder.clarify_handler(c);
    }
    // Only a person at a terminal can be asked; anywhere else a call that would ask is
    // not run unless --allow or --yes said so.
    if interactive {
        builder = builder.approver(ask_approval);
    }
    builder.build()
}

/// Asks the person at the terminal whether a call may run: the tool, its class, its
/// arguments with long values cut. Ctrl-C or the end of input is no.
fn ask_approval(r: &crate::ApprovalRequest<'_>) -> crate::Answer {
    let shown: serde_json::Map<String, serde_json::Value> = r
        .arguments
        .iter()
        .map(|(k, v)| {
            let v = match v {
                serde_json::Value::String(s) => {
                    serde_json::Value::String(crate::http::shorten(s, 200))
                }
                other => {
                    let text = other.to_string();
                    match text.chars().count() > 200 {
                        true => serde_json::Value::String(crate::http::shorten(&text, 200)),
                        false => other.clone(),
                    }
                }
            };
            (k.clone(), v)
        })
        .collect();
    eprintln!(
        "toolloop: the model wants to call {} ({}; {}):\n{}",
        r.tool,
        r.class,
        r.source,
        serde_json::to_string_pretty(&shown).unwrap_or_default()
    );
    if let Some(line) = r.unsaid.line() {
        eprintln!("toolloop: {line}");
    }
    let mut input = Input::new();
    // Offered only where the call can run without something the person did not write.
    let without = match r.unsaid.optional.is_empty() {
        true => String::new(),
        false => format!(", [w]ithout {}", r.unsaid.optional.join(", ")),
    };
    loop {
        let prompt = format!(
            "run it? [y]es, [n]o, [a]lways {} in this run{without}: ",
            r.tool
        );
        let Some(line) = input.read(&prompt) else {
            eprintln!("(not run)");
            return crate::Answer::No;
        };
        match line.trim().to_ascii_lowercase().as_str() {
            "y" | "yes" => return crate::Answer::Yes,
            "n" | "no" => return crate::Answer::No,
            "a" | "always" => return crate::Answer::Always,
            "w" | "without" if !without.is_empty() => return crate::Answer::Without,
            _ if without.is_empty() => eprintln!("say y, n or a"),
            _ => eprintln!("say y, n, a or w"),
        }
    }
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

/// Writes `text` and a newline to stdout.
fn print_stdout(text: &str) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}").and_then(|_| out.flush())
}

/// The exit code once the output is written: a closed pipe (`toolloop tools | head`) ends
/// the program quietly, as other command-line tools do; any other failed write says so.
fn output_status(written: std::io::Result<()>, code: u8) -> ExitCode {
    match written {
        Ok(()) => ExitCode::from(code),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => ExitCode::SUCCESS,
        Err(e) => fail(format!("cannot write the output: {e}")),
    }
}

/// Says on stderr why a run gave no clean answer, with the flag that would help.
fn explain(o: &Outcome) {
    let Some(message) = o.ending.message() else {
        return;
    };
    let hint = match o.ending {
        Ending::MaxIterations { .. } => "; raise --max-iterations or simplify the question",
        Ending::Timeout { .. } => "; raise --timeout (small models on a CPU are slow)",
        _ => "",
    };
    eprintln!("toolloop: {message}{hint}");
}

/// Prints an outcome (`--json`, or the end of the answer that was printed as it was
/// written), explains it, and gives its exit code.
fn report(outcome: &Outcome, answer: Option<&AnswerOut>) -> ExitCode {
    let written = match answer {
        None => print_stdout(&outcome.to_json().to_string()),
        Some(a) => a.finish(),
    };
    explain(outcome);
    output_status(written, outcome.stop_reason().exit_code())
}

/// The question of `ask`: the argument, or stdin for `-` or when no argument is given and
/// stdin is not a terminal (so a question longer than the shell allows can be asked).
fn question(arg: Option<String>) -> Result<String, ExitCode> {
    let from_stdin = match arg.as_deref() {
        Some("-") => true,
        Some(_) => false,
        None if !std::io::stdin().is_terminal() => true,
        None => {
            return Err(usage(
                "give a question: toolloop ask \"QUESTION\", or - to read it from stdin",
            ));
        }
    };
    if !from_stdin {
        return Ok(arg.unwrap_or_default());
    }
    let mut text = String::new();
    if let Err(e) = std::io::stdin().read_to_string(&mut text) {
        return Err(fail(format!("cannot read the question from stdin: {e}")));
    }
    if text.trim().is_empty() {
        return Err(usage("the question on stdin is empty"));
    }
    Ok(text.trim().to_string())
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
    let answer = (!json).then(AnswerOut::default);
    let result =
        build(model, tools, no_tools, deadline, clarify, answer.clone()).and_then(|mut o| {
            let interrupts = signals::Interrupts::install(&o.stop_handle());
            interrupts.working(true);
            o.run_with_deadline(query, &[], deadline)
        });
    match result {
        // Only a signal stops a run of `ask`.
        Ok(outcome) if matches!(outcome.ending, Ending::Cancelled) => {
            let _ = report(&outcome, answer.as_ref());
            signals::exit_code()
        }
        Ok(outcome) => report(&outcome, answer.as_ref()),
        Err(OrchestratorError::Cancelled { steps }) => {
            if json {
                let v = serde_json::json!({"error": "interrupted", "stop_reason": "cancelled", "steps": steps});
                let _ = print_stdout(&v.to_string());
            }
            eprintln!("toolloop: interrupted");
            signals::exit_code()
        }
        Err(e) => {
            if json {
                let v = serde_json::json!({"error": with_flags(&e), "stop_reason": "error", "steps": e.steps()});
                let _ = print_stdout(&v.to_string());
            }
            eprintln!("toolloop: {}", with_flags(&e));
            ExitCode::from(e.exit_code())
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
    let answer = AnswerOut::default();
    let orchestrator = build(
        model,
        tools,
        no_tools,
        connect,
        Some(Box::new(clarify)),
        Some(answer.clone()),
    )
    .and_then(|mut o| o.preflight(connect).map(|_| o));
    let orchestrator = match orchestrator {
        Ok(o) => o,
        Err(e) => return fail(with_flags(e)),
    };
    let (mut asked, mut failed) = (0, 0);
    let names = orchestrator.catalogue().names();
    // Ctrl-C while the model or a tool works stops that run, and the chat goes on with
    // the conversation kept; at the prompt, line editing reads it and the chat ends.
    let stop = orchestrator.stop_handle();
    let interrupts = signals::Interrupts::install(&stop);
    let mut chat = Conversation::new(orchestrator);
    let mut input = Input::new();
    eprintln!(
        "toolloop chat with {} tools; /help lists the commands, /exit leaves.",
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
                    eprintln!("  {}", crate::turn::prompt::signature(&spec));
                }
                continue;
            }
            "/help" | "/?" => {
                eprintln!("{CHAT_HELP}");
                continue;
            }
            _ if line.starts_with('/') => {
                eprintln!("unknown command {line}; /help lists the commands");
                continue;
            }
            _ => {}
        }
        asked += 1;
        stop.reset();
        interrupts.working(true);
        let asked_now = chat.ask(line);
        interrupts.working(false);
        match asked_now {
            Ok(outcome) => {
                if let Err(e) = answer.finish() {
                    return output_status(Err(e), EXIT_RUNTIME);
                }
                explain(&outcome);
            }
            Err(e) => {
                failed += 1;
                eprintln!("toolloop: {}", with_flags(e))
            }
        }
        if interrupts.terminated() {
            // SIGTERM: the run stopped; the chat ends with it, its MCP servers with the
            // conversation as it is dropped.
            drop(chat);
            return signals::exit_code();
        }
    }
    // A session in which every question failed (the server went away, say) is a failure.
    if asked > 0 && failed == asked {
        return ExitCode::from(EXIT_RUNTIME);
    }
    ExitCode::SUCCESS
}

fn run_demo(json: bool, verbose: bool) -> ExitCode {
    eprintln!(
        "toolloop demo: a scripted model and the built-in tools on 127.0.0.1; no server needed."
    );
    eprintln!("you> {}", crate::cli::demo::QUESTION);
    let answer = (!json).then(AnswerOut::default);
    let (mut progress, mut printer) = (Progress::new(verbose), answer.clone());
    let observer = move |e: &crate::run::events::Event| {
        progress.event(e);
        printer.iter_mut().for_each(|p| p.event(e));
    };
    let result = crate::cli::demo::run(
        Box::new(observer),
        Box::new(|line| eprintln!("{line}")),
        150,
    );
    match result {
        Ok(outcome) => report(&outcome, answer.as_ref()),
        Err(e) => fail(e),
    }
}

/// What `/help` says in `chat`.
const CHAT_HELP: &str = "\
  /tools   the tools the model may call
  /reset   forget the conversation so far
  /help    this list
  /exit    leave (also /quit, or Ctrl-D at the prompt)
Anything else is a question for the model; the conversation so far goes with it.";

/// A usage error: a bad flag or value, said, with the usage exit code.
fn usage(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("toolloop: {message}");
    ExitCode::from(EXIT_USAGE)
}

fn fail(message: impl std::fmt::Display) -> ExitCode {
    // The library's messages name its settings; the person typed flags.
    eprintln!("toolloop: {}", with_flags(message));
    ExitCode::from(EXIT_RUNTIME)
}

fn run_schema(tools: &ToolArgs, decide: schema::Decide, max_calls: u32) -> ExitCode {
    let setup = tools.setup();
    if setup.is_empty() {
        let written = print_stdout(schema::call_schema_json().trim_end());
        return output_status(written, 0);
    }
    match setup.connect(Deadline::after(Duration::from_secs(30))) {
        Ok(catalogue) => {
            let narrowed = CallSchema::deciding_calls(
                &catalogue.specs(),
                Narrowing::PerTool,
                decide,
                max_calls,
            );
            let text = serde_json::to_string_pretty(narrowed.as_value()).unwrap_or_default();
            output_status(print_stdout(&text), 0)
        }
        Err(e) => fail(with_flags(e)),
    }
}

fn run_checks(name: Option<&str>, json: bool, markdown: bool) -> ExitCode {
    use crate::checks::doc;
    let text = match (name, json) {
        _ if markdown => doc::markdown(),
        (Some(n), _) if doc::page(n).is_none() => {
            let names: Vec<_> = crate::checks::all().map(|c| c.name).collect();
            return usage(format!(
                "no check is called '{n}'; the checks are: {}",
                names.join(", ")
            ));
        }
        (Some(n), true) => {
            let one = doc::json()
                .as_array()
                .and_then(|l| l.iter().find(|c| c["name"] == n).cloned());
            serde_json::to_string_pretty(&[one]).unwrap_or_default()
        }
        (Some(n), false) => doc::page(n).unwrap_or_default(),
        (None, true) => serde_json::to_string_pretty(&doc::json()).unwrap_or_default(),
        (None, false) => doc::list(),
    };
    output_status(print_stdout(&text), 0)
}

fn run_tools(tools: &ToolArgs, json: bool) -> ExitCode {
    // The same rule as `ask`: no tool flag means the default tool server.
    let mut setup = tools.setup();
    if setup.is_empty() {
        setup = Config::default().tools;
    }
    let permissions = match tools.permissions() {
        Ok(p) => p,
        Err(e) => return usage(e),
    };
    match setup.connect(Deadline::after(Duration::from_secs(30))) {
        Ok(c) => match permissions.check(&c.specs()) {
            Err(e) => usage(e),
            Ok(()) => output_status(
                crate::cli::display::print_tools(&c.specs(), &permissions, json),
                0,
            ),
        },
        Err(e) => fail(with_flags(e)),
    }
}

/// `toolloop doctor`: each part a person's first question needs, a line each, every line
/// printed whatever failed before it; exit 1 when any part fails.
fn run_doctor(model: &ModelArgs, tools: &ToolArgs, no_tools: bool) -> ExitCode {
    let config = config(model, tools, no_tools);
    let deadline = Deadline::after(config.timeout.min(Duration::from_secs(30)));
    let mut ok = true;
    // A backend that cannot be made (a key missing) is a failed part like a server down:
    // the lines after it still come.
    let checked = config
        .backend()
        .and_then(|mut b| b.preflight(deadline).map(|()| b));
    let (identity, backend) = match checked {
        Ok(backend) => {
            println!("model: {} answers", backend.describe());
            (backend.identity(), Some(backend))
        }
        Err(e) => {
            ok = false;
            println!("model: {}", with_flags(e));
            (None, None)
        }
    };
    let key = identity.unwrap_or_else(|| (config.model.clone(), config.server()));
    match config.clone().calibrated_for(&key) {
        Ok(c) => {
            let mut t = c.thresholds.unwrap_or_default();
            // As a run finds it: the calibration shipped for this model file, when the
            // person has none of their own.
            if let Some(b) = &backend {
                t.take_shipped(b.as_ref());
            }
            let (model, server) = &key;
            match (&t.calibrated_for, &t.outdated_for) {
                (Some(of), _) if t.shipped() => println!(
                    "calibration: {model} on {server} is calibrated for {of}: its calls are \
                     declined by bars measured for this file; `toolloop calibrate` measures \
                     your own"
                ),
                (Some(_), _) => println!(
                    "calibration: {model} on {server} is calibrated: its calls are declined \
                     by bars measured for it"
                ),
                (None, Some(_)) => println!("calibration: {}", t.source()),
                (None, None) => println!(
                    "calibration: {model} on {server} is not calibrated: a call whose tool \
                     the request does not name, or that carries a value nobody said, is asked \
                     whether the tool fits and declined below {:.2}; `toolloop calibrate \
                     --dry-run` says what measuring this model's own bars takes",
                    t.fit_min
                ),
            }
        }
        Err(e) => {
            ok = false;
            println!("calibration: {e}");
        }
    }
    // As a run reads them: the defaults of the model file the server runs, where it names one.
    let levels = match backend.as_deref() {
        Some(b) => crate::run::orchestrator::served_levels(&config.checks, b),
        None => config.checks.clone(),
    };
    if let Some(line) = levels.family_note() {
        println!("checks: {line}");
    }
    if config.tools.is_empty() {
        println!("tools: none (--no-tools)");
    } else {
        match config.tools.connect(deadline) {
            Ok(c) => {
                let names: Vec<String> = c.specs().iter().map(|s| s.name.clone()).collect();
                println!("tools: {} ({})", names.len(), names.join(", "));
            }
            Err(e) => {
                ok = false;
                println!("tools: {}", with_flags(e));
            }
        }
    }
    ExitCode::from(if ok { 0 } else { EXIT_RUNTIME })
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
            output_status(print_stdout(&json), 0)
        }
        Err(e) => fail(e),
    }
}
