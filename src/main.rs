//! The `toolloop` binary: the command line lives in the library (`src/cli/`), so this
//! file only hands over to it.

fn main() -> std::process::ExitCode {
    toolloop::cli_main()
}
