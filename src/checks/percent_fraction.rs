//! `percent-fraction`: a percentage the person wrote, passed as the fraction a float
//! parameter takes.
//!
//! Asked for "an annual rate of 8%", the model passes `8`. A tool that takes a rate as a
//! float wants the fraction: over BFCL's right answers, a percentage the person wrote
//! goes to a float parameter as the fraction (0.08) 54 times and as written twice, unless
//! the parameter says it takes a percentage. So a number the person wrote only as a
//! percentage, passed as written to a `number` parameter whose name and description do
//! not say "percent", becomes the fraction; one that says "decimal" or "fraction" always
//! does. Integers are left alone.

use serde_json::{Value, json};

use super::{CallUnderCheck, Check, CheckInfo, Effect, Evidence, Finding, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "percent-fraction",
    default_on: false,
    effect: Effect::Rewrites,
    what: "passes a percentage the person wrote as the fraction a float parameter takes",
    why: "asked for 8%, small models pass 8 where the tool reads 0.08",
    example: "\"a rate of 8%\" with `rate: 8` (a number parameter) becomes `rate: 0.08`",
    safety: "Unsafe: the evidence is the person's words and the parameter's words; a tool that says \"e.g. 20 for 20%\" gets a wrong fraction. Off by default.",
    measured: "Invariant: breaks no right call. Qwen 0.5B, validation halves, on against off: unchanged (everyday and BFCL).",
};

/// The `percent-fraction` check.
#[derive(Debug)]
pub struct PercentFraction;

impl Check for PercentFraction {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &mut CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let rewrites: Vec<(String, f64)> = call
            .arguments
            .iter()
            .filter(|(name, _)| !call.constrained(name) && !call.rewritten.contains(*name))
            .filter_map(|(name, v)| {
                let f = fraction(name, call.param(name), v.as_f64(), ctx.said)?;
                Some((name.clone(), f))
            })
            .collect();
        for (name, f) in rewrites {
            let why = "the person wrote a percentage; the tool takes a fraction".to_string();
            call.rewrite(INFO.name, &name, json!(f), why, findings);
        }
        None
    }
}

/// The fraction for `n` when the person wrote it only as a percentage and the parameter
/// takes a fraction (see the module docs).
pub(crate) fn fraction(name: &str, param: &Value, n: Option<f64>, said: &Evidence) -> Option<f64> {
    let n = n.filter(|n| *n != 0.0 && said.said_only_as_percent(*n))?;
    let types = match &param["type"] {
        Value::String(t) => vec![t.as_str()],
        Value::Array(ts) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    if !types.contains(&"number") || types.contains(&"integer") {
        return None;
    }
    let text = format!(
        "{name} {}",
        param["description"].as_str().unwrap_or_default()
    )
    .to_lowercase();
    let says_fraction = text.contains("decimal") || text.contains("fraction");
    (says_fraction || !text.contains("percent")).then_some(n / 100.0)
}
