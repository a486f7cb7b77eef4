//! Parsing a model turn and checking it against a narrowed schema never panics.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use toolloop::turn::schema::{CallSchema, Narrowing};
use toolloop::tools::ToolSpec;

fn schema() -> &'static CallSchema {
    static S: OnceLock<CallSchema> = OnceLock::new();
    S.get_or_init(|| {
        let tool = ToolSpec::new(
            "get_weather",
            "Weather",
            serde_json::json!({"type": "object", "properties": {"city": {"type": "string"},
                "days": {"type": "integer"}}, "required": ["city"]}),
        );
        CallSchema::for_tools(&[tool], Narrowing::PerTool)
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok(parsed) = toolloop::turn::Turn::parse(&text) {
        let _ = schema().check(&parsed.turn);
    }
});
