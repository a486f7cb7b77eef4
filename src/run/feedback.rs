//! What the loop tells the model, other than the tools' own results, and the guard that
//! keeps the history inside the context window.
//!
//! Every sentence the model reads from toolloop itself is here, so a change to any of them
//! is one place to measure (each wording was measured with the real models). The style
//! follows smolagents: a mistake of the model goes back to it as an observation that says
//! what was wrong and what is valid, and the model retries.
//!
//! The context guard exists because Ollama silently drops the oldest messages when the
//! prompt exceeds `num_ctx` (`docs/ARCHITECTURE.md`, "facts that decide the design"): the
//! person's question can vanish without an error. So the history is measured before each
//! request and old tool results are shortened first, and a reply whose prompt filled the
//! window is reported as a warning.

use crate::backend::{Message, Role, StopReason, Usage};
use crate::checks::Evidence;
use crate::http::shorten;
use crate::tools::{ToolError, ToolSpec};
use crate::turn::Turn;
use crate::turn::schema::Rejection;

pub(crate) use crate::message::AFTER_RESULTS;

/// The notice appended to the earlier result when the model repeats a call.
pub fn repeated_call(tool: &str, earlier: &str) -> String {
    format!(
        "{earlier}\n(You already called {tool} with these arguments; this is the same \
         result. Use it to answer.)"
    )
}

/// A result as the model reads it: as it is for a turn of one call, marked with its
/// call ("[call 2 of 3: get_weather]") when the turn had several.
pub fn call_result(index: usize, of: usize, tool: &str, observation: &str) -> String {
    if of <= 1 {
        observation.to_string()
    } else {
        format!("[call {index} of {of}: {tool}] {observation}")
    }
}

/// What the model is told to do once a tool is unavailable.
const ANSWER_WITHOUT: &str = "Answer directly without it.";

/// The observation for a call of a tool that was declared unavailable.
pub fn unavailable(tool: &str) -> String {
    format!("error: {tool} is unavailable. {ANSWER_WITHOUT}")
}

/// The observation that declares a tool unavailable after it failed.
pub fn degraded(tool: &str, observation: &str) -> String {
    format!("{observation}\n{tool} is unavailable now. {ANSWER_WITHOUT}")
}

/// The question put to the person for required arguments the model invented
/// (`invented-required`): the parameters in words, and the tool.
pub fn ask_for(tool: &str, parameters: &[String]) -> String {
    let names: Vec<String> = parameters.iter().map(|p| p.replace('_', " ")).collect();
    let listed = match names.as_slice() {
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
        [] => "more".to_string(),
    };
    let it = if names.len() == 1 { "it" } else { "them" };
    format!("What {listed} should I use? ({tool} needs {it}, and you did not say.)")
}

/// The observation for a call of a tool the catalogue does not have.
pub fn unknown_tool(name: &str, available: &[String]) -> String {
    format!(
        "error: unknown tool \"{name}\". Available tools: {}",
        available.join(", ")
    )
}

/// The observation for arguments the tool's schema refused, with the tool's signature.
pub fn invalid_arguments(message: &str, expected: &str) -> String {
    format!("error: invalid arguments: {message}. Expected: {expected}")
}

/// What the model is told when a call failed in the tool layer, and the reason to
/// declare the tool unavailable: a refusal of the model's call (an unknown tool, arguments
/// that fail the schema, with the tool's signature) is for the model to correct; any
/// other failure is the infrastructure's, and the tool is not tried again.
pub fn tool_error(error: ToolError, spec: Option<&ToolSpec>) -> (String, Option<String>) {
    match error {
        ToolError::UnknownTool { name, available } => (unknown_tool(&name, &available), None),
        ToolError::InvalidArguments { message, .. } => {
            let expected = spec.map(crate::turn::prompt::signature).unwrap_or_default();
            (invalid_arguments(&message, &expected), None)
        }
        e => (format!("error: {e}"), Some(e.to_string())),
    }
}

