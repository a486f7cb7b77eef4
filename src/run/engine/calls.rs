//! The calls of one model turn, for the engine: answers from memory, results in the
//! order of the calls. A part of [`crate::run::engine`] in a file of its own
//! so that the state machine itself reads in one sitting.

use std::time::Duration;

use super::{Call, Engine, Pending, State, schema_of};
use crate::backend::Message;
use crate::config::Config;
use crate::run::events::Event;
use crate::run::feedback;
use crate::run::memory::CallKey;
use crate::tool_spec::ToolSpec;
use crate::tools::{ToolError, ToolResult};
use crate::turn::schema::CallSchema;

/// What a run needs that depends only on the tools and the settings, prepared once per
/// orchestrator: the schemas its requests are held to (building one compiles validators,
/// which took most of a run's own time when it was done per run), and what the model
/// answered about each tool for no request ([`crate::checks::Leanings`]).
#[derive(Debug, Clone)]
pub(crate) struct Prepared {
    /// The first turn's: several calls when the settings allow them.
    pub(crate) first: CallSchema,
    /// After results, one call at a time; `None` when the first is that already.
    one_call: Option<CallSchema>,
    /// An answer only.
    pub(crate) answer: CallSchema,
    /// Each tool's leaning, shared by the runs (and, per model, by the orchestrators).
    pub(crate) fit_baselines: crate::checks::Leanings,
}

impl Prepared {
    /// The schemas for every tool in `specs`.
    pub(crate) fn new(specs: &[ToolSpec], config: &Config) -> Self {
        Self::of(specs, |_| true, config)
    }

    /// The schemas for the tools of `specs` that `keep` keeps.
    pub(crate) fn of(specs: &[ToolSpec], keep: impl Fn(&str) -> bool, config: &Config) -> Self {
        let one = Config {
            max_calls_per_turn: 1,
            ..config.clone()
        };
        Prepared {
            first: schema_of(specs, &keep, config),
            one_call: (config.max_calls_per_turn > 1).then(|| schema_of(specs, &keep, &one)),
            answer: CallSchema::answer_only_deciding(config.decide),
            fit_baselines: Default::default(),
        }
    }

    /// The schema once results are in.
    pub(crate) fn after_results(&self) -> &CallSchema {
        self.one_call.as_ref().unwrap_or(&self.first)
    }
}

impl Engine {
    /// The calls of one turn, as the checks left them: each answered from memory (a
    /// repeat, an unavailable tool), held back by a check (`held`: its place and what the
    /// model is told instead, `Finding::OnCall`), or left to run. The results go into the
    /// history in the order of the calls once all are in.
    pub(super) fn tool_calls(
        &mut self,
        thought: String,
        calls: Vec<Call>,
        held: Vec<(usize, String)>,
    ) {
        let mut pending = Vec::with_capacity(calls.len());
        for (i, (tool, arguments)) in calls.into_iter().enumerate() {
            let not_run = held.iter().find(|(at, _)| *at == i).map(|(_, n)| n.clone());
            self.events.push(Event::ToolCall {
                iteration: self.iterations,
                thought: thought.clone(),
                tool: tool.clone(),
                arguments: arguments.clone(),
            });
            let key = CallKey::new(&tool, &arguments);
            let is_held = not_run.is_some();
            let answered = if let Some(told) = not_run {
                Some((told, true))
            } else if let Some((count, earlier)) = self.repeats.repeat(&key) {
                self.events.push(Event::Repeat {
                    tool: tool.clone(),
                    count,
                });
                if count >= self.config.max_repeats {
                    self.next = super::Next::AnswerOnly;
                }
                Some((feedback::repeated_call(&tool, earlier), true))
            } else if self.unavailable.contains(&tool) {
                Some((feedback::unavailable(&tool), false))
            } else {
                None
            };
            let call = Some((tool.clone(), arguments.clone()));
            self.record(thought.clone(), call, String::new(), false);
            pending.push(Pending {
                tool,
                arguments,
                key,
                step: self.steps.len() - 1,
                held: is_held,
                answered,
                ran: false,
            });
        }
        if pending.iter().all(|p| p.answered.is_some()) {
            return self.settle(pending);
        }
        self.state = State::Calling { calls: pending };
    }

