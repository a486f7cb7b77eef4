//! The decision on a turn that calls: the checks judge it, after the model has answered
//! the fit question when a check wants that first (`crate::checks::tool_fit`). A part of
//! [`crate::run::engine`] in a file of its own so that the state machine itself reads in
//! one sitting.

use serde_json::Value;

use super::{Call, Engine, State, schema_of};
use crate::checks::{Earlier, Finding, TurnContext, Verdict, numbers_left};
use crate::message::{ChatReply, Message};
use crate::run::events::Event;
use crate::run::feedback;
use crate::turn::Turn;

impl Engine {
    /// The fit question waiting for the model ([`super::Step::AskFit`]); empty when none is.
    pub fn fit_question(&self) -> &[Message] {
        match &self.state {
            State::Confirming { questions, .. } => questions.first().map_or(&[], |q| &q.messages),
            _ => &[],
        }
    }

    /// Whether the fit question waiting is the one about the tool's own leaning (the
    /// request left empty), whose loss leaves the call judged on its bare "yes".
    pub fn fit_asks_leaning(&self) -> bool {
        match &self.state {
            State::Confirming { questions, .. } => questions.first().is_some_and(|q| q.baseline),
            _ => false,
        }
    }

    /// The schema the answer to the fit question follows.
    pub fn fit_schema(&self) -> Value {
        crate::checks::tool_fit::schema()
    }

    /// Feeds the model's answer to the fit question back (`None`: it could not be had,
    /// and the call is judged without it). Once every tool of the turn was asked about,
    /// the turn is judged by the one that fit best.
    pub fn fit_replied(&mut self, reply: Option<&ChatReply>) {
        // Not waiting for an answer: the state stays as it is.
        if !matches!(self.state, State::Confirming { .. }) {
            return;
        }
        let State::Confirming {
            reply: call_reply,
            turn,
            repaired,
            mut questions,
            mut answers,
        } = std::mem::replace(&mut self.state, State::Thinking)
        else {
            return;
        };
        if let Some(r) = reply {
            self.usage.add(&r.usage);
            let fit = crate::run::budget::Generated {
                fit: r.usage.completion_tokens,
                ..Default::default()
            };
            self.budget.requested(&r.usage, fit);
        }
        if !questions.is_empty() {
            let asked = questions.remove(0);
            let yes = reply.and_then(crate::checks::tool_fit::read);
            if let (true, Some(yes), Some(spec)) = (
                asked.baseline,
                yes,
                self.specs.iter().find(|s| s.name == asked.tool),
            ) {
                self.prepared.fit_baselines.put(spec, yes);
            }
            if !asked.baseline && yes.is_none() {
                // No answer to set against the leaning: its question would be wasted.
                questions.retain(|q| !(q.baseline && q.tool == asked.tool));
            }
            answers.push((asked, yes));
        }
        if !questions.is_empty() {
            self.state = State::Confirming {
                reply: call_reply,
                turn,
                repaired,
                questions,
                answers,
            };
            return;
        }
        // Each tool's answer against its leaning; the best stands for the turn, an
        // unreadable one only when none was read.
        let best = answers
            .iter()
            .filter(|(a, _)| !a.baseline)
            .map(|(a, yes)| {
                let spec = self.specs.iter().find(|s| s.name == a.tool);
                let base = spec.and_then(|s| self.prepared.fit_baselines.get(s));
                let fit = yes.map(|yes| crate::checks::tool_fit::Fit { yes, base });
                (a.tool.clone(), fit)
            })
            .max_by(|a, b| {
                let score =
                    |f: &Option<crate::checks::tool_fit::Fit>| f.map_or(-1.0, |f| f.score());
                score(&a.1).total_cmp(&score(&b.1))
            });
        let (tool, fit) = best.unzip();
        self.fit = Some(fit.flatten());
        self.fit_tool = tool;
        self.accept(&call_reply, *turn, repaired);
        self.fit = None;
        self.fit_tool = None;
    }