/// How the message that explains a refused reply begins.
const INVALID_REPLY: &str = "Your last reply was not valid: ";

/// How that message ends.
const ONE_OBJECT: &str = "Reply with exactly one JSON object.";

/// Words of toolloop's instructions to the model that no answer of the model's own holds.
/// Qwen2.5-Coder 0.5B, after the calculator failed three times, answered "error: calculator
/// is unavailable now. Answer directly without it." (a held-back whole question); asked
/// again, with or without being told why, it wrote back the last message it had read each
/// time. The `told` text of `more-calls` is among them: it is toolloop's too.
const INSTRUCTIONS: [&str; 6] = [
    ANSWER_WITHOUT,
    "reply with final_answer",
    "this is the same result. Use it to answer.",
    INVALID_REPLY,
    ONE_OBJECT,
    "again with the values they give",
];

/// The instruction of toolloop's ([`INSTRUCTIONS`]) that a final answer or a question for
/// the person writes back, matched in any case and spacing, with or without its last
/// stop. The placeholder the prompt shows for an answer is refused the same way
/// ([`crate::turn::schema::Rejection::Placeholder`]).
pub fn instruction_in(text: &str) -> Option<&'static str> {
    let words = |s: &str| {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let text = words(text);
    INSTRUCTIONS.into_iter().find(|i| {
        let i = words(i);
        text.contains(i.trim_end_matches(['.', ':', ' ']))
    })
}

/// A final answer or a question for the person that writes back one of toolloop's
/// instructions to the model ([`instruction_in`]): not the model's own, never shown as
/// one, and not asked for again.
pub fn echoed(turn: &Turn) -> Option<Rejection> {
    let text = match turn {
        Turn::FinalAnswer { content, .. } => content,
        Turn::Clarify { question, .. } => question,
        _ => return None,
    };
    instruction_in(text).map(Rejection::Instruction)
}

/// The model's own words of an answer that goes on to write back one of toolloop's
/// instructions ([`instruction_in`]): what comes before the text it copied from a
/// message it was given (the instruction and as much of that message as it wrote back
/// before it), ended at its last whole sentence (UAX #29); `None` when no instruction is
/// written back as sent or nothing of the model's own is left. After a call that was not
/// run, Qwen2.5-Coder 0.5B answered with the weather it had, then wrote back that call's
/// advice: refused whole, the run ended with no answer.
pub fn before_instruction<'a>(text: &'a str, history: &[Message]) -> Option<&'a str> {
    use unicode_segmentation::UnicodeSegmentation;
    let instruction = instruction_in(text)?.trim_end_matches(['.', ':', ' ']);
    // The instructions are ASCII: lower-cased so, the text keeps its byte offsets.
    let lower = text.to_ascii_lowercase();
    let needle = instruction.to_ascii_lowercase();
    let at = lower.find(&needle)?;
    // How far back the copy goes: the longest run before the instruction that one message
    // given to the model has before it too. Where no message gave it the instruction,
    // nothing shows where a copy would begin, and the answer is refused whole.
    let copied = history
        .iter()
        .filter(|m| m.role != Role::Assistant)
        .filter_map(|m| {
            let given = m.content.to_ascii_lowercase();
            let there = given.find(&needle)?;
            let same = lower.as_bytes()[..at]
                .iter()
                .rev()
                .zip(given.as_bytes()[..there].iter().rev())
                .take_while(|(a, b)| a == b)
                .count();
            Some(same)
        })
        .max()?;
    // The copy begins at a word: a run that matched from inside one (the period of
    // "flour." against the one of "now.") is the model's up to that word's end.
    let mut start = at - copied;
    while start < at
        && !(text.is_char_boundary(start) && text[..start].ends_with(char::is_whitespace))
        && start > 0
    {
        start += 1;
    }
    let before = text[..start].trim_end();
    let last = before.split_sentence_bounds().last()?;
    let ends = last
        .trim_end()
        .ends_with(['.', '!', '?', '。', '！', '？', '…']);
    let kept = match ends {
        true => before,
        false => before[..before.len() - last.len()].trim_end(),
    };
    (!kept.is_empty()).then_some(kept)
}

