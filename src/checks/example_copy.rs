//! `example-copy`: a turn whose calls carry the prompt's own example value, which the
//! person never said, is not run: the model is asked for its answer, or another tool,
//! instead.
//!
//! The prompt shows one example call, the calculator on `12.5 * 4` (`turn/prompt.rs`:
//! without an example the small models called no tool at all). Gemma 3 270M copies it: on
//! the five-language and numbers sets, whose tools include a calculator, 61 of its 70 first
//! replies carried `12.5 * 4` (a weather question, an order's status, "hello"), and on the
//! seven-language set it set timers labelled `12.5 * 4`. Such a value is known to come from
//! toolloop's own text, not from the request: that is the evidence, not a guess from words.
//! A request that says it ("What is 12.5 times 4?") makes it the person's, and the call
//! goes ahead. A declined copy of the prompt's example is no choice of tool: a weather
//! question may still need the weather tool. So the model is asked again once, with the
//! example out of the prompt, among the tools whose own text shares a word with the
//! request (Gemma 3 270M then called `get_weather` for the weather in Tokyo); where none
//! does, only an answer is allowed.
//!
//! Qwen2.5-Coder 0.5B copies less whole: it takes the example's `12.5` as an amount
//! (`convert_currency(amount: 12.5)` for "Is there a chemist open right now in Leeds?",
//! `calculate_tip(bill_amount: 12.5)` for "Is tipping customary in Japan?"), and a tool
//! description's own example as an id (`get_order_status(order_id: "A1234")` from "The
//! order id, e.g. A1234." for "Who wrote Romeo and Juliet?", in all five languages of
//! `tests/data/languages`). Both come from text the person did not write, so both count:
//! the example's number with a fraction ([`is_example_number`]) and a description's
//! example with a digit in a required argument ([`described`]).
//!
//! An example without a digit counts too ("The artist or band, e.g. Queen", which Gemma
//! 3 270M played for a joke, a capital and a train), but only where even the lenient
//! reading of a required value finds nothing of it in the request
//! ([`super::grounding::unsaid`]). A right call often carries such an example as the
//! person said it another way (`"USD"` for "$250", `"New York City, NY"` for "New
//! York"): a code of two or three letters and a name one of whose words was said count
//! as said, and so does any word of a script the request is not written in ("Paris" may
//! be the person's "Париж"). No right call of BFCL's or toolloop's sets carries an
//! example that reading finds unsaid. Whole numbers are not counted (a right
//! call's 4 is often four aces), nor optional values (often the tool's default written
//! out): the invariant, over every form of a right call BFCL accepts, lost calls on each.
//! An optional copy counts only where it is all the call carries and the request's
//! words do not point to the tool ([`only_described`]): Qwen2.5-Coder 0.5B answered "Hi!",
//! "Who are you?" and "Ciao! Come stai?" with `current_time(utc_offset: "+09:00")`, the
//! demo clock's "e.g. +09:00", on 13 of 24 greetings and thanks in eight languages. No
//! right call of BFCL's or toolloop's sets is such a call; "What time is it in Tokyo?"
//! is one, and its words point to the clock.
//!
//! A very small model also writes a parameter's own name as its value (`book_taxi(pickup:
//! "pickup", destination: "destination")` for "Who painted the Mona Lisa?"): the schema's
//! key, copied where the person gave nothing to write ([`own_name`]). No right value is
//! its parameter's name, unless the person said it ("the lights in the room").
//!
//! An answer can copy the example too. Qwen2.5-Coder 0.5B answered "Thanks, that's all I
//! needed.", "Dobré ráno!" and a Hindi request for a song with "12.5 * 4 = 50", and a
//! Finnish question for a pharmacy with "Tampereessa on 12.5 * 4 = 50": 7 of the 156 runs
//! on the everyday, errands and scripts sets ended on such an answer. An answer that writes
//! the example's expression ([`example_in`]) where neither the person nor a tool ever gave
//! its fractional number is refused, and the model is asked for its answer again with the
//! example out of its prompt (`run/engine/retry.rs`). A question that says 12.5 (or a
//! result of 12.5) makes the expression theirs: "50 / 4 = 12.5, and 12.5 * 4 = 50" stands.
//!
//! Asked again so, the same model answered thanks in four languages with the demo clock's
//! description, word for word ("The current date and time, in UTC or at a UTC offset;
//! …"). An answer that is a tool's description is refused too, and asked for with the
//! tool list out of the prompt (an answer needs none).

