//! The decision on a turn that calls: the checks judge it, after the model has answered
//! its questions aside when a check wants them answered first. A part of
//! [`crate::run::engine`] in a file of its own so that the state machine itself reads in
//! one sitting.

use super::{Call, Engine, Next, State, schema_of};
use crate::checks::{self, Aside, Earlier, Finding, TurnContext, Verdict};
use crate::message::ChatReply;
use crate::run::feedback;
use crate::tool_spec::Effect;
use crate::turn::Turn;

impl Engine {
    /// The run's calls that came back, as its steps record them.
    pub(super) fn earlier(&self) -> Vec<Earlier<'_>> {
        self.steps
            .iter()
            .filter_map(|s| {
                Some(Earlier {
                    tool: s.tool.as_deref()?,
                    arguments: s.arguments.as_ref()?,
                    result: &s.observation,
                    ok: s.ok,
                    turn: s.iteration,
                })
            })
            .collect()
    }

    /// The question aside waiting for the model ([`super::Step::AskAside`]), if one is.
    pub(crate) fn aside(&self) -> Option<&Aside> {
        match &self.state {
            State::AskingAside { questions, .. } => questions.first(),
            _ => None,
        }
    }

    /// Feeds the model's answer to the question aside back (`None`: it could not be had,
    /// and the check that asked judges without it). Once every question was answered, the
    /// turn is judged with what the answers say.
    pub fn aside_replied(&mut self, reply: Option<&ChatReply>) {
        // Not waiting for an answer: the state stays as it is.
        if !matches!(self.state, State::AskingAside { .. }) {
            return;
        }
        let State::AskingAside {
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
            let leanings = &self.prepared.fit_baselines;
            let read = checks::aside_answered(&asked, reply, &mut questions, &self.specs, leanings);
            answers.push((asked, read));
        }
        if !questions.is_empty() {
            self.state = State::AskingAside {
                reply: call_reply,
                turn,
                repaired,
                questions,
                answers,
            };
            return;
        }
        let answered = checks::asides_answered(&answers, &self.specs, &self.prepared.fit_baselines);
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
        answered: Option<checks::Answered>,
    ) -> Option<(Turn, Verdict)> {
        let said = feedback::evidence(&self.history);
        let thresholds = self.config.thresholds();
        let question = &self.history[self.run_start].content;
        let person = feedback::person(&self.history[self.run_start..]);
        let earlier = self.earlier();
        let unsaid = checks::unsaid(&self.specs, calls, &said);
        let own_numbers = checks::own_numbers(calls, &said);
        let examples = checks::example_copy::described_copies(&self.specs, calls, &said);
        // Asked for one call more than the turn before: the calls past those were added,
        // and they answer to what that turn left out. Read only where the check could ask.
        let added_from = asked.map(|a| a.calls.len());
        let ctx_left = match asked {
            Some(a) => a.left.clone(),
            None if calls.len() == 1 => self.checks.left_out(question, calls),
            None => Vec::new(),
        };
        let writes: Vec<String> = self
            .specs
            .iter()
            .filter(|s| self.config.permissions.class_of(s).0.effect != Effect::ReadOnly)
            .map(|s| s.name.clone())
            .collect();
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
            examples: &examples,
            // Nor where the schema can hold no call more: the turn is then judged call by
            // call like any other.
            again: asked.is_some()
                || matches!(self.next, Next::Among { by_words: true, .. })
                || !self.prepared.first.can_hold(calls.len() as u64 + 1),
            // Only a declined call's `instead` narrows the tools to some (`example-copy`,
            // by shared words); an answer-only narrowing leaves no call to judge.
            offered_by_words: matches!(self.next, Next::Among { by_words: true, .. }),
            leaned: matches!(
                self.next,
                Next::Among {
                    by_words: false,
                    ..
                }
            ),
            added_from,
            left: &ctx_left,
            writes: &writes,
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
            let tools: Vec<&crate::tool_spec::ToolSpec> = calls
                .iter()
                .filter_map(|c| self.specs.iter().find(|s| s.name == c.0))
                .collect();
            let questions = checks::asides(question, &tools, &writes, &self.prepared.fit_baselines);
            if !questions.is_empty() {
                self.state = State::AskingAside {
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
                Finding::OnCall {
                    index,
                    act: crate::checks::OnCall::Hold { told },
                    ..
                } => Some((*index, told.clone())),
                _ => None,
            })
            .collect();
        let mut turn = turn;
        for f in &findings {
            if let Finding::OnCall {
                index,
                arguments,
                act: crate::checks::OnCall::LeaveOut,
                ..
            } = f
            {
                leave_out(&mut turn, *index, arguments);
            }
        }
        let source = thresholds.as_ref().map(|t| t.source());
        for f in findings {
            self.events.extend(f.events(source.as_deref()));
        }
        if let Verdict::Decline {
            instead,
            copied_prompt,
            leaned,
        } = &verdict
        {
            if *copied_prompt {
                self.change_prompt(crate::turn::prompt::without_example);
            }
            let keep = |name: &str| instead.iter().any(|n| n == name);
            self.next = Next::Among {
                schema: schema_of(&self.specs, keep, &self.config),
                by_words: !leaned,
            };
            return None;
        }
        // Once: a turn asked again is carried out as it comes back. `ctx.again` saw to it
        // that this turn was never asked again and that the schema holds one more.
        self.ask_for_more(reply, turn, repaired, calls, verdict)
    }
}

/// The call at `index` of `turn` without `arguments`: what a check left out.
fn leave_out(turn: &mut Turn, index: usize, arguments: &[String]) {
    let map = match turn {
        Turn::ToolCall { arguments, .. } if index == 0 => arguments,
        Turn::ToolCalls { calls, .. } => match calls.get_mut(index) {
            Some(c) => &mut c.arguments,
            None => return,
        },
        _ => return,
    };
    for a in arguments {
        map.remove(a);
    }
}

#[cfg(test)]
mod tests;