    /// Judges the calls of `turn`: `None` when the turn is held for the fit question or
    /// declined (the model is asked again), else the turn and the verdict on it.
    ///
    /// A turn is questioned only when every one of its tools would be: one that shares
    /// words with the request, or a probability the model was sure of, lets the turn go
    /// ahead. Then each of its tools is asked about, and the one that fit best judges it.
    pub(super) fn judge(
        &mut self,
        reply: &ChatReply,
        turn: Turn,
        repaired: bool,
        calls: &mut [Call],
        asked: Option<&super::retry::AskedAgain>,
    ) -> Option<(Turn, Verdict)> {
        let said = feedback::evidence(&self.history);
        let thresholds = self.config.thresholds();
        let question = &self.history[self.run_start].content;
        let person = feedback::person(&self.history[self.run_start..]);
        // The run's calls that came back, as its steps record them.
        let earlier: Vec<Earlier<'_>> = self
            .steps
            .iter()
            .filter_map(|s| {
                Some(Earlier {
                    tool: s.tool.as_deref()?,
                    arguments: s.arguments.as_ref()?,
                    result: &s.observation,
                    ok: s.ok,
                })
            })
            .collect();
        let unsaid = crate::checks::tool_fit::unsaid(&self.specs, calls, &said);
        // Asked for one call more than the turn before: the calls past those were added,
        // and they answer to what that turn left out. Read only where the check could ask.
        let added_from = asked.map(|a| a.calls.len());
        let ctx_left = match asked {
            Some(a) => a.left.clone(),
            None if calls.len() == 1 && self.config.checks.is_on(numbers_left::INFO.name) => {
                numbers_left::left(question, calls)
            }
            None => Vec::new(),
        };
        let ctx = TurnContext {
            question,
            said: &said,
            specs: &self.specs,
            reply,
            thresholds: thresholds.as_ref(),
            fit: self.fit.flatten(),
            fit_tool: self.fit_tool.as_deref(),
            person: &person,
            earlier: &earlier,
            unsaid: &unsaid,
            // Nor where the schema can hold no call more: the turn is then judged call by
            // call like any other.
            again: self.shortlist.is_some()
                || !self.prepared.first.can_hold(calls.len() as u64 + 1),
            added_from,
            left: &ctx_left,
        };
        // A turn asked again for more calls was decided on already (its kind was held to
        // calls by the schema, so its p(tool) says nothing); its calls meet the call checks.
        let judge_turn = !self.answer_only() && added_from.is_none();
        let mut tools: Vec<&str> = calls.iter().map(|c| c.0.as_str()).collect();
        tools.sort_unstable();
        tools.dedup();
        if judge_turn
            && self.fit.is_none()
            && tools.iter().all(|t| self.checks.wants_fit(&ctx, t))
            && !self.checks.declines_calls(&ctx, calls)
        {
            use crate::checks::tool_fit::{self, Asked};
            // Each tool once, and its leaning for no request where it is not known yet.
            let mut questions: Vec<Asked> = Vec::new();
            for spec in calls
                .iter()
                .filter_map(|c| self.specs.iter().find(|s| s.name == c.0))
            {
                if questions.iter().any(|q| q.tool == spec.name) {
                    continue;
                }
                let ask = |baseline, messages| Asked {
                    tool: spec.name.clone(),
                    baseline,
                    messages,
                };
                questions.push(ask(false, tool_fit::question(question, spec)));
                if self.prepared.fit_baselines.get(spec).is_none() {
                    questions.push(ask(true, tool_fit::baseline_question(spec)));
                }
            }
            if !questions.is_empty() {
                self.state = State::Confirming {
                    reply: Box::new(reply.clone()),
                    turn: Box::new(turn),
                    repaired,
                    questions,
                    answers: Vec::new(),
                };
                return None;
            }
        }
        let (findings, verdict) = self.checks.judge(&ctx, calls, judge_turn);
        self.held = findings
            .iter()
            .filter_map(|f| match f {
                Finding::Held { index, told, .. } => Some((*index, told.clone())),
                _ => None,
            })
            .collect();
        let source = thresholds.as_ref().map(|t| t.source());
        self.events.extend(findings.into_iter().map(|f| {
            // A decline on the run's own record owes nothing to the thresholds.
            let on_record =
                matches!(&f, Finding::Decision { judgement, .. } if judgement.on_record);
            let mut e = Event::from(f);
            if let (Event::Decision { thresholds, .. }, false) = (&mut e, on_record) {
                thresholds.clone_from(&source);
            }
            e
        }));
        if let Verdict::Decline { instead } = &verdict {
            let keep = |name: &str| instead.iter().any(|n| n == name);
            self.shortlist = Some(schema_of(&self.specs, keep, &self.config));
            return None;
        }
        // Once: a turn asked again is carried out as it comes back. `ctx.again` saw to it
        // that this turn was never asked again and that the schema holds one more.
        self.ask_for_more(reply, turn, repaired, calls, verdict)
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

    /// Answers the fit question with `yes` and, when the tool's leaning is asked next,
    /// that with `base`.
    fn answer(e: &mut Engine, yes: f64, base: f64) {
        assert!(!e.fit_asks_leaning());
        e.fit_replied(Some(&fit_answer(yes)));
        let leaning = e
            .fit_question()
            .get(1)
            .is_some_and(|m| m.content.contains("Request: \n"));
        // The orchestrator's warning when it fails says which question it was.
        assert_eq!(e.fit_asks_leaning(), leaning);
        if leaning {
            e.fit_replied(Some(&fit_answer(base)));
        }
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
        // Then the same question with no request: the tool's own leaning.
        assert_eq!(e.next_step(), Step::AskFit);
        assert!(e.fit_question()[1].content.contains("Request: \n"));
        e.fit_replied(Some(&fit_answer(0.5)));
        let events = e.drain_events();
        let declined = events.iter().find_map(|ev| match ev {
            Event::Decision {
                declined: true,
                fit,
                check,
                ..
            } => Some((fit.map(|f| (f * 100.0).round()), check.clone())),
            _ => None,
        });
        assert_eq!(
            declined,
            Some((Some(20.0), Some("tool-fit".into()))),
            "{events:?}"
        );
        let line = events.iter().find_map(Event::check_line).unwrap();
        assert!(
            line.starts_with(
                "tool-fit: declined calculator: fit 0.20 < 0.35 (yes 0.20 against 0.50 for no \
                 request), p 0.80 < 0.90 (not calibrated"
            ),
            "{line}"
        );
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(!e.schema().allows(crate::turn::Kind::ToolCall));
    }

    #[test]
    fn a_turn_asked_again_for_more_is_not_decided_on_again() {
        // Unsure of its one call, the model is asked the fit question and says yes; asked
        // for one more, the turn it writes goes ahead without a second question.
        let mut e = Engine::new(
            vec![Message::system("sys")],
            "2+2 and 3+3",
            vec![calc()],
            super::super::tests::with_check("numbers-left"),
        );
        e.next_step();
        let mut unsure = reply(CALL);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskFit);
        answer(&mut e, 0.9, 0.5);
        assert_eq!(e.next_step(), Step::CallModel);
        let mut two = reply(
            r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"calculator","arguments":{"expression":"2+2"}},{"tool":"calculator","arguments":{"expression":"3+3"}}]}"#,
        );
        two.logprobs = kind_logprobs(0.8);
        e.model_replied(&two);
        assert!(matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 2));
    }

    #[test]
    fn a_yes_to_the_fit_question_lets_the_call_through_unchanged() {
        let mut e = engine(10);
        e.next_step();
        let mut unsure = reply(CALL);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        assert_eq!(e.next_step(), Step::AskFit);
        answer(&mut e, 0.7, 0.5);
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
        // Nothing to set against the tool's leaning, so that is not asked.
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    /// A tip tool and a request that shares its words, answered with `call`.
    fn tip_turn(question: &str, call: &str) -> Engine {
        let tip = ToolSpec::new(
            "calculate_tip",
            "Calculate the tip on a restaurant bill",
            json!({"type": "object", "properties": {"bill_amount": {"type": "number"}},
                   "required": ["bill_amount"]}),
        );
        let mut e = Engine::new(
            vec![Message::system("sys")],
            question,
            vec![tip],
            Config::default(),
        );
        e.next_step();
        let mut unsure = reply(call);
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        e
    }

    #[test]
    fn a_call_with_a_value_nobody_said_is_questioned_though_its_tool_shares_words() {
        let invented = r#"{"kind":"tool_call","thought":"","tool":"calculate_tip","arguments":{"bill_amount":30}}"#;
        let mut e = tip_turn(
            "Is a tip on a restaurant bill customary in Japan?",
            invented,
        );
        assert_eq!(e.next_step(), Step::AskFit);
        answer(&mut e, 0.2, 0.5);
        let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
        assert!(
            line.starts_with(
                "tool-fit: declined calculate_tip: fit 0.20 < 0.35 (yes 0.20 against 0.50 for \
                 no request), a value nobody said"
            ),
            "{line}"
        );
        // The same words, with the bill the person gave: it goes ahead unquestioned.
        let said = r#"{"kind":"tool_call","thought":"","tool":"calculate_tip","arguments":{"bill_amount":84}}"#;
        let mut e = tip_turn("Calculate the tip on a restaurant bill of $84.", said);
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    /// A German request for two things, with two tools whose English text it shares no
    /// word with, and a turn that calls both.
    fn two_tool_turn() -> Engine {
        let clock = ToolSpec::new(
            "clock",
            "time of day",
            json!({"type": "object", "properties": {"zone": {"type": "string"}}}),
        );
        let config = Config {
            max_calls_per_turn: 8,
            ..Config::default()
        };
        let mut e = Engine::new(
            vec![Message::system("sys")],
            "Wie spät ist es in Berlin, und wie viel ist 2 plus 2?",
            vec![calc(), clock],
            config,
        );
        e.next_step();
        let mut unsure = reply(
            r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"clock","arguments":{"zone":"Europe/Berlin"}},{"tool":"calculator","arguments":{"expression":"2+2"}}]}"#,
        );
        unsure.logprobs = kind_logprobs(0.8);
        e.model_replied(&unsure);
        e
    }

    #[test]
    fn a_turn_of_several_tools_is_asked_about_each_and_goes_ahead_when_one_fits() {
        let mut e = two_tool_turn();
        assert_eq!(e.next_step(), Step::AskFit);
        assert!(e.fit_question()[1].content.contains("Tool: clock"));
        answer(&mut e, 0.2, 0.5);
        assert_eq!(e.next_step(), Step::AskFit);
        assert!(e.fit_question()[1].content.contains("Tool: calculator"));
        answer(&mut e, 0.7, 0.5);
        match e.next_step() {
            Step::CallTools { calls } => assert_eq!(calls.len(), 2),
            other => panic!("{other:?}"),
        }
        let fit = e.drain_events().iter().find_map(|ev| match ev {
            Event::Decision { tool, fit, .. } => {
                Some((tool.clone(), fit.map(|f| (f * 100.0).round())))
            }
            _ => None,
        });
        assert_eq!(fit, Some(("calculator".into(), Some(70.0))));
    }

    #[test]
    fn a_turn_of_several_tools_is_declined_only_when_none_fits() {
        let mut e = two_tool_turn();
        e.next_step();
        answer(&mut e, 0.2, 0.5);
        e.next_step();
        answer(&mut e, 0.3, 0.5);
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(!e.schema().allows(crate::turn::Kind::ToolCalls));
    }

    #[test]
    fn the_fit_answer_is_read_against_the_tools_own_leaning_asked_once() {
        // Runs of one orchestrator share what was learnt of each tool.
        let schemas =
            std::sync::Arc::new(super::super::Prepared::new(&[calc()], &Config::default()));
        let run = || {
            let mut e = Engine::with_schema(
                vec![Message::system("sys")],
                "Wie viel ist 2 plus 2?",
                vec![calc()],
                Config::default(),
                schemas.clone(),
            );
            e.next_step();
            let mut unsure = reply(CALL);
            unsure.logprobs = kind_logprobs(0.8);
            e.model_replied(&unsure);
            assert_eq!(e.next_step(), Step::AskFit);
            e
        };
        // "Yes" at 0.5 where the tool draws 0.7 with no request at all: the request
        // moved the model towards "no", and the call is declined.
        let mut e = run();
        answer(&mut e, 0.5, 0.7);
        let line = e.drain_events().iter().find_map(Event::check_line).unwrap();
        assert!(
            line.starts_with("tool-fit: declined calculator: fit 0.30 < 0.35"),
            "{line}"
        );
        // The next run asks the question only, and 0.8 against 0.7 goes ahead.
        let mut e = run();
        e.fit_replied(Some(&fit_answer(0.8)));
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    #[test]
    fn a_tools_leaning_kept_in_the_file_is_not_asked_by_the_next_process() {
        let dir = std::env::temp_dir().join(format!("toolloop-leaning-{}", std::process::id()));
        let path = dir.join("leanings.json");
        let _ = std::fs::remove_dir_all(&dir);
        // Each process starts with nothing learnt but what the file keeps.
        let process = || {
            let model = ("qwen".to_string(), "http://127.0.0.1:8080/v1".to_string());
            let mut prepared = super::super::Prepared::new(&[calc()], &Config::default());
            prepared.fit_baselines = prepared.fit_baselines.clone().kept_in(&path, model);
            let (q, specs) = ("Wie viel ist 2 plus 2?", vec![calc()]);
            let sys = vec![Message::system("sys")];
            let mut e = Engine::with_schema(sys, q, specs, Config::default(), prepared.into());
            e.next_step();
            let mut unsure = reply(CALL);
            unsure.logprobs = kind_logprobs(0.8);
            e.model_replied(&unsure);
            assert_eq!(e.next_step(), Step::AskFit);
            e
        };
        answer(&mut process(), 0.5, 0.7);
        // The next process asks about the request only, and reads the answer against the
        // leaning the first one kept: 0.5 against 0.7 is declined again.
        let mut next = process();
        next.fit_replied(Some(&fit_answer(0.5)));
        assert!(!next.fit_asks_leaning());
        let line = next
            .drain_events()
            .iter()
            .find_map(Event::check_line)
            .unwrap();
        assert!(line.starts_with("tool-fit: declined calculator: fit 0.30 < 0.35"));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_call_the_model_was_sure_of_is_never_questioned() {
        let mut e = engine(10);
        e.next_step();
        let mut sure = reply(CALL);
        sure.logprobs = kind_logprobs(0.95);
        e.model_replied(&sure);
        // An answer nobody asked for changes nothing.
        e.fit_replied(None);
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
