//! Unit tests of CALL_SCHEMA, its narrowing and its layouts.

use super::*;
use crate::turn::tool_schema::ARG_STRING_MAX;

fn weather() -> ToolSpec {
    ToolSpec::new(
        "get_weather",
        "Weather",
        json!({"type": "object", "properties": {"city": {"type": "string"}},
               "required": ["city"]}),
    )
}

fn turn(text: &str) -> Turn {
    Turn::parse(text).unwrap().turn
}

#[test]
fn every_free_string_is_bounded() {
    fn walk(v: &Value, path: &str) {
        if let Value::Object(m) = v {
            if m.get("type").and_then(Value::as_str) == Some("string") && !m.contains_key("const") {
                assert!(m.contains_key("maxLength"), "unbounded string at {path}");
            }
            for (k, c) in m {
                walk(c, &format!("{path}/{k}"));
            }
        } else if let Value::Array(a) = v {
            for (i, c) in a.iter().enumerate() {
                walk(c, &format!("{path}/{i}"));
            }
        }
    }
    walk(call_schema(), "");
    walk(
        CallSchema::for_tools(&[weather()], Narrowing::PerTool).as_value(),
        "",
    );
}

#[test]
fn per_tool_variant_fixes_name_and_arguments() {
    let s = CallSchema::for_tools(&[weather()], Narrowing::PerTool);
    let v = &s.as_value()["oneOf"][0];
    assert_eq!(v["properties"]["tool"]["const"], "get_weather");
    assert_eq!(
        v["properties"]["arguments"]["properties"]["city"]["maxLength"],
        ARG_STRING_MAX
    );
    assert!(
        s.check(&turn(
            r#"{"kind":"tool_call","tool":"get_weather","arguments":{"city":"Oslo"}}"#
        ))
        .is_ok()
    );
}

#[test]
fn unknown_tool_lists_the_valid_ones() {
    let s = CallSchema::for_tools(&[weather()], Narrowing::ToolNames);
    let e = s
        .check(&turn(
            r#"{"kind":"tool_call","tool":"weather","arguments":{}}"#,
        ))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "unknown tool \"weather\"; available tools: \"get_weather\""
    );
}

#[test]
fn wrong_argument_type_names_the_path() {
    let s = CallSchema::for_tools(&[weather()], Narrowing::PerTool);
    let e = s
        .check(&turn(
            r#"{"kind":"tool_call","tool":"get_weather","arguments":{"city":5}}"#,
        ))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("/arguments/city: 5 is not of type"), "{e}");
}

