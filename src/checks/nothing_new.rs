//! `nothing-new`: once results are in, a turn whose calls can bring nothing the person
//! asked for is not run: the model is asked for its answer instead, on the history as it
//! was before that turn.
//!
//! Asked whole questions with the tools run for real (`scripts/whole-questions.sh`),
//! Qwen2.5-Coder 0.5B called a tool again after nearly every result: the same call again
//! (the weather in Paris, twice), the same call that had just failed (`"Tokio"` three
//! times, until the tool was declared unavailable), or the tool fed its own result (`250 /
//! 4`, then `62.5 / 4`, then `15.625 / 4`, ten turns, and the last quotient given as the
//! answer). The model's own probability does not tell these turns apart from a needed
//! second step (0.78–0.999 for the calculator fed its own result), nor did a question put
//! to it ("do these results answer the question?": "yes" for every case, needed step or
//! not). What tells them apart is the run's own record:
//!
//! - **a repeat**: the same tool with the same arguments as a call of this run, which
//!   can only bring the same result or the same error;
//! - **its own result fed back**: a number in the arguments that the same tool gave as its
//!   whole result in this run (the calculator's `62.5`) and the person never wrote. A
//!   second step that uses another tool's result (the weather's 18 °C into the
//!   calculator), a number from inside a longer result (an id from the rows a query
//!   returned, for the next query) or the person's own numbers is not this.
//!
//! Such a turn is declined before the fit question, and it is not kept in the history:
//! a repeated result at the end of the history made the answer that followed speak of
//! that one result only ("the weather in Paris and in Tokyo" answered with Tokyo's).
//!
//! A request whose steps are all done with one tool, each on the result before ("15 % of
//! 200, then add 7 to it") is where this declines a step that was asked for: the model
//! answers from the first result. Turn it off (`--check nothing-new=off`) for such work.

use serde_json::{Map, Value};

use super::grounding::Evidence;
use super::{Check, CheckInfo, Effect, Judgement, Reads, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "nothing-new",
    default_on: true,
    off_for: &[],
    reads: Reads::Record,
    effect: Effect::Declines,
    what: "after results, declines a turn whose every call repeats a call of the run or feeds a tool its own result",
    why: "after a result a small model calls again: the same call, the same failing call, or the calculator on its own quotient, turn after turn",
    example: "\"Combien font 250 divisé par 4 ?\": calculator(\"250 / 4\") gave 62.5, then calculator(\"62.5 / 4\") is declined (62.5 is the calculator's own result, not the person's): the model answers 62.5",
    safety: "It reads only the run's own record: the calls made, their results and the person's words. It never changes a call, and it acts only once results are in, so a first turn passes unchanged. A request of several steps with one tool, each on the result before, is its known risk: the second step is declined and the model answers from the first.",
};

/// One call of the run that came back, as the checks see it (borrowed from the run's
/// steps).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Earlier<'a> {
    /// The tool called.
    pub tool: &'a str,
    /// Its arguments.
    pub arguments: &'a Map<String, Value>,
    /// What the model was shown.
    pub result: &'a str,
    /// Whether the tool succeeded.
    pub ok: bool,
    /// The model turn that wrote the call (1-based): calls of one turn were written
    /// before any of their results came back.
    pub turn: u32,
}

/// The `nothing-new` check.
#[derive(Debug)]
pub struct NothingNew;

impl Check for NothingNew {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
        judgement: &mut Judgement,
    ) {
        if ctx.earlier.is_empty() || calls.is_empty() {
            return;
        }
        let person = Evidence::of(ctx.person.iter().copied());
        let why: Option<Vec<String>> = calls
            .iter()
            .map(|(tool, arguments)| nothing_new(ctx.earlier, &person, tool, arguments))
            .collect();
        if let Some(why) = why {
            judgement.decline_on_record(INFO.name, why.join("; "));
        }
    }
}

