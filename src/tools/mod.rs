//! Tools the model can call, from every source, behind one [`Catalogue`].
//!
//! A source is the HTTP tool API ([`http::HttpTools`]), an MCP server ([`mcp::McpTools`]),
//! Rust closures ([`closure::FnTools`]) or the built-in tools ([`builtin::Builtin`]). Each
//! describes its tools as a [`ToolSpec`], the shape MCP's `tools/list` and our
//! `GET /tools` share, and answers a call with a [`ToolResult`]
//! (`{ok, content, error}`).
//!
//! The error policy follows smolagents: a mistake of the *model* (unknown tool, arguments
//! that fail the schema, a tool that reports an error) becomes text the model sees and
//! recovers from; a fault of the *infrastructure* is a [`ToolError`] the loop decides on.
//!
//! May import `turn/` (the repairer, for a tool server's broken JSON) and the leaf
//! modules; never the checks, the run, serving, eval or the command line.

pub(crate) mod builtin;
pub mod calculator;
pub(crate) mod closure;
pub(crate) mod docs;
pub(crate) mod http;
pub(crate) mod mcp;
mod running;
pub(crate) mod sql;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::deadline::Deadline;
pub use crate::tool_spec::{ClassSource, Effect, Hints, ToolClass, ToolSpec};
pub use builtin::{Builtin, BuiltinConfig, DEMO_WEATHER};
pub use closure::{FnTool, FnTools};
pub use http::HttpTools;
pub use mcp::McpTools;
#[cfg(feature = "cli")]
pub(crate) use mcp::end_stdio_servers;
pub use running::Started;

/// What a tool call gave: its content, or the error the model reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The result: a string or any JSON.
    #[serde(default)]
    pub content: Value,
    /// What went wrong, when `ok` is false.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl ToolResult {
    /// A success.
    pub fn ok(content: impl Into<Value>) -> Self {
        ToolResult {
            ok: true,
            content: content.into(),
            error: None,
        }
    }

    /// A failure the model should read.
    pub fn err(message: impl Into<String>) -> Self {
        ToolResult {
            ok: false,
            content: Value::Null,
            error: Some(message.into()),
        }
    }

    /// The result as text for the model, cut to `cap` characters with a marker saying
    /// how much was cut.
    ///
    /// ```
    /// use toolloop::tools::ToolResult;
    ///
    /// assert_eq!(ToolResult::ok("sunny").to_model_text(100), "sunny");
    /// assert_eq!(ToolResult::err("no such city").to_model_text(100), "error: no such city");
    /// let long = ToolResult::ok("x".repeat(50)).to_model_text(10);
    /// assert_eq!(long, "xxxxxxxxxx…[cut 40 of 50 characters]");
    /// ```
    pub fn to_model_text(&self, cap: usize) -> String {
        let text = if self.ok {
            match &self.content {
                Value::String(s) => s.clone(),
                Value::Null => "(no output)".to_string(),
                other => other.to_string(),
            }
        } else {
            format!(
                "error: {}",
                self.error.as_deref().unwrap_or("the tool failed")
            )
        };
        cap_text(&text, cap)
    }
}

/// `text` cut to `cap` characters, with a marker saying how many were cut.
pub fn cap_text(text: &str, cap: usize) -> String {
    match text.char_indices().nth(cap) {
        None => text.to_string(),
        Some((at, _)) => {
            let total = text.chars().count();
            format!(
                "{}…[cut {} of {} characters]",
                &text[..at],
                total - cap,
                total
            )
        }
    }
}

/// A failure of the tool infrastructure, or a call the catalogue refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ToolError {
    /// Nothing answers at a tool server's address.
    #[error("{} at {url} is not reachable: {}", if *.mcp { "MCP server" } else { "tool server" }, if *.mcp {
        "is it running, and is this its MCP endpoint (often ending in /mcp)? check `mcp`"
    } else {
        "start it (`toolloop serve-tools`), check `tools`, or use `builtin`"
    })]
    Unreachable {
        /// The address.
        url: String,
        /// Whether it is an MCP server rather than an HTTP tool API.
        mcp: bool,
    },
    /// A tool call or listing ran out of time.
    #[error("{source_name}: no answer before the deadline")]
    Timeout {
        /// The source.
        source_name: String,
    },
    /// A tool server answered with an error status.
    #[error("{url}: HTTP {status}: {message}")]
    Http {
        /// The address.
        url: String,
        /// The status.
        status: u16,
        /// The server's own words.
        message: String,
    },
    /// A source broke its protocol (invalid JSON, a malformed reply).
    #[error("{source_name}: {detail}")]
    Protocol {
        /// The source.
        source_name: String,
        /// What was wrong.
        detail: String,
    },
    /// An MCP server command could not be started.
    #[error("cannot start MCP server `{command}`: {detail}")]
    Spawn {
        /// The command line.
        command: String,
        /// Why.
        detail: String,
    },
    /// An MCP server process ended or closed its output.
    #[error("MCP server `{command}` exited: {detail}")]
    Exited {
        /// The command line.
        command: String,
        /// What it said last.
        detail: String,
    },
    /// The model named a tool the catalogue does not have.
    #[error("unknown tool \"{name}\"; available tools: {}", available.join(", "))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The names there are.
        available: Vec<String>,
    },
    /// The arguments fail the tool's input schema.
    #[error("invalid arguments for {tool}: {message}")]
    InvalidArguments {
        /// The tool.
        tool: String,
        /// What is wrong, for the model.
        message: String,
    },
    /// Two sources offer a tool of the same name.
    #[error("tool \"{name}\" is offered by both {first} and {second}; names must be unique")]
    DuplicateName {
        /// The name.
        name: String,
        /// The first source.
        first: String,
        /// The second source.
        second: String,
    },
    /// A source was configured wrongly (a bad path, a bad database).
    #[error("{0}")]
    Config(String),
}