#[test]
fn answer_only_refuses_tool_calls() {
    let e = CallSchema::answer_only()
        .check(&turn(r#"{"kind":"tool_call","tool":"x","arguments":{}}"#))
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        "kind \"tool_call\" is not allowed now; reply with kind \"final_answer\" or \"clarify\""
    );
}

#[test]
fn overlong_strings_are_reported_briefly() {
    let long = "x".repeat(5000);
    let e = CallSchema::full()
        .check(&Turn::FinalAnswer {
            thought: String::new(),
            content: long,
        })
        .unwrap_err()
        .to_string();
    assert!(e.len() < 200, "{e}");
    assert!(e.contains("/content"), "{e}");
}

#[test]
fn defs_are_hoisted_and_refs_rewritten() {
    let tool = ToolSpec::new(
        "geo.lookup",
        "",
        json!({"type": "object", "properties": {"p": {"$ref": "#/$defs/Point"}},
               "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}}, "required": ["x"]}}}),
    );
    let s = CallSchema::for_tools(&[tool], Narrowing::PerTool);
    assert_eq!(
        s.as_value()["oneOf"][0]["properties"]["arguments"]["properties"]["p"]["$ref"],
        "#/$defs/geo_lookup__Point"
    );
    assert!(s.as_value()["$defs"]["geo_lookup__Point"].is_object());
    let e = s
        .check(&turn(
            r#"{"kind":"tool_call","tool":"geo.lookup","arguments":{"p":{"x":"a"}}}"#,
        ))
        .unwrap_err()
        .to_string();
    assert!(e.contains("/arguments/p/x"), "{e}");
}

#[test]
fn no_tools_means_no_tool_call_variant() {
    let s = CallSchema::for_tools(&[], Narrowing::PerTool);
    assert!(!s.allows(Kind::ToolCall));
    assert!(s.allows(Kind::FinalAnswer));
}

#[test]
fn root_has_only_keywords_the_grammar_honours_next_to_one_of() {
    let s = CallSchema::for_tools(&[weather()], Narrowing::PerTool);
    let keys: Vec<&String> = s.as_value().as_object().unwrap().keys().collect();
    assert_eq!(keys, ["$schema", "title", "oneOf"]);
}

#[test]
fn reason_puts_a_bounded_thought_before_the_kind_in_every_variant() {
    let s = CallSchema::deciding(&[weather()], Narrowing::PerTool, Decide::Reason);
    for v in s.as_value()["oneOf"].as_array().unwrap() {
        let keys: Vec<&String> = v["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys[..2], ["thought", "kind"], "{v}");
        assert_eq!(v["properties"]["thought"]["maxLength"], REASON_MAX);
    }
    let answer_only = CallSchema::answer_only_deciding(Decide::Reason);
    assert!(!answer_only.allows(Kind::ToolCall));
    let first = &answer_only.as_value()["oneOf"][0]["properties"];
    assert_eq!(first.as_object().unwrap().keys().next().unwrap(), "thought");
}

#[test]
fn direct_bounds_the_thought_and_puts_an_answers_content_before_it() {
    let s = CallSchema::deciding(&[weather()], Narrowing::PerTool, Decide::Direct);
    for v in s.as_value()["oneOf"].as_array().unwrap() {
        let keys: Vec<&String> = v["properties"].as_object().unwrap().keys().collect();
        assert_eq!(keys[0], "kind", "{v}");
        if v["properties"]["kind"]["const"] == "final_answer" {
            assert_eq!(keys, ["kind", "content", "thought"], "{v}");
            // Written after the content, an answer's thought changes nothing.
            assert_eq!(v["properties"]["thought"]["maxLength"], 0);
        } else {
            assert_eq!(v["properties"]["thought"]["maxLength"], REASON_MAX);
        }
    }
    let answer = turn(r#"{"kind": "final_answer", "thought": "t", "content": "Hi"}"#);
    // A server that does not hold the model to the schema may still send one.
    assert!(s.check(&answer).is_ok());
    assert!(CallSchema::answer_only().check(&answer).is_ok());
    assert_eq!(
        Decide::Direct.canonical(&answer),
        r#"{"kind":"final_answer","content":"Hi","thought":"t"}"#
    );
}

#[test]
fn reason_checks_the_same_turns_as_direct() {
    let s = CallSchema::deciding(&[weather()], Narrowing::PerTool, Decide::Reason);
    let ok = turn(
        r#"{"thought":"t","kind":"tool_call","tool":"get_weather","arguments":{"city":"Oslo"}}"#,
    );
    assert!(s.check(&ok).is_ok());
    assert_eq!(
        Decide::Reason.canonical(&ok),
        r#"{"thought":"t","kind":"tool_call","tool":"get_weather","arguments":{"city":"Oslo"}}"#
    );
    let long = Turn::FinalAnswer {
        thought: "x".repeat(200),
        content: String::new(),
    };
    assert!(s.check(&long).unwrap_err().to_string().contains("/thought"));
}

#[test]
fn several_calls_are_narrowed_per_call_and_capped() {
    let s = CallSchema::deciding_calls(&[weather()], Narrowing::PerTool, Decide::Direct, 3);
    let calls = s.as_value()["oneOf"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["properties"]["kind"]["const"] == "tool_calls")
        .expect("a tool_calls variant");
    assert_eq!(calls["properties"]["calls"]["maxItems"], 3);
    let item = &calls["properties"]["calls"]["items"]["oneOf"][0];
    assert_eq!(item["properties"]["tool"]["const"], "get_weather");
    assert_eq!(item["properties"]["arguments"]["required"][0], "city");
    let turn = |calls: &str| {
        Turn::parse(&format!(
            r#"{{"kind": "tool_calls", "thought": "", "calls": [{calls}]}}"#
        ))
        .unwrap()
        .turn
    };
    let ok = r#"{"tool": "get_weather", "arguments": {"city": "Oslo"}}"#;
    assert_eq!(s.check(&turn(&[ok, ok].join(","))), Ok(()));
    let bad = r#"{"tool": "get_weather", "arguments": {"town": "Oslo"}}"#;
    let e = s
        .check(&turn(&[ok, bad].join(",")))
        .unwrap_err()
        .to_string();
    assert!(e.starts_with("call 2: "), "{e}");
    let e = s
        .check(&turn(&[ok, ok, ok, ok].join(",")))
        .unwrap_err()
        .to_string();
    assert!(e.contains("1 to 3 calls, not 4"), "{e}");
    // One call per turn: the form is left out.
    let single = CallSchema::deciding_calls(&[weather()], Narrowing::PerTool, Decide::Direct, 1);
    assert!(!single.allows(crate::turn::Kind::ToolCalls));
}

#[test]
fn a_tools_negated_character_class_refuses_the_quote_in_the_narrowed_schema() {
    let tool = ToolSpec::new(
        "find",
        "",
        json!({"type": "object", "properties": {"city": {"type": "string", "pattern": "^[^,]+, [A-Z]{2}$"}}}),
    );
    let schema = CallSchema::for_tools(&[tool], Narrowing::PerTool);
    let sent =
        schema.as_value()["oneOf"][0]["properties"]["arguments"]["properties"]["city"]["pattern"]
            .clone();
    assert_eq!(sent, json!(r#"^[^"\\,]+, [A-Z]{2}$"#));
}

#[test]
fn an_answer_that_is_the_prompts_placeholder_is_refused_with_what_to_write() {
    let s = CallSchema::for_tools(&[weather()], Narrowing::PerTool);
    let answer = |content: &str| {
        Turn::parse(&json!({"kind": "final_answer", "thought": "", "content": content}).to_string())
            .unwrap()
            .turn
    };
    let e = s.check(&answer(" <the answer for the user> ")).unwrap_err();
    assert_eq!(e, Rejection::Placeholder);
    assert!(e.to_string().contains("try a larger one"), "{e}");
    // Without its brackets, capitalised, with a full stop: the same words back.
    for copied in [
        "the answer for the user",
        "The answer for the user.",
        "<the answer for the user>.",
    ] {
        assert_eq!(
            s.check(&answer(copied)),
            Err(Rejection::Placeholder),
            "{copied}"
        );
    }
    // An answer that only mentions it, or goes on past its words, is an answer.
    for answer_text in [
        "It said <the answer for the user>.",
        "The answer for the user is 50.",
        "the answer",
    ] {
        assert_eq!(s.check(&answer(answer_text)), Ok(()), "{answer_text}");
    }
}

/// Every layout that puts `kind` first begins every turn the same way, and that beginning
/// parses as the start of each of its kinds: what the model writes after it is its own.
#[test]
fn every_layout_with_the_kind_first_begins_at_the_kind() {
    let tools = [weather()];
    let begun = Some(r#"{"kind": ""#.to_string());
    for decide in [Decide::Direct, Decide::Probability] {
        let layouts = [
            CallSchema::deciding_calls(&tools, Narrowing::PerTool, decide, 4),
            CallSchema::deciding(&tools, Narrowing::ToolNames, decide),
            CallSchema::answer_only_deciding(decide),
        ];
        for schema in layouts {
            assert_eq!(schema.beginning(), begun, "{decide:?}");
        }
        let more = CallSchema::deciding_calls(&tools, Narrowing::PerTool, decide, 4)
            .at_least(2)
            .unwrap();
        assert_eq!(more.beginning(), begun);
    }
    assert_eq!(CallSchema::full().beginning(), begun);
    let reason = CallSchema::deciding(&tools, Narrowing::PerTool, Decide::Reason);
    assert_eq!(reason.beginning(), None, "the thought comes first");
    let call =
        r#"get_weather", "thought": "", "tool": "get_weather", "arguments": {"city": "Oslo"}}"#;
    let answer = r#"final_answer", "content": "Sunny", "thought": ""}"#;
    let schema = CallSchema::deciding(&tools, Narrowing::PerTool, Decide::Probability);
    for rest in [call.replacen("get_weather", "tool_call", 1), answer.into()] {
        let text = format!("{}{rest}", begun.as_deref().unwrap());
        schema.check(&turn(&text)).unwrap();
    }
}
