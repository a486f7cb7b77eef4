//! Decoding a streamed answer: a 4,000-character answer arriving one token (about four
//! characters) at a time, against the same answer in one piece. If the decoding were not
//! incremental (re-reading everything so far at each piece) the first would cost about
//! a thousand times the second; it costs about the same.

use criterion::{Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use toolloop::turn::answer_stream::AnswerStream;

fn reply() -> String {
    let answer: String = "The weather in Tokyo is sunny, 18 \u{b0}C; \"light\" wind.\n"
        .repeat(80)
        .chars()
        .take(4000)
        .collect();
    serde_json::json!({"kind": "final_answer", "thought": "", "content": answer}).to_string()
}

fn bench(c: &mut Criterion) {
    let text = reply();
    let mut tokens = Vec::new();
    let mut rest = text.as_str();
    while !rest.is_empty() {
        let mut cut = rest.len().min(4);
        while !rest.is_char_boundary(cut) {
            cut += 1;
        }
        tokens.push(&rest[..cut]);
        rest = &rest[cut..];
    }
    c.bench_function("answer_stream/4000 chars, one token at a time", |b| {
        b.iter(|| {
            let mut s = AnswerStream::default();
            let mut n = 0;
            for t in &tokens {
                n += s.feed(black_box(t)).len();
            }
            n
        })
    });
    c.bench_function("answer_stream/4000 chars, in one piece", |b| {
        b.iter(|| AnswerStream::default().feed(black_box(&text)).len())
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
