//! The decision on a turn that calls: the checks judge it, after the model has answered
//! the fit question when a check wants that first (`crate::checks::tool_fit`). A part of
//! [`crate::run::engine`] in a file of its own so that the state machine itself reads in
//! one sitting.

use serde_json::Value;

use super::{Call, Engine, State, schema_of};
use crate::checks::{TurnContext, Verdict};
use crate::message::{ChatReply, Message};
use crate::run::events::Event;
use crate::run::feedback;
use crate::turn::Turn;

impl Engine {
    /// The fit question waiting for the model ([`super::Step::AskFit`]); empty when none is.
    pub fn fit_question(&self) -> &[Message] {
        match &self.state {
            State::Confirming { question, .. } => question,
            _ => &[],
        }
    }

    /// The schema the answer to the fit question follows.
    pub fn fit_schema(&self) -> Value {
        crate::checks::tool_fit::schema()
    }

    /// Feeds the model's answer to the fit question back (`None`: it could not be had,
    /// and the call is judged without it); the waiting call is then judged.
    pub fn fit_replied(&mut self, reply: Option<&ChatReply>) {
        let State::Confirming {
            reply: call_reply,
            turn,
            repaired,
            ..
        } = std::mem::replace(&mut self.state, State::Thinking)
        else {
            return;
        };
        if let Some(r) = reply {
            self.usage.add(&r.usage);
        }
        self.fit = Some(reply.and_then(crate::checks::tool_fit::read));
        self.accept(&call_reply, *turn, repaired);
        self.fit = None;
    }

    /// Judges the calls of `turn`: `None` when the turn is held for the fit question or
    /// declined (the model is asked again), else the turn and the verdict on it.
    pub(super) fn judge(
        &mut self,
        reply: &ChatReply,
        turn: Turn,
        repaired: bool,
        calls: &mut [Call],
    ) -> Option<(Turn, Verdict)> {
        let said = feedback::evidence(&self.history);
        let thresholds = self.config.thresholds();
        let question = &self.history[self.run_start].content;
        let ctx = TurnContext {
            question,
            said: &said,
            specs: &self.specs,
            reply,
            thresholds: thresholds.as_ref(),
            fit: self.fit.flatten(),
        };
        let judge_turn = !self.answer_only();
        if judge_turn
            && self.fit.is_none()
            && self.checks.wants_fit(&ctx, &calls[0].0)
            && let Some(spec) = self.specs.iter().find(|s| s.name == calls[0].0)
        {
            let question = crate::checks::tool_fit::question(question, spec);
            self.state = State::Confirming {
                reply: Box::new(reply.clone()),
                turn: Box::new(turn),
                repaired,
                question,
            };
            return None;
        }
        let (findings, verdict) = self.checks.judge(&ctx, calls, judge_turn);
        let source = thresholds.as_ref().map(|t| t.source());
        self.events.extend(findings.into_iter().map(|f| {
            let mut e = Event::from(f);
            if let Event::Decision { thresholds, .. } = &mut e {
                thresholds.clone_from(&source);
            }
            e
        }));
        if let Verdict::Decline { instead } = &verdict {
            let keep = |name: &str| instead.iter().any(|n| n == name);
            self.shortlist = Some(schema_of(&self.specs, keep, &self.config));
            return None;
        }
        Some((turn, verdict))
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::Step;
    use super::super::tests::{CALL, calc, engine, kind_logprobs, reply};
    use super::*;
    use crate::config::Config;
    use crate::tool_spec::ToolSpec;

    /// The answer to the fit question with a share of "yes" of `yes`.
    fn fit_answer(yes: f64) -> ChatReply {
        use crate::backend::TokenLogprob;
        let mut r = reply(r#"{"answer": "no"}"#);
        r.logprobs = vec![TokenLogprob {
            token: "no".into(),
            logprob: (1.0 - yes).ln(),
            top: vec![("no".into(), (1.0 - yes).ln()), ("yes".into(), yes.ln())],
        }];
        r
    }

    #[test]
    fn a_call_the_model_was_unsure_of_is_questioned_and_a_no_declines_it() {
        let mut e = Engine::new(
            vec![Message::system("sys")],
            "Wie viel ist 2 plus 2?",
            vec![calc()],
            Config::default(),
        );
        e.next_step();
        let mut unsure = reply(CALL);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskFit);
        let question = e.fit_question();
        assert!(
            question[1].content.contains("calculator — math"),
            "{question:?}"
        );
        assert!(question[1].content.contains("Wie viel ist 2 plus 2?"));
        e.fit_replied(Some(&fit_answer(0.2)));
        let events = e.drain_events();
        let declined = events.iter().find_map(|ev| match ev {
            Event::Decision {
                declined: true,
                fit,
                check,
                ..
            } => Some((*fit, check.clone())),
            _ => None,
        });
        assert_eq!(
            declined,
            Some((Some(0.2), Some("tool-fit".into()))),
            "{events:?}"
        );
        let line = events.iter().find_map(Event::check_line).unwrap();
        assert!(
            line.starts_with(
                "tool-fit: declined calculator: fit 0.20 < 0.45, p 0.80 < 0.90 (not calibrated"
            ),
            "{line}"
        );
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    }

    #[test]
    fn a_yes_to_the_fit_question_lets_the_call_through_unchanged() {
        let mut e = engine(10);
        e.next_step();
        let mut unsure = reply(CALL);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskFit);
        e.fit_replied(Some(&fit_answer(0.7)));
        assert_eq!(
            e.next_step(),
            Step::CallTool {
                tool: "calculator".into(),
                arguments: json!({"expression": "2+2"}).as_object().unwrap().clone()
            }
        );
        // No answer to the question at all (the server failed it): judged without it.
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&unsure);
        e.fit_replied(None);
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    #[test]
    fn a_call_the_model_was_sure_of_is_never_questioned() {
        let mut e = engine(10);
        e.next_step();
        let mut sure = reply(CALL);
        sure.logprobs = kind_logprobs(0.95);
        e.model_replied(&sure);
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    #[test]
    fn calibrated_thresholds_are_named_in_the_decline_line() {
        let config = Config {
            thresholds: Some(crate::Thresholds {
                p_min: 0.85,
                calibrated_for: Some("qwen2.5-coder-0.5b".into()),
                ..crate::Thresholds::default()
            }),
            ..Config::default()
        };
        let mut e = Engine::new(vec![Message::system("sys")], "hi", vec![calc()], config);
        e.next_step();
        let mut unsure = reply(CALL);
        unsure.logprobs = kind_logprobs(0.62);
        e.model_replied(&unsure);
        let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
        assert_eq!(
            line,
            "tool-probability: declined calculator: p 0.62 < 0.85 (calibrated for \
             qwen2.5-coder-0.5b); asking for an answer instead"
        );
    }

    #[test]
    fn a_call_whose_tool_shares_the_requests_words_is_not_questioned() {
        let weather = ToolSpec::new(
            "get_weather",
            "Current weather for a city",
            json!({"type": "object", "properties": {"city": {"type": "string"}}}),
        );
        let mut e = Engine::new(
            vec![Message::system("sys")],
            "What's the weather in Oslo?",
            vec![weather],
            Config::default(),
        );
        e.next_step();
        let mut unsure = reply(
            r#"{"kind":"tool_call","thought":"","tool":"get_weather","arguments":{"city":"Oslo"}}"#,
        );
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }
}
