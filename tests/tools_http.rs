//! The HTTP tool API client against our own built-in server on 127.0.0.1 (a real socket),
//! and against mockito and a fake server for every failure path.

mod common;

use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use toolloop::Deadline;
use toolloop::serve::{RunningServer, ToolServer};
use toolloop::tools::HttpTools;
use toolloop::tools::{Builtin, BuiltinConfig};
use toolloop::tools::{ToolError, ToolResult, ToolSource};

use common::{Act, serve};

fn builtin_server() -> RunningServer {
    let tools = Builtin::new(&BuiltinConfig {
        demo: true,
        ..BuiltinConfig::default()
    })
    .unwrap();
    ToolServer::bind("127.0.0.1:0", Box::new(tools))
        .unwrap()
        .spawn()
}

fn args(v: Value) -> Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn soon() -> Deadline {
    Deadline::after(Duration::from_secs(10))
}

#[test]
fn lists_and_calls_the_builtin_server() {
    let server = builtin_server();
    let mut client = HttpTools::new(server.url());
    client.health(soon()).unwrap();
    let listed = client.list(soon()).unwrap();
    let names: Vec<&str> = listed.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["calculator", "current_time", "get_weather"]);
    // The built-in tools only read, and the listing says so (`readOnlyHint`), so a
    // toolloop using this server may start their calls early.
    assert!(listed.iter().all(|t| t.read_only()), "{listed:?}");
    let r = client
        .call(
            "calculator",
            &args(json!({"expression": "12.5 * 4"})),
            soon(),
        )
        .unwrap();
    assert_eq!(r, ToolResult::ok("50"));
    let r = client
        .call("get_weather", &args(json!({"city": "Tokyo"})), soon())
        .unwrap();
    assert_eq!(r.content["temp_c"], 18);
}

#[test]
fn tool_errors_unknown_tools_and_bad_arguments_are_results_for_the_model() {
    let server = builtin_server();
    let client = HttpTools::new(server.url());
    let r = client
        .call("get_weather", &args(json!({"city": "Atlantis"})), soon())
        .unwrap();
    assert!(!r.ok);
    assert!(r.error.unwrap().starts_with("no weather for \"Atlantis\""));
    let r = client.call("teleport", &Map::new(), soon()).unwrap();
    assert_eq!(
        r.error.as_deref(),
        Some("unknown tool 'teleport'; available tools: calculator, current_time, get_weather")
    );
    let r = client
        .call("get_weather", &args(json!({"city": 5})), soon())
        .unwrap();
    assert_eq!(
        r.error.as_deref(),
        Some("invalid arguments: /city: value is not of type \"string\"")
    );
}

#[test]
fn server_down_at_start_is_an_error_naming_the_url() {
    let url = common::dead_url();
    let err = HttpTools::new(&url).list(soon()).unwrap_err();
    assert_eq!(
        err.to_string(),
        format!(
            "tool server at {url} is not reachable: start it (`toolloop serve-tools`), check `tools`, or use `builtin`"
        )
    );
}

