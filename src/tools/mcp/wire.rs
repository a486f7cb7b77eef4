//! What both MCP transports share: the protocol version, the bounds on a request and a
//! line, a JSON-RPC reply read into a [`Reply`], and a `CallToolResult` read into a
//! [`ToolResult`]. A leaf of `tools/mcp/`: the transports import it, it imports neither.

use std::time::Duration;

use serde_json::Value;

use crate::tools::ToolResult;

/// The protocol version this client speaks.
pub const PROTOCOL_VERSION: &str = "2025-11-25";
/// The longest one MCP request may take, within the run's deadline.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest line accepted from a server.
pub(crate) const MAX_LINE: usize = 16 << 20;

/// A JSON-RPC reply: its result, or the error the server sent.
pub(crate) enum Reply {
    Result(Value),
    Error { code: i64, message: String },
}

/// Turns a `CallToolResult` into a [`ToolResult`]: text to the model, other content
/// summarised in a line, `structuredContent` as JSON, `isError` as an error.
pub fn call_result(r: &Value) -> ToolResult {
    let mut parts = Vec::new();
    for item in r["content"].as_array().into_iter().flatten() {
        let mime = item["mimeType"].as_str().unwrap_or("unknown type");
        match item["type"].as_str() {
            Some("text") => parts.push(item["text"].as_str().unwrap_or("").to_string()),
            Some("image") | Some("audio") => parts.push(format!(
                "[{} content: {mime}, {} bytes base64]",
                item["type"].as_str().unwrap_or(""),
                item["data"].as_str().map_or(0, str::len)
            )),
            Some("resource") => {
                let res = &item["resource"];
                let uri = res["uri"].as_str().unwrap_or("?");
                match res["text"].as_str() {
                    Some(t) => parts.push(format!("[resource {uri}]\n{t}")),
                    None => parts.push(format!("[resource {uri}: {mime}]")),
                }
            }
            Some("resource_link") => parts.push(format!(
                "[resource link {}: {}]",
                item["uri"].as_str().unwrap_or("?"),
                item["name"].as_str().unwrap_or("")
            )),
            other => parts.push(format!("[{} content]", other.unwrap_or("unknown"))),
        }
    }
    let text = parts.join("\n");
    if r["isError"] == true {
        return ToolResult::err(if text.is_empty() {
            "the tool reported an error".to_string()
        } else {
            text
        });
    }
    match r.get("structuredContent") {
        Some(s) if !s.is_null() => ToolResult::ok(s.clone()),
        _ => ToolResult::ok(text),
    }
}

/// Splits a command line into words, honouring single and double quotes.
pub fn split_command(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut quote: Option<char> = None;
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some('"'), '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                }
            }
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                in_word = true;
            }
            (None, '\\') => {
                if let Some(n) = chars.next() {
                    cur.push(n);
                    in_word = true;
                }
            }
            (None, c) if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            (None, c) => {
                cur.push(c);
                in_word = true;
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    words
}

/// A JSON-RPC response read as a [`Reply`].
pub(crate) fn to_reply(v: &Value) -> Reply {
    if let Some(e) = v.get("error") {
        Reply::Error {
            code: e["code"].as_i64().unwrap_or(0),
            message: e["message"].as_str().unwrap_or("unknown error").to_string(),
        }
    } else {
        Reply::Result(v.get("result").cloned().unwrap_or(Value::Null))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn command_lines_split_like_a_shell() {
        assert_eq!(split_command("npx -y pkg"), ["npx", "-y", "pkg"]);
        assert_eq!(
            split_command(r#"python3 -c 'print("a b")' "x y" z\ w"#),
            ["python3", "-c", "print(\"a b\")", "x y", "z w"]
        );
        assert!(split_command("   ").is_empty());
    }

    #[test]
    fn call_results_become_text_or_json() {
        let r = call_result(&json!({"content": [{"type": "text", "text": "hi"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"}]}));
        assert_eq!(
            r,
            ToolResult::ok("hi\n[image content: image/png, 4 bytes base64]")
        );
        let r = call_result(&json!({"content": [{"type": "text", "text": "{\"a\":1}"}],
            "structuredContent": {"a": 1}}));
        assert_eq!(r, ToolResult::ok(json!({"a": 1})));
        let r = call_result(
            &json!({"content": [{"type": "text", "text": "Unknown tool: x"}],
            "isError": true}),
        );
        assert_eq!(r, ToolResult::err("Unknown tool: x"));
    }
}
