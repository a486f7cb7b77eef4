//! `cut-number`: a call whose number has as many digits before its point as the server's
//! grammar allows, and which the person never said, is not run: the model is asked for
//! its answer instead.
//!
//! llama.cpp turns a JSON schema into a grammar whose numbers have at most 16 digits
//! before the point (`integral-part ::= [0] | [1-9] [0-9]{0,15}` in
//! `common/json-schema-to-grammar.cpp`; Ollama's `format` goes through the same code). A
//! model that keeps writing zeros is stopped there by the grammar, not by itself, and the
//! number it is left with is the grammar's length, not a value anybody meant: Gemma 3 270M
//! wrote `amount: 1000000000000000` for "Can you convert 250 euros to pounds?" and for
//! requests that needed no tool at all, `seats: 1200000000000000` for a taxi, `minutes:
//! 1000000000000000` for a reminder. That is evidence from the schema's own grammar, not
//! from words: the value is where the grammar ran out. A person who writes the number
//! makes it theirs (a card number said in full), and the call goes ahead.
//!
//! A turn whose every call carries such a number is declined, and the model is asked for
//! its answer, as for a copy of the prompt's example: asked again with the same tools,
//! the same model wrote the same zeros. A call that carries one beside calls that do not
//! is held while the others run, and the model is told why.

use serde_json::{Map, Value};

use super::{
    CallUnderCheck, Check, CheckInfo, Effect, Evidence, Finding, Judgement, Reads, TurnContext,
};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "cut-number",
    default_on: true,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::Declines,
    what: "declines a call, or holds it beside others, whose number ran to the 16 digits before the point that the server's grammar allows, where the person never said it",
    why: "a very small model keeps writing zeros until llama.cpp's grammar stops it, and the number it is left with is nobody's",
    example: "\"Dobrý den, jak se máš?\": convert_currency(amount: 1000000000000000, …) has the grammar's 16 digits and nobody said them: declined, and the model answers",
    safety: "It acts only on a number of exactly the grammar's most digits before the point that the person's words do not hold; it never changes a call. A right call carries the person's numbers, so it passes (`src/eval/invariant.rs`).",
};

/// The most digits llama.cpp's grammar lets a JSON number have before its point.
pub const GRAMMAR_DIGITS: usize = 16;

/// The `cut-number` check.
#[derive(Debug)]
pub struct CutNumber;

impl Check for CutNumber {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
        judgement: &mut Judgement,
    ) {
        if judgement.declined || calls.is_empty() {
            return;
        }
        let why: Option<Vec<String>> = calls
            .iter()
            .map(|(tool, arguments)| {
                let (name, n) = cut(arguments, ctx.said)?;
                Some(format!(
                    "{tool}'s {name} {n} has the {GRAMMAR_DIGITS} digits the grammar allows"
                ))
            })
            .collect();
        if let Some(why) = why {
            let reason = format!("{}, which the request never says", why.join("; "));
            judgement.decline_on_record(INFO.name, reason);
        }
    }

    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let (name, n) = cut(call.arguments, ctx.said)?;
        let why = format!(
            "{name} {n} has the {GRAMMAR_DIGITS} digits the grammar allows, which the request never says"
        );
        let told = format!(
            "not run: {name} {n} is no number anybody gave. Call {} again with the number the person said, if they said one.",
            call.spec.name
        );
        findings.push(Finding::hold(INFO.name, call, vec![name], why, told));
        None
    }
}

/// The first argument (its top-level name) holding, at any depth, a number cut by the
/// grammar that the person never said, with that number as written.
fn cut(arguments: &Map<String, Value>, said: &Evidence) -> Option<(String, String)> {
    arguments
        .iter()
        .find_map(|(name, v)| cut_in(v, said).map(|n| (name.clone(), n)))
}

fn cut_in(v: &Value, said: &Evidence) -> Option<String> {
    match v {
        Value::Number(n) => (at_the_limit(n) && !said.grounds(v)).then(|| n.to_string()),
        Value::Array(items) => items.iter().find_map(|i| cut_in(i, said)),
        Value::Object(map) => map.values().find_map(|i| cut_in(i, said)),
        _ => None,
    }
}

/// Whether the number has exactly the grammar's most digits before its point.
fn at_the_limit(n: &serde_json::Number) -> bool {
    let digits = |whole: u64| whole.checked_ilog10().map_or(1, |l| l as usize + 1);
    if let Some(u) = n.as_u64() {
        digits(u) == GRAMMAR_DIGITS
    } else if let Some(i) = n.as_i64() {
        digits(i.unsigned_abs()) == GRAMMAR_DIGITS
    } else {
        // A fraction: its whole part, which at these sizes an f64 holds exactly.
        n.as_f64()
            .map(f64::abs)
            .is_some_and(|f| (1e15..1e16).contains(&f.trunc()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn a_number_of_the_grammars_sixteen_digits_nobody_said_is_cut() {
        let said = Evidence::of(["Dobrý den, jak se máš?"]);
        let cut = |v| super::cut(&args(v), &said);
        assert_eq!(
            cut(json!({"amount": 1000000000000000u64, "from_currency": "USD"})),
            Some(("amount".into(), "1000000000000000".into()))
        );
        assert_eq!(
            cut(json!({"seats": -1200000000000000i64})).map(|c| c.0),
            Some("seats".into())
        );
        assert_eq!(
            cut(json!({"items": [{"qty": 1000000000000000.5}]})).map(|c| c.0),
            Some("items".into())
        );
    }

    #[test]
    fn fewer_digits_or_a_number_the_person_said_stand() {
        let said = Evidence::of(["Charge card 4111111111111111 for 250 euros"]);
        let cut = |v| super::cut(&args(v), &said);
        assert_eq!(cut(json!({"amount": 250})), None);
        assert_eq!(cut(json!({"amount": 999999999999999u64})), None);
        assert_eq!(cut(json!({"card": 4111111111111111u64})), None);
        assert_eq!(cut(json!({"note": "1000000000000000"})), None);
    }
}
