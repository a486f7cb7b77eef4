//! What toolloop serves over HTTP: the built-in tool API, the web page with its run API,
//! and the proxy that gives OpenAI and Ollama clients toolloop's turn, each on a runtime
//! whose every resource is bounded.
//!
//! May import everything but `eval/` and `cli/`.

pub(crate) mod bounds;

/// Why a server cannot listen on `addr`, with what to do when another program has it.
pub(crate) fn cannot_listen(addr: &dyn std::fmt::Display, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::AddrInUse => {
            format!("cannot listen on {addr}: another program uses it; choose another with `addr`")
        }
        _ => format!("cannot listen on {addr}: {e}"),
    }
}

#[cfg(feature = "web")]
pub(crate) mod markdown;
#[cfg(feature = "web")]
pub(crate) mod proxy;
pub(crate) mod tool_server;
#[cfg(feature = "web")]
pub(crate) mod web;

pub use bounds::Bounds;
#[cfg(feature = "web")]
pub use proxy::{ProxySettings, RunningProxy, start as start_proxy};
pub use tool_server::{RunningServer, ToolServer};
#[cfg(feature = "web")]
pub use web::{MakeBackend, RunningWeb, Runs, WebServer};