use serde_json::{Map, Value};

use super::{
    AnswerContext, CallUnderCheck, Check, CheckInfo, Effect, Finding, Judgement, Reads, Refusal,
    TurnContext, support,
};
use crate::turn::prompt::{
    EXAMPLE_VALUE, as_words, example_in, example_numbers, is_description, without_example,
    without_tools,
};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "example-copy",
    default_on: true,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::Declines,
    what: "declines a call, or refuses an answer, that carries the prompt's own example (12.5 * 4), a tool description's example (\"e.g. Queen\") or a parameter's own name as its value where the person never said it, or an answer that is a tool's description word for word; a call that copied the prompt is asked again without the example, and one beside other calls is held while they run; an answer, without what it copied",
    why: "a very small model copies the examples it was shown into calls the request never asked for",
    example: "\"What is the weather in Tokyo?\": calculator(expression: \"12.5 * 4\") is the prompt's example: declined, and asked again without it among the tools that share a word with the request (get_weather); \"Wie spät ist es in Tokio?\" shares none: the model answers",
    safety: "It acts only on a value equal to the example toolloop's own prompt shows, to the example a required parameter's description gives (an optional one's only where the call carries nothing else and the request's words do not point to the tool), or to the parameter's own name, and only where the person's words do not ground it (an example without a digit: not even one of its words, nor as a code); it never changes a call. A right call carries the person's values, so it passes (`src/eval/invariant.rs`). An answer is refused only where the prompt still holds what it copied, so at most once for each, and never for a description the person wrote or an answer that says more than the description.",
};

/// The `example-copy` check.
#[derive(Debug)]
pub struct ExampleCopy;

impl Check for ExampleCopy {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
        judgement: &mut Judgement,
    ) {
        if !ctx.earlier.is_empty() || calls.is_empty() {
            return;
        }
        let mut from_prompt = false;
        let why: Option<Vec<String>> = calls
            .iter()
            .map(|(tool, arguments)| {
                let spec = ctx.specs.iter().find(|s| s.name == *tool);
                if let Some(name) = copied(arguments, ctx.said) {
                    from_prompt = true;
                    return Some(format!("{tool}'s {name} is the prompt's example"));
                }
                let spec = spec?;
                let schema = &spec.input_schema;
                if let Some(name) = own_name(arguments, schema, ctx.said) {
                    return Some(format!("{tool}'s {name} is the parameter's own name"));
                }
                described(arguments, schema, ctx.said)
                    .or_else(|| {
                        only_described(arguments, schema, ctx.said).filter(|_| {
                            !super::words_support(ctx.question, spec)
                                && super::leaned_tool::turned_to(ctx, calls).is_none()
                        })
                    })
                    .map(|(name, example)| {
                        format!("{tool}'s {name} is its description's example ({example})")
                    })
            })
            .collect();
        if let Some(why) = why {
            let reason = format!("{}, which the request never says", why.join("; "));
            judgement.decline_on_record(INFO.name, reason);
            // The value was the prompt's, not the choice of a tool: a weather question
            // may still need its weather tool. Once, the model is asked again with the
            // example out of the prompt, among the tools whose own text shares a word
            // with the request (none: for an answer, as before).
            if from_prompt && !ctx.again {
                judgement.copied_prompt = true;
                judgement.instead = ctx
                    .specs
                    .iter()
                    .filter(|s| support::support(ctx.question, s).is_some_and(|x| x > 0.0))
                    .map(|s| s.name.clone())
                    .collect();
            }
        }
    }

    /// A call that copies the prompt's example beside calls that do not (a turn of them
    /// all is declined whole, above) is held: the others run, and the model is told why
    /// this one did not. Qwen2.5-Coder 0.5B, asked for the weather in Paris and its
    /// temperature doubled, called `get_weather` and `calculator("2 * (12.5 * 4)")` in
    /// one turn, and the second ran.
    fn judge_call(
        &self,
        ctx: &TurnContext<'_>,
        call: &CallUnderCheck<'_>,
        findings: &mut Vec<Finding>,
    ) -> Option<Vec<String>> {
        let name = copied(call.arguments, ctx.said)?;
        let why = format!("{name} is the prompt's example, which the request never says");
        let told = super::more_calls::told(&call.spec.name, &name);
        findings.push(Finding::hold(INFO.name, call, vec![name], why, told));
        None
    }

    fn judges_answers(&self) -> bool {
        true
    }

    fn judge_answer(&self, ctx: &AnswerContext<'_>) -> Option<Refusal> {
        // The answer is asked for again without the tool list, so at most once a run: an
        // answer needs no tools, and with the list in the prompt the model had nothing
        // else of its own to write back.
        if let Some(tool) = description_copied(ctx)
            && let Some(prompt) = ctx.system.and_then(without_tools)
        {
            return Some(Refusal {
                why: format!(
                    "it is {tool}'s description, not a reply to the person (the tools are out \
                     of the prompt for the answer)"
                ),
                prompt: Some(prompt),
                told: None,
            });
        }
        let at = example_in(ctx.content)?;
        let unsaid = example_numbers()
            .filter(|n| n.fract() != 0.0)
            .all(|n| !ctx.said.grounds(&Value::from(n)));
        // Only where the prompt holds the example, the evidence that the answer copied
        // it, and so once a run at most. Told why instead, with its copy in the history,
        // Qwen2.5-Coder 0.5B wrote it again every time; without the example it answered
        // in its own words.
        let prompt = without_example(ctx.system?)?;
        unsaid.then(|| Refusal {
            why: format!(
                "it writes the prompt's example {}, which nobody in the conversation gave \
                 (the example is out of the prompt from now)",
                &ctx.content[at]
            ),
            prompt: Some(prompt),
            told: None,
        })
    }
}