/// Whether a user-role message is toolloop's own feedback on a refused reply rather than
/// something the person said: it quotes the model's values back ("`kelvin` is not one
/// of …"), so it must not count as the person giving them.
pub fn is_feedback(m: &Message) -> bool {
    m.role == Role::User && m.content.starts_with(INVALID_REPLY)
}

/// What the checks may take as said in a run ([`Evidence`]): the person's messages and
/// the tool results in `history`, never the system prompt nor toolloop's own feedback.
/// Built once per turn, however many calls the turn carries; the person's numbers
/// spelled out in words are read too ([`Evidence::spelled`]).
pub fn evidence(history: &[Message]) -> Evidence {
    said_in(history, true)
}

/// What the person said in `history`, as [`evidence`] reads it, without the tool results:
/// what a person asked to approve a call is told they did not write
/// ([`crate::Unsaid`]).
pub fn person_evidence(history: &[Message]) -> Evidence {
    said_in(history, false)
}

fn said_in(history: &[Message], results: bool) -> Evidence {
    let mut said = Evidence::of(
        history
            .iter()
            .filter(|m| {
                (m.role == Role::User || results && m.role == Role::Tool) && !is_feedback(m)
            })
            .map(|m| m.content.as_str()),
    );
    for text in person(history) {
        said.spelled(text);
    }
    said
}

/// The person's own words in `history`: their messages, never tool results nor
/// toolloop's feedback on a refused reply.
pub fn person(history: &[Message]) -> Vec<&str> {
    history
        .iter()
        .filter(|m| m.role == Role::User && !is_feedback(m))
        .map(|m| m.content.as_str())
        .collect()
}

/// The two messages that follow an invalid reply: what the model said (shortened) and
/// why it was refused.
pub fn invalid_reply(raw: &str, stop: StopReason, reason: &str) -> [Message; 2] {
    let cut = if stop == StopReason::Length {
        " Your reply was cut off at the token limit: keep \"thought\" short."
    } else {
        ""
    };
    [
        Message::assistant(shorten(raw.trim(), 500)),
        Message::user(format!("{INVALID_REPLY}{reason}.{cut} {ONE_OBJECT}")),
    ]
}

/// How the message that says why an answer was refused begins.
const ANSWER_REFUSED: &str = "Your answer was not taken: ";

/// The answer a check refused ([`crate::checks::Refusal::told`]) and what the model is
/// told about it, for the history.
pub fn answer_refused(raw: &str, told: &str) -> [Message; 2] {
    [
        Message::assistant(shorten(raw.trim(), 500)),
        Message::user(format!("{ANSWER_REFUSED}{told}")),
    ]
}

/// Whether an answer was refused, the model told why, in these messages.
pub fn answer_refused_in(history: &[Message]) -> bool {
    history
        .iter()
        .any(|m| m.role == Role::User && m.content.starts_with(ANSWER_REFUSED))
}

/// Keeps the history inside the context window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextGuard {
    num_ctx: Option<u32>,
}

impl ContextGuard {
    /// A guard for a window of `num_ctx` tokens; `None` guards nothing.
    pub fn new(num_ctx: Option<u32>) -> Self {
        ContextGuard { num_ctx }
    }

