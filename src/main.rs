//! The `toolloop` command line: glue over the library. Exit codes are mapped here, in one
//! place (see DESIGN.md, "Command line").

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use toolloop::deadline::Deadline;
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
    /// HTTP tool API base URL (repeatable).
    #[arg(
        long = "tools",
        value_name = "URL",
        env = "TOOLLOOP_TOOLS",
        value_delimiter = ','
    )]
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
        ToolSetup {
            http: self
                .tools
                .iter()
                .filter(|u| !u.trim().is_empty())
                .cloned()
                .collect(),
            mcp: self.mcp.clone(),
            builtin: (self.builtin || uses_builtin_opts).then(|| self.builtin_opts.config()),
        }
    }
}

#[derive(Debug, Subcommand)]
enum Command {
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

/// Exit codes, a contract (DESIGN.md): 0 answered, 1 runtime error, 2 usage error.
const EXIT_RUNTIME: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    match cli.command {
        Command::Repair { verbose } => run_repair(verbose),
        Command::Schema { tools } => run_schema(&tools),
        Command::Tools { tools, json } => run_tools(&tools, json),
        Command::ServeTools { addr, opts } => run_serve(&addr, &opts),
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
