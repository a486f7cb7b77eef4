//! Tools written as Rust functions by a library user.
//!
//! The usual way is [`FnTool::new`]: the arguments are a `serde` + `schemars` struct, so
//! the input schema the model is constrained to is derived from the same type the
//! function receives, and the arguments are deserialized before the function runs (a
//! mismatch goes back to the model as an error it can correct). [`FnTool::raw`] takes a
//! hand-written schema and the arguments as JSON, for tools whose shape is only known at
//! run time.

use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::{ToolError, ToolResult, ToolSource, ToolSpec};
use crate::deadline::Deadline;

type ToolFn = Box<dyn Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync>;

/// One Rust function as a tool.
///
/// ```
/// use schemars::JsonSchema;
/// use serde::Deserialize;
/// use toolloop::{FnTool, Orchestrator, Scripted};
///
/// /// Arguments of `order_status`; the doc comments become the schema's descriptions.
/// #[derive(Deserialize, JsonSchema)]
/// struct Order {
///     /// The order number.
///     id: u32,
/// }
///
/// // It only reads, so its calls run without asking anyone.
/// let tool = FnTool::new("order_status", "Status of an order", |o: Order| {
///     Ok(format!("order {} has shipped", o.id))
/// })
/// .reading_only();
/// assert_eq!(tool.spec().input_schema["required"][0], "id");
///
/// let model = Scripted::new([
///     r#"{"kind": "tool_call", "thought": "", "tool": "order_status", "arguments": {"id": 7}}"#,
///     r#"{"kind": "final_answer", "thought": "", "content": "It has shipped."}"#,
/// ]);
/// let outcome = Orchestrator::builder().backend(model).tool(tool).build()?.run("Order 7?")?;
/// assert_eq!(outcome.steps[0].observation, "order 7 has shipped");
/// # Ok::<(), toolloop::OrchestratorError>(())
/// ```
pub struct FnTool {
    spec: ToolSpec,
    f: ToolFn,
}

impl std::fmt::Debug for FnTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FnTool").field("spec", &self.spec).finish()
    }
}

impl FnTool {
    /// A tool whose arguments are `A`: its JSON Schema (from `schemars`) is the tool's
    /// input schema, and the model's arguments are deserialized into it before `f` runs.
    /// `f` returns the result (anything `Serialize`) or an error message for the model.
    pub fn new<A, R, F>(name: impl Into<String>, description: impl Into<String>, f: F) -> Self
    where
        A: DeserializeOwned + JsonSchema,
        R: Serialize,
        F: Fn(A) -> Result<R, String> + Send + Sync + 'static,
    {
        let spec = ToolSpec::new(name, description, input_schema::<A>());
        FnTool::raw(spec, move |args| {
            let typed: A = serde_json::from_value(Value::Object(args.clone()))
                .map_err(|e| format!("invalid arguments: {e}"))?;
            let out = f(typed)?;
            serde_json::to_value(out).map_err(|e| format!("the result is not JSON: {e}"))
        })
    }

    /// A tool with a hand-written spec; `f` gets the arguments as JSON, already checked
    /// against the spec's schema.
    pub fn raw(
        spec: ToolSpec,
        f: impl Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) -> Self {
        FnTool {
            spec,
            f: Box::new(f),
        }
    }

    /// The same tool with questions a person might ask of it, which the web page offers
    /// ([`ToolSpec::examples`]).
    pub fn with_examples<S: Into<String>>(mut self, examples: impl IntoIterator<Item = S>) -> Self {
        self.spec = self.spec.with_examples(examples);
        self
    }

    /// The same tool, declared as one that only reads ([`ToolSpec::read_only`]): its
    /// calls run unasked, and may start as soon as the model has written them. A tool
    /// not so declared is taken to change things, so each call waits for the person's
    /// approval ([`crate::Approver`], [`crate::Permissions`]).
    pub fn reading_only(mut self) -> Self {
        self.spec = self.spec.reading_only();
        self
    }

    /// The same tool, declared of `class` (a tool that writes, say, and on the person's
    /// machine only).
    pub fn with_class(mut self, class: crate::tools::ToolClass) -> Self {
        self.spec = self.spec.with_class(class);
        self
    }

    /// What the model is told about the tool.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

/// The input schema of an arguments type: schemars' schema without the keys that only
/// name the document (`$schema`, `title`), which the model does not need to see.
fn input_schema<A: JsonSchema>() -> Value {
    let mut v = serde_json::to_value(schemars::schema_for!(A)).unwrap_or(Value::Null);
    if let Value::Object(m) = &mut v {
        m.remove("$schema");
        m.remove("title");
        m.entry("type").or_insert_with(|| Value::from("object"));
    }
    v
}

/// Closures registered as tools: one [`ToolSource`] for all of them.
///
/// ```
/// use serde_json::json;
/// use toolloop::tools::ToolSpec;
/// use toolloop::tools::FnTools;
///
/// let mut tools = FnTools::new();
/// tools.add(ToolSpec::new("ping", "Answers pong", json!({"type": "object"})), |_| Ok(json!("pong")));
/// ```
#[derive(Default)]
pub struct FnTools {
    tools: Vec<FnTool>,
}

impl FnTools {
    /// No tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool with a hand-written spec ([`FnTool::raw`]).
    pub fn add(
        &mut self,
        spec: ToolSpec,
        f: impl Fn(&Map<String, Value>) -> Result<Value, String> + Send + Sync + 'static,
    ) -> &mut Self {
        self.push(FnTool::raw(spec, f))
    }

    /// Registers a tool.
    pub fn push(&mut self, tool: FnTool) -> &mut Self {
        self.tools.push(tool);
        self
    }

    /// Whether no tool is registered.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
    }
}

impl ToolSource for FnTools {
    fn label(&self) -> String {
        "closures".into()
    }

    fn list(&mut self, _deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.tools.iter().map(|t| t.spec.clone()).collect())
    }

    fn call(
        &self,
        name: &str,
        arguments: &Map<String, Value>,
        _deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        let Some(tool) = self.tools.iter().find(|t| t.spec.name == name) else {
            return Ok(ToolResult::err(format!("unknown tool {name}")));
        };
        Ok(match (tool.f)(arguments) {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::err(e),
        })
    }
}