/// A source of tools.
///
/// `call` takes `&self` and a source is `Sync`, so one source serves several calls at
/// once: the tool server runs each request on its own, and the calls of one turn run
/// side by side. A source over one connection shares it as far as its protocol allows
/// (an MCP session sends the calls without waiting and routes replies by JSON-RPC id);
/// one that cannot share (a SQLite handle) keeps a small pool or its own lock.
pub trait ToolSource: Send + Sync {
    /// Where the tools come from, for messages: a URL, a command line, `closures`.
    fn label(&self) -> String;

    /// The tools this source offers. Called once per run.
    fn list(&mut self, deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError>;

    /// Calls one tool. `Ok` with `ok: false` is the tool's own error, for the model;
    /// `Err` is a failure of the infrastructure.
    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        deadline: Deadline,
    ) -> Result<ToolResult, ToolError>;

    /// Releases what the source holds (an MCP server process). Called when the catalogue
    /// is dropped.
    fn shutdown(&mut self) {}
}

/// How long calls that reached the deadline are given to return (see
/// [`Catalogue::call_all_or_stop`]).
const CALL_GRACE: Duration = Duration::from_millis(500);

struct Entry {
    spec: ToolSpec,
    source: usize,
    validator: Option<Arc<jsonschema::Validator>>,
}

/// Every tool of every source, by unique name, listed once per run.
///
/// ```
/// use serde_json::json;
/// use toolloop::Deadline;
/// use toolloop::tools::{Catalogue, ToolSpec};
/// use toolloop::tools::FnTools;
///
/// let mut fns = FnTools::new();
/// fns.add(
///     ToolSpec::new("double", "Doubles n", json!({"type": "object",
///         "properties": {"n": {"type": "number"}}, "required": ["n"]})),
///     |args| Ok(json!(args["n"].as_f64().unwrap_or(0.0) * 2.0)),
/// );
/// let mut tools = Catalogue::load(vec![Box::new(fns)], Deadline::none())?;
/// let args = json!({"n": 21}).as_object().unwrap().clone();
/// let result = tools.call("double", &args, Deadline::none())?;
/// assert_eq!(result.content, json!(42.0));
/// # Ok::<(), toolloop::tools::ToolError>(())
/// ```
#[derive(Default)]
pub struct Catalogue {
    sources: Vec<Box<dyn ToolSource>>,
    entries: BTreeMap<String, Entry>,
}