/// Why `tool` called with `arguments` can bring nothing new, if it cannot.
fn nothing_new(
    earlier: &[Earlier<'_>],
    person: &Evidence,
    tool: &str,
    arguments: &Map<String, Value>,
) -> Option<String> {
    if let Some(e) = earlier
        .iter()
        .find(|e| e.tool == tool && e.arguments == arguments)
    {
        return Some(match e.ok {
            true => "the same call as before".to_string(),
            false => "the same call failed before".to_string(),
        });
    }
    // Only a result that is one number as a whole: a number inside a longer result (an id
    // in a table a query returned) is what a next query of the same tool may rightly
    // ask about.
    let own: Vec<f64> = earlier
        .iter()
        .filter(|e| e.tool == tool && e.ok)
        .filter_map(|e| e.result.trim().trim_matches('"').parse::<f64>().ok())
        .collect();
    let mut fed = Vec::new();
    numbers(&Value::Object(arguments.clone()), &mut fed);
    let fed: Vec<f64> = fed
        .into_iter()
        .filter(|n| own.contains(n) && !person.has_number(*n))
        .collect();
    let first = fed.first()?;
    Some(format!("its own result {} fed back", show(*first)))
}

/// Every number in `v`: JSON numbers, and numbers written in its strings.
fn numbers(v: &Value, out: &mut Vec<f64>) {
    match v {
        Value::Number(n) => out.extend(n.as_f64()),
        Value::String(s) => out.extend(Evidence::of([s.as_str()]).written_numbers()),
        Value::Array(items) => items.iter().for_each(|i| numbers(i, out)),
        Value::Object(m) => m.values().for_each(|i| numbers(i, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// A number as a person would read it: `62.5`, `4`.
fn show(n: f64) -> String {
    let s = format!("{n}");
    s.strip_suffix(".0").map(str::to_string).unwrap_or(s)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// A call of the run as the tests write it: tool, arguments, result, success.
    type Call = (&'static str, Value, &'static str, bool);

    fn earlier(tool: &'static str, arguments: Value, result: &'static str, ok: bool) -> Call {
        (tool, arguments, result, ok)
    }

    fn judge(question: &str, run: &[Call], tool: &str, arguments: Value) -> Option<String> {
        let person = Evidence::of([question]);
        let earlier: Vec<Earlier<'_>> = run
            .iter()
            .map(|(tool, arguments, result, ok)| Earlier {
                tool,
                arguments: arguments.as_object().unwrap(),
                result,
                ok: *ok,
                turn: 1,
            })
            .collect();
        nothing_new(&earlier, &person, tool, arguments.as_object().unwrap())
    }

    #[test]
    fn the_calculator_fed_its_own_quotient_is_nothing_new() {
        let run = [earlier(
            "calculator",
            json!({"expression": "250 / 4"}),
            "62.5",
            true,
        )];
        let q = "Combien font 250 divisé par 4 ?";
        assert_eq!(
            judge(q, &run, "calculator", json!({"expression": "62.5 / 4"})).as_deref(),
            Some("its own result 62.5 fed back")
        );
        // The calculator on its own result alone, too.
        assert!(judge(q, &run, "calculator", json!({"expression": "62.5"})).is_some());
    }

    #[test]
    fn a_second_step_on_another_tools_result_or_the_persons_numbers_goes_ahead() {
        let weather = earlier(
            "get_weather",
            json!({"city": "Tokyo"}),
            r#"{"city":"Tokyo","temp_c":18}"#,
            true,
        );
        let q = "Look up the temperature in Tokyo and multiply it by 3.";
        assert_eq!(
            judge(q, &[weather], "calculator", json!({"expression": "18 * 3"})),
            None
        );
        let sum = earlier("calculator", json!({"expression": "12 * 12"}), "144", true);
        let q = "What are 12 * 12 and 13 * 13?";
        assert_eq!(
            judge(q, &[sum], "calculator", json!({"expression": "13 * 13"})),
            None
        );
        // A number of the calculator's result that the person wrote too is the person's.
        let same = earlier("calculator", json!({"expression": "2 * 2"}), "4", true);
        let q = "What is 2 * 2, and 4 * 5?";
        assert_eq!(
            judge(q, &[same], "calculator", json!({"expression": "4 * 5"})),
            None
        );
    }

    #[test]
    fn a_repeat_is_nothing_new_and_so_is_a_call_that_failed_before() {
        let paris = earlier("get_weather", json!({"city": "Paris"}), "{}", true);
        assert_eq!(
            judge(
                "Weather in Paris?",
                &[paris],
                "get_weather",
                json!({"city": "Paris"})
            )
            .as_deref(),
            Some("the same call as before")
        );
        let tokio = earlier(
            "get_weather",
            json!({"city": "Tokio"}),
            "error: no weather",
            false,
        );
        assert_eq!(
            judge(
                "Wetter in Tokio?",
                std::slice::from_ref(&tokio),
                "get_weather",
                json!({"city": "Tokio"})
            )
            .as_deref(),
            Some("the same call failed before")
        );
        assert_eq!(
            judge(
                "Wetter in Tokio?",
                &[tokio],
                "get_weather",
                json!({"city": "Tokyo"})
            ),
            None
        );
    }

    #[test]
    fn a_number_from_inside_a_longer_result_may_drive_the_next_call() {
        let rows = earlier(
            "sql_query",
            json!({"sql": "SELECT id FROM orders WHERE total > 100"}),
            r#"[{"id": 17}]"#,
            true,
        );
        let next = json!({"sql": "SELECT name FROM customers WHERE id = 17"});
        assert_eq!(
            judge("Who placed big orders?", &[rows], "sql_query", next),
            None
        );
    }

    #[test]
    fn a_failed_result_feeds_nothing() {
        let failed = earlier(
            "calculator",
            json!({"expression": "17% * 2,340"}),
            "error: 340",
            false,
        );
        assert_eq!(
            judge(
                "What is 17% of 2,340?",
                &[failed],
                "calculator",
                json!({"expression": "0.17 * 340"})
            ),
            None
        );
    }
}