    /// A round of calls made and carried out before this run took over — by a client of
    /// `toolloop proxy`, which runs the tools itself and sends their results back — put
    /// into the history as if this run had made it: the turn in the canonical form, each
    /// result after it as [`Engine::tools_returned`] puts it, the calls in the steps and in
    /// memory so that a repeat is answered from it, and the stage past the first results.
    /// `results` holds each call's text and whether it succeeded, in the order of `calls`.
    pub(crate) fn replay(&mut self, calls: Vec<Call>, results: Vec<(String, bool)>) {
        let turn = match calls.len() {
            1 => crate::turn::Turn::ToolCall {
                thought: String::new(),
                tool: calls[0].0.clone(),
                arguments: calls[0].1.clone(),
            },
            _ => crate::turn::Turn::ToolCalls {
                thought: String::new(),
                calls: calls
                    .iter()
                    .map(|(tool, arguments)| crate::turn::Call {
                        tool: tool.clone(),
                        arguments: arguments.clone(),
                    })
                    .collect(),
            },
        };
        self.iterations += 1;
        self.history
            .push(Message::assistant(self.config.decide.canonical(&turn)));
        let mut results = results.into_iter();
        let mut pending = Vec::with_capacity(calls.len());
        for (tool, arguments) in calls {
            let (observation, ok) = results
                .next()
                .unwrap_or_else(|| ("no result came back for this call".into(), false));
            // Capped as a result this run's own tool returned would be.
            let observation = ToolResult::ok(observation).to_model_text(self.config.result_cap);
            let key = CallKey::new(&tool, &arguments);
            if ok {
                self.repeats.record(key.clone(), observation.clone());
            }
            self.record(
                String::new(),
                Some((tool.clone(), arguments.clone())),
                observation.clone(),
                ok,
            );
            pending.push(Pending {
                tool,
                arguments,
                key,
                step: self.steps.len() - 1,
                answered: Some((observation, ok)),
                ran: true,
                held: false,
            });
        }
        self.settle(pending);
    }

    /// Feeds a tool's result back (the turn's one call to run). `Err` of the
    /// infrastructure kind makes the tool unavailable for the rest of the run.
    #[cfg(test)]
    pub fn tool_returned(&mut self, result: Result<ToolResult, ToolError>, took: Duration) {
        self.tools_returned(vec![(result, took)]);
    }

    /// Feeds the results of [`super::Step::CallTools`] back, in the order of its calls.
    pub fn tools_returned(&mut self, results: Vec<(Result<ToolResult, ToolError>, Duration)>) {
        let State::Calling { mut calls } = std::mem::replace(&mut self.state, State::Thinking)
        else {
            return;
        };
        let mut results = results.into_iter();
        for call in calls.iter_mut().filter(|c| c.answered.is_none()) {
            let (result, took) = results.next().unwrap_or((
                Err(ToolError::Config(
                    "no result came back for this call".into(),
                )),
                Duration::ZERO,
            ));
            let ms = took.as_millis() as u64;
            let (observation, ok) = self.result_of(&call.tool, &call.key, result);
            if let Some(step) = self.steps.get_mut(call.step) {
                step.observation = observation.clone();
                step.ok = ok;
                step.ms = ms;
            }
            self.events.push(Event::ToolResult {
                tool: call.tool.clone(),
                ok,
                observation: observation.clone(),
                ms,
            });
            call.answered = Some((observation, ok));
            call.ran = true;
        }
        self.settle(calls);
    }

    /// The observation of one result, with the tool's failures counted; a tool that
    /// failed too often (or whose infrastructure failed) becomes unavailable.
    fn result_of(
        &mut self,
        tool: &str,
        key: &CallKey,
        result: Result<ToolResult, ToolError>,
    ) -> (String, bool) {
        let (observation, ok, degrade) = match result {
            Ok(r) if r.ok => {
                let text = r.to_model_text(self.config.result_cap);
                self.failures.succeeded(tool);
                self.repeats.record(key.clone(), text.clone());
                (text, true, None)
            }
            Ok(r) => {
                let failures = self.failures.failed(tool);
                let degrade = (failures >= self.config.max_tool_failures)
                    .then(|| format!("it failed {failures} times in a row"));
                (r.to_model_text(self.config.result_cap), false, degrade)
            }
            Err(e) => {
                let (text, degrade) =
                    feedback::tool_error(e, self.specs.iter().find(|s| s.name == tool));
                (text, false, degrade)
            }
        };
        let Some(reason) = degrade else {
            return (observation, ok);
        };
        self.unavailable.insert(tool.to_string());
        let unavailable = &self.unavailable;
        let mut prepared = Prepared::of(&self.specs, |n| !unavailable.contains(n), &self.config);
        // The tools' leanings stay what they were: they do not depend on which are left.
        prepared.fit_baselines = self.prepared.fit_baselines.clone();
        self.prepared = std::sync::Arc::new(prepared);
        self.events.push(Event::Degraded {
            tool: tool.to_string(),
            reason,
        });
        (feedback::degraded(tool, &observation), ok)
    }

