//! `numbers-left`: a first turn of one call, written in the single-call form, that
//! carries some of the numbers the person wrote but leaves others out is asked again,
//! held to one call more.
//!
//! Asked for the same thing on several inputs ("the price of gold, silver and platinum",
//! "seasons 2017, 2018 and 2019", "radii of 5, 10 and 15 cm"), Qwen2.5-Coder 0.5B often
//! chooses the single-call form, giving the list form no probability at all, and makes
//! the call for the first input only. `more-calls` cannot see those turns: there is no
//! list whose close it could read. What can be seen is the request's numbers against the
//! call's: a call that took some numbers from the request and left others out has not
//! used all the person gave.
//!
//! The rule was fixed before any run and has no threshold to tune. A right first call
//! often leaves a number of its request out (a unit, a count of things, the other inputs
//! of a parallel request), so asking again must keep such a call as it was: the model
//! continues after it, and it stands as written.
//!
//! What the asking adds is held to that evidence: a call the asking added that carries
//! none of the numbers the first call left out is not run (the model is told so with the
//! other results), so a right single call asked again keeps its one call unless the
//! model puts a left number to use.

use serde_json::{Map, Value};

use super::grounding::Evidence;
use super::numbers;
use super::{CallUnderCheck, Check, CheckInfo, Effect, Finding, Judgement, Reads, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "numbers-left",
    default_on: true,
    off_for: &["gemma"],
    reads: Reads::Call,
    effect: Effect::AsksForMore,
    what: "asks again for one call more when a single call used some of the request's numbers and left others out",
    why: "asked for one thing on several inputs, a small model often makes the call for the first input only, in the single-call form, where no probability shows a second",
    example: "\"seasons 2017, 2018 and 2019\" answered with one call for 2017: asked again for at least two; a call added that carries none of 2018 or 2019 is not run",
    safety: "It never changes a call: the call made stays in the history with the request after it again, and the model writes at least one call more (on llama-server after the call it made, which stands as written; elsewhere writing it again), and a call the asking added that uses none of the numbers left out is not run. Only a first turn of one call in the single-call form, with the model's probabilities read, is asked again, once. Its risk is a number that is not an input (\"m/s^2\", \"type 2 diabetes\"): asked again, the model may use it in a second call. Off by default for Gemma models: Gemma 3 270M, with it and numbers-left off, made as many right calls on the validation halves of BFCL parallel, parallel_multiple and everyday, in half the seconds on the BFCL sets.",
};

/// The numbers `question` writes with digits that none of `calls` carries, when the
/// calls carry at least one of them; else none. A number counts as carried when a value
/// holds it as written or at its scale ("5%" as 0.05, "2k" as 2000).
pub(crate) fn left(question: &str, calls: &[(String, Map<String, Value>)]) -> Vec<f64> {
    let carried = carried(calls.iter().map(|(_, a)| a));
    let mut used = false;
    let mut out: Vec<f64> = Vec::new();
    for w in numbers::written(question) {
        // Every reading of the number at its scale, as `Evidence` reads it.
        let scaled = Evidence::of([w.text.as_str()]);
        if scaled.any_number(|s| carried.has_number(s)) {
            used = true;
        } else if !out.contains(&w.readings[0]) {
            out.push(w.readings[0]);
        }
    }
    if used { out } else { Vec::new() }
}

/// The numbers the values of these arguments carry, read as the person's are.
fn carried<'a>(arguments: impl IntoIterator<Item = &'a Map<String, Value>>) -> Evidence {
    let mut values = Vec::new();
    for v in arguments.into_iter().flat_map(Map::values) {
        texts(v, &mut values);
    }
    Evidence::of(values.iter().map(String::as_str))
}

/// The texts of a value's leaves: numbers as written, strings whole.
fn texts(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Number(n) => out.push(n.to_string()),
        Value::String(s) => out.push(s.clone()),
        Value::Array(a) => a.iter().for_each(|x| texts(x, out)),
        Value::Object(o) => o.values().for_each(|x| texts(x, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The `numbers-left` check.
#[derive(Debug)]
pub struct NumbersLeft;

impl Check for NumbersLeft {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_turn(&self, ctx: &TurnContext<'_>, _tool: &str, judgement: &mut Judgement) {
        // The single-call form only (no list close to read), with the model's
        // probabilities read: a list is `more-calls`' to judge.
        let single = super::tool_probability::more_share(ctx.reply).is_none()
            && super::tool_probability::tool_share(ctx.reply).is_some();
        if single
            && !ctx.left.is_empty()
            && !ctx.again
            && !judgement.declined
            && judgement.instead.is_empty()
        {
            judgement.more = true;
            judgement.more_by = Some(INFO.name);
            judgement.more_left = ctx.left.to_vec();
        }
    }

    /// Holds a call the asking added that uses none of the numbers left out.
    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let from = ctx.added_from?;
        if call.index < from || ctx.left.is_empty() {
            return None;
        }
        let carried = carried([call.arguments]);
        if !ctx.left.iter().any(|&n| carried.has_number(n)) {
            let tool = &call.spec.name;
            let left: Vec<String> = ctx.left.iter().map(|n| n.to_string()).collect();
            let numbers = left.join(", ");
            let why = format!("it uses none of {numbers} that the calls before left out");
            let told = format!(
                "not run: this {tool} call uses none of {numbers} from the request, which the \
                 calls before left out."
            );
            findings.push(Finding::hold(INFO.name, call, left, why, told));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call(arguments: Value) -> Vec<(String, Map<String, Value>)> {
        vec![("t".into(), arguments.as_object().unwrap().clone())]
    }

    #[test]
    fn the_numbers_a_call_left_out_are_those_it_did_not_carry() {
        let q = "Check if player 3142 was top scorer in seasons 2017, 2018 and 2019.";
        let c = call(json!({"player_id": 3142, "season": 2017}));
        assert_eq!(left(q, &c), [2018.0, 2019.0]);
        // Carried as text or at its scale counts as used.
        let q = "Case No 28473 at 5% of $2k";
        let c = call(json!({"case": "28473", "rate": 0.05, "amount": 2000}));
        assert!(left(q, &c).is_empty());
    }

    #[test]
    fn a_call_that_took_no_number_from_the_request_leaves_none_out() {
        // Nothing shows that the numbers were inputs of this call.
        let q = "Play Taylor Swift for 20 minutes";
        assert!(left(q, &call(json!({"artist": "Taylor Swift"}))).is_empty());
        assert!(left("What is 2+2?", &call(json!({"expression": "4"}))).is_empty());
    }
}