    /// Shortens the oldest tool results when the history nears the window, and says how
    /// many it shortened. The system prompt and the person's words are never touched.
    pub fn fit(&self, history: &mut [Message]) -> Option<String> {
        let ctx = self.num_ctx?;
        // About 3 characters a token for mixed JSON and prose, with room for the reply.
        let budget = (ctx as usize).saturating_mul(3) * 4 / 5;
        let size = |h: &[Message]| h.iter().map(|m| m.content.len() + 16).sum::<usize>();
        let mut total = size(history);
        let mut shortened = 0;
        for m in history.iter_mut() {
            if total <= budget {
                break;
            }
            if m.role == Role::Tool && m.content.len() > 300 {
                let before = m.content.len();
                m.content = format!(
                    "{}…[shortened to fit the context window]",
                    shorten(&m.content, 200)
                );
                total = total - before + m.content.len();
                shortened += 1;
            }
        }
        (shortened > 0).then(|| {
            format!(
                "the history neared the context window: {shortened} old tool results were shortened"
            )
        })
    }

    /// A warning when a reply's prompt and completion reached the window: Ollama reports
    /// what it evaluated after silently dropping the oldest messages, so a prompt at the
    /// window's size is the sign.
    pub fn check(&self, usage: &Usage) -> Option<String> {
        let ctx = self.num_ctx?;
        (usage.prompt_tokens + usage.completion_tokens >= u64::from(ctx)).then(|| {
            format!(
                "the prompt filled the context window ({ctx} tokens): the server may have \
                 dropped the oldest messages; raise num_ctx"
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every instruction is found in the text the model is actually sent, so a wording
    /// changed in one place cannot leave the other behind.
    #[test]
    fn each_instruction_the_model_reads_is_known_as_toolloops() {
        let sent = [
            degraded("calculator", "error: not 'g'"),
            unavailable("calculator"),
            AFTER_RESULTS.to_string(),
            repeated_call("calculator", "4"),
            invalid_reply("{", StopReason::Finished, "not JSON")[1]
                .content
                .clone(),
            crate::checks::held_for_nobodys_value("calculator", "expression"),
        ];
        for text in &sent {
            assert!(instruction_in(text).is_some(), "{text}");
        }
        for i in INSTRUCTIONS {
            assert!(sent.iter().any(|t| t.contains(i)), "{i}");
        }
    }

    #[test]
    fn an_answer_that_writes_an_instruction_back_is_told_from_one_that_does_not() {
        let answer = |content: &str| Turn::FinalAnswer {
            thought: String::new(),
            content: content.into(),
        };
        let echo = answer("error: calculator is unavailable now.  ANSWER directly\nwithout it");
        assert_eq!(echoed(&echo), Some(Rejection::Instruction(ANSWER_WITHOUT)));
        for own in [
            "350 g times 6 is 2,100 g of flour.",
            "Sorry, the calculator is unavailable now.",
            "Use it to answer the phone.",
            "The reply was not valid JSON.",
        ] {
            assert_eq!(echoed(&answer(own)), None, "{own}");
        }
    }

    #[test]
    fn an_answer_keeps_its_own_sentences_before_an_instruction_it_writes_back() {
        let advice = crate::checks::held_for_nobodys_value("calculator", "expression");
        let history = [
            Message::user("Weather in Paris, in Fahrenheit?"),
            Message::tool("weather", repeated_call("weather", "11 °C")),
            Message::user(advice.clone()),
        ];
        let answer = format!("It is 11 degrees in Paris, with light rain. {advice}");
        assert_eq!(
            before_instruction(&answer, &history),
            Some("It is 11 degrees in Paris, with light rain.")
        );
        // Two sentences of toolloop's: the answer ends before the first.
        assert_eq!(
            before_instruction(
                "It is 11 degrees. This is the same result. Use it to answer.",
                &history
            ),
            Some("It is 11 degrees.")
        );
        assert_eq!(before_instruction(&advice, &history), None);
        // An instruction no message gave: nothing shows where the copy begins.
        assert_eq!(
            before_instruction(
                "error: calculator is unavailable now. Answer directly without it.",
                &history
            ),
            None
        );
        assert_eq!(
            before_instruction("It is 11 degrees in Paris.", &history),
            None
        );
    }
}
