//! A turn the engine asks the model for again, and what happens when the second reply
//! fails: a call cut at the token limit is asked for once with twice the room; a turn a
//! check wants more calls of (`more-calls`, `numbers-left`) is asked for once more, and
//! when that reply is not a valid turn the first one is carried out as it was. The asking
//! was the engine's idea, so its failure must not cost the calls the model already made
//! right: on Gemma 3 270M six runs of twenty ended with no call at all that way. An answer
//! a check refuses (`example-copy`) is asked for again without the example it copied. A
//! part of [`crate::run::engine`] in a file of its own so that the state machine reads in
//! one sitting.

use super::{Call, Engine, Next, State};
use crate::checks::{Acted, AnswerContext, CheckAction, Verdict};
use crate::message::{ChatReply, Role, StopReason};
use crate::run::ending::Ending;
use crate::run::events::Event;
use crate::run::feedback;
use crate::turn::Turn;

/// A turn of calls that passed every check and was asked for again with more calls: what
/// is carried out if the turn asked for does not come back valid.
#[derive(Debug)]
pub(super) struct AskedAgain {
    /// The check that asked.
    check: &'static str,
    reply: Box<ChatReply>,
    turn: Box<Turn>,
    repaired: bool,
    /// The calls as the checks left them.
    pub(super) calls: Vec<Call>,
    /// The request's numbers they left out, when `numbers-left` asked: a call the asking
    /// adds that uses none of them is not run.
    pub(super) left: Vec<f64>,
    /// The turn's calls as the beginning of the list asked for, for a server that
    /// continues a reply: the model writes only the calls after them.
    pub(super) prefill: Option<String>,
    /// Where the history stood before the turn and the person's request again went into
    /// it, when the turn is not continued as written ([`Engine::ask_for_more`]): both are
    /// taken out again if the turn asked for fails.
    kept_from: Option<usize>,
}

impl Engine {
    /// A final answer a check refuses is asked for again, with only an answer allowed:
    /// the model chose to answer. The check says how ([`crate::checks::Refusal`]): with a
    /// new system prompt for the rest of the run, and with or without its answer and what
    /// it is told in the history. An answer is refused with the model told why once a run
    /// at most, so that a check can never keep a run from ending; `true` when the answer
    /// was refused.
    pub(super) fn refuse_answer(&mut self, raw: &str, turn: &Turn) -> bool {
        let Turn::FinalAnswer { content, .. } = turn else {
            return false;
        };
        let said = feedback::evidence(&self.history);
        let earlier = self.earlier();
        let told_before = feedback::answer_refused_in(&self.history[self.run_start..]);
        let person = feedback::person(&self.history);
        let ctx = AnswerContext {
            content,
            said: &said,
            earlier: &earlier,
            system: self.system_prompt(),
            person: &person,
            specs: &self.specs,
        };
        let Some((check, refusal)) = self.checks.judge_answer(&ctx) else {
            return false;
        };
        if refusal.told.is_some() && told_before {
            return false;
        }
        if let Some(prompt) = refusal.prompt {
            self.history[0].content = prompt;
        }
        let told = refusal.told.is_some();
        if let Some(text) = refusal.told {
            self.history.extend(feedback::answer_refused(raw, &text));
        }
        self.answer_only_from_now();
        self.events.push(Event::from(Acted {
            check,
            action: CheckAction::RefuseAnswer { told },
            why: refusal.why,
        }));
        true
    }

    /// The run's system prompt, where its history begins with one (not where a person's
    /// conversation was sent without it).
    fn system_prompt(&self) -> Option<&str> {
        let system = self.history.first().filter(|m| m.role == Role::System)?;
        Some(&system.content)
    }

    /// Changes the system prompt for the rest of the run, where `change` finds what to
    /// change in it (toolloop's example, its placeholder): a reply copied that text, and
    /// the next request would show it again. The server evaluates the prompt afresh once.
    /// `false` where there was nothing to change.
    pub(super) fn change_prompt(&mut self, change: fn(&str) -> Option<String>) -> bool {
        let Some(changed) = self.system_prompt().and_then(change) else {
            return false;
        };
        self.history[0].content = changed;
        true
    }

