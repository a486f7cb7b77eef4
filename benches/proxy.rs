//! The proxy's own work per request: a request with tools through `toolloop proxy`
//! against a scripted upstream that answers at once, beside the same request sent to the
//! upstream directly. The difference is what the proxy adds (reading the client's body,
//! the run's schema and checks, the reply in the client's shape).
//!
//! `cargo bench --bench proxy`

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;

/// A llama-server stand-in on 127.0.0.1 that answers every request with one call, at once,
/// over keep-alive connections.
fn upstream() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let content =
        r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Oslo"}}"#;
    let chunk =
        json!({"choices": [{"index": 0, "delta": {"content": content}, "finish_reason": null}]});
    let last = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
    let body = format!("data: {chunk}\n\ndata: {last}\n\ndata: [DONE]\n\n");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let body = body.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                let mut stream = stream;
                let _ = stream.set_nodelay(true);
                loop {
                    let mut length = 0usize;
                    loop {
                        let mut line = String::new();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 {
                            return;
                        }
                        if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if line == "\r\n" {
                            break;
                        }
                    }
                    let mut skip = vec![0; length];
                    if reader.read_exact(&mut skip).is_err() {
                        return;
                    }
                    let head = format!(
                        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nContent-Length: {}\r\n\r\n",
                        body.len()
                    );
                    if stream.write_all(head.as_bytes()).is_err()
                        || stream.write_all(body.as_bytes()).is_err()
                    {
                        return;
                    }
                }
            });
        }
    });
    url
}

fn request() -> String {
    json!({
        "model": "m",
        "messages": [{"role": "user", "content": "What is the weather in Oslo?"}],
        "tools": [{"type": "function", "function": {"name": "get_weather",
            "description": "Current weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}],
    })
    .to_string()
}

fn bench(c: &mut Criterion) {
    let up = upstream();
    let config = toolloop::Config {
        backend: toolloop::BackendKind::OpenAi,
        base_url: format!("{up}/v1"),
        model: "m".into(),
        calibration: None,
        leanings: None,
        ..toolloop::Config::default()
    };
    let settings = toolloop::serve::ProxySettings {
        config,
        api_key: None,
    };
    let proxy = toolloop::serve::start_proxy(settings, "127.0.0.1:0").unwrap();
    let agent: ureq::Agent = ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(10)))
        .http_status_as_error(false)
        .build()
        .into();
    let body = request();
    let direct = format!("{up}/v1/chat/completions");
    let through = format!("{}/v1/chat/completions", proxy.url());
    let mut g = c.benchmark_group("proxy");
    g.bench_function("upstream directly", |b| {
        b.iter(|| {
            agent
                .post(&direct)
                .header("Content-Type", "application/json")
                .send(body.as_bytes())
                .unwrap()
                .into_body()
                .read_to_string()
                .unwrap()
        })
    });
    g.bench_function("through the proxy, with tools", |b| {
        b.iter(|| {
            let text = agent
                .post(&through)
                .header("Content-Type", "application/json")
                .send(body.as_bytes())
                .unwrap()
                .into_body()
                .read_to_string()
                .unwrap();
            assert!(text.contains("tool_calls"), "{text}");
            text
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
