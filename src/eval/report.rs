//! What an eval reports: figures per category, the text table, the JSON report, and the
//! cases a `--category` and `--limit` select.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Case, CaseResult};

/// Per-category figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The category.
    pub category: String,
    /// Cases run.
    pub cases: usize,
    /// Cases passed.
    pub passed: usize,
    /// passed / cases.
    pub accuracy: f64,
    /// Rejected replies / all replies.
    pub invalid_turn_rate: f64,
    /// Mean model turns per case.
    pub mean_iterations: f64,
    /// Mean milliseconds per case.
    pub mean_ms: f64,
    /// Mean generated tokens per case.
    #[serde(default)]
    pub mean_tokens: f64,
    /// Passed and run in the tuning half (cases with an even number, [`half`]).
    #[serde(default)]
    pub tuning: (usize, usize),
    /// Passed and run in the validation half (odd numbers): the figures that decide.
    #[serde(default)]
    pub validation: (usize, usize),
}

/// Which half of a data set a case is in, by a rule fixed before any result was seen:
/// the number that ends its id (`simple_python_12`), even for tuning, odd for validation.
/// Rules are tuned on the first and kept or dropped by the second.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "cli", derive(clap::ValueEnum))]
pub enum Half {
    /// Even case numbers.
    Tuning,
    /// Odd case numbers.
    Validation,
}

/// The half `id` is in (an id without a number is in the tuning half).
pub fn half(id: &str) -> Half {
    let n: u64 = id
        .rsplit('_')
        .next()
        .and_then(|d| d.parse().ok())
        .unwrap_or(0);
    if n.is_multiple_of(2) {
        Half::Tuning
    } else {
        Half::Validation
    }
}

/// Sums results up by category (sorted), plus an `all` row.
pub fn summarize(results: &[CaseResult]) -> Vec<Summary> {
    let mut cats: Vec<String> = results.iter().map(|r| r.category.clone()).collect();
    cats.sort();
    cats.dedup();
    cats.push("all".to_string());
    cats.into_iter()
        .map(|c| {
            let rs: Vec<&CaseResult> = results
                .iter()
                .filter(|r| c == "all" || r.category == c)
                .collect();
            let n = rs.len().max(1) as f64;
            let replies: u32 = rs.iter().map(|r| r.replies).sum();
            let invalid: u32 = rs.iter().map(|r| r.invalid_turns).sum();
            let passed = rs.iter().filter(|r| r.pass).count();
            let in_half = |h: Half| {
                let of: Vec<_> = rs.iter().filter(|r| half(&r.id) == h).collect();
                (of.iter().filter(|r| r.pass).count(), of.len())
            };
            Summary {
                tuning: in_half(Half::Tuning),
                validation: in_half(Half::Validation),
                category: c,
                cases: rs.len(),
                passed,
                accuracy: passed as f64 / n,
                invalid_turn_rate: if replies == 0 {
                    0.0
                } else {
                    invalid as f64 / replies as f64
                },
                mean_iterations: rs.iter().map(|r| r.iterations as f64).sum::<f64>() / n,
                mean_ms: rs.iter().map(|r| r.ms as f64).sum::<f64>() / n,
                mean_tokens: rs.iter().map(|r| r.tokens as f64).sum::<f64>() / n,
            }
        })
        .collect()
}

/// The cases to run: only `category` when given (an error when it has none), and at most
/// `limit` cases of each category, spread evenly over its file.
pub fn select(
    mut cases: Vec<Case>,
    category: Option<&str>,
    limit: Option<usize>,
) -> Result<Vec<Case>, String> {
    if let Some(cat) = category {
        cases.retain(|c| c.category == cat);
        if cases.is_empty() {
            return Err(format!("no case of category {cat}"));
        }
    }
    if let Some(n) = limit {
        // Evenly spread over each category's file, not its first n: BFCL files are
        // ordered by topic, so the first cases are not a sample of the rest. Each half
        // gets its share (the tuning half the odd one), so both are reported: a spread
        // over the whole file with an even step would take one half only.
        let group = |c: &Case| (c.category.clone(), half(&c.id));
        let mut total = std::collections::HashMap::<(String, Half), usize>::new();
        for c in &cases {
            *total.entry(group(c)).or_default() += 1;
        }
        let mut seen = std::collections::HashMap::<(String, Half), usize>::new();
        cases.retain(|c| {
            let g = group(c);
            let i = seen.entry(g.clone()).or_default();
            let t = total[&g];
            let share = match g.1 {
                Half::Tuning => n.div_ceil(2),
                Half::Validation => n / 2,
            };
            let m = share.min(t);
            // Case i is kept when it is the k-th pick, k*t/m, for some k below m.
            let keep = (0..m).any(|k| k * t / m == *i);
            *i += 1;
            keep
        });
    }
    Ok(cases)
}

/// The summary as the text table `toolloop eval` prints.
pub fn table(summary: &[Summary]) -> String {
    let mut out = format!(
        "{:<22} {:>6} {:>9} {:>9} {:>10} {:>13} {:>10} {:>9} {:>11}\n",
        "category",
        "cases",
        "accuracy",
        "tuning",
        "validation",
        "invalid turns",
        "iterations",
        "s/case",
        "tokens/case"
    );
    let share = |(passed, of): (usize, usize)| {
        if of == 0 {
            "-".to_string()
        } else {
            format!("{:.1}%", 100.0 * passed as f64 / of as f64)
        }
    };
    for s in summary {
        out.push_str(&format!(
            "{:<22} {:>6} {:>8.1}% {:>9} {:>10} {:>12.1}% {:>10.2} {:>9.2} {:>11.1}\n",
            s.category,
            s.cases,
            s.accuracy * 100.0,
            share(s.tuning),
            share(s.validation),
            s.invalid_turn_rate * 100.0,
            s.mean_iterations,
            s.mean_ms / 1000.0,
            s.mean_tokens
        ));
    }
    out
}

/// The report as JSON: the summary rows and every case.
pub fn report_json(results: &[CaseResult]) -> Value {
    json!({"summary": summarize(results), "cases": results})
}
