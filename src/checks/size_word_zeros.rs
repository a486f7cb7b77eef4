//! `size-word-zeros`: a number said with a size word, given back the zeros the model
//! miscounted.
//!
//! "A payout of 50 million USD" came back as `500000000`, "8.5 million square kilometers"
//! as `850000000`: spelling out a size word, the model miscounts the zeros. A number
//! nobody said that differs from one said with a size word ("million", "bn", "$1.2M")
//! only by a power of ten (10 to 1000) is that number. "100 m" (metres) is not a size
//! word.

use serde_json::json;

use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "size-word-zeros",
    default_on: false,
    effect: Effect::Rewrites,
    what: "gives a number said with a size word (million, bn) back its miscounted zeros",
    why: "spelling out \"50 million\", small models write 500000000",
    example: "\"a payout of 50 million\" with `amount: 500000000` becomes `amount: 50000000`",
    safety: "Unsafe: the evidence is the person's words; a value the schema accepts is rewritten. Off by default.",
    measured: "Invariant: breaks no right call. Qwen 0.5B, validation halves, on against off: unchanged (everyday and BFCL).",
};

/// The `size-word-zeros` check.
#[derive(Debug)]
pub struct SizeWordZeros;

impl Check for SizeWordZeros {
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
            .filter(|(name, v)| {
                v.is_number() && !call.constrained(name) && !call.rewritten.contains(*name)
            })
            .filter_map(|(name, v)| Some((name.clone(), ctx.said.miscounted(v.as_f64()?)?)))
            .collect();
        for (name, m) in rewrites {
            let whole = m.fract() == 0.0 && m.abs() < 9e15;
            let to = if whole { json!(m as i64) } else { json!(m) };
            let why = "the person said it in words; the zeros were miscounted".to_string();
            call.rewrite(INFO.name, &name, to, why, findings);
        }
        None
    }
}