/// The tool whose description the answer is, word for word (case, spaces and the
/// closing stop aside), where no message of the person's holds it: the prompt's own
/// text, written back for want of a reply of the model's own.
fn description_copied(ctx: &AnswerContext<'_>) -> Option<String> {
    ctx.specs
        .iter()
        .find(|spec| {
            let described = spec.description.trim().trim_end_matches(['.', '!', '。']);
            if !is_description(ctx.content, described) {
                return false;
            }
            let described = as_words(described);
            !ctx.person.iter().any(|m| as_words(m).contains(&described))
        })
        .map(|spec| spec.name.clone())
}

/// The first argument whose value is the prompt's example, or its number with a fraction
/// ([`is_example_number`]), and not said by the person; or a text that writes the
/// example's expression inside a longer one (`3 * (12.5 * 4)` for "multiply the
/// temperature in Tokyo by 3", `12.5 * 4 / 3.6` for a wind speed to convert) where the
/// person never said the example's fractional number, as an answer is judged.
fn copied(arguments: &Map<String, Value>, said: &super::Evidence) -> Option<String> {
    let inside = |v: &Value| {
        v.as_str().is_some_and(|s| example_in(s).is_some())
            && example_numbers()
                .filter(|n| n.fract() != 0.0)
                .all(|n| !said.grounds(&Value::from(n)))
    };
    arguments
        .iter()
        .find(|(_, v)| ((is_example(v) || is_example_number(v)) && !said.grounds(v)) || inside(v))
        .map(|(name, _)| name.clone())
}

fn is_example(v: &Value) -> bool {
    v.as_str().is_some_and(|s| same(s, EXAMPLE_VALUE))
}

/// A value that is one of the numbers the example writes with a fraction, as a number
/// or as its text: `amount: 12.5` for a pharmacy, `bill_amount: 12.5` for "Is tipping
/// customary in Japan?". A whole number is no sign of a copy: right calls carry a 4
/// the person meant without writing it (four aces in a deck, "fyra" in Swedish), and
/// the invariant lost six such calls when it counted.
fn is_example_number(v: &Value) -> bool {
    let n = match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    };
    n.is_some_and(|n| example_numbers().any(|e| e == n && e.fract() != 0.0))
}

