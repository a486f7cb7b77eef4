//! A blocking MCP client, hand-written over `std::process` and ureq.
//!
//! The official `rmcp` crate needs tokio and a second HTTP stack; tools need only four
//! messages (`initialize`, `notifications/initialized`, `tools/list`, `tools/call`), so
//! they are written here. Both transports of protocol `2025-11-25`:
//! - **stdio**: spawn a command, one JSON-RPC message per line. stdout is read on its own
//!   thread so every wait has a timeout; stderr is drained on another so a chatty server
//!   cannot block on a full pipe; `ping` is answered, notifications and garbage lines are
//!   skipped. When the run ends: close stdin, wait, then kill.
//! - **Streamable HTTP**: POST each message with `Accept: application/json,
//!   text/event-stream`; the reply is JSON or an SSE stream; `Mcp-Session-Id` is kept and
//!   `MCP-Protocol-Version` sent; a lost session (404) is initialized again.

mod http;
mod stdio;
mod wire;

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

use serde_json::{Map, Value, json};

use super::{ToolError, ToolResult, ToolSource, ToolSpec};
use crate::deadline::Deadline;
use http::HttpServer;
use stdio::StdioServer;
#[cfg(feature = "cli")]
pub(crate) use stdio::end_all as end_stdio_servers;
use wire::Reply;
pub use wire::{PROTOCOL_VERSION, call_result};

/// How many pages of `tools/list` are followed.
const MAX_PAGES: usize = 100;

/// Tools of one MCP server.
///
/// ```no_run
/// use toolloop::Deadline;
/// use toolloop::tools::{Catalogue, ToolSource};
/// use toolloop::tools::McpTools;
///
/// let server = McpTools::connect("npx -y @modelcontextprotocol/server-everything", Deadline::none())?;
/// let tools = Catalogue::load(vec![Box::new(server)], Deadline::none())?;
/// println!("{:?}", tools.names());
/// # Ok::<(), toolloop::tools::ToolError>(())
/// ```
pub struct McpTools {
    label: String,
    /// Shared by the calls of a turn: they go out side by side and each reply comes back
    /// to its caller by id (stdio), or each is its own POST in the session (HTTP).
    session: Session,
}

struct Session {
    transport: Transport,
    next_id: AtomicU64,
    protocol: Mutex<String>,
}

impl std::fmt::Debug for McpTools {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "McpTools {{ server: {:?} }}", self.label)
    }
}

enum Transport {
    Stdio(StdioServer),
    Http(HttpServer),
}

impl McpTools {
    /// Connects to a server: a URL (`http://` or `https://`) means Streamable HTTP,
    /// anything else is a command line started for stdio. Initializes the session.
    pub fn connect(target: &str, deadline: Deadline) -> Result<Self, ToolError> {
        let session = Session::connect(target, deadline)?;
        Ok(McpTools {
            label: session.label(),
            session,
        })
    }
}

impl ToolSource for McpTools {
    fn label(&self) -> String {
        self.label.clone()
    }

    fn list(&mut self, deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        self.session.list(deadline)
    }

    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        self.session.call(name, arguments, deadline)
    }

    fn shutdown(&mut self) {
        self.session.shutdown();
    }
}

impl Session {
    fn connect(target: &str, deadline: Deadline) -> Result<Self, ToolError> {
        let target = target.trim();
        let transport = if target.starts_with("http://") || target.starts_with("https://") {
            Transport::Http(HttpServer {
                url: target.to_string(),
                session: Mutex::new(None),
            })
        } else {
            Transport::Stdio(StdioServer::spawn(target)?)
        };
        let client = Session {
            transport,
            next_id: AtomicU64::new(1),
            protocol: Mutex::new(PROTOCOL_VERSION.to_string()),
        };
        if let Err(e) = client.initialize(deadline) {
            client.shutdown();
            return Err(e);
        }
        Ok(client)
    }