    /// Every call of the turn has its result: into the history in the order of the calls,
    /// each marked with its call when there were several, and the last followed by
    /// [`feedback::AFTER_RESULTS`] when every call succeeded.
    ///
    /// A turn that brought nothing new — every call a repeat, or a result the model was
    /// already shown in this run (a calculator called with its own result) — ends the
    /// calling: the next turn may only answer. Small models otherwise go on calling after
    /// every result until the repeat limit, a model turn each; a tool that returns the same
    /// text twice has nothing more to say.
    fn settle(&mut self, calls: Vec<Pending>) {
        let n = calls.len();
        // Answered without running and ok: a repeat, answered from memory.
        let nothing_new = calls.iter().all(|c| match &c.answered {
            Some((o, true)) => !c.ran || self.shown.contains(o),
            _ => false,
        });
        // Several calls at once are for the things a request asks for together, which the
        // first turn sees; after results, one call at a time. Offered the form after a
        // result, Qwen 0.5B wrote a second call nobody asked for each turn (the calculator
        // on its own result, then its square).
        self.stage = super::Stage::AfterResults;
        if nothing_new && !matches!(self.next, super::Next::AnswerOnly) {
            self.answer_only_from_now();
            self.events.push(Event::CallingEnded {
                tools: calls.iter().map(|c| c.tool.clone()).collect(),
            });
        }
        let all_ok = calls.iter().all(|c| matches!(c.answered, Some((_, true))));
        for (i, call) in calls.into_iter().enumerate() {
            let (observation, ok) = call.answered.unwrap_or_default();
            if ok {
                self.shown.insert(observation.clone());
            }
            if let (false, Some(step)) = (call.ran, self.steps.get_mut(call.step)) {
                // Answered without running: the step shows what the model was told. A call
                // held back is not a result, though the model reads it beside them as one.
                step.observation = observation.clone();
                step.ok = ok && !call.held;
                self.events.push(Event::ToolResult {
                    tool: call.tool.clone(),
                    ok: ok && !call.held,
                    observation: observation.clone(),
                    ms: 0,
                });
            }
            let mut text = feedback::call_result(i + 1, n, &call.tool, &observation);
            if i + 1 == n && all_ok {
                text.push_str(feedback::AFTER_RESULTS);
                if let Some((language, detected)) = &self.answer_in {
                    text.push_str(&crate::message::answer_in(language, *detected));
                }
            }
            self.history.push(Message::tool(&call.tool, text));
        }
        self.state = State::Thinking;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn after_results_the_model_calls_one_at_a_time() {
        use crate::config::Config;
        use crate::message::Message;
        use crate::turn::Kind;
        let mut e = super::Engine::new(
            vec![Message::system("sys")],
            "2+2 and 3+3",
            vec![super::super::tests::calc()],
            Config::default(),
        );
        e.next_step();
        assert!(e.schema().allows(Kind::ToolCalls));
        e.model_replied(&reply(
            r#"{"kind":"tool_calls","thought":"","calls":[{"tool":"calculator","arguments":{"expression":"2+2"}},{"tool":"calculator","arguments":{"expression":"3+3"}}]}"#,
        ));
        assert!(matches!(e.next_step(), Step::CallTools { .. }));
        e.tools_returned(vec![
            (Ok(ToolResult::ok("4")), Duration::ZERO),
            (Ok(ToolResult::ok("6")), Duration::ZERO),
        ]);
        assert_eq!(e.next_step(), Step::CallModel);
        assert!(!e.schema().allows(Kind::ToolCalls));
        assert!(e.schema().allows(Kind::ToolCall));
    }

    use super::super::Step;
    use super::super::tests::{CALL, engine, reply};
    use crate::message::Message;
    use crate::run::engine::Engine;
    use crate::tools::ToolResult;

    /// A call of the calculator with its result `4`, then a second call of `expression`
    /// whose result is `result`: the next step, and whether a call is allowed after it.
    fn second_call(expression: &str, result: &str) -> (Step, bool) {
        let mut e = super::super::tests::engine_without_nothing_new();
        e.next_step();
        e.model_replied(&reply(CALL));
        e.next_step();
        e.tool_returned(Ok(ToolResult::ok("4")), Duration::ZERO);
        e.next_step();
        e.model_replied(&reply(&format!(
            r#"{{"kind":"tool_call","thought":"","tool":"calculator","arguments":{{"expression":"{expression}"}}}}"#
        )));
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
        e.tool_returned(Ok(ToolResult::ok(result)), Duration::ZERO);
        let next = e.next_step();
        (next, e.schema().allows(crate::turn::Kind::ToolCall))
    }

    #[test]
    fn a_new_call_whose_result_was_already_shown_ends_the_calling() {
        // The calculator called with its own result: a new call, the same text back.
        assert_eq!(second_call("4", "4"), (Step::CallModel, false));
    }

    #[test]
    fn a_turn_with_something_new_keeps_calling_open() {
        assert_eq!(second_call("4*3", "12"), (Step::CallModel, true));
    }

    /// A first turn of `calls` calculator calls whose list the model closed giving one
    /// more call `p_more`.
    fn list_reply(calls: usize, p_more: f64) -> crate::message::ChatReply {
        list_of(&vec!["2+2"; calls], p_more)
    }

    /// A turn of calculator calls on `expressions`, its list closed giving one more call
    /// `p_more`.
    fn list_of(expressions: &[&str], p_more: f64) -> crate::message::ChatReply {
        use crate::backend::TokenLogprob;
        let calls: Vec<String> = expressions
            .iter()
            .map(|e| format!(r#"{{"tool":"calculator","arguments":{{"expression":"{e}"}}}}"#))
            .collect();
        let text = format!(
            r#"{{"kind":"tool_calls","thought":"","calls":[{}]}}"#,
            calls.join(",")
        );
        let close = text.len() - 2;
        let mut r = reply(&text);
        let token = |t: &str, top: Vec<(String, f64)>| TokenLogprob {
            token: t.into(),
            logprob: top.first().map_or(0.0, |(_, p)| *p),
            top,
        };
        r.logprobs = vec![
            token(&text[..close - 1], vec![]),
            token(
                "}]",
                vec![
                    ("}]".into(), (1.0 - p_more).ln()),
                    ("},".into(), p_more.ln()),
                ],
            ),
            token("}", vec![]),
        ];
        r
    }

    #[test]
    fn a_list_closed_while_one_more_call_had_weight_is_asked_again_for_one_more() {
        use crate::run::events::Event;
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&list_reply(1, 0.01));
        let events = e.drain_events();
        let line = events.iter().find_map(Event::check_line).unwrap();
        assert!(
            line.starts_with("more-calls: 1 call made where the model gave one more p 0.0100"),
            "{line}"
        );
        assert_eq!(e.next_step(), Step::CallModel);
        let schema = e.schema().as_value();
        assert_eq!(schema["oneOf"].as_array().unwrap().len(), 1, "{schema}");
        assert_eq!(schema["oneOf"][0]["properties"]["calls"]["minItems"], 2);
        // Asked once: the turn asked again is carried out, weight on one more or not.
        e.model_replied(&list_reply(2, 0.01));
        assert!(matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 2));
    }

    use super::super::retry::tests::{numbers_left, single};

    #[test]
    fn a_single_call_that_left_the_requests_numbers_out_is_asked_again_for_one_more() {
        use crate::run::events::Event;
        let mut e = numbers_left("2+2 and 3+3");
        e.next_step();
        e.model_replied(&single("2+2"));
        let events = e.drain_events();
        let line = events.iter().find_map(Event::check_line).unwrap();
        assert_eq!(
            line,
            "numbers-left: 1 call made that left out 3 of the request; asking again for at least 2"
        );
        assert_eq!(e.next_step(), Step::CallModel);
        let schema = e.schema().as_value();
        assert_eq!(schema["oneOf"][0]["properties"]["calls"]["minItems"], 2);
        e.model_replied(&list_of(&["2+2", "3+3"], 0.0));
        assert!(matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 2));
        // Turned off, the single call goes ahead.
        let mut config = crate::config::Config::default();
        config.checks.set("numbers-left", false).unwrap();
        let mut e = Engine::new(
            vec![Message::system("sys")],
            "2+2 and 3+3",
            vec![super::super::tests::calc()],
            config,
        );
        e.next_step();
        e.model_replied(&single("2+2"));
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    /// The line the last check that spoke printed, as a person sees it without `-v`.
    fn last_check_line(e: &mut Engine) -> String {
        let events = e.drain_events();
        events
            .iter()
            .filter_map(crate::run::events::Event::check_line)
            .next_back()
            .expect("a check spoke")
    }

    #[test]
    fn a_call_the_asking_added_that_uses_no_number_left_out_is_not_run() {
        let mut e = numbers_left("2+2 and 3+3");
        e.next_step();
        e.model_replied(&single("2+2"));
        assert_eq!(e.next_step(), Step::CallModel);
        e.model_replied(&list_of(&["2+2", "2*2"], 0.0));
        assert_eq!(
            last_check_line(&mut e),
            "numbers-left: calculator not run: it uses none of 3 that the calls before left out"
        );
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
        e.tools_returned(vec![(Ok(ToolResult::ok("4")), Duration::ZERO)]);
        assert_eq!(e.next_step(), Step::CallModel);
        let told = &e.messages().last().unwrap().content;
        assert!(told.contains("uses none of 3 from the request"), "{told}");
        // Where `more-calls` asked, the calls it added answer to it alone.
        let mut e = numbers_left("2+2 and 3+3");
        e.next_step();
        e.model_replied(&list_of(&["2+2"], 0.01));
        assert_eq!(e.next_step(), Step::CallModel);
        e.model_replied(&list_of(&["2+2", "2*2"], 0.0));
        assert!(matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 2));
        // A call that says nothing of the request's numbers leaves nothing to ask for.
        let mut e = numbers_left("what is two plus two");
        e.next_step();
        e.model_replied(&single("2+2"));
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
    }