/// The first required argument whose value is the example its own description gives,
/// and which the person never said: `order_id: "A1234"` for "Who wrote Romeo and
/// Juliet?" from "The order id, e.g. A1234.", `artist: "Queen"` for "Tell me a joke".
/// An id, an amount or a name the tool requires is what only the person can give. An
/// example without a digit must be unsaid on the lenient reading too: a currency code or
/// a unit is the tool's word for what the person said another way (`"USD"` for "US
/// dollars"). An optional one is left alone, being often the tool's default written out
/// (`time_signature: "4/4"`, BFCL multiple_82).
fn described(
    arguments: &Map<String, Value>,
    schema: &Value,
    said: &super::Evidence,
) -> Option<(String, String)> {
    described_by(arguments, schema, |name, v, example| {
        unsaid_example(schema, name, v, example, said)
    })
}

/// Whether `v`, a copy of `example`, is unsaid: with a digit, word for word; without,
/// on the lenient reading too.
fn unsaid_example(
    schema: &Value,
    name: &str,
    v: &Value,
    example: &str,
    said: &super::Evidence,
) -> bool {
    match example.chars().any(|c| c.is_ascii_digit()) {
        true => !said.grounds(v),
        false => super::grounding::unsaid(schema, name, v, said),
    }
}

/// A call whose every value is an optional parameter's description example, unsaid as
/// [`described`] reads it, with the first: `current_time(utc_offset: "+09:00")` from "e.g.
/// +09:00" for "Hi!". Such a call carries nothing of the request, only the tool's own
/// text. An optional copy beside other values is left alone, as the tool's default
/// written out (`time_signature: "4/4"`); and so is this one where the request's words
/// point to the tool ("What time is it in Tokyo?" makes +09:00 the model's reading of
/// Tokyo), which the caller judges. So is one whose model leaned to another tool's name
/// (`leaned-tool` asks again among it): "What's the temperature in Tokyo?" drew the same
/// call while the model gave `weather` its weight, and declined for an answer it lost the
/// weather it got before.
fn only_described(
    arguments: &Map<String, Value>,
    schema: &Value,
    said: &super::Evidence,
) -> Option<(String, String)> {
    let required = crate::turn::tool_schema::required(schema);
    let mut first = None;
    for (name, v) in arguments {
        if required.contains(&name.as_str()) {
            return None;
        }
        let example = described_example(&schema["properties"][name])?;
        let copy = v.as_str().is_some_and(|s| same(s, &example));
        if !(copy && unsaid_example(schema, name, v, &example, said)) {
            return None;
        }
        first.get_or_insert((name.clone(), example));
    }
    first
}

/// The first required argument of a call whose value is its description's example and
/// is `unsaid` (given the argument's name, the value and the example), with that example.
fn described_by(
    arguments: &Map<String, Value>,
    schema: &Value,
    unsaid: impl Fn(&str, &Value, &str) -> bool,
) -> Option<(String, String)> {
    let required = crate::turn::tool_schema::required(schema);
    arguments.iter().find_map(|(name, v)| {
        if !required.contains(&name.as_str()) {
            return None;
        }
        let example = described_example(&schema["properties"][name])?;
        let copy = v.as_str().is_some_and(|s| same(s, &example)) && unsaid(name, v, &example);
        copy.then(|| (name.clone(), example))
    })
}