    fn protocol(&self) -> String {
        self.protocol
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    fn initialize(&self, deadline: Deadline) -> Result<(), ToolError> {
        if let Transport::Http(h) = &self.transport {
            h.forget_session();
        }
        let params = json!({
            "protocolVersion": PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "toolloop", "version": env!("CARGO_PKG_VERSION")},
        });
        match self.request("initialize", params, deadline)? {
            Reply::Result(r) => {
                if let Some(v) = r["protocolVersion"].as_str() {
                    *self.protocol.lock().unwrap_or_else(|p| p.into_inner()) = v.to_string();
                }
            }
            Reply::Error { code, message } => {
                return Err(self.protocol_error(format!("initialize failed ({code}): {message}")));
            }
        }
        self.notify("notifications/initialized", deadline)
    }

    fn protocol_error(&self, detail: String) -> ToolError {
        ToolError::Protocol {
            source_name: self.label(),
            detail,
        }
    }

    fn request(&self, method: &str, params: Value, deadline: Deadline) -> Result<Reply, ToolError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let label = self.label();
        match &self.transport {
            Transport::Stdio(s) => s.request(&msg, id, deadline, &label),
            Transport::Http(h) => {
                match h.post(&msg, Some(id), deadline, &self.protocol(), &label) {
                    Err(ToolError::Http { status: 404, .. })
                        if h.has_session() && method != "initialize" =>
                    {
                        // The server forgot the session: start a new one and ask again.
                        log::info!("{label}: session lost; initializing again");
                        self.initialize(deadline)?;
                        h.post(&msg, Some(id), deadline, &self.protocol(), &label)
                    }
                    other => other,
                }
            }
        }
    }

    fn notify(&self, method: &str, deadline: Deadline) -> Result<(), ToolError> {
        let msg = json!({"jsonrpc": "2.0", "method": method});
        let label = self.label();
        match &self.transport {
            Transport::Stdio(s) => s.send(&msg),
            Transport::Http(h) => h
                .post(&msg, None, deadline, &self.protocol(), &label)
                .map(|_| ()),
        }
    }
}

impl Session {
    fn label(&self) -> String {
        match &self.transport {
            Transport::Stdio(s) => format!("mcp `{}`", s.command),
            Transport::Http(h) => format!("mcp {}", h.url),
        }
    }

    fn list(&self, deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        let mut tools = Vec::new();
        let mut cursor: Option<String> = None;
        for _ in 0..MAX_PAGES {
            let params = match &cursor {
                Some(c) => json!({"cursor": c}),
                None => json!({}),
            };
            let page = match self.request("tools/list", params, deadline)? {
                Reply::Result(r) => r,
                Reply::Error { code, message } => {
                    return Err(
                        self.protocol_error(format!("tools/list failed ({code}): {message}"))
                    );
                }
            };
            let items = page["tools"].as_array().cloned().unwrap_or_default();
            for item in items {
                match serde_json::from_value::<ToolSpec>(item) {
                    Ok(spec) => tools.push(spec),
                    Err(e) => log::warn!("{}: skipping a malformed tool: {e}", self.label()),
                }
            }
            cursor = page["nextCursor"].as_str().map(str::to_string);
            if cursor.is_none() {
                return Ok(tools);
            }
        }
        log::warn!("{}: stopped after {MAX_PAGES} pages of tools", self.label());
        Ok(tools)
    }

    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        let params = json!({"name": name, "arguments": arguments});
        match self.request("tools/call", params, deadline)? {
            Reply::Result(r) => Ok(call_result(&r)),
            // -32602 is how servers say "unknown tool" or "bad arguments": the model's
            // mistake, so the model reads it.
            Reply::Error { code, message } => Ok(ToolResult::err(if code == -32602 {
                message
            } else {
                format!("MCP error {code}: {message}")
            })),
        }
    }

    fn shutdown(&self) {
        match &self.transport {
            Transport::Stdio(s) => s.shutdown(),
            Transport::Http(h) => h.close(),
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        self.shutdown();
    }
}
