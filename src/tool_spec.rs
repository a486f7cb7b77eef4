//! A tool as the model is told about it: its name, what it does, and the JSON Schema of
//! its arguments. A leaf: every tool source describes its tools this way, and the turn
//! and the checks read it without knowing where a tool comes from.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// A tool as the model sees it: a name, what it does, and the JSON Schema of its
/// arguments.
///
/// ```
/// use toolloop::tools::ToolSpec;
///
/// let spec: ToolSpec = serde_json::from_str(
///     r#"{"name": "get_weather", "description": "Weather for a city",
///         "inputSchema": {"type": "object", "properties": {"city": {"type": "string"}},
///                         "required": ["city"]}}"#,
/// ).unwrap();
/// assert_eq!(spec.name, "get_weather");
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The unique name the model uses to call the tool.
    pub name: String,
    /// What the tool does, shown to the model.
    #[serde(default)]
    pub description: String,
    /// JSON Schema of the arguments object.
    #[serde(rename = "inputSchema", default = "empty_object_schema")]
    pub input_schema: Value,
    /// Questions a person might ask that this tool helps answer. The web page offers
    /// them on its first screen; they are never shown to the model (a model shown
    /// examples tends to copy their values into its calls).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub examples: Vec<String>,
    /// The tool only reads: calling it changes nothing, so it may be called as soon as
    /// the model has written the call, before its turn is judged, and a result the turn
    /// then does not use is let go (`crate::run::orchestrator`'s early calls). Read from
    /// MCP's `annotations.readOnlyHint` (the HTTP tool API's listing takes the same
    /// field); false unless a tool says so.
    #[serde(
        rename = "annotations",
        default,
        skip_serializing_if = "std::ops::Not::not",
        with = "read_only_hint"
    )]
    pub read_only: bool,
}

/// `read_only` as MCP writes it: `"annotations": {"readOnlyHint": true}`. The other hints
/// (`destructiveHint`, `idempotentHint`, `openWorldHint`, `title`) are not read.
mod read_only_hint {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Serialize, Deserialize)]
    struct Annotations {
        #[serde(rename = "readOnlyHint", default)]
        read_only_hint: Option<bool>,
    }

    pub fn serialize<S: Serializer>(read_only: &bool, s: S) -> Result<S::Ok, S::Error> {
        Annotations {
            read_only_hint: Some(*read_only),
        }
        .serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
        // A server that sends `"annotations": null`, or hints of another shape, says
        // nothing about reading only.
        let a = Option::<serde_json::Value>::deserialize(d)?;
        Ok(
            a.and_then(|v| serde_json::from_value::<Annotations>(v).ok())
                .and_then(|a| a.read_only_hint)
                .unwrap_or(false),
        )
    }
}

fn empty_object_schema() -> Value {
    serde_json::json!({"type": "object"})
}

impl ToolSpec {
    /// A tool with a name, a description and an input schema.
    pub fn new(
        name: impl Into<String>,
        description: impl Into<String>,
        input_schema: Value,
    ) -> Self {
        ToolSpec {
            name: name.into(),
            description: description.into(),
            input_schema,
            examples: Vec::new(),
            read_only: false,
        }
    }

    /// The same tool, marked as one that only reads ([`ToolSpec::read_only`]): it may be
    /// called as soon as its call is written.
    ///
    /// ```
    /// use toolloop::tools::ToolSpec;
    ///
    /// let spec: ToolSpec = serde_json::from_str(
    ///     r#"{"name": "get_weather", "annotations": {"readOnlyHint": true}}"#,
    /// ).unwrap();
    /// assert!(spec.read_only);
    /// assert_eq!(spec, ToolSpec::new("get_weather", "", serde_json::json!({"type": "object"})).reading_only());
    /// assert!(!serde_json::from_str::<ToolSpec>(r#"{"name": "send_mail"}"#).unwrap().read_only);
    /// ```
    pub fn reading_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// The same tool with questions a person might ask of it ([`ToolSpec::examples`]).
    ///
    /// ```
    /// use toolloop::tools::ToolSpec;
    ///
    /// let spec = ToolSpec::new("get_weather", "Weather for a city", serde_json::json!({}))
    ///     .with_examples(["What is the weather in Paris?"]);
    /// assert_eq!(spec.examples, ["What is the weather in Paris?"]);
    /// ```
    pub fn with_examples<S: Into<String>>(mut self, examples: impl IntoIterator<Item = S>) -> Self {
        self.examples = examples.into_iter().map(Into::into).collect();
        self
    }
}