/// The tools of `calls` with a required value that is its description's example, which
/// the request does not hold even on the lenient reading, a word in another script than
/// the request's counted as unsaid, each with that example: `artist: "Queen"` from "The
/// artist or band, e.g. Queen." for "Включи музыку для бега". The reading [`described`]
/// declines on counts a Latin word as said in a request in another script, where words
/// cannot judge it; the value still came from the tool's own text, which is what
/// `guessed-tool` reads beside the model's choice of the tool. Read word for word, 4 of
/// 2,481 string values of right calls in BFCL and toolloop's sets are such a copy
/// (`"USD"` three times for "US dollars", `"New York City, NY"` for "New York"); this
/// reading finds them said, as a code and by one word of the name.
pub(crate) fn described_copies(
    specs: &[crate::tool_spec::ToolSpec],
    calls: &[(String, Map<String, Value>)],
    said: &super::Evidence,
) -> Vec<(String, String)> {
    calls
        .iter()
        .filter_map(|(tool, arguments)| {
            let spec = specs.iter().find(|s| s.name == *tool)?;
            let schema = &spec.input_schema;
            let (_, example) = described_by(arguments, schema, |name, v, _| {
                super::grounding::unsaid_in_their_script(schema, name, v, said)
            })?;
            Some((tool.clone(), example))
        })
        .collect()
}

/// The first argument whose text is its own parameter's name, whatever the case and the
/// separators (`pickup: "pickup"`, `room: "Room"`), where the person never said it: the
/// model copied the schema's key, not a value. A very small model does so for requests
/// that give it nothing to write, and no value BFCL or toolloop's own sets accept as right
/// is its parameter's name (figures in BENCHMARKS).
fn own_name(
    arguments: &Map<String, Value>,
    schema: &Value,
    said: &super::Evidence,
) -> Option<String> {
    let key = |s: &str| -> String {
        s.chars()
            .filter(|c| c.is_alphanumeric())
            .flat_map(char::to_lowercase)
            .collect()
    };
    arguments.iter().find_map(|(name, v)| {
        let text = v.as_str()?;
        let copy = schema["properties"].get(name).is_some()
            && !key(name).is_empty()
            && key(text) == key(name)
            && !said.grounds(v);
        copy.then(|| name.clone())
    })
}

/// The example a parameter's description gives after "e.g." or "for example", up to the
/// end of its sentence.
fn described_example(param: &Value) -> Option<String> {
    let text = param["description"].as_str()?;
    // ASCII lower case keeps every byte where it was, so a place found in it is one in
    // `text` (full lower case moves them: "İ" becomes two characters).
    let lower = text.to_ascii_lowercase();
    let at = ["e.g.", "for example"]
        .iter()
        .filter_map(|m| lower.find(m).map(|i| i + m.len()))
        .min()?;
    let rest = text[at..].trim_start_matches([',', ':', ' ']);
    let end = [". ", ";", ")", "\n"]
        .iter()
        .filter_map(|e| rest.find(e))
        .min()
        .unwrap_or(rest.len());
    let example = rest[..end]
        .trim()
        .trim_end_matches('.')
        .trim_matches(['\'', '"', '`']);
    (!example.is_empty()).then(|| example.to_string())
}

