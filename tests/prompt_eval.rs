//! A small fixed case set for measuring prompt changes against a real model (ignored:
//! needs llama-server, see `tests/real_model.rs`). Prints, for each case, the tools the
//! model used and its answer, and the count of cases that went the expected way.

use std::time::Duration;

use toolloop::Deadline;
use toolloop::Orchestrator;
use toolloop::backend::OpenAi;
use toolloop::tools::Catalogue;
use toolloop::tools::{Builtin, BuiltinConfig};

#[test]
#[ignore = "needs a llama-server"]
fn prompt_case_set() {
    let url = std::env::var("TOOLLOOP_LLAMA_URL").expect("TOOLLOOP_LLAMA_URL");
    // (question, the tool it needs, words one of which a right answer holds)
    let cases: [(&str, Option<&str>, &[&str]); 8] = [
        ("How much is 123.5 * 48?", Some("calculator"), &["5928"]),
        (
            "What is 17 to the power of 5?",
            Some("calculator"),
            &["1419857"],
        ),
        (
            "What is the weather in Paris right now?",
            Some("get_weather"),
            &["rain", "11"],
        ),
        (
            "Is it cold in Oslo today?",
            Some("get_weather"),
            &["-3", "snow", "cold"],
        ),
        (
            "What time is it in Tokyo (UTC+09:00)?",
            Some("current_time"),
            &["+09:00", ":"],
        ),
        (
            "Write a haiku about the sea.",
            None,
            &["sea", "wave", "ocean"],
        ),
        ("What is the capital of France?", None, &["paris"]),
        ("Translate 'good morning' into Spanish.", None, &["buenos"]),
    ];
    let mut right = 0;
    let mut answered = 0;
    for (q, want, words) in cases {
        let builtin = Builtin::new(&BuiltinConfig {
            demo: true,
            ..Default::default()
        })
        .unwrap();
        let tools = Catalogue::load(vec![Box::new(builtin)], Deadline::none()).unwrap();
        let mut o = Orchestrator::builder()
            .backend(OpenAi::new(&url, "m", None))
            .catalogue(tools)
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap();
        let out = o.run(q).unwrap();
        let used: Vec<String> = out.steps.iter().filter_map(|s| s.tool.clone()).collect();
        let ok = used.first().map(String::as_str) == want;
        right += ok as u32;
        let text = out.answer().unwrap_or_default().to_lowercase();
        let good = words.iter().any(|w| text.contains(w));
        answered += good as u32;
        eprintln!(
            "{}{} {q} -> tools {used:?}; answer {:?}",
            if ok { "OK " } else { "BAD" },
            if good { "+" } else { "-" },
            out.answer()
        );
    }
    eprintln!("tool choice right in {right} of 8; answer right in {answered} of 8");
}
