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
    /// What calling the tool does, as its server or its author says: MCP's tool
    /// annotations (`readOnlyHint`, `destructiveHint`, `idempotentHint`,
    /// `openWorldHint`), which the HTTP tool API's listing takes too. A hint left out
    /// takes MCP's default ([`ToolSpec::class`]): a tool that says nothing is taken to
    /// write, destructively, beyond the person's machine.
    #[serde(
        default,
        skip_serializing_if = "Hints::is_empty",
        deserialize_with = "lenient_hints"
    )]
    pub annotations: Hints,
}

/// MCP's tool annotations: hints of what a call does. A server may say anything here, so
/// they only ever make a tool ask *less* when the person has not set its class.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hints {
    /// Calling it changes nothing.
    #[serde(
        rename = "readOnlyHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub read_only: Option<bool>,
    /// A call that writes may delete or overwrite (when it does not only add).
    #[serde(
        rename = "destructiveHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub destructive: Option<bool>,
    /// The same call twice does no more than once.
    #[serde(
        rename = "idempotentHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub idempotent: Option<bool>,
    /// It reaches beyond the person's machine (the web, a service, other people).
    #[serde(
        rename = "openWorldHint",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub open_world: Option<bool>,
}

impl Hints {
    /// Whether no hint is given.
    pub fn is_empty(&self) -> bool {
        *self == Hints::default()
    }

    /// The hints that say `class` and nothing left to a default.
    pub fn of(class: ToolClass) -> Self {
        Hints {
            read_only: Some(class.effect == Effect::ReadOnly),
            destructive: Some(class.effect == Effect::Destructive),
            idempotent: Some(class.effect == Effect::WritesIdempotent),
            open_world: Some(class.open_world),
        }
    }
}

/// A server that sends `"annotations": null`, or hints of another shape, says nothing;
/// a hint that is not a boolean is left out.
fn lenient_hints<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Hints, D::Error> {
    let v = Option::<Value>::deserialize(d)?.unwrap_or(Value::Null);
    let hint = |k: &str| v.get(k).and_then(Value::as_bool);
    Ok(Hints {
        read_only: hint("readOnlyHint"),
        destructive: hint("destructiveHint"),
        idempotent: hint("idempotentHint"),
        open_world: hint("openWorldHint"),
    })
}

/// What a call of a tool does to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Effect {
    /// It changes nothing: it runs unasked.
    ReadOnly,
    /// It changes something, and the same call twice does more than once.
    Writes,
    /// It changes something, and the same call again does nothing more.
    WritesIdempotent,
    /// It may delete or overwrite.
    Destructive,
}

/// A tool's effect class: what a call does, and whether it reaches beyond the person's
/// machine.
///
/// ```
/// use toolloop::tools::{Effect, ToolClass};
///
/// let c: ToolClass = "destructive".parse().unwrap();
/// assert_eq!(c.effect, Effect::Destructive);
/// assert_eq!(c.to_string(), "destructive");
/// assert_eq!("writes,local".parse::<ToolClass>().unwrap().to_string(), "writes, local");
/// assert!("harmless".parse::<ToolClass>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ToolClass {
    /// What a call does.
    pub effect: Effect,
    /// Whether it reaches beyond the person's machine.
    pub open_world: bool,
}

impl ToolClass {
    /// A tool that only reads, on the person's machine (the built-in tools).
    pub const READ_ONLY: ToolClass = ToolClass {
        effect: Effect::ReadOnly,
        open_world: false,
    };
}

impl std::fmt::Display for ToolClass {
    /// `reads only`, `writes`, `writes, idempotent`, `destructive`; `, local` for a tool
    /// that writes only on the person's machine, `, open world` for one that reads
    /// beyond it.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (what, reads) = match self.effect {
            Effect::ReadOnly => ("reads only", true),
            Effect::Writes => ("writes", false),
            Effect::WritesIdempotent => ("writes, idempotent", false),
            Effect::Destructive => ("destructive", false),
        };
        f.write_str(what)?;
        match (reads, self.open_world) {
            (true, true) => f.write_str(", open world"),
            (false, false) => f.write_str(", local"),
            _ => Ok(()),
        }
    }
}

impl std::str::FromStr for ToolClass {
    type Err = String;