    #[test]
    fn a_call_added_when_asked_for_more_with_a_value_nobody_gave_waits_for_the_results() {
        use crate::run::events::Event;
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&list_of(&["2+2"], 0.01));
        assert_eq!(e.next_step(), Step::CallModel);
        // Asked for one more, the model adds a step on a value of its own.
        e.model_replied(&list_of(&["2+2", "17 * 3"], 0.0));
        assert_eq!(
            last_check_line(&mut e),
            "more-calls: calculator not run: expression given by nobody; it waits for the other calls' results"
        );
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
        e.tools_returned(vec![(Ok(ToolResult::ok("4")), Duration::ZERO)]);
        assert_eq!(e.next_step(), Step::CallModel);
        let told = &e.messages().last().unwrap().content;
        assert!(
            told.contains("not run: nobody gave expression for calculator"),
            "{told}"
        );
        // The person sees it as not run, not as a result.
        let shown: Vec<(String, bool)> = e
            .drain_events()
            .into_iter()
            .filter_map(|ev| match ev {
                Event::ToolResult { tool, ok, .. } => Some((tool, ok)),
                _ => None,
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("calculator".to_string(), true),
                ("calculator".to_string(), false)
            ]
        );
        // Asked once: a turn that still gives one more call weight is judged call by
        // call like any other, and the added step waits all the same.
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&list_of(&["2+2"], 0.01));
        e.next_step();
        e.model_replied(&list_of(&["2+2", "17 * 3"], 0.01));
        assert!(matches!(e.next_step(), Step::CallTool { .. }));
        // A call added with the person's own values runs.
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&list_of(&["2+2"], 0.01));
        e.next_step();
        e.model_replied(&list_of(&["2+2", "2*2"], 0.0));
        assert!(matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 2));
    }

    #[test]
    fn a_full_list_with_weight_on_one_more_is_still_judged_call_by_call() {
        // Eight calls, the most a turn carries: it cannot be asked for one more, and its
        // calls go ahead as any other turn's do (here, one the model was sure enough of
        // not to be asked about).
        let config = crate::config::Config {
            thresholds: Some(crate::Thresholds {
                p_sure: 0.9,
                ..crate::Thresholds::default()
            }),
            ..crate::config::Config::default()
        };
        let mut e = Engine::new(
            vec![Message::system("sys")],
            "what is 2+2",
            vec![super::super::tests::calc()],
            config,
        );
        e.next_step();
        e.model_replied(&list_of(&["17 * 3"; 8], 0.01));
        assert!(
            matches!(e.next_step(), Step::CallTools { calls } if calls.len() == 8),
            "{:?}",
            e.drain_events()
        );
    }

    #[test]
    fn a_list_closed_with_no_weight_on_one_more_call_goes_ahead_unchanged() {
        let mut e = engine(10);
        e.next_step();
        e.model_replied(&list_reply(1, 0.00002));
        assert!(matches!(
            e.next_step(),
            Step::CallTool { .. } | Step::CallTools { .. }
        ));
        // A turn asked again for more is held to it: one call is not enough.
        let schema = crate::turn::schema::CallSchema::deciding_calls(
            &[super::super::tests::calc()],
            crate::turn::schema::Narrowing::PerTool,
            crate::turn::schema::Decide::Probability,
            8,
        );
        let two = schema.at_least(2).unwrap();
        let one = crate::turn::Turn::parse(&list_reply(1, 0.0).text)
            .unwrap()
            .turn;
        assert!(two.check(&one).is_err());
        assert!(schema.check(&one).is_ok());
        assert!(schema.at_least(9).is_none());
    }
}
