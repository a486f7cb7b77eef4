//! Tools written as Rust closures by a library user.

use serde_json::{Map, Value};

use super::{ToolError, ToolResult, ToolSource, ToolSpec};
use crate::deadline::Deadline;

type ToolFn = Box<dyn FnMut(&Map<String, Value>) -> Result<Value, String> + Send>;

/// Closures registered as tools. A closure returns the result's content, or an error
/// message the model will read.
///
/// ```
/// use serde_json::json;
/// use toolloop::tools::ToolSpec;
/// use toolloop::tools::closure::FnTools;
///
/// let mut tools = FnTools::new();
/// tools.add(ToolSpec::new("ping", "Answers pong", json!({"type": "object"})), |_| Ok(json!("pong")));
/// ```
#[derive(Default)]
pub struct FnTools {
    tools: Vec<(ToolSpec, ToolFn)>,
}

impl FnTools {
    /// No tools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers a tool.
    pub fn add(
        &mut self,
        spec: ToolSpec,
        f: impl FnMut(&Map<String, Value>) -> Result<Value, String> + Send + 'static,
    ) -> &mut Self {
        self.tools.push((spec, Box::new(f)));
        self
    }
}

impl ToolSource for FnTools {
    fn label(&self) -> String {
        "closures".into()
    }

    fn list(&mut self, _deadline: Deadline) -> Result<Vec<ToolSpec>, ToolError> {
        Ok(self.tools.iter().map(|(s, _)| s.clone()).collect())
    }

    fn call(
        &mut self,
        name: &str,
        arguments: &Map<String, Value>,
        _deadline: Deadline,
    ) -> Result<ToolResult, ToolError> {
        let Some((_, f)) = self.tools.iter_mut().find(|(s, _)| s.name == name) else {
            return Ok(ToolResult::err(format!("unknown tool {name}")));
        };
        Ok(match f(arguments) {
            Ok(v) => ToolResult::ok(v),
            Err(e) => ToolResult::err(e),
        })
    }
}