    /// A call whose reply was cut before it ended (at the token limit, or stopped where it
    /// began to repeat itself) is never run: repaired, it would be a call nobody wrote
    /// (a path or a SQL statement cut part-way, a matrix closed after its first row).
    /// The model is asked again once, with twice the room; a second cut ends the run.
    pub(super) fn cut_call(&mut self, raw: &str, tool: String, stop: StopReason) {
        self.cut_calls += 1;
        let num_predict = self.num_predict();
        let looped = stop == StopReason::Stopped;
        if self.cut_calls > 1 {
            self.state = State::Done(Ending::CutOff {
                tool,
                num_predict,
                looped,
            });
            return;
        }
        let error = match looped {
            true => format!(
                "the call of {tool} was cut where it began to repeat itself, before its \
                 arguments ended, so it was not run"
            ),
            false => format!(
                "the call of {tool} was cut off at the token limit before its arguments \
                 ended, so it was not run"
            ),
        };
        self.events.push(Event::Invalid {
            error: error.clone(),
            attempt: self.cut_calls,
        });
        self.history
            .extend(feedback::invalid_reply(raw, stop, &error));
    }

    /// The token limit for the next request: the configured one, doubled after a call
    /// was cut at it.
    pub fn num_predict(&self) -> Option<u32> {
        let base = self.config.options.num_predict?;
        Some(base.saturating_mul(1 + u32::from(self.cut_calls > 0)))
    }

