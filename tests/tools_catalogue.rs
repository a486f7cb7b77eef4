//! One catalogue over several sources: unique names, sorted listing, typed lookups,
//! argument validation as messages for the model, and capped result text.

use serde_json::{Map, Value, json};
use toolloop::Deadline;
use toolloop::tools::FnTools;
use toolloop::tools::{Catalogue, ToolError, ToolResult, ToolSpec, cap_text};

fn tool(name: &str) -> ToolSpec {
    ToolSpec::new(
        name,
        "test tool",
        json!({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    )
}

fn source(names: &[&str]) -> Box<FnTools> {
    let mut f = FnTools::new();
    for n in names {
        f.add(tool(n), |a| Ok(a["n"].clone()));
    }
    Box::new(f)
}

#[test]
fn listing_is_sorted_across_sources() {
    let c = Catalogue::load(
        vec![source(&["zeta", "alpha"]), source(&["mid"])],
        Deadline::none(),
    )
    .unwrap();
    assert_eq!(c.names(), ["alpha", "mid", "zeta"]);
    assert_eq!(c.specs()[0].name, "alpha");
}

#[test]
fn a_duplicate_name_names_both_sources() {
    let err =
        Catalogue::load(vec![source(&["calc"]), source(&["calc"])], Deadline::none()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "tool \"calc\" is offered by both closures and closures; names must be unique"
    );
    let err = Catalogue::load(vec![source(&["a", "a"])], Deadline::none()).unwrap_err();
    assert!(matches!(err, ToolError::DuplicateName { .. }));
}

#[test]
fn unknown_tool_is_a_typed_error_listing_what_exists() {
    let c = Catalogue::load(vec![source(&["a", "b"])], Deadline::none()).unwrap();
    let err = c.call("c", &Map::new(), Deadline::none()).unwrap_err();
    assert_eq!(
        err,
        ToolError::UnknownTool {
            name: "c".into(),
            available: vec!["a".into(), "b".into()]
        }
    );
    assert_eq!(err.to_string(), "unknown tool \"c\"; available tools: a, b");
    assert!(c.get("a").is_ok());
}

#[test]
fn arguments_are_validated_before_the_call() {
    let calls = std::sync::atomic::AtomicU64::new(0);
    let mut f = FnTools::new();
    f.add(tool("count"), move |_| {
        let n = calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1;
        Ok(json!(n))
    });
    let c = Catalogue::load(vec![Box::new(f)], Deadline::none()).unwrap();
    let bad: Map<String, Value> = json!({"n": "three"}).as_object().unwrap().clone();
    let err = c.call("count", &bad, Deadline::none()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid arguments for count: /n: \"three\" is not of type \"integer\""
    );
    let missing = c.call("count", &Map::new(), Deadline::none()).unwrap_err();
    assert!(
        missing.to_string().contains("\"n\" is a required property"),
        "{missing}"
    );
    let good: Map<String, Value> = json!({"n": 3}).as_object().unwrap().clone();
    // The closure ran once: the two bad calls never reached it.
    assert_eq!(
        c.call("count", &good, Deadline::none()).unwrap(),
        ToolResult::ok(json!(1))
    );
}

#[test]
fn closure_errors_are_results_for_the_model() {
    let mut f = FnTools::new();
    f.add(tool("fail"), |_| Err("disk full".into()));
    let c = Catalogue::load(vec![Box::new(f)], Deadline::none()).unwrap();
    let ok: Map<String, Value> = json!({"n": 1}).as_object().unwrap().clone();
    let r = c.call("fail", &ok, Deadline::none()).unwrap();
    assert_eq!(r.to_model_text(100), "error: disk full");
}

#[test]
fn result_text_is_capped_with_a_marker() {
    let text = "é".repeat(5000);
    let capped = cap_text(&text, 4000);
    assert!(capped.ends_with("…[cut 1000 of 5000 characters]"));
    assert_eq!(
        ToolResult::ok(json!({"a": [1, 2]})).to_model_text(100),
        "{\"a\":[1,2]}"
    );
}

#[test]
fn an_expired_deadline_does_not_call() {
    let c = Catalogue::load(vec![source(&["a"])], Deadline::none()).unwrap();
    let ok: Map<String, Value> = json!({"n": 1}).as_object().unwrap().clone();
    let err = c
        .call("a", &ok, Deadline::after(std::time::Duration::ZERO))
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }));
}
