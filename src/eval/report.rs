//! What an eval reports: figures per category, the text table, the JSON report, and the
//! cases a `--category` and `--limit` select.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{Case, CaseResult};
use crate::run::budget::Budget;

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
    /// Where the category's tokens and seconds went, summed over its cases.
    #[serde(default)]
    pub budget: Budget,
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
            let mut budget = Budget::default();
            rs.iter().for_each(|r| budget.add(&r.budget));
            Summary {
                budget,
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
        let mut have: Vec<String> = cases.iter().map(|c| c.category.clone()).collect();
        have.sort();
        have.dedup();
        cases.retain(|c| c.category == cat);
        if cases.is_empty() {
            return Err(format!(
                "no case of category {cat}; the data has {}",
                have.join(", ")
            ));
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
    out.push_str(
        "accuracy: cases whose calls BFCL's checker passes; tuning / validation: the same on \
         even / odd case numbers; invalid turns: replies rejected / replies; iterations: \
         model turns; tokens: generated.\n",
    );
    out.push('\n');
    out.push_str(&budget_table(summary));
    out
}

/// Where each category's time went, per case: the second table `toolloop eval` prints.
pub fn budget_table(summary: &[Summary]) -> String {
    let mut out = format!(
        "{:<22} {:>8} {:>9} {:>7} {:>8} {:>10} {:>7} {:>10} {:>4} {:>8} {:>8} {:>8} {:>9} {:>11}\n",
        "per case",
        "requests",
        "evaluated",
        "reused",
        "thought",
        "arguments",
        "answer",
        "structure",
        "fit",
        "model s",
        "aside s",
        "tools s",
        "toolloop s",
        "1st call s"
    );
    for s in summary {
        let n = s.cases.max(1) as f64;
        let b = &s.budget;
        let g = &b.generated;
        let per = |x: u64| x as f64 / n;
        out.push_str(&format!(
            "{:<22} {:>8.2} {:>9.0} {:>7} {:>8.1} {:>10.1} {:>7.1} {:>10.1} {:>4.1} {:>8.2} {:>8.2} {:>8.2} {:>9.3} {:>11}\n",
            s.category,
            per(b.model_requests.into()),
            per(b.prompt_evaluated),
            b.prompt_reused
                .map_or("-".to_string(), |r| format!("{:.0}", per(r))),
            per(g.thought),
            per(g.arguments),
            per(g.answer),
            per(g.structure),
            per(g.fit),
            per(b.model_ms) / 1000.0,
            per(b.aside_ms) / 1000.0,
            per(b.tool_ms) / 1000.0,
            per(b.own_ms) / 1000.0,
            b.first_call_s()
                .map_or("-".to_string(), |s| format!("{s:.2}")),
        ));
    }
    out.push_str(
        "requests: to the model (turns, re-asks, fit questions); evaluated / reused: prompt \
         tokens the server computed / took from its cache; thought … fit: generated tokens by \
         what they were spent on; model / tools / toolloop: seconds waiting for each (aside: the \
         part of the model's spent on the fit questions); 1st call: \
         seconds from a case's start to its first call sent off, over the cases that made one.\n",
    );
    out
}

/// The report as JSON: the summary rows and every case.
pub fn report_json(results: &[CaseResult]) -> Value {
    json!({"summary": summarize(results), "cases": results})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::budget::Generated;

    #[test]
    fn the_budget_table_gives_each_category_per_case() {
        let case = |id: &str, requests: u32, thought: u64, model_ms: u64| CaseResult {
            id: id.into(),
            category: "parallel".into(),
            budget: Budget {
                model_requests: requests,
                prompt_evaluated: 400,
                prompt_reused: Some(100),
                generated: Generated {
                    thought,
                    ..Generated::default()
                },
                model_ms,
                aside_ms: model_ms / 4,
                ..Budget::default()
            },
            ..CaseResult::default()
        };
        let summary = summarize(&[
            case("parallel_0", 1, 10, 2000),
            case("parallel_1", 2, 20, 4000),
        ]);
        assert_eq!(summary[0].budget.model_requests, 3);
        let table = budget_table(&summary);
        let row = table.lines().nth(1).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        // requests, evaluated, reused, thought … model s: the means over the two cases.
        assert_eq!(
            &cols[..5],
            ["parallel", "1.50", "400", "100", "15.0"],
            "{table}"
        );
        assert_eq!(cols[9], "3.00", "{table}");
        // The part of it spent on questions aside.
        assert_eq!(cols[10], "0.75", "{table}");
        assert!(table.contains("requests: to the model"), "{table}");
        // Neither made a call: no time to a first one.
        assert_eq!(cols[13], "-", "{table}");
    }

    #[test]
    fn the_first_call_is_timed_over_the_cases_that_made_one() {
        let case = |id: &str, first_call_ms: Option<u64>| CaseResult {
            id: id.into(),
            category: "parallel".into(),
            budget: Budget {
                first_call_ms,
                first_calls: u32::from(first_call_ms.is_some()),
                ..Budget::default()
            },
            ..CaseResult::default()
        };
        let summary = summarize(&[
            case("parallel_0", Some(4000)),
            case("parallel_1", None),
            case("parallel_2", Some(6000)),
        ]);
        let table = budget_table(&summary);
        let row = table.lines().nth(1).unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[13], "5.00", "{table}");
        assert!(table.contains("1st call: seconds"), "{table}");
    }
}