#[test]
fn refused_call_is_retried_twice_then_reported() {
    let url = common::dead_url();
    let started = Instant::now();
    let err = HttpTools::new(&url)
        .call("x", &Map::new(), soon())
        .unwrap_err();
    assert!(matches!(err, ToolError::Unreachable { .. }), "{err}");
    // Two retries with 200 and 400 ms pauses.
    assert!(
        started.elapsed() >= Duration::from_millis(550),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn busy_502_503_504_are_retried_and_can_recover() {
    let fake = serve(vec![
        Act::Respond(503, "application/json", br#"{"error":"busy"}"#.to_vec()),
        Act::Respond(502, "text/plain", b"bad gateway".to_vec()),
        Act::Respond(
            200,
            "application/json",
            br#"{"ok":true,"content":"done"}"#.to_vec(),
        ),
    ]);
    let r = HttpTools::new(&fake.url)
        .call("x", &Map::new(), soon())
        .unwrap();
    assert_eq!(r, ToolResult::ok("done"));
    assert_eq!(fake.requests.lock().unwrap().len(), 3);
}

#[test]
fn a_500_is_not_retried() {
    let fake = serve(vec![Act::Respond(
        500,
        "application/json",
        br#"{"error":"boom"}"#.to_vec(),
    )]);
    let err = HttpTools::new(&fake.url)
        .call("x", &Map::new(), soon())
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        format!("{}/tools/x: HTTP 500: boom", fake.url)
    );
    assert_eq!(fake.requests.lock().unwrap().len(), 1);
}

#[test]
fn error_statuses_with_messages() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/tools/get_weather")
        .with_status(400)
        .with_body(r#"{"ok":false,"error":"city is required"}"#)
        .create();
    server
        .mock("POST", "/tools/nope")
        .with_status(404)
        .with_body(r#"{"ok":false,"error":"unknown tool nope"}"#)
        .create();
    let client = HttpTools::new(&server.url());
    let r = client.call("get_weather", &Map::new(), soon()).unwrap();
    assert_eq!(r, ToolResult::err("city is required"));
    let r = client.call("nope", &Map::new(), soon()).unwrap();
    assert_eq!(r, ToolResult::err("unknown tool nope"));
}

#[test]
fn names_are_percent_encoded_in_the_path() {
    let mut server = mockito::Server::new();
    let m = server
        .mock("POST", "/tools/geo.lookup%2Fv2")
        .match_body(mockito::Matcher::Json(json!({"q": "x"})))
        .with_body(r#"{"ok":true,"content":1}"#)
        .create();
    HttpTools::new(&server.url())
        .call("geo.lookup/v2", &args(json!({"q": "x"})), soon())
        .unwrap();
    m.assert();
}

#[test]
fn invalid_json_from_the_server_is_a_protocol_error() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/tools/x")
        .with_body("<html>oops</html>")
        .create();
    let err = HttpTools::new(&server.url())
        .call("x", &Map::new(), soon())
        .unwrap_err();
    assert!(
        err.to_string()
            .contains("invalid JSON from the tool server"),
        "{err}"
    );
}

#[test]
fn plain_json_bodies_are_content() {
    let mut server = mockito::Server::new();
    server
        .mock("POST", "/tools/x")
        .with_body(r#"{"temp": 3}"#)
        .create();
    let r = HttpTools::new(&server.url())
        .call("x", &Map::new(), soon())
        .unwrap();
    assert_eq!(r, ToolResult::ok(json!({"temp": 3})));
}

#[test]
fn a_50_mb_body_is_capped_not_loaded_whole() {
    let big = format!(r#"{{"ok":true,"content":"{}"}}"#, "x".repeat(50 << 20));
    let mut server = mockito::Server::new();
    server.mock("POST", "/tools/x").with_body(big).create();
    let r = HttpTools::new(&server.url())
        .call("x", &Map::new(), soon())
        .unwrap();
    assert!(r.ok);
    let text = r.content.as_str().unwrap();
    assert!(text.len() < (1 << 20) + 100, "{}", text.len());
    assert!(
        text.ends_with("[result cut at 1048576 bytes by the client]"),
        "{}",
        &text[text.len() - 80..]
    );
}

#[test]
fn a_hanging_server_is_cut_by_the_deadline() {
    let fake = serve(vec![Act::Hang]);
    let started = Instant::now();
    let err = HttpTools::new(&fake.url)
        .call(
            "x",
            &Map::new(),
            Deadline::after(Duration::from_millis(600)),
        )
        .unwrap_err();
    assert!(matches!(err, ToolError::Timeout { .. }), "{err}");
    assert!(
        started.elapsed() < Duration::from_millis(1100),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn a_malformed_tool_list_says_what_was_expected() {
    let mut server = mockito::Server::new();
    server
        .mock("GET", "/tools")
        .with_body(r#"[{"name": "x"}]"#)
        .create();
    let err = HttpTools::new(&server.url()).list(soon()).unwrap_err();
    assert!(
        err.to_string().contains("expected {\"tools\": [...]}"),
        "{err}"
    );
}

#[test]
fn the_server_refuses_bodies_that_are_not_objects_or_too_large() {
    let server = builtin_server();
    let agent = ureq::Agent::new_with_defaults();
    let url = format!("{}/tools/calculator", server.url());
    let resp = agent
        .post(&url)
        .config()
        .http_status_as_error(false)
        .build()
        .send("[1,2]")
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    // The server answers 413 from the declared length without reading the body, and
    // closes: a client still sending may see the close before the answer.
    match agent
        .post(&url)
        .config()
        .http_status_as_error(false)
        .build()
        .send(vec![b' '; (1 << 20) + 10])
    {
        Ok(resp) => assert_eq!(resp.status().as_u16(), 413),
        Err(e) => assert!(matches!(e, ureq::Error::Io(_)), "{e}"),
    }
}

#[test]
fn a_body_nested_too_deep_is_called_invalid_json_and_a_405_names_the_allowed_method() {
    let server = builtin_server();
    let agent = ureq::Agent::new_with_defaults();
    let url = format!("{}/tools/calculator", server.url());
    let deep = format!("{}{}", "[".repeat(1000), "]".repeat(1000));
    let mut resp = agent
        .post(&url)
        .config()
        .http_status_as_error(false)
        .build()
        .send(deep)
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    let body = resp.body_mut().read_to_string().unwrap();
    assert!(
        body.contains("not valid JSON") && body.contains("recursion"),
        "{body}"
    );
    for (path, allowed) in [
        ("/health", "GET"),
        ("/tools", "GET"),
        ("/tools/calculator", "POST"),
    ] {
        let resp = agent
            .delete(format!("{}{path}", server.url()))
            .config()
            .http_status_as_error(false)
            .build()
            .call()
            .unwrap();
        assert_eq!(resp.status().as_u16(), 405, "{path}");
        assert_eq!(resp.headers().get("allow").unwrap(), allowed, "{path}");
    }
}

#[test]
fn the_contract_file_names_the_three_endpoints() {
    let spec: Value =
        serde_json::from_str(include_str!("../schemas/tool_api.openapi.json")).unwrap();
    for path in ["/health", "/tools", "/tools/{name}"] {
        assert!(spec["paths"][path].is_object(), "{path} missing");
    }
    for status in ["200", "400", "404"] {
        assert!(spec["paths"]["/tools/{name}"]["post"]["responses"][status].is_object());
    }
}

#[test]
fn a_dropped_server_stops_listening() {
    let server = builtin_server();
    let addr = server.url().trim_start_matches("http://").to_string();
    drop(server);
    std::thread::sleep(Duration::from_millis(100));
    let err = HttpTools::new(&format!("http://{addr}"))
        .with_timeout(Duration::from_secs(2))
        .list(soon())
        .unwrap_err();
    assert!(matches!(err, ToolError::Unreachable { .. }), "{err}");
}
