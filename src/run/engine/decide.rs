//! The decision on a turn that calls: the checks judge it, after the model has answered
//! the fit question when a check wants that first (`crate::checks::tool_fit`). A part of
//! [`crate::run::engine`] in a file of its own so that the state machine itself reads in
//! one sitting.

use serde_json::Value;

use super::{Call, Engine, Next, State, schema_of};
use crate::checks::{Earlier, Finding, TurnContext, Verdict, numbers_left};
use crate::message::{ChatReply, Message};
use crate::run::events::Event;
use crate::run::feedback;
use crate::turn::Turn;

/// The model's answers to the fit question about a turn, once it was asked: the one that
/// fit best, and the tool it is about.
#[derive(Debug)]
pub(super) struct Answered {
    /// Its share of "yes", against the tool's leaning where that is known; `None` where
    /// it could not be read.
    fit: Option<crate::checks::tool_fit::Fit>,
    /// The tool it is about.
    tool: Option<String>,
}

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
        let answered = Answered {
            fit: fit.flatten(),
            tool,
        };
        self.accept(&call_reply, *turn, repaired, Some(answered));
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
        calls: &[Call],
        asked: Option<&super::retry::AskedAgain>,
        answered: Option<Answered>,
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
        let own_numbers = crate::checks::tool_fit::own_numbers(calls, &said);
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
            fit: answered.as_ref().and_then(|a| a.fit),
            fit_tool: answered.as_ref().and_then(|a| a.tool.as_deref()),
            person: &person,
            earlier: &earlier,
            unsaid: &unsaid,
            own_numbers: &own_numbers,
            // Nor where the schema can hold no call more: the turn is then judged call by
            // call like any other.
            again: asked.is_some()
                || matches!(self.next, Next::Among(_))
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
            && answered.is_none()
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
            self.next = Next::Among(schema_of(&self.specs, keep, &self.config));
            return None;
        }
        // Once: a turn asked again is carried out as it comes back. `ctx.again` saw to it
        // that this turn was never asked again and that the schema holds one more.
        self.ask_for_more(reply, turn, repaired, calls, verdict)
    }
}

#[cfg(test)]
mod tests;
