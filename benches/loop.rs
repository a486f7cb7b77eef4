//! Loop overhead: the time toolloop itself spends per iteration, with a model that
//! answers at once and an in-process tool, so model and tool time are ~zero. One run is
//! two iterations (a tool call, then the answer).
//!
//! `cargo bench --bench loop`

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toolloop::Deadline;
use toolloop::Orchestrator;
use toolloop::backend::{
    Backend, BackendError, ChatReply, ChatRequest, StopReason, TextSink, Timings, Usage,
};
use toolloop::tools::FnTools;
use toolloop::tools::{Catalogue, ToolSpec};

/// Alternates a tool call and an answer, instantly.
struct Instant {
    n: u64,
}

impl Backend for Instant {
    fn describe(&self) -> String {
        "instant".into()
    }
    fn chat(
        &mut self,
        _: &ChatRequest<'_>,
        _: Deadline,
        sink: TextSink<'_>,
    ) -> Result<ChatReply, BackendError> {
        self.n += 1;
        let text = if self.n % 2 == 1 {
            r#"{"kind":"tool_call","thought":"look it up","tool":"order_status","arguments":{"id":7}}"#
        } else {
            r#"{"kind":"final_answer","thought":"done","content":"Order 7 has shipped."}"#
        };
        let _ = sink(text);
        Ok(ChatReply {
            text: text.to_string(),
            given: 0,
            stop: StopReason::Finished,
            usage: Usage::default(),
            timings: Timings::default(),
            logprobs: Vec::new(),
        })
    }
}

fn bench(c: &mut Criterion) {
    let mut tools = FnTools::new();
    for name in ["order_status", "refund", "track", "cancel", "address"] {
        tools.add(
            ToolSpec::new(
                name,
                "Order tools",
                json!({"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]}),
            )
            // Reads only: the bench measures the loop, not a wait for approval.
            .reading_only(),
            |a| Ok(json!({"id": a["id"], "status": "shipped"})),
        );
    }
    let catalogue = Catalogue::load(vec![Box::new(tools)], Deadline::none()).unwrap();
    let mut o = Orchestrator::builder()
        .backend(Instant { n: 0 })
        .catalogue(catalogue)
        .build()
        .unwrap();
    c.bench_function("loop/run_of_two_iterations", |b| {
        b.iter(|| {
            let out = o.run(black_box("Where is order 7?")).unwrap();
            assert_eq!(out.iterations, 2);
            out
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
