//! `toolloop web` and `toolloop serve-tools`: the two commands that serve until the
//! process ends.

use std::process::ExitCode;

use super::flags::{self, BuiltinArgs, ModelArgs, ToolArgs, with_flags};
use super::{config, fail, usage};
use crate::serve::tool_server::ToolServer;
use crate::tools::builtin::Builtin;

/// Serves the page until the process ends; a failure to start is reported first.
pub(super) fn run_web(
    model: &ModelArgs,
    tools: &ToolArgs,
    no_tools: bool,
    web: &flags::WebArgs,
) -> ExitCode {
    let addr = match check_address(&web.addr, web.allow_remote) {
        Ok(a) => a,
        Err(e) => return usage(e),
    };
    if !addr.ip().is_loopback() {
        eprintln!(
            "toolloop: WARNING: serving on {addr}: anyone who can reach it can use the model and the tools"
        );
    }
    // The calibration file is read once here, not again for every run of the page.
    let mut config = match config(model, tools, no_tools).calibrated() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // What the person allowed ahead; any other call that would ask waits for them on
    // the page.
    config.permissions = match tools.permissions() {
        Ok(p) => p,
        Err(e) => return fail(e),
    };
    match crate::serve::web::start(config, addr, web.max_runs as usize) {
        Ok(w) => {
            eprintln!("toolloop: the page is at {} (Ctrl-C stops)", w.url());
            w.wait();
            ExitCode::SUCCESS
        }
        Err(e) => fail(with_flags(e)),
    }
}

/// Serves the proxy until the process ends.
pub(super) fn run_proxy(p: &flags::ProxyCommand) -> ExitCode {
    let mut config = match config(&p.model, &ToolArgs::default(), true).calibrated() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    config.permissions.classes.extend(p.classes.iter().cloned());
    let upstream = config.server();
    let settings = crate::serve::proxy::ProxySettings {
        config,
        api_key: p.api_key.clone().filter(|k| !k.is_empty()),
    };
    match crate::serve::proxy::start(settings, &p.addr) {
        Ok(running) => {
            let url = running.url();
            eprintln!(
                "toolloop: proxying {upstream}: OpenAI clients at {url}/v1, Ollama clients at {url} (Ctrl-C stops)"
            );
            running.wait();
            ExitCode::SUCCESS
        }
        Err(e) => fail(with_flags(e)),
    }
}

pub(super) fn run_serve(addr: &str, opts: &BuiltinArgs) -> ExitCode {
    let tools = match Builtin::new(&opts.config()) {
        Ok(t) => t,
        Err(e) => return fail(with_flags(e)),
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

/// The address `toolloop web` serves, refused when it is not loopback and
/// `--allow-remote` is not given. Here, not in `serve/`, because its messages name flags.
fn check_address(addr: &str, allow_remote: bool) -> Result<std::net::SocketAddr, String> {
    use std::net::{SocketAddr, ToSocketAddrs};
    let resolved: Vec<SocketAddr> = addr
        .to_socket_addrs()
        .map_err(|e| format!("--addr {addr}: {e} (give HOST:PORT, e.g. 127.0.0.1:8700)"))?
        .collect();
    let first = *resolved
        .first()
        .ok_or_else(|| format!("--addr {addr}: no address"))?;
    if !allow_remote && resolved.iter().any(|a| !a.ip().is_loopback()) {
        return Err(format!(
            "--addr {addr} can be reached from other machines; anyone who reaches it can use \
             the model and the tools. Add --allow-remote if that is what you want"
        ));
    }
    Ok(first)
}

#[cfg(test)]
mod tests {
    use super::check_address;

    #[test]
    fn only_loopback_is_served_unless_remote_is_allowed() {
        assert!(check_address("127.0.0.1:8700", false).is_ok());
        assert!(
            check_address("0.0.0.0:8700", false)
                .unwrap_err()
                .contains("--allow-remote")
        );
        assert!(check_address("0.0.0.0:8700", true).is_ok());
    }
}
