//! Against a real llama-server running a real model (Qwen2.5-Coder 0.5B Instruct by
//! default), through the OpenAI-compatible backend. Ignored unless asked for, because it
//! needs the server:
//!
//! ```sh
//! pid=$(scripts/real-model.sh serve qwen 8091)
//! TOOLLOOP_LLAMA_URL=http://127.0.0.1:8091/v1 cargo test --test real_model -- --ignored
//! kill $pid
//! ```

use std::time::Duration;

use serde_json::json;
use toolloop::backend::openai::OpenAi;
use toolloop::backend::{Backend, ChatRequest, GenOptions, Message};
use toolloop::deadline::Deadline;
use toolloop::schema::{CallSchema, Narrowing};
use toolloop::tools::ToolSpec;
use toolloop::turn::Turn;

fn url() -> String {
    std::env::var("TOOLLOOP_LLAMA_URL").expect("set TOOLLOOP_LLAMA_URL to a llama-server /v1 URL")
}

fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec::new(
            "calculator",
            "Exact arithmetic on an expression",
            json!({"type": "object", "properties": {"expression": {"type": "string"}},
                   "required": ["expression"]}),
        ),
        ToolSpec::new(
            "get_weather",
            "Current weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}),
        ),
    ]
}

const SYSTEM: &str = "You answer by replying with one JSON object.\n\
Kinds: {\"kind\": \"tool_call\", \"thought\": ..., \"tool\": ..., \"arguments\": {...}} or \
{\"kind\": \"final_answer\", \"thought\": ..., \"content\": ...}.\n\
Use a tool whenever it gives a more reliable answer: live data, exact arithmetic.\n\
Tools:\n1. calculator(expression: string): exact arithmetic\n\
2. get_weather(city: string): current weather\n\
Example: user asks \"How much is 12.5 * 4?\" -> \
{\"kind\": \"tool_call\", \"thought\": \"exact product\", \"tool\": \"calculator\", \
\"arguments\": {\"expression\": \"12.5 * 4\"}}";

#[test]
#[ignore = "needs a llama-server: see the module docs"]
fn schema_constrained_reply_is_valid_and_usage_and_cache_are_read() {
    let tools = tools();
    let schema = CallSchema::for_tools(&tools, Narrowing::PerTool);
    let mut backend = OpenAi::new(&url(), "qwen", None);
    backend
        .preflight(Deadline::after(Duration::from_secs(10)))
        .unwrap();
    let options = GenOptions {
        num_predict: Some(200),
        ..GenOptions::default()
    };
    let mut messages = vec![
        Message::system(SYSTEM),
        Message::user("What is the weather in Paris right now?"),
    ];
    let deadline = Deadline::after(Duration::from_secs(120));
    let req = ChatRequest {
        messages: &messages,
        schema: Some(schema.as_value()),
        options: &options,
    };
    let mut streamed = String::new();
    let first = backend
        .chat(&req, deadline, &mut |p| streamed.push_str(p))
        .unwrap();
    eprintln!("reply 1: {}\nusage 1: {:?}", first.text, first.usage);
    assert_eq!(streamed, first.text, "the stream carried the whole reply");
    // Under the grammar the reply is strict JSON valid under the narrowed schema.
    let value: serde_json::Value = serde_json::from_str(&first.text).unwrap();
    assert!(
        jsonschema::is_valid(schema.as_value(), &value),
        "{value} is not valid under the schema"
    );
    let turn = Turn::parse(&first.text).unwrap().turn;
    schema.check(&turn).unwrap();
    assert!(first.usage.prompt_tokens > 0);
    assert!(first.usage.completion_tokens > 0);

    // Same prefix, one more exchange: the server reuses its cache.
    messages.push(Message::assistant(first.text.clone()));
    messages.push(Message::tool(
        "get_weather",
        r#"{"city":"Paris","temp_c":18,"sky":"clear"}"#,
    ));
    let req = ChatRequest {
        messages: &messages,
        schema: Some(schema.as_value()),
        options: &options,
    };
    let second = backend.chat(&req, deadline, &mut |_| {}).unwrap();
    eprintln!("reply 2: {}\nusage 2: {:?}", second.text, second.usage);
    let turn = Turn::parse(&second.text).unwrap().turn;
    schema.check(&turn).unwrap();
    let cached = second
        .usage
        .cached_prompt_tokens
        .expect("llama-server reports cache_n");
    assert!(
        cached > 0,
        "no prompt tokens reused from the cache: {:?}",
        second.usage
    );
}