/// The same value, whatever the case and the spaces: "12.5*4" is "12.5 * 4".
fn same(a: &str, b: &str) -> bool {
    let squeeze = |s: &str| {
        s.chars()
            .filter(|c| !c.is_whitespace())
            .flat_map(char::to_lowercase)
            .collect::<String>()
    };
    squeeze(a) == squeeze(b)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_value_that_is_its_parameters_own_name_is_a_copy_unless_the_person_said_it() {
        let schema = serde_json::json!({"type": "object", "properties": {
            "pickup": {"type": "string"}, "drop_off": {"type": "string"}, "seats": {"type": "integer"}},
            "required": ["pickup"]});
        let said = super::super::Evidence::of(["Chi ha dipinto la Gioconda?"]);
        let args = |v: serde_json::Value| v.as_object().unwrap().clone();
        let own = |v| super::own_name(&args(v), &schema, &said);
        assert_eq!(
            own(serde_json::json!({"pickup": "pickup"})).as_deref(),
            Some("pickup")
        );
        assert_eq!(
            own(serde_json::json!({"pickup": "Gioconda", "drop_off": "Drop-off"})).as_deref(),
            Some("drop_off")
        );
        assert_eq!(
            own(serde_json::json!({"pickup": "Gioconda", "seats": 2})),
            None
        );
        let theirs = super::super::Evidence::of(["Send a taxi to the pickup"]);
        let args = args(serde_json::json!({"pickup": "pickup"}));
        assert_eq!(super::own_name(&args, &schema, &theirs), None);
    }

    use super::*;
    use crate::checks::Evidence;
    use serde_json::json;

    fn args(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    #[test]
    fn the_prompts_example_the_person_never_said_is_found_and_theirs_is_not() {
        let said = Evidence::of(["Поставь таймер на 25 минут."]);
        assert_eq!(
            copied(&args(json!({"minutes": 1, "label": "12.5*4"})), &said),
            Some("label".into())
        );
        let theirs = Evidence::of(["What is 12.5 times 4?"]);
        assert_eq!(
            copied(&args(json!({"expression": "12.5 * 4"})), &theirs),
            None
        );
        assert_eq!(
            copied(&args(json!({"expression": "12.5 * 40"})), &said),
            None
        );
        // Inside a longer expression: the model's, unless the person said 12.5.
        let tokyo = Evidence::of(["Look up the temperature in Tokyo and multiply it by 3."]);
        for copy in ["3 * (12.5 * 4)", "12.5 * 4 / 3.6"] {
            let call = args(json!({"expression": copy}));
            assert_eq!(copied(&call, &tokyo), Some("expression".into()), "{copy}");
        }
        let halves = Evidence::of(["What is 3 times 12.5 times 4?"]);
        let call = args(json!({"expression": "3 * (12.5 * 4)"}));
        assert_eq!(copied(&call, &halves), None);
    }

    #[test]
    fn a_description_example_without_a_digit_counts_only_where_no_word_of_it_was_said() {
        let schema = json!({"properties": {
            "artist": {"type": "string", "description": "The artist or band, e.g. Queen."},
            "city": {"type": "string", "description": "City and state, e.g. New York City, NY"},
            "currency": {"type": "string", "description": "Three letters, e.g. USD."},
            "genre": {"type": "string", "description": "e.g. Rock"}
        }, "required": ["artist", "city", "currency"]});
        let joke = Evidence::of(["Opowiedz mi dowcip."]);
        let found = described(&args(json!({"artist": "Queen"})), &schema, &joke);
        assert_eq!(found, Some(("artist".into(), "Queen".into())));
        // Words cannot judge a value in a script the request is not written in: "Paris"
        // may be the person's "Париж".
        let paris = Evidence::of(["Расскажи мне анекдот."]);
        assert_eq!(
            described(&args(json!({"artist": "Queen"})), &schema, &paris),
            None
        );
        // Said: by name, by one of its words, as a code.
        let queen = Evidence::of(["Put on some Queen"]);
        assert_eq!(
            described(&args(json!({"artist": "Queen"})), &schema, &queen),
            None
        );
        let york = Evidence::of(["Sculpture exhibitions in New York next month?"]);
        let city = args(json!({"city": "New York City, NY"}));
        assert_eq!(described(&city, &schema, &york), None);
        let yen = Evidence::of(["１２０ドルは何円ですか？"]);
        assert_eq!(
            described(&args(json!({"currency": "USD"})), &schema, &yen),
            None
        );
        // Optional: the tool's default as often as a copy.
        assert_eq!(
            described(&args(json!({"genre": "Rock"})), &schema, &joke),
            None
        );
    }

    #[test]
    fn a_description_example_with_a_digit_the_person_never_said_is_found() {
        let schema = json!({"properties": {
            "order_id": {"type": "string", "description": "The order id, e.g. A1234."},
            "currency": {"type": "string", "description": "Three letters, e.g. USD."},
            "expression": {"type": "string", "description": "The expression, e.g. 12.5 * 4."},
            "time_signature": {"type": "string", "description": "e.g., 4/4. Default '4/4'"}
        }, "required": ["order_id", "currency", "expression"]});
        let said = Evidence::of(["Who wrote Romeo and Juliet?"]);
        let found = described(&args(json!({"order_id": "a1234"})), &schema, &said);
        assert_eq!(found, Some(("order_id".into(), "A1234".into())));
        let found = described(&args(json!({"expression": "12.5*4"})), &schema, &said);
        assert_eq!(found.map(|f| f.1), Some("12.5 * 4".into()));
        // No digit: the tool's word for what the person said another way.
        assert_eq!(
            described(&args(json!({"currency": "USD"})), &schema, &said),
            None
        );
        let theirs = Evidence::of(["Where is my order A1234?"]);
        assert_eq!(
            described(&args(json!({"order_id": "A1234"})), &schema, &theirs),
            None
        );
        assert_eq!(
            described(&args(json!({"order_id": "B7"})), &schema, &said),
            None
        );
        // The first example the description gives, whichever words bring it.
        let two = json!({"description": "An id. For example, Z9; e.g. A1234."});
        assert_eq!(described_example(&two), Some("Z9".into()));
        // An optional value: the tool's default written out as often as a copy.
        assert_eq!(
            described(&args(json!({"time_signature": "4/4"})), &schema, &said),
            None
        );
    }

    #[test]
    fn a_call_of_optional_examples_alone_is_found_and_one_with_more_is_not() {
        let schema = json!({"properties": {
            "utc_offset": {"type": "string", "description": "e.g. +09:00; UTC when absent"},
            "time_signature": {"type": "string", "description": "e.g., 4/4. Default '4/4'"},
            "tempo": {"type": "integer"},
            "key": {"type": "string", "description": "e.g. C"}
        }, "required": ["key"]});
        let hi = Evidence::of(["Hi!"]);
        let found = only_described(&args(json!({"utc_offset": "+09:00"})), &schema, &hi);
        assert_eq!(found, Some(("utc_offset".into(), "+09:00".into())));
        // Two optional copies and nothing else: still nothing of the request.
        let two = args(json!({"utc_offset": "+09:00", "time_signature": "4/4"}));
        assert_eq!(
            only_described(&two, &schema, &hi).map(|f| f.0),
            Some("utc_offset".into())
        );
        // Beside a value of the request's, or a required one, it is the default written out.
        let tempo = args(json!({"time_signature": "4/4", "tempo": 120}));
        assert_eq!(only_described(&tempo, &schema, &hi), None);
        let key = args(json!({"time_signature": "4/4", "key": "C"}));
        assert_eq!(only_described(&key, &schema, &hi), None);
        // Said, or another value: not a copy.
        let said = Evidence::of(["What time is it at +09:00?"]);
        let offset = args(json!({"utc_offset": "+09:00"}));
        assert_eq!(only_described(&offset, &schema, &said), None);
        let other = args(json!({"utc_offset": "+01:00"}));
        assert_eq!(only_described(&other, &schema, &hi), None);
        assert_eq!(only_described(&args(json!({})), &schema, &hi), None);
    }

    #[test]
    fn a_number_of_the_example_the_person_never_said_is_found_and_theirs_is_not() {
        let pharmacy = Evidence::of(["Is there a chemist open right now in Leeds?"]);
        let call = json!({"amount": 12.5, "from_currency": "USD", "to_currency": "GBP"});
        assert_eq!(copied(&args(call), &pharmacy), Some("amount".into()));
        assert_eq!(
            copied(
                &args(json!({"from_city": "12.5", "to_city": "Bonn"})),
                &pharmacy
            ),
            Some("from_city".into())
        );
        let theirs = Evidence::of(["Convert 12.5 dollars to euros"]);
        let call = json!({"amount": 12.5, "from_currency": "USD", "to_currency": "EUR"});
        assert_eq!(copied(&args(call), &theirs), None);
        // Another number the person did not say is no copy of the example, nor is its
        // whole number.
        assert_eq!(copied(&args(json!({"amount": 12.0})), &pharmacy), None);
        assert_eq!(copied(&args(json!({"seats": 4})), &pharmacy), None);
    }

    #[test]
    fn an_answer_that_writes_the_example_nobody_gave_is_refused_and_one_that_was_given_is_not() {
        let calc = crate::tool_spec::ToolSpec::new(
            "calculator",
            "math",
            json!({"type": "object", "properties": {"expression": {"type": "string"}}}),
        );
        let system = crate::turn::prompt::build_system_prompt(&[calc], None);
        let judge = |said: &[&str], answer: &str| {
            ExampleCopy.judge_answer(&AnswerContext {
                content: answer,
                said: &Evidence::of(said.iter().copied()),
                earlier: &[],
                system: Some(&system),
                person: &[],
                specs: &[],
            })
        };
        let refuses = |said: &[&str], answer: &str| judge(said, answer).is_some();
        for answer in [
            "12.5 * 4 = 50",
            "Tampereessa on 12.5 * 4 = 50",
            "12.5*4",
            "It is 12.5 × 4.",
            "3 * (12.5 * 4) = 150",
        ] {
            assert!(
                refuses(&["Thanks, that's all I needed."], answer),
                "{answer}"
            );
        }
        // Other numbers, and the example's inside longer ones, are not the example.
        for answer in [
            "112.5 * 4 = 450",
            "12.5 * 45",
            "12.5 * 4.5",
            "12.5",
            "50",
            "4 * 12.5",
        ] {
            assert!(!refuses(&["Dobré ráno!"], answer), "{answer}");
        }
        // A question or a result that gave 12.5 makes the expression theirs.
        assert!(!refuses(&["What is 12,5 times 4?"], "12.5 * 4 = 50"));
        assert!(!refuses(
            &["What's 50 / 4?", "12.5"],
            "50 / 4 = 12.5, and 12.5 * 4 = 50"
        ));
        let refusal = judge(&["Dobré ráno!"], "Sure: 12.5 * 4. = 50").unwrap();
        assert!(refusal.why.contains("example 12.5 * 4,"), "{}", refusal.why);
        // Asked again with the example out of the prompt, not told why.
        let without = refusal.prompt.unwrap();
        assert!(example_in(&without).is_none() && refusal.told.is_none());
        // A prompt without the example (a person's own, or after the first refusal)
        // holds no evidence of a copy.
        let theirs = AnswerContext {
            content: "12.5 * 4 = 50",
            said: &Evidence::of(["Dobré ráno!"]),
            earlier: &[],
            system: Some(&without),
            person: &["Dobré ráno!"],
            specs: &[],
        };
        assert_eq!(ExampleCopy.judge_answer(&theirs), None);
    }

    /// An answer that is a tool's description word for word is refused once, and the
    /// answer asked for with the tools out of the prompt; one that says more, or that
    /// the person gave, stands.
    #[test]
    fn an_answer_that_is_a_tools_description_is_refused_once() {
        let clock = crate::tool_spec::ToolSpec::new(
            "current_time",
            "The current date and time, in UTC or at a UTC offset; only for questions about the date or time.",
            json!({"type": "object", "properties": {"utc_offset": {"type": "string"}}}),
        );
        let specs = [clock];
        let system = crate::turn::prompt::build_system_prompt(&specs, None);
        let judge = |person: &[&str], answer: &str, system: &str| {
            ExampleCopy.judge_answer(&AnswerContext {
                content: answer,
                said: &Evidence::of(person.iter().copied()),
                earlier: &[],
                system: Some(system),
                person,
                specs: &specs,
            })
        };
        let thanks = ["Thanks, that's all I needed."];
        let copy = "The current date and time, in UTC or at a UTC offset; only for questions \
                    about the date or time.";
        let refusal = judge(&thanks, copy, &system).unwrap();
        assert!(
            refusal.why.starts_with("it is current_time's description"),
            "{}",
            refusal.why
        );
        assert!(refusal.told.is_none());
        let without = refusal.prompt.unwrap();
        assert!(
            !without.contains("current_time") && !without.contains("Tools:"),
            "{without}"
        );
        assert!(without.contains("final_answer"), "{without}");
        // Once: the prompt without the tools holds no description to copy.
        assert_eq!(judge(&thanks, copy, &without), None);
        // Case, spaces and the closing stop aside.
        assert!(judge(&thanks, &copy.to_uppercase().replace('.', ""), &system).is_some());
        // More than the description is a reply that uses it.
        let more = format!("I can tell you this: {copy}");
        assert_eq!(judge(&["What can you do?"], &more, &system), None);
        // The person's own words written back are theirs.
        let pasted = [copy];
        assert_eq!(judge(&pasted, copy, &system), None);
    }
}
