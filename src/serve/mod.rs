//! What toolloop serves over HTTP: the built-in tool API and the web page with its run
//! API, each on a runtime whose every resource is bounded.
//!
//! May import everything but `eval/` and `cli/`.

pub mod bounds;
#[cfg(feature = "web")]
pub mod markdown;
pub mod tool_server;
#[cfg(feature = "web")]
pub mod web;
