//! `leaned-tool`: a first call whose tool name the model began elsewhere is asked again
//! among the tool it reached for.
//!
//! The schema lets the model write only the names on offer, so where it wanted another
//! beginning the grammar turns it to a listed name it did not choose. The probability it
//! gave there is its own evidence, read at the token where the tool's name begins
//! ([`tool_probability::name_leaning`]). Asked "How warm is it in Sydney and in Oslo?"
//! with `calculator`, `current_time` and `get_weather` on offer, Qwen2.5-Coder 0.5B gave
//! 0.32 to `weather` there, which no name begins with, and wrote `current_time`: the
//! grammar left it that. `weather` is a whole word of one tool's name alone,
//! `get_weather`, and asked again among that tool the model calls it with its own
//! arguments.
//!
//! Nothing is written for the model: it is asked again, once, and only on the run's first
//! turn; that turn may still be asked for more calls. Nor is it asked where the request's
//! words point to the tool it called and not to the one it leaned to ("What time is it in
//! Tokyo?" and `current_time`): the words and its choice agree. Where the word is part of
//! several names, or of the name called, or is no whole word of a name (`rem`, `sp`), nothing
//! follows from it; nor where the tool's name begins as the one called does
//! (`get_forecast` called, `weather` weighed): past that first word both were open to the
//! model, and it chose.
//!
//! The bar, [`LEANED_MIN`], was read off the first turns of the whole-question runs' tuning
//! halves (Qwen, `tests/data/whole`): where another tool was needed, the model leaned to a
//! word of its name at 0.08 to 0.31; where none was, it leaned to `weather` at 0.028 at
//! most.

use serde_json::{Map, Value};

use super::words::name_words as words;
use super::{CheckInfo, Effect, Judgement, Reads, TurnContext, tool_probability};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "leaned-tool",
    default_on: true,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::Declines,
    what: "asks a first call again among another tool, where the model gave at least 0.05 of its probability, at the token where the tool's name begins, to a word that is a whole word of that tool's name alone, unless the request's words point to the tool called and not to that one",
    why: "the schema lets the model write only the names on offer, so a name it began otherwise (`weather`) is turned to one it did not choose (`current_time`)",
    example: "\"How warm is it in Sydney and in Oslo?\": current_time(utc_offset: \"+10:00\"), where the model gave 0.32 to `weather`: declined, and asked again among get_weather",
    safety: "It never changes a call: the model is asked again, once, on the run's first turn, and writes the call itself. It acts only on the model's own probabilities, which a scripted right call has none of (`src/eval/invariant.rs`).",
};

/// The least probability at the name's first token, for a word of another tool's name,
/// that asks again (read off the tuning halves: see the module's doc).
pub const LEANED_MIN: f64 = 0.05;

/// The `leaned-tool` check.
#[derive(Debug)]
pub struct LeanedTool;

impl super::Check for LeanedTool {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_calls(
        &self,
        ctx: &TurnContext<'_>,
        calls: &[(String, Map<String, Value>)],
        judgement: &mut Judgement,
    ) {
        if judgement.declined {
            return;
        }
        let Some((tool, leaning)) = turned_to(ctx, calls) else {
            return;
        };
        judgement.declined = true;
        judgement.by.get_or_insert(INFO.name);
        judgement.reason = Some(format!(
            "the model gave {:.2} to `{}` where the tool's name begins, a word of {tool}'s name alone",
            leaning.p,
            leaning.name.trim()
        ));
        judgement.instead = vec![tool.to_string()];
        judgement.leaned = true;
    }
}

/// The tool a first turn's `calls` are asked again among, with the model's leaning to
/// it, where this check acts on them (whatever an earlier check did).
pub(super) fn turned_to<'a>(
    ctx: &'a TurnContext<'_>,
    calls: &[(String, Map<String, Value>)],
) -> Option<(&'a str, tool_probability::Leaning)> {
    // Once, on the first turn: a turn asked again was chosen among tools already.
    if ctx.again || ctx.leaned || !ctx.earlier.is_empty() || calls.is_empty() {
        return None;
    }
    let names: Vec<&str> = ctx.specs.iter().map(|s| s.name.as_str()).collect();
    let leaning = tool_probability::name_leaning(ctx.reply, &names)?;
    if leaning.p < LEANED_MIN {
        return None;
    }
    let tool = leaned_to(&leaning.name, &names, calls)?;
    let tool = ctx.specs.iter().find(|s| s.name == tool)?.name.as_str();
    (!words_chose(ctx, calls, tool)).then_some((tool, leaning))
}

