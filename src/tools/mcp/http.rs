//! MCP's Streamable HTTP transport: each JSON-RPC message is a `POST`; the reply is JSON
//! or a Server-Sent Events stream, and the session is named by the `Mcp-Session-Id`
//! header. Kept apart from the stdio transport in `mcp.rs` because the two share only the
//! message shapes.

use std::io::BufReader;
use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};

use super::wire::{MAX_LINE, REQUEST_TIMEOUT, Reply, to_reply};
use crate::deadline::Deadline;
use crate::http::{self, Failure};
use crate::tools::ToolError;

/// One Streamable HTTP server. Each message is its own POST, so the calls of a turn go
/// out side by side; only the session id is shared.
pub(super) struct HttpServer {
    pub(super) url: String,
    pub(super) session: Mutex<Option<String>>,
}

impl HttpServer {
    fn session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn has_session(&self) -> bool {
        self.session().is_some()
    }

    pub(super) fn forget_session(&self) -> Option<String> {
        self.session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
    }

    pub(super) fn failure(&self, f: Failure, label: &str) -> ToolError {
        match f {
            Failure::Unreachable => ToolError::Unreachable {
                url: self.url.clone(),
                mcp: true,
            },
            Failure::Timeout => ToolError::Timeout {
                source_name: label.to_string(),
            },
            Failure::Other(detail) => ToolError::Protocol {
                source_name: label.to_string(),
                detail,
            },
        }
    }

    /// POSTs one message. For a request (`id` given) returns its reply; for a
    /// notification, an empty result.
    pub(super) fn post(
        &self,
        msg: &Value,
        id: Option<u64>,
        deadline: Deadline,
        protocol: &str,
        label: &str,
    ) -> Result<Reply, ToolError> {
        let budget = http::budget(&deadline, REQUEST_TIMEOUT).ok_or(ToolError::Timeout {
            source_name: label.to_string(),
        })?;
        let mut req = http::agent()
            .post(&self.url)
            .config()
            .timeout_global(Some(budget))
            .build()
            .header("Content-Type", "application/json")
            .header("Accept", "application/json, text/event-stream")
            .header("MCP-Protocol-Version", protocol);
        if let Some(s) = self.session() {
            req = req.header("Mcp-Session-Id", s);
        }
        let body = serde_json::to_vec(msg).unwrap_or_default();
        let resp = req
            .send(&body[..])
            .map_err(|e| self.failure(http::classify(e), label))?;
        let status = resp.status().as_u16();
        if let Some(s) = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
        {
            *self.session.lock().unwrap_or_else(|p| p.into_inner()) = Some(s.to_string());
        }
        let is_sse = resp
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|c| c.contains("event-stream"));
        let reader = resp.into_body().into_reader();
        if status == 202 || (id.is_none() && (200..300).contains(&status)) {
            return Ok(Reply::Result(Value::Null));
        }
        if status != 200 {
            let (bytes, _) = http::read_capped(reader, 64 << 10).unwrap_or_default();
            return Err(ToolError::Http {
                url: self.url.clone(),
                status,
                message: http::error_message(&bytes),
            });
        }
        let Some(id) = id else {
            return Ok(Reply::Result(Value::Null));
        };
        if !is_sse {
            let (bytes, _) = http::read_capped(reader, MAX_LINE)
                .map_err(|e| self.failure(http::classify_io(&e), label))?;
            let v: Value = serde_json::from_slice(&bytes).map_err(|_| ToolError::Protocol {
                source_name: label.to_string(),
                detail: "reply is not JSON".into(),
            })?;
            // A batch, or a single message.
            let found = match &v {
                Value::Array(items) => items.iter().find(|m| m["id"].as_u64() == Some(id)).cloned(),
                _ => Some(v),
            };
            return found.map(|m| to_reply(&m)).ok_or(ToolError::Protocol {
                source_name: label.to_string(),
                detail: "no reply to the request".into(),
            });
        }
        let mut r = BufReader::new(reader);
        let mut data = String::new();
        loop {
            let line = http::read_line(&mut r, MAX_LINE)
                .map_err(|e| self.failure(http::classify_io(&e), label))?;
            let Some(line) = line else {
                return Err(ToolError::Protocol {
                    source_name: label.to_string(),
                    detail: "the event stream ended without a reply".into(),
                });
            };
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\r', '\n']);
            if let Some(d) = line.strip_prefix("data:") {
                data.push_str(d.strip_prefix(' ').unwrap_or(d));
                continue;
            }
            if !line.is_empty() || data.is_empty() {
                continue;
            }
            let event = std::mem::take(&mut data);
            let Ok(v) = serde_json::from_str::<Value>(&event) else {
                continue;
            };
            if v["id"].as_u64() == Some(id) && v.get("method").is_none() {
                return Ok(to_reply(&v));
            }
            if v["method"] == "ping"
                && let Some(ping_id) = v.get("id")
            {
                let answer = json!({"jsonrpc": "2.0", "id": ping_id, "result": {}});
                let _ = self.post(&answer, None, deadline, protocol, label);
            }
        }
    }

    pub(super) fn close(&self) {
        if let Some(s) = self.forget_session() {
            // Ending the session is a courtesy; a server that does not allow it says 405.
            let _ = http::agent()
                .delete(&self.url)
                .config()
                .timeout_global(Some(Duration::from_secs(2)))
                .build()
                .header("Mcp-Session-Id", &s)
                .call();
        }
    }
}
