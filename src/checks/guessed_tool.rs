//! `guessed-tool`: a first call whose tool the model barely chose, and which carries a
//! required value the request does not hold, is not run: the model is asked for its
//! answer instead.
//!
//! Two kinds of evidence, both the run's own, must point the same way:
//!
//! - **the model's choice of tool**: its share of probability, where the tool's name
//!   begins, for the names on offer ([`super::tool_probability::name_share`]). A request
//!   that needs a tool on offer draws its name at once; one that needs none spreads the
//!   probability over words no tool has ("Chi ha dipinto la Gioconda?" gave `book_taxi`
//!   its name at 0.25);
//! - **the values**: a required value that shares not one word or number with what the
//!   person wrote ([`super::tool_fit::unsaid`], the lenient reading): such a call had to
//!   make up what the tool needs (`destination: "Piazza"`, `flight_number: "12345"`,
//!   `amount: 1000` for "Tell me a joke"). Or a required value that is the tool's own
//!   example, which the request does not hold
//!   ([`super::example_copy::described_copies`]): the lenient reading counts any Latin
//!   word as said in a request written in another script, and Gemma 3 270M played its
//!   description's "e.g. Queen" for requests in Russian, Chinese, Hindi and Korean that
//!   named no band. What it costs: a right call in another script whose value is the
//!   example ("パリの天気" → `city: "Paris"` where the description says "e.g. Paris"),
//!   named under the bar, is declined; no run measured here had one.
//!
//! Either alone is weak: right calls in other languages often begin at a low share, and a
//! right call may carry a value said another way. A right call that does both is rare,
//! and the bar, [`NAME_SHARE_MAX`], was read off the tuning halves (figures in
//! BENCHMARKS.md). A call `leaned-tool` asked again for, or one asked for among tools the
//! request's words chose, is left to those: the names on offer were narrowed.

use super::{Check, CheckInfo, Effect, Judgement, Reads, TurnContext};

/// The check's declaration.
pub static INFO: CheckInfo = CheckInfo {
    name: "guessed-tool",
    default_on: true,
    off_for: &[],
    reads: Reads::Reply,
    effect: Effect::Declines,
    what: "declines a first call whose tool's name the model gave little probability and which carries a required value the request does not hold, or the tool's own example it does not write",
    why: "a small model calls some tool for requests that need none, and has to make up what the tool needs",
    example: "\"Chi ha dipinto la Gioconda?\": book_taxi(pickup: \"Gioconda\", destination: \"Piazza\"), the names on offer 0.25 < 0.45 where the name begins, and nobody said Piazza: declined, the model answers",
    safety: "It only declines, and only where both the model's own share for the tool's name is below the bar and a required value shares no word or number with the request (a code of two or three letters, one word of a name, a word in another script count as said; for the tool's own example, only a word in the request's script). No right call of BFCL's or toolloop's sets carries its description's example unsaid so (`src/eval/invariant.rs`). It stands aside on a call made when asked again among fewer tools.",
};

/// The most share of probability for the names on offer, where the first call's tool
/// name begins, at which the call counts as barely chosen.
pub const NAME_SHARE_MAX: f64 = 0.45;

/// The `guessed-tool` check.
#[derive(Debug)]
pub struct GuessedTool;

impl Check for GuessedTool {
    fn info(&self) -> &'static CheckInfo {
        &INFO
    }

    fn judge_turn(&self, ctx: &TurnContext<'_>, tool: &str, judgement: &mut Judgement) {
        // Another check decided, or asked again among fewer tools (whose names then draw
        // the probability whatever the request is), or this is not the run's first turn.
        if judgement.declined
            || !judgement.instead.is_empty()
            || ctx.leaned
            || ctx.offered_by_words
            || ctx.added_from.is_some()
            || !ctx.earlier.is_empty()
        {
            return;
        }
        let Some(p_name) = judgement.p_name else {
            return;
        };
        if p_name >= NAME_SHARE_MAX {
            return;
        }
        let example = ctx.examples.iter().find(|(t, _)| t == tool);
        let value = match (ctx.unsaid.iter().any(|t| t == tool), example) {
            (true, _) => "a required value nobody said".to_string(),
            (false, Some((_, e))) => {
                format!(
                    "a required value that is its description's example ({e}), which the request does not write"
                )
            }
            (false, None) => return,
        };
        judgement.decline_on_record(
            INFO.name,
            format!(
                "the names on offer {} where {tool}'s name begins, and {value}",
                super::below(p_name, NAME_SHARE_MAX)
            ),
        );
    }
}