    /// `read-only`, `writes`, `idempotent`, `destructive`, each with `,local` or
    /// `,open-world` after it if wanted (a tool that writes is taken as open world
    /// unless said local, one that reads as local unless said open world).
    fn from_str(s: &str) -> Result<Self, String> {
        let mut parts = s.split(',').map(|p| p.trim().to_ascii_lowercase());
        let effect = match parts.next().as_deref() {
            Some("read-only" | "readonly" | "reads" | "reads only" | "read_only") => {
                Effect::ReadOnly
            }
            Some("writes" | "write") => Effect::Writes,
            Some("idempotent" | "writes-idempotent") => Effect::WritesIdempotent,
            Some("destructive") => Effect::Destructive,
            _ => {
                return Err(format!(
                    "{s:?} is not a tool class: say read-only, writes, idempotent or \
                     destructive, with ,local or ,open-world after it if wanted"
                ));
            }
        };
        let mut open_world = effect != Effect::ReadOnly;
        for p in parts {
            match p.as_str() {
                "local" => open_world = false,
                "open-world" | "open world" | "open_world" => open_world = true,
                _ => return Err(format!("{p:?} in {s:?}: say local or open-world")),
            }
        }
        Ok(ToolClass { effect, open_world })
    }
}

impl TryFrom<String> for ToolClass {
    type Error = String;
    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl From<ToolClass> for String {
    fn from(c: ToolClass) -> String {
        c.to_string()
    }
}

/// Where a tool's class came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClassSource {
    /// The tool's own hints: its server's annotations, or its author's declaration.
    Hints,
    /// No hints: MCP's defaults, destructive and open world.
    Default,
    /// The person's own setting (`--class`, the config file).
    Person,
}

impl std::fmt::Display for ClassSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ClassSource::Hints => "the tool's hints",
            ClassSource::Default => "no hints: taken as destructive",
            ClassSource::Person => "your setting",
        })
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
            annotations: Hints::default(),
        }
    }

    /// The tool's effect class by its hints, each hint left out taking MCP's default
    /// (not read-only, destructive, not idempotent, open world), and whether any hint
    /// was given.
    ///
    /// ```
    /// use toolloop::tools::{ClassSource, Effect, ToolSpec};
    ///
    /// let spec: ToolSpec = serde_json::from_str(
    ///     r#"{"name": "get_weather", "annotations": {"readOnlyHint": true}}"#,
    /// ).unwrap();
    /// assert_eq!(spec.class().0.effect, Effect::ReadOnly);
    /// let mail: ToolSpec = serde_json::from_str(r#"{"name": "send_mail"}"#).unwrap();
    /// assert_eq!(mail.class(), (toolloop::tools::ToolClass { effect: Effect::Destructive, open_world: true }, ClassSource::Default));
    /// ```
    pub fn class(&self) -> (ToolClass, ClassSource) {
        let h = &self.annotations;
        let effect = match (h.read_only, h.destructive, h.idempotent) {
            (Some(true), ..) => Effect::ReadOnly,
            (_, Some(false), Some(true)) => Effect::WritesIdempotent,
            (_, Some(false), _) => Effect::Writes,
            _ => Effect::Destructive,
        };
        let open_world = h.open_world.unwrap_or(true);
        let source = match h.is_empty() {
            true => ClassSource::Default,
            false => ClassSource::Hints,
        };
        (ToolClass { effect, open_world }, source)
    }

    /// Whether the tool only reads by its own hints: its calls may start as soon as they
    /// are written, and run unasked.
    pub fn read_only(&self) -> bool {
        self.class().0.effect == Effect::ReadOnly
    }

    /// The same tool, declared of `class`.
    pub fn with_class(mut self, class: ToolClass) -> Self {
        self.annotations = Hints::of(class);
        self
    }

    /// The same tool, declared as one that only reads, on the person's machine: it may
    /// be called as soon as its call is written, and runs unasked.
    ///
    /// ```
    /// use toolloop::tools::ToolSpec;
    ///
    /// let spec = ToolSpec::new("get_weather", "", serde_json::json!({"type": "object"})).reading_only();
    /// assert!(spec.read_only());
    /// ```
    pub fn reading_only(self) -> Self {
        self.with_class(ToolClass::READ_ONLY)
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