/// Whether the request's own words point to a tool the turn called and not to `leaned`
/// ([`super::words_support`]): then the words and the model's choice agree, and a
/// leaning elsewhere is no evidence against them. Asked "What time is it in Tokyo?",
/// Qwen2.5-Coder 0.5B wrote `current_time`, the tool whose text says "time", while giving
/// 0.16 to `weather`; asked again among `get_weather`, it called that and answered with
/// the weather.
fn words_chose(
    ctx: &TurnContext<'_>,
    calls: &[(String, Map<String, Value>)],
    leaned: &str,
) -> bool {
    let supported = |name: &str| {
        (ctx.specs.iter())
            .find(|s| s.name == name)
            .is_some_and(|spec| super::words_support(ctx.question, spec))
    };
    !supported(leaned) && calls.iter().any(|(t, _)| supported(t))
}

/// The one tool on offer whose name has `word` as a whole word, when the turn called
/// none whose name has it.
fn leaned_to<'a>(
    word: &str,
    names: &[&'a str],
    calls: &[(String, Map<String, Value>)],
) -> Option<&'a str> {
    let word = word.trim().to_lowercase();
    // A token of one or two letters is a piece of many words, no word of its own.
    if word.chars().count() < 3 || !word.chars().all(char::is_alphanumeric) {
        return None;
    }
    let has = |name: &str| words(name).contains(&word);
    if calls.iter().any(|(t, _)| has(t)) {
        return None;
    }
    let mut with = names.iter().filter(|n| has(n));
    let (Some(tool), None) = (with.next(), with.next()) else {
        return None;
    };
    // A name that begins as the one called (`get_forecast`, `get_weather`) was still
    // open to the model past the token read: it chose between them later, and chose
    // the other.
    let first = |name: &str| words(name).into_iter().next();
    match calls.iter().any(|(t, _)| first(t) == first(tool)) {
        true => None,
        false => Some(tool),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(tool: &str) -> (String, Map<String, Value>) {
        (tool.to_string(), Map::new())
    }

    #[test]
    fn a_word_of_one_other_tools_name_leads_to_it() {
        let names = ["calculator", "current_time", "get_weather"];
        assert_eq!(
            leaned_to("weather", &names, &[call("current_time")]),
            Some("get_weather")
        );
        assert_eq!(
            leaned_to(" Weather", &names, &[call("calculator")]),
            Some("get_weather")
        );
    }

    #[test]
    fn a_piece_of_a_word_or_a_word_of_several_names_leads_nowhere() {
        let names = ["get_weather", "get_forecast", "book_taxi", "findRecipe"];
        // Part of a word, not a word.
        assert_eq!(leaned_to("weat", &names, &[call("book_taxi")]), None);
        assert_eq!(leaned_to("sp", &names, &[call("book_taxi")]), None);
        // A word of two names.
        assert_eq!(leaned_to("get", &names, &[call("book_taxi")]), None);
        // A word of the name called.
        assert_eq!(leaned_to("weather", &names, &[call("get_weather")]), None);
        // A name that begins as the one called: the model chose between them after.
        assert_eq!(leaned_to("weather", &names, &[call("get_forecast")]), None);
        // Split where case changes.
        assert_eq!(
            leaned_to("recipe", &names, &[call("book_taxi")]),
            Some("findRecipe")
        );
    }

    #[test]
    fn names_split_into_words() {
        assert_eq!(words("get_weather"), ["get", "weather"]);
        assert_eq!(
            words("cooking_conversion.convert"),
            ["cooking", "conversion", "convert"]
        );
        assert_eq!(words("getWeather"), ["get", "weather"]);
    }
}
