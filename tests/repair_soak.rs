//! A long randomized run of the repairer and the turn parser, outside the default suite:
//! mutated corpus inputs must never panic, must give valid JSON or a clean error, and must
//! not take long. It stands in for `cargo fuzz` where no fuzzer is installed.
//!
//! `TOOLLOOP_SOAK_ITERS=2000000 cargo test --release --test repair_soak -- --ignored`

use std::time::{Duration, Instant};

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    "\"",
    "'",
    ",",
    ":",
    "\\",
    "\\u",
    "\\ud83d",
    "//",
    "/*",
    "#",
    "\n",
    "“",
    "”",
    "True",
    "NaN",
    "-",
    "1e",
    "```json",
    "<end_of_turn>",
    "<|im_end|>",
    " ",
    "null",
    // Unicode spaces: `[` and an em space panicked the turn parser (found by cargo fuzz).
    "\u{2003}",
    "\u{a0}",
    "\u{feff}",
];

fn mutate(rng: &mut Rng, seed: &str) -> String {
    let mut s: Vec<u8> = seed.as_bytes().to_vec();
    for _ in 0..1 + rng.below(4) {
        match rng.below(4) {
            0 if !s.is_empty() => {
                let at = rng.below(s.len());
                s.truncate(at);
            }
            1 => {
                let at = rng.below(s.len() + 1);
                let piece = PIECES[rng.below(PIECES.len())].as_bytes();
                s.splice(at..at, piece.iter().copied());
            }
            2 if !s.is_empty() => {
                let at = rng.below(s.len());
                s.remove(at);
            }
            _ => {
                let at = rng.below(s.len() + 1);
                s.insert(at, (rng.next() & 0x7f) as u8);
            }
        }
    }
    String::from_utf8_lossy(&s).into_owned()
}

#[test]
#[ignore = "long-running; run with --ignored"]
fn soak_repair_and_turn_parser() {
    let iters: usize = std::env::var("TOOLLOOP_SOAK_ITERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let seeds: Vec<String> = include_str!("data/repair_corpus.jsonl")
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|c| c["input"].as_str().map(str::to_string))
        .filter(|s| s.len() < 4096)
        .collect();
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut slowest = Duration::ZERO;
    let started = Instant::now();
    for i in 0..iters {
        let input = mutate(&mut rng, &seeds[i % seeds.len()]);
        let t = Instant::now();
        if let Ok((json, _)) = toolloop::turn::repair::repair_to_string(&input) {
            assert!(
                serde_json::from_str::<serde_json::Value>(&json).is_ok(),
                "{input:?} -> {json:?}"
            );
        }
        let _ = toolloop::turn::Turn::parse(&input);
        let took = t.elapsed();
        slowest = slowest.max(took);
        assert!(took < Duration::from_millis(50), "{input:?} took {took:?}");
    }
    eprintln!(
        "soak: {iters} inputs in {:?}, slowest {:?}",
        started.elapsed(),
        slowest
    );
}
