//! The beginning of a turn in the list form, written for the model to continue: a turn
//! asked again for one call more (`more-calls`, `numbers-left`) is sent to a server that
//! continues replies with the calls it made, so that the model writes only the calls
//! after them (`crate::backend::GenOptions::prefill`). A part of [`super`] in a file of
//! its own: it lays out JSON as the model writes it, which the schema otherwise never
//! does.

use serde_json::{Map, Value, json};

use super::CallSchema;

impl CallSchema {
    /// The beginning of a turn of `calls` in this schema's list form, up to the comma
    /// after its last call: what a server that continues a reply
    /// ([`crate::backend::GenOptions::prefill`]) is given, so that the model writes only
    /// the calls after them. Fields go in the schema's order, which is the order its
    /// grammar holds the model to, laid out as the prompt's examples are (`", "`, `": "`).
    /// `None` where the schema has no list form or `calls` is not its last field (the
    /// beginning would not end inside the list).
    ///
    /// It ends at the comma, not at the call's brace, for the server's cache. Its tokenizer
    /// reads a run of punctuation as one piece: a beginning that ended at `"}}` was read
    /// there as one token, and the same text with the model's `,` after it as another, so
    /// the next turn's prompt parted from the cache one token before the model's own calls
    /// and evaluated them again. After `", "` the model writes ` {"`, which starts a piece
    /// of its own.
    ///
    /// ```
    /// use serde_json::json;
    /// use toolloop::tools::ToolSpec;
    /// use toolloop::turn::Call;
    /// use toolloop::turn::schema::{CallSchema, Decide, Narrowing};
    ///
    /// let tools = [ToolSpec::new("get_weather", "Weather for a city", json!({
    ///     "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"],
    /// }))];
    /// let schema = CallSchema::deciding_calls(&tools, Narrowing::PerTool, Decide::Probability, 4)
    ///     .at_least(2)
    ///     .unwrap();
    /// let paris = Call { tool: "get_weather".into(), arguments: json!({"city": "Paris"}).as_object().unwrap().clone() };
    /// let begun = schema.list_beginning("two cities", &[paris]).unwrap();
    /// assert_eq!(begun, r#"{"kind": "tool_calls", "thought": "two cities", "calls": [{"tool": "get_weather", "arguments": {"city": "Paris"}},"#);
    /// ```
    pub fn list_beginning(&self, thought: &str, calls: &[crate::turn::Call]) -> Option<String> {
        use serde::Serialize;
        let mut turn = Map::new();
        for key in self.several_form()?["properties"].as_object()?.keys() {
            let value = match key.as_str() {
                "kind" => json!("tool_calls"),
                "thought" => json!(thought),
                "calls" => json!(calls),
                _ => return None,
            };
            turn.insert(key.clone(), value);
        }
        if turn.keys().next_back().map(String::as_str) != Some("calls") {
            return None;
        }
        let mut text = Vec::new();
        Value::Object(turn)
            .serialize(&mut serde_json::Serializer::with_formatter(
                &mut text, Spaced,
            ))
            .ok()?;
        let text = String::from_utf8(text).ok()?;
        Some(format!("{},", text.strip_suffix("]}")?))
    }
}

impl CallSchema {
    /// The beginning every turn under this schema shares, `{"kind": "`, when `kind` is
    /// the first field of every variant (it is not under [`super::Decide::Reason`], where
    /// the thought comes first). Laid out as the prompt's examples are.
    ///
    /// Given to a server that continues a reply ([`crate::backend::GenOptions::prefill`]),
    /// it is read with the prompt in one batch, and the model's first token is the kind's
    /// value: the four tokens before it are the grammar's, which the server otherwise
    /// generates one at a time, each a whole step of the model.
    ///
    /// ```
    /// use toolloop::turn::schema::{CallSchema, Decide};
    ///
    /// let direct = CallSchema::answer_only_deciding(Decide::Probability);
    /// assert_eq!(direct.beginning().as_deref(), Some(r#"{"kind": ""#));
    /// assert_eq!(CallSchema::answer_only_deciding(Decide::Reason).beginning(), None);
    /// ```
    pub fn beginning(&self) -> Option<String> {
        let value = self.as_value();
        let variants: Vec<&Value> = match value["oneOf"].as_array() {
            Some(all) => all.iter().collect(),
            None => vec![value],
        };
        let kind_first = |v: &&Value| {
            v["properties"]
                .as_object()
                .and_then(|p| p.keys().next())
                .is_some_and(|k| k == "kind")
        };
        (!variants.is_empty() && variants.iter().all(kind_first)).then(|| r#"{"kind": ""#.into())
    }
}

/// JSON laid out as the prompt's examples are: `", "` between items, `": "` after a key.
struct Spaced;

impl serde_json::ser::Formatter for Spaced {
    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if first { Ok(()) } else { w.write_all(b", ") }
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        w.write_all(b": ")
    }
}
