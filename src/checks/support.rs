//! How much of a request a tool's own text covers: the share of the request's content
//! words, Snowball-stemmed, that the tool's name, description and parameters also have.
//!
//! `tool-fit` reads it as evidence *for* a call: a tool that shares the request's words
//! is not put to the fit question. It is a signal, never a verdict on its own: a request
//! in another language shares no word with an English tool description, and "How much
//! is 12.5 * 4?" shares none with "Exact arithmetic".

use std::collections::HashSet;
use std::sync::LazyLock;

use rust_stemmers::{Algorithm, Stemmer};
use serde_json::Value;

use crate::tool_spec::ToolSpec;
use crate::turn::question::topic;
use crate::turn::tool_schema;

/// At this share of the request's content words in the tool's own text ([`support`])
/// or more, the words point to the tool.
pub const MIN_SUPPORT: f64 = 0.2;

/// The English Snowball stemmer, made once (grounding uses it too).
pub(crate) static STEMMER: LazyLock<Stemmer> =
    LazyLock::new(|| Stemmer::create(Algorithm::English));

/// Words that carry no topic: question words, articles, pronouns, common verbs of asking.
/// Written out here because the point is the words people use to *ask*, which general
/// stop-word lists do not all have ("tell", "find", "much").
const STOP: &[&str] = &[
    "a", "about", "after", "all", "also", "an", "and", "any", "are", "as", "at", "be", "been",
    "being", "but", "by", "can", "could", "did", "do", "does", "each", "for", "from", "get",
    "give", "had", "has", "have", "he", "her", "here", "his", "how", "i", "if", "in", "into", "is",
    "it", "its", "just", "know", "let", "like", "many", "me", "more", "much", "my", "need", "of",
    "on", "or", "our", "please", "she", "should", "show", "so", "some", "tell", "than", "that",
    "the", "their", "them", "then", "there", "these", "they", "this", "those", "to", "us", "want",
    "was", "we", "were", "what", "when", "where", "which", "who", "whom", "whose", "why", "will",
    "with", "would", "you", "your",
];

/// The stemmed content words of `text`: the words [`super::words::words`] reads, in
/// letters only (a run of digits parts a word), camelCase and snake_case split, stop
/// words and one- and two-letter words left out.
fn words(text: &str, stemmer: &Stemmer) -> HashSet<String> {
    super::words::name_words(text)
        .iter()
        .flat_map(|w| w.split(|c: char| !c.is_alphabetic()))
        .filter(|w| w.chars().count() > 2 && !STOP.contains(w))
        .map(|w| stemmer.stem(w).into_owned())
        .collect()
}

/// Everything a tool says about itself: its name, description, and each parameter's
/// name, description and enum values.
fn tool_text(spec: &ToolSpec) -> String {
    let mut text = format!(
        "{} {}",
        spec.name.replace(['_', '.', '-'], " "),
        spec.description
    );
    if let Some(props) = spec.input_schema["properties"].as_object() {
        for (name, schema) in props {
            text.push(' ');
            text.push_str(&name.replace(['_', '.', '-'], " "));
            if let Some(d) = schema.get("description").and_then(Value::as_str) {
                text.push(' ');
                text.push_str(d);
            }
            for value in enum_values(schema) {
                text.push(' ');
                text.push_str(value);
            }
        }
    }
    text
}

/// The string values a parameter (or its items) may take: what the tool speaks to as
/// much as its description.
fn enum_values(schema: &Value) -> impl Iterator<Item = &str> {
    tool_schema::listed_values(schema).filter_map(Value::as_str)
}

/// The share of the question's content words that the tool's own text also has; `None`
/// when the question has no content word (only numbers and symbols, say).
pub fn support(question: &str, spec: &ToolSpec) -> Option<f64> {
    let stemmer = &*STEMMER;
    let asked = words(&topic(question), stemmer);
    if asked.is_empty() {
        return None;
    }
    let offered = words(&tool_text(spec), stemmer);
    Some(asked.intersection(&offered).count() as f64 / asked.len() as f64)
}

/// The tool that stands for a turn of calls when it is judged as a whole: the one the fit
/// answer is about, else the one whose text covers most of the request (the first of
/// equals). The model's probability of calling is one figure for the whole turn; which of
/// its tools fits is not, and a turn of several tools goes ahead when any of them fits.
pub(crate) fn turn_tool(
    ctx: &super::TurnContext<'_>,
    calls: &[(String, serde_json::Map<String, serde_json::Value>)],
) -> Option<String> {
    if let Some(t) = ctx.fit_tool {
        return Some(t.to_string());
    }
    let support = |name: &str| {
        ctx.specs
            .iter()
            .find(|s| s.name == name)
            .and_then(|s| support(ctx.question, s))
            .unwrap_or(0.0)
    };
    let mut best: Option<(&str, f64)> = None;
    for (name, _) in calls {
        let s = support(name);
        if best.is_none_or(|(_, b)| s > b) {
            best = Some((name, s));
        }
    }
    best.map(|(name, _)| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn stemming_and_name_splitting_find_the_shared_topic() {
        let tool = ToolSpec::new(
            "getWeatherForecast",
            "",
            json!({"type": "object", "properties": {"city_name": {"type": "string"}}}),
        );
        assert_eq!(
            support("Weather forecasts for which cities?", &tool),
            Some(1.0)
        );
        assert_eq!(support("Who painted the Mona Lisa?", &tool), Some(0.0));
    }

    #[test]
    fn a_parameters_enum_values_are_part_of_what_the_tool_speaks_to() {
        // BFCL multiple_92: the fitting tool says "vegan" and "gluten-free" only as the
        // values its `categories` items may take; without them support was 1 of 7 words.
        let tool = ToolSpec::new(
            "walmart.vegan_products",
            "Get available vegan products at specified Walmart store",
            json!({"type": "object", "properties": {
                "location": {"type": "string", "description": "City and state"},
                "categories": {"type": "array", "items": {"type": "string", "enum": ["vegan", "gluten-free"]}}}}),
        );
        let s = support(
            "Get me a list of available vegetarian and gluten-free foods at the Walmart near Denver.",
            &tool,
        )
        .unwrap();
        assert!(s >= 0.4, "{s}");
    }
}

/// The examples of this module's docs, as tests: its items are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {
    #[test]
    fn support_counts_the_questions_words_in_the_tools_text() {
        use crate::checks::support::support;
        use crate::tools::ToolSpec;
        use serde_json::json;

        let bmi = ToolSpec::new(
            "determine_body_mass_index",
            "Calculate body mass index",
            json!({"type": "object", "properties": {"weight": {"type": "number"}, "height": {"type": "number"}}}),
        );
        assert_eq!(support("What is the capital of France?", &bmi), Some(0.0));
        assert!(support("Compute my body mass index: 70 kg, 1.8 m tall", &bmi).unwrap() > 0.5);
        assert_eq!(support("12.5 * 4?", &bmi), None);
    }
}
