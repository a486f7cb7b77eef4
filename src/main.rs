//! The `toolloop` command line: glue over the library. Exit codes are mapped here, in one
//! place (see DESIGN.md, "Command line").

use std::io::{Read, Write};
use std::process::ExitCode;

use clap::{Parser, Subcommand};

use toolloop::repair;
use toolloop::schema;

/// Make small local models use tools reliably.
#[derive(Debug, Parser)]
#[command(name = "toolloop", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Read broken JSON on stdin and print the repaired JSON on stdout.
    ///
    /// Example: echo "{'a': 1," | toolloop repair -v
    Repair {
        /// Print what was fixed to stderr.
        #[arg(short, long)]
        verbose: bool,
    },
    /// Print CALL_SCHEMA, the JSON Schema every model turn is constrained to.
    ///
    /// Example: toolloop schema > call_schema.json
    Schema,
}

/// Exit codes, a contract (DESIGN.md): 0 answered, 1 runtime error, 2 usage error.
const EXIT_RUNTIME: u8 = 1;

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Repair { verbose } => run_repair(verbose),
        Command::Schema => {
            print!("{}", schema::call_schema_json());
            ExitCode::SUCCESS
        }
    }
}

fn run_repair(verbose: bool) -> ExitCode {
    let mut raw = Vec::new();
    if let Err(e) = std::io::stdin().read_to_end(&mut raw) {
        eprintln!("toolloop: cannot read stdin: {e}");
        return ExitCode::from(EXIT_RUNTIME);
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
        Err(e) => {
            eprintln!("toolloop: {e}");
            ExitCode::from(EXIT_RUNTIME)
        }
    }
}