    /// A `More` verdict on a turn: asks the model again for at least its `at_least`
    /// calls, keeping this turn to fall back on (`None`). The turn and verdict come back
    /// for any other verdict, or when the schema cannot hold that many: it then goes ahead.
    pub(super) fn ask_for_more(
        &mut self,
        reply: &ChatReply,
        turn: Turn,
        repaired: bool,
        calls: &[Call],
        verdict: Verdict,
    ) -> Option<(Turn, Verdict)> {
        let schema = match &verdict {
            Verdict::More { at_least, .. } => self.prepared.first.at_least(*at_least as u64),
            _ => None,
        };
        let (
            Some(schema),
            Verdict::More {
                at_least,
                p_more,
                by,
                left,
            },
        ) = (schema, &verdict)
        else {
            return Some((turn, verdict));
        };
        let made = calls.len();
        let s = if made == 1 { "" } else { "s" };
        let why = match left.is_empty() {
            true => format!("{made} call{s} made where the model gave one more p {p_more:.4}"),
            false => format!(
                "{made} call{s} made that left out {} of the request",
                left.iter()
                    .map(f64::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        self.events.push(Event::from(Acted {
            check: by,
            action: CheckAction::AskModel {
                made,
                at_least: *at_least,
            },
            why,
        }));
        // The calls as the model wrote them: a repaired turn's text is not the model's,
        // and the grammar may not take it.
        let prefill = match (&turn, repaired) {
            (_, true) => None,
            (
                Turn::ToolCall {
                    thought,
                    tool,
                    arguments,
                },
                false,
            ) => {
                let call = crate::turn::Call {
                    tool: tool.clone(),
                    arguments: arguments.clone(),
                };
                schema.list_beginning(thought, &[call])
            }
            (Turn::ToolCalls { thought, calls }, false) => schema.list_beginning(thought, calls),
            _ => None,
        };
        // A list the model closed is continued where it closed, so the server's cache
        // holds the whole reply. Any other turn (one call in the single-call form, a
        // repaired one) stays in the history, followed by the person's request again:
        // sent without it, the request shared only the prompt with the one before, and a
        // single call asked again in the list form had its call evaluated anew (298 of
        // 327 tokens reused, Qwen on llama-server). The request and not words of
        // toolloop's: told the numbers the call left out, Qwen2.5-Coder 0.5B made a call
        // for each, counts and units too (BFCL `parallel`, 3 cases of 50 lost); told only
        // that more was asked, it called a tool the request never named.
        let continued = prefill
            .as_deref()
            .and_then(|p| p.strip_suffix(','))
            .is_some_and(|p| reply.text.trim_start().starts_with(p));
        let kept_from = (!continued).then(|| {
            let at = self.history.len();
            let text = self.history_text(reply, &turn, repaired);
            let request = self.history[self.run_start].content.clone();
            self.history.push(crate::message::Message::assistant(text));
            self.history.push(crate::message::Message::user(request));
            at
        });
        let first = AskedAgain {
            check: by,
            reply: Box::new(reply.clone()),
            turn: Box::new(turn),
            repaired,
            calls: calls.to_vec(),
            left: left.clone(),
            prefill,
            kept_from,
        };
        self.next = Next::AskedAgain(Box::new(first), schema);
        None
    }

    /// The beginning of the reply the next request asks for, already written
    /// ([`crate::backend::GenOptions::prefill`]), so that a server that can continue a
    /// reply has the model write only the rest:
    /// - a turn asked again for one call more begins with the calls it made, which the
    ///   model would otherwise write again, at the cost of their tokens;
    /// - any other turn begins with what its schema forces before the kind
    ///   ([`crate::turn::schema::CallSchema::beginning`]).
    pub fn prefill(&self) -> Option<String> {
        let asked = match &self.next {
            Next::AskedAgain(a, _) => a.prefill.clone(),
            _ => None,
        };
        match asked {
            Some(calls) => Some(calls),
            None => self.schema().beginning(),
        }
    }

    /// The calls of a turn asked again for more ([`Engine::prefill`] begins the reply with
    /// them), as the checks left them; empty when no turn is asked again. However the
    /// asking ends they are what the turn makes: continued, the reply holds them as
    /// written; failed, the turn before is carried out. So a caller may start those of
    /// tools that only read before the reply asked for comes: a call the asking made first
    /// in the single-call form went off only once the continuation streamed it back. A
    /// server that does not continue replies has the model write the turn whole, most often
    /// with the same calls first; one it does not make again is let go like any call sent
    /// early.
    pub fn calls_standing(&self) -> &[Call] {
        match &self.next {
            Next::AskedAgain(a, _) => &a.calls,
            _ => &[],
        }
    }

    /// The reply to a turn asked again was not a valid turn (`error` says why): the turn
    /// before it is carried out instead, unchanged, and the model is not told of the
    /// failed reply.
    pub(super) fn fall_back(&mut self, first: AskedAgain, error: String) {
        if let Some(at) = first.kept_from {
            self.history.truncate(at);
        }
        self.events.push(Event::from(Acted {
            check: first.check,
            action: CheckAction::KeepTurn {
                calls: first.calls.len(),
            },
            why: format!("the reply asked for was not valid ({error})"),
        }));
        self.carry_out(
            &first.reply,
            *first.turn,
            first.repaired,
            first.calls,
            Verdict::Go,
        );
    }
}

/// An answer stopped where it began to repeat itself (`looping-reply`) ends part-way
/// through the sentence that began the repetition ("… 18 degrees Celsius. The sky is
/// cloudy, but"): its whole sentences, or `None` when it has one sentence or its end is
/// already one's. Sentences are read by Unicode's rules (UAX #29), so "3.5 km" is no end
/// and "。" is one.
pub(super) fn whole_sentences(answer: &str) -> Option<&str> {
    use unicode_segmentation::UnicodeSegmentation;
    let last = answer.split_sentence_bounds().last()?;
    let kept = answer[..answer.len() - last.len()].trim_end();
    let ends = |s: &str| {
        s.trim_end()
            .ends_with(['.', '!', '?', '。', '！', '？', '…'])
    };
    (!kept.is_empty() && !ends(last)).then_some(kept)
}

/// Whether a reply cut where `text` ends was inside one of its calls: the single-call
/// form's arguments (or tool name), or a call of the list form. Calls the list form closed
/// before the cut are whole, as the model wrote them.
pub(super) fn cut_inside_a_call(text: &str, turn: &Turn) -> bool {
    let depth = crate::turn::repair::open_depth(text);
    match turn {
        // The turn's object, then its arguments.
        Turn::ToolCall { .. } => depth >= 2,
        // The turn's object, its list of calls, then a call.
        Turn::ToolCalls { .. } => depth >= 3,
        _ => false,
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::super::Step;
    use super::super::tests::{calc, kind_logprobs, reply, with_check};
    use super::*;

    #[test]
    fn an_answer_cut_in_its_loop_ends_at_its_last_whole_sentence() {
        let cut = "The weather in Tokyo is sunny. It is 18 degrees Celsius. The sky is cloudy, but";
        assert_eq!(
            whole_sentences(cut),
            Some("The weather in Tokyo is sunny. It is 18 degrees Celsius.")
        );
        assert_eq!(
            whole_sentences("It is 3.5 km away. It is"),
            Some("It is 3.5 km away.")
        );
        assert_eq!(
            whole_sentences("東京は晴れです。気温は18度で"),
            Some("東京は晴れです。")
        );
        // Nothing to take off: one sentence, or a whole one at the end.
        assert_eq!(whole_sentences("The weather in Tokyo is sunny and"), None);
        assert_eq!(whole_sentences("Sunny. It is 18 degrees."), None);
        assert_eq!(whole_sentences(""), None);
    }

    /// A stopped answer is the run's answer in whole sentences; the same text at the end
    /// of a reply that finished is left as the model wrote it.
    #[test]
    fn only_an_answer_stopped_in_a_loop_loses_its_broken_sentence() {
        let text = "Sunny. It is 18 degrees. Sunny. It is 18 deg";
        for (stop, answer) in [
            (StopReason::Stopped, "Sunny. It is 18 degrees. Sunny."),
            (StopReason::Finished, text),
        ] {
            let mut e = Engine::new(
                vec![crate::message::Message::system("sys")],
                "Weather?",
                vec![calc()],
                crate::config::Config::default(),
            );
            assert_eq!(e.next_step(), Step::CallModel);
            let mut r = reply(&format!(
                r#"{{"kind":"final_answer","content":"{text}","thought":""}}"#
            ));
            r.stop = stop;
            e.model_replied(&r);
            assert_eq!(
                e.ending().and_then(|e| e.answer()),
                Some(answer),
                "{stop:?}"
            );
            // Said, as every repair is.
            let said = e.drain_events().iter().any(|ev| {
                matches!(ev, Event::Repaired { fixes } if fixes.iter().any(|f| f.contains("last whole sentence")))
            });
            assert_eq!(said, stop == StopReason::Stopped, "{stop:?}");
        }
    }

    /// A first turn in the single-call form: the calculator on `expression`, the model sure
    /// it calls.
    pub(in crate::run::engine) fn single(expression: &str) -> crate::message::ChatReply {
        let mut r = reply(&format!(
            r#"{{"kind":"tool_call","thought":"","tool":"calculator","arguments":{{"expression":"{expression}"}}}}"#
        ));
        r.logprobs = kind_logprobs(0.999);
        r
    }

    /// An engine for `question` with `numbers-left` on.
    pub(in crate::run::engine) fn numbers_left(question: &str) -> Engine {
        Engine::new(
            vec![crate::message::Message::system("sys")],
            question,
            vec![calc()],
            with_check("numbers-left"),
        )
    }

    /// An engine with `numbers-left` on, whose first turn (one call, the model sure of it)
    /// left 3 of "2+2 and 3+3" out and was asked again.
    fn asked_again() -> Engine {
        let mut e = numbers_left("2+2 and 3+3");
        e.next_step();
        e.model_replied(&single("2+2"));
        assert!(e.drain_events().iter().any(|ev| matches!(
            ev,
            Event::Check {
                action: CheckAction::AskModel { .. },
                ..
            }
        )));
        assert_eq!(e.next_step(), Step::CallModel);
        e
    }

    /// The first turn's call is what runs, the line says why, and the model never sees the
    /// reply that failed.
    fn goes_ahead_with_the_first_call(mut e: Engine, why: &str) {
        let sent = e.messages().len();
        let line = e.drain_events().iter().find_map(Event::check_line);
        assert_eq!(
            line.as_deref(),
            Some(
                format!(
                    "numbers-left: the reply asked for was not valid ({why}); going ahead with \
                     the 1 call made first"
                )
                .as_str()
            )
        );
        let arguments = json!({"expression": "2+2"}).as_object().unwrap().clone();
        assert_eq!(
            e.next_step(),
            Step::CallTool {
                tool: "calculator".into(),
                arguments
            }
        );
        assert_eq!(sent, 3, "{:?}", e.messages());
        assert!(e.messages()[2].content.contains(r#""expression":"2+2""#));
        // Results in, the next turn is held to nothing the asking wanted.
        e.tool_returned(Ok(crate::tools::ToolResult::ok("4")), Default::default());
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(
            e.schema()
                .as_value()
                .to_string()
                .find("minItems\":2")
                .is_none()
        );
    }

    /// The turn asked again begins with the call the model made, in the list form, and
    /// the reply that continues it is carried out whole.
    #[test]
    fn a_turn_asked_again_begins_with_the_calls_made() {
        let mut e = asked_again();
        let begun = e.prefill().unwrap();
        assert_eq!(
            begun,
            r#"{"kind": "tool_calls", "thought": "", "calls": [{"tool": "calculator", "arguments": {"expression": "2+2"}},"#
        );
        e.model_replied(&reply(&format!(
            r#"{begun} {{"tool": "calculator", "arguments": {{"expression": "3+3"}}}}]}}"#
        )));
        let Step::CallTools { calls } = e.next_step() else {
            panic!("{:?}", e.drain_events());
        };
        let expressions: Vec<_> = calls.iter().map(|c| c.1["expression"].clone()).collect();
        assert_eq!(expressions, [json!("2+2"), json!("3+3")]);
    }

    /// A single call asked again stays in the history with the person's request after it,
    /// so the request asked again begins with everything the server evaluated for the one
    /// before; the turn that comes back follows it there.
    #[test]
    fn a_single_call_asked_again_stays_in_the_history() {
        let mut e = asked_again();
        let sent = e.messages();
        assert_eq!(sent.len(), 4, "{sent:?}");
        assert_eq!(sent[2].content, single("2+2").text);
        assert_eq!(sent[3], crate::message::Message::user("2+2 and 3+3"));
        let begun = e.prefill().unwrap();
        e.model_replied(&reply(&format!(
            r#"{begun} {{"tool": "calculator", "arguments": {{"expression": "3+3"}}}}]}}"#
        )));
        assert!(matches!(e.next_step(), Step::CallTools { .. }));
        let sent = e.messages();
        assert_eq!(sent.len(), 5);
        assert!(sent[4].content.starts_with(&begun), "{:?}", sent[4]);
    }

    /// Any other turn begins at its kind, where the model makes its first choice; with
    /// the thought first, nothing is forced before the model's own words.
    #[test]
    fn a_turn_begins_at_its_kind_unless_its_thought_comes_first() {
        let mut e = numbers_left("2+2");
        assert_eq!(e.next_step(), Step::CallModel);
        assert_eq!(e.prefill().as_deref(), Some(r#"{"kind": ""#));
        let mut config = with_check("numbers-left");
        config.decide = crate::turn::schema::Decide::Reason;
        let mut reason = Engine::new(
            vec![crate::message::Message::system("sys")],
            "2+2",
            vec![calc()],
            config,
        );
        assert_eq!(reason.next_step(), Step::CallModel);
        assert_eq!(reason.prefill(), None);
    }

    /// A repaired first turn is not the model's text: the list is asked for whole.
    #[test]
    fn a_repaired_turn_asked_again_is_asked_for_whole() {
        let mut e = numbers_left("2+2 and 3+3");
        e.next_step();
        let mut cut = single("2+2");
        // Cut before its last brace: repaired.
        cut.text.pop();
        e.model_replied(&cut);
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(e.schema().as_value().to_string().contains("minItems\":2"));
        // Only what the schema forces: no call is written for the model.
        assert_eq!(e.prefill().as_deref(), Some(r#"{"kind": ""#));
    }

    #[test]
    fn a_reply_asked_for_that_is_no_turn_leaves_the_first_turns_call() {
        let mut e = asked_again();
        e.model_replied(&reply("I think the answer is 6"));
        let why = crate::turn::Turn::parse("I think the answer is 6")
            .err()
            .unwrap()
            .to_string();
        goes_ahead_with_the_first_call(e, &why);
    }

    #[test]
    fn a_reply_asked_for_that_breaks_the_schema_leaves_the_first_turns_call() {
        let mut e = asked_again();
        // One call where the schema asked for at least two.
        let one = r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"calculator","arguments":{"expression":"3+3"}}]}"#;
        let why = e
            .schema()
            .check(&crate::turn::Turn::parse(one).unwrap().turn)
            .unwrap_err()
            .to_string();
        e.model_replied(&reply(one));
        goes_ahead_with_the_first_call(e, &why);
    }

    #[test]
    fn a_reply_asked_for_cut_at_the_token_limit_leaves_the_first_turns_call() {
        let mut e = asked_again();
        let mut cut = reply(
            r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"calculator","arguments":{"expression":"2+2"}},{"tool":"calculator","arguments":{"expression":"3+3000000000"#,
        );
        cut.stop = StopReason::Length;
        e.model_replied(&cut);
        goes_ahead_with_the_first_call(e, "the reply was cut at the token limit");
    }

    #[test]
    fn without_asking_again_an_invalid_reply_still_goes_back_to_the_model() {
        let mut e = numbers_left("2+2");
        e.next_step();
        e.model_replied(&reply("I think the answer is 4"));
        assert!(
            e.drain_events()
                .iter()
                .any(|ev| matches!(ev, Event::Invalid { attempt: 1, .. }))
        );
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(e.messages().len() > 2);
    }

    #[test]
    fn an_answer_that_is_the_prompts_example_is_asked_again_without_the_example() {
        let engine = |config| {
            let system = crate::turn::prompt::build_system_prompt(&[calc()], None);
            Engine::new(
                vec![crate::message::Message::system(&system)],
                "Thanks, that's all I needed.",
                vec![calc()],
                config,
            )
        };
        let copy = r#"{"kind":"final_answer","content":"12.5 * 4 = 50","thought":""}"#;
        let mut e = engine(crate::config::Config::default());
        e.next_step();
        let before = e.messages().to_vec();
        e.model_replied(&reply(copy));
        let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
        assert_eq!(
            line,
            "example-copy: the answer was refused: it writes the prompt's example 12.5 * 4, which nobody in the conversation gave (the example is out of the prompt from now); asked again"
        );
        // The same history, but for the example; only an answer allowed.
        assert_eq!(e.next_step(), Step::CallModel);
        assert_eq!(e.messages().len(), before.len());
        assert!(before[0].content.contains("12.5 * 4"));
        assert!(!e.messages()[0].content.contains("12.5 * 4"));
        assert_eq!(e.messages()[1..], before[1..]);
        assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
        // Without the example in the prompt, the same text is the model's own.
        e.model_replied(&reply(copy));
        assert_eq!(e.next_step(), Step::Done);
        assert_eq!(e.ending().unwrap().answer(), Some("12.5 * 4 = 50"));
        // With the check off, the copy is the answer.
        let mut levels = crate::checks::CheckLevels::default();
        levels.set("example-copy", false).unwrap();
        let mut off = engine(crate::config::Config {
            checks: levels,
            ..Default::default()
        });
        off.next_step();
        off.model_replied(&reply(copy));
        assert_eq!(off.next_step(), Step::Done);
        assert_eq!(off.ending().unwrap().answer(), Some("12.5 * 4 = 50"));
    }
}
