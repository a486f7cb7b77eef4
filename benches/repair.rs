//! Repair throughput on large broken inputs: a truncated valid document and a document
//! with single quotes and trailing commas, at 1 MB and 16 MB, so that linear growth shows.
//!
//! `cargo bench --bench repair`

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};

/// A valid JSON document of about `size` bytes, cut in the middle of a string.
pub fn truncated(size: usize) -> String {
    let mut s = String::from("{\"results\": [");
    let mut i = 0;
    while s.len() < size + 200 {
        s.push_str(&format!(
            "{{\"id\": {i}, \"name\": \"item \\\"{i}\\\"\", \"score\": {}.5, \"ok\": true, \
             \"tags\": [\"a\", \"b\"], \"note\": \"caf\\u00e9 line\\nnext\"}}, ",
            i % 97
        ));
        i += 1;
    }
    let mut cut = size;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    s.truncate(cut);
    s
}

/// About `size` bytes of single-quoted objects, each with trailing commas.
pub fn single_quoted(size: usize) -> String {
    let mut s = String::from("{'items': [");
    let mut i = 0;
    while s.len() < size {
        s.push_str(&format!(
            "{{'id': {i}, 'name': 'item {i}', 'tags': ['x', 'y',], 'ok': True,}},\n"
        ));
        i += 1;
    }
    s.push_str("],}");
    s
}

fn bench(c: &mut Criterion) {
    let mut group = c.benchmark_group("repair");
    group.sample_size(10);
    for (name, make) in [
        ("truncated", truncated as fn(usize) -> String),
        ("single_quotes_trailing_commas", single_quoted),
    ] {
        for mb in [1usize, 16] {
            let input = make(mb << 20);
            group.throughput(Throughput::Bytes(input.len() as u64));
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/to_string"), format!("{mb}MB")),
                &input,
                |b, input| b.iter(|| toolloop::turn::repair::repair_to_string(black_box(input))),
            );
            group.bench_with_input(
                BenchmarkId::new(format!("{name}/to_value"), format!("{mb}MB")),
                &input,
                |b, input| b.iter(|| toolloop::turn::repair::repair(black_box(input))),
            );
        }
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