impl std::fmt::Debug for Catalogue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Catalogue")
            .field("tools", &self.entries.keys().collect::<Vec<_>>())
            .field(
                "sources",
                &self.sources.iter().map(|s| s.label()).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl Catalogue {
    /// An empty catalogue.
    pub fn new() -> Self {
        Self::default()
    }

    /// Lists every source once and indexes the tools. A source that cannot be listed, or
    /// two tools with one name, is an error naming the source.
    pub fn load(sources: Vec<Box<dyn ToolSource>>, deadline: Deadline) -> Result<Self, ToolError> {
        let mut catalogue = Catalogue::new();
        for source in sources {
            catalogue.add_source(source, deadline)?;
        }
        Ok(catalogue)
    }

    /// Lists one more source and adds its tools.
    pub fn add_source(
        &mut self,
        mut source: Box<dyn ToolSource>,
        deadline: Deadline,
    ) -> Result<(), ToolError> {
        let specs = match source.list(deadline) {
            Ok(specs) => specs,
            Err(e) => {
                source.shutdown();
                return Err(e);
            }
        };
        let index = self.sources.len();
        let label = source.label();
        let mut seen_here = std::collections::HashSet::new();
        for spec in &specs {
            let clash = if let Some(existing) = self.entries.get(&spec.name) {
                Some(self.sources[existing.source].label())
            } else if !seen_here.insert(spec.name.clone()) {
                Some(label.clone())
            } else {
                None
            };
            if let Some(first) = clash {
                source.shutdown();
                return Err(ToolError::DuplicateName {
                    name: spec.name.clone(),
                    first,
                    second: label,
                });
            }
        }
        for spec in specs {
            let validator = match crate::validate::compile(&spec.input_schema) {
                Ok(v) => Some(v),
                Err(e) => {
                    log::warn!(
                        "{}: input schema of {} is not usable: {e}",
                        label,
                        spec.name
                    );
                    None
                }
            };
            self.entries.insert(
                spec.name.clone(),
                Entry {
                    spec,
                    source: index,
                    validator,
                },
            );
        }
        self.sources.push(source);
        Ok(())
    }

    /// The tools, sorted by name.
    pub fn specs(&self) -> Vec<ToolSpec> {
        self.entries.values().map(|e| e.spec.clone()).collect()
    }

    /// The tool names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.entries.keys().cloned().collect()
    }

    /// Whether there are no tools.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The labels of the sources.
    pub fn source_labels(&self) -> Vec<String> {
        self.sources.iter().map(|s| s.label()).collect()
    }

    /// One tool's spec.
    pub fn get(&self, name: &str) -> Result<&ToolSpec, ToolError> {
        self.entries
            .get(name)
            .map(|e| &e.spec)
            .ok_or_else(|| ToolError::UnknownTool {
                name: name.to_string(),
                available: self.names(),
            })
    }

    /// Checks arguments against the tool's input schema; the message is for the model.
    pub fn check_arguments(&self, name: &str, args: &Map<String, Value>) -> Result<(), ToolError> {
        let entry = self
            .entries
            .get(name)
            .ok_or_else(|| ToolError::UnknownTool {
                name: name.to_string(),
                available: self.names(),
            })?;
        let Some(validator) = &entry.validator else {
            return Ok(());
        };
        match crate::validate::describe_errors(validator, &Value::Object(args.clone()), false) {
            None => Ok(()),
            Some(message) => Err(ToolError::InvalidArguments {
                tool: name.to_string(),
                message,
            }),
        }
    }

    /// Validates the arguments and calls the tool.
    pub fn call(
        &self,
        name: &str,
        args: &Map<String, Value>,
        deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        self.check_arguments(name, args)?;
        let source = self.entries[name].source;
        if deadline.is_expired() {
            return Err(ToolError::Timeout {
                source_name: self.sources[source].label(),
            });
        }
        self.sources[source].call(name, args, deadline)
    }

    /// Shuts every source down (MCP server processes end). Also done on drop.
    pub fn shutdown(&mut self) {
        for s in &mut self.sources {
            s.shutdown();
        }
        self.sources.clear();
        self.entries.clear();
    }
}

impl Drop for Catalogue {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Where the tools of a run come from, as a person names them on the command line:
/// HTTP tool API base URLs, MCP servers (URL or command line), the built-in tools.
///
/// ```
/// use toolloop::Deadline;
/// use toolloop::tools::ToolSetup;
/// use toolloop::tools::BuiltinConfig;
///
/// let setup = ToolSetup { builtin: Some(BuiltinConfig::default()), ..ToolSetup::default() };
/// let catalogue = setup.connect(Deadline::none())?;
/// assert_eq!(catalogue.names(), ["calculator", "current_time"]);
/// # Ok::<(), toolloop::tools::ToolError>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct ToolSetup {
    /// Base URLs of HTTP tool APIs.
    pub http: Vec<String>,
    /// MCP servers: a URL for Streamable HTTP, anything else a command line for stdio.
    pub mcp: Vec<String>,
    /// The built-in tools, in-process.
    pub builtin: Option<builtin::BuiltinConfig>,
}

impl ToolSetup {
    /// Only the built-in tools.
    pub fn builtin(config: builtin::BuiltinConfig) -> Self {
        ToolSetup {
            builtin: Some(config),
            ..ToolSetup::default()
        }
    }

    /// Whether no source is named.
    pub fn is_empty(&self) -> bool {
        self.http.is_empty() && self.mcp.is_empty() && self.builtin.is_none()
    }

    /// Connects every source and lists the tools once.
    pub fn connect(&self, deadline: Deadline) -> Result<Catalogue, ToolError> {
        let mut catalogue = Catalogue::new();
        self.connect_into(&mut catalogue, deadline)?;
        Ok(catalogue)
    }

    /// Connects every source and adds its tools to `catalogue`.
    pub fn connect_into(
        &self,
        catalogue: &mut Catalogue,
        deadline: Deadline,
    ) -> Result<(), ToolError> {
        if let Some(cfg) = &self.builtin {
            catalogue.add_source(Box::new(builtin::Builtin::new(cfg)?), deadline)?;
        }
        for url in &self.http {
            catalogue.add_source(Box::new(http::HttpTools::new(url)), deadline)?;
        }
        for target in &self.mcp {
            catalogue.add_source(
                Box::new(mcp::McpTools::connect(target, deadline)?),
                deadline,
            )?;
        }
        Ok(())
    }
}
