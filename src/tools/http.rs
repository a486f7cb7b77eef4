//! The client of the HTTP tool API (`schemas/tool_api.openapi.json`): `GET /tools`,
//! `POST /tools/{name}`, `GET /health`. Any server in any language can implement it;
//! `toolloop serve-tools` is ours.
//!
//! Retries (up to 2) only where a retry is safe because the call cannot have
//! run: connection refused, 502, 503, 504. A 50 MB result is not loaded whole: the body
//! is read up to a cap and what arrived is repaired.

use std::time::{Duration, Instant};

use serde_json::{Map, Value};

use super::{ToolError, ToolResult, ToolSource, ToolSpec};
use crate::deadline::Deadline;
use crate::http::{self, Failure};

/// The most bytes of one tool result read from the server.
pub const MAX_RESULT_BYTES: usize = 1 << 20;
/// Retries of a call that cannot have run.
const RETRIES: u32 = 2;

/// Tools behind an HTTP tool API at a base URL (by default `http://localhost:5000`).
#[derive(Debug, Clone)]
pub struct HttpTools {
    base: String,
    timeout: Duration,
}

impl HttpTools {
    /// The tool API at `base` (e.g. `http://127.0.0.1:5000`).
    pub fn new(base: &str) -> Self {
        HttpTools {
            base: base.trim().trim_end_matches('/').to_string(),
            timeout: Duration::from_secs(30),
        }
    }

    /// The longest one call may take, within the run's deadline (default 30 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The base URL.
    pub fn base_url(&self) -> &str {
        &self.base
    }

    fn failure(&self, f: Failure) -> ToolError {
        match f {
            Failure::Unreachable => ToolError::Unreachable {
                url: self.base.clone(),
                mcp: false,
            },
            Failure::Timeout => ToolError::Timeout {
                source_name: self.base.clone(),
            },
            Failure::Other(detail) => ToolError::Protocol {
                source_name: self.base.clone(),
                detail,
            },
        }
    }

    /// `GET {base}/health` answers 200.
    pub fn health(&self, deadline: Deadline) -> Result<(), ToolError> {
        let budget = http::budget(&deadline, Duration::from_secs(5)).ok_or(ToolError::Timeout {
            source_name: self.base.clone(),
        })?;
        let resp = http::agent()
            .get(format!("{}/health", self.base))
            .config()
            .timeout_global(Some(budget))
            .build()
            .call()
            .map_err(|e| self.failure(http::classify(e)))?;
        match resp.status().as_u16() {
            200 => Ok(()),
            status => Err(ToolError::Http {
                url: format!("{}/health", self.base),
                status,
                message: "health check failed".into(),
            }),
        }
    }
}

/// Percent-encodes a tool name for a URL path segment.
fn encode_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

impl ToolSource for HttpTools {
    fn label(&self) -> String {
        self.base.clone()
    }

    fn list(&mut self, deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        let url = format!("{}/tools", self.base);
        let budget = http::budget(&deadline, self.timeout).ok_or(ToolError::Timeout {
            source_name: self.base.clone(),
        })?;
        let resp = http::agent()
            .get(&url)
            .config()
            .timeout_global(Some(budget))
            .build()
            .call()
            .map_err(|e| self.failure(http::classify(e)))?;
        let status = resp.status().as_u16();
        let (body, more) = http::read_capped(resp.into_body().into_reader(), 16 << 20)
            .map_err(|e| self.failure(http::classify_io(&e)))?;
        if status != 200 {
            return Err(ToolError::Http {
                url,
                status,
                message: http::error_message(&body),
            });
        }
        if more {
            return Err(ToolError::Protocol {
                source_name: url,
                detail: "the tool list is larger than 16 MiB".into(),
            });
        }
        #[derive(serde::Deserialize)]
        struct List {
            tools: Vec<ToolSpec>,
        }
        serde_json::from_slice::<List>(&body)
            .map(|l| l.tools)
            .map_err(|e| ToolError::Protocol {
                source_name: url,
                detail: format!("expected {{\"tools\": [...]}}: {e}"),
            })
    }

    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        let url = format!("{}/tools/{}", self.base, encode_segment(name));
        let body = serde_json::to_vec(arguments).unwrap_or_default();
        let started = Instant::now();
        let mut attempt = 0;
        loop {
            let budget = http::budget(&deadline, self.timeout).ok_or(ToolError::Timeout {
                source_name: self.base.clone(),
            })?;
            let sent = http::agent()
                .post(&url)
                .config()
                .timeout_global(Some(budget))
                .build()
                .header("Content-Type", "application/json")
                .send(&body[..]);
            let retryable = match sent {
                Err(e) => match http::classify(e) {
                    Failure::Unreachable => ToolError::Unreachable {
                        url: self.base.clone(),
                        mcp: false,
                    },
                    other => return Err(self.failure(other)),
                },
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let (bytes, more) =
                        http::read_capped(resp.into_body().into_reader(), MAX_RESULT_BYTES)
                            .map_err(|e| self.failure(http::classify_io(&e)))?;
                    match status {
                        200 => return parse_result(&bytes, more, &url),
                        400 | 404 | 422 => {
                            return Ok(ToolResult::err(http::error_message(&bytes)));
                        }
                        502..=504 => ToolError::Http {
                            url: url.clone(),
                            status,
                            message: http::error_message(&bytes),
                        },
                        _ => {
                            return Err(ToolError::Http {
                                url,
                                status,
                                message: http::error_message(&bytes),
                            });
                        }
                    }
                }
            };
            attempt += 1;
            let wait = Duration::from_millis(100 << attempt);
            if attempt > RETRIES || deadline.remaining().is_some_and(|left| left <= wait) {
                log::debug!(
                    "{name}: giving up after {attempt} attempts in {:?}",
                    started.elapsed()
                );
                return Err(retryable);
            }
            log::info!("{name}: {retryable}; retry {attempt} of {RETRIES}");
            std::thread::sleep(wait);
        }
    }
}

/// Reads `{"ok": ..., "content": ..., "error": ...}`. A body cut at the cap is repaired
/// (its complete part kept) and marked as cut.
fn parse_result(bytes: &[u8], cut: bool, url: &str) -> Result<ToolResult, ToolError> {
    let text = String::from_utf8_lossy(bytes);
    let value = if cut {
        crate::turn::repair::repair(&text)
            .map(|r| r.value)
            .map_err(|e| ToolError::Protocol {
                source_name: url.to_string(),
                detail: format!("result larger than {MAX_RESULT_BYTES} bytes and unreadable: {e}"),
            })?
    } else {
        serde_json::from_str::<Value>(&text).map_err(|_| ToolError::Protocol {
            source_name: url.to_string(),
            detail: format!(
                "invalid JSON from the tool server: {:?}",
                http::shorten(&text, 120)
            ),
        })?
    };
    let mut result: ToolResult =
        serde_json::from_value(value.clone()).unwrap_or_else(|_| ToolResult::ok(value));
    if cut {
        let note = format!("[result cut at {MAX_RESULT_BYTES} bytes by the client]");
        result.content = match result.content {
            Value::String(s) => Value::String(format!("{s}…{note}")),
            other => serde_json::json!({"partial": other, "note": note}),
        };
    }
    Ok(result)
}
