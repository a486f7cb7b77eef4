//! Guardrails on what goes in and what comes out: size limits and blocked
//! patterns, each with an action. `Allow` lets it through, `Warn` lets it through with a
//! warning event, `Block` stops the run with stop reason `blocked`.

use regex::Regex;

/// What to do when a rule matches.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Action {
    /// Let it through.
    Allow,
    /// Let it through and emit a warning.
    #[default]
    Warn,
    /// Stop the run.
    Block,
}

/// One blocked pattern.
#[derive(Debug, Clone)]
pub struct Rule {
    /// What it matches.
    pub pattern: Regex,
    /// What to do.
    pub action: Action,
    /// A name for messages.
    pub name: String,
}

/// Limits and patterns for the person's query and the final answer.
///
/// ```
/// use toolloop::{Action, Guardrails, Verdict};
///
/// let g = Guardrails::default()
///     .max_input_chars(100)
///     .block_pattern("api key", r"(?i)sk-[a-z0-9]{8,}", Action::Block)
///     .unwrap();
/// assert_eq!(g.check_input("What is 2 + 2?"), Verdict::Pass);
/// assert!(matches!(g.check_output("here: sk-abcdefgh1234"), Verdict::Block(_)));
/// ```
#[derive(Debug, Clone, Default)]
pub struct Guardrails {
    max_input: Option<usize>,
    max_output: Option<usize>,
    oversize: Action,
    rules: Vec<Rule>,
}

/// The result of a check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing matched (or only `Allow` rules).
    Pass,
    /// Let through, with this warning.
    Warn(String),
    /// Stopped, for this reason.
    Block(String),
}

impl Guardrails {
    /// The longest query accepted; longer is handled by the size action (default: warn).
    pub fn max_input_chars(mut self, n: usize) -> Self {
        self.max_input = Some(n);
        self
    }

    /// The longest answer accepted.
    pub fn max_output_chars(mut self, n: usize) -> Self {
        self.max_output = Some(n);
        self
    }

    /// What to do when a size limit is passed (default [`Action::Warn`]).
    pub fn on_oversize(mut self, action: Action) -> Self {
        self.oversize = action;
        self
    }

    /// Adds a pattern; an invalid regex is an error naming it.
    pub fn block_pattern(
        mut self,
        name: &str,
        pattern: &str,
        action: Action,
    ) -> Result<Self, regex::Error> {
        self.rules.push(Rule {
            pattern: Regex::new(pattern)?,
            action,
            name: name.to_string(),
        });
        Ok(self)
    }

    /// Checks the person's query.
    pub fn check_input(&self, text: &str) -> Verdict {
        self.check(text, self.max_input, "query")
    }

    /// Whether an answer could be blocked: then it is not shown while it is written
    /// ([`crate::turn::answer_stream`]), only once it has passed.
    pub fn may_block_output(&self) -> bool {
        (self.max_output.is_some() && self.oversize == Action::Block)
            || self.rules.iter().any(|r| r.action == Action::Block)
    }

    /// Checks the final answer.
    pub fn check_output(&self, text: &str) -> Verdict {
        self.check(text, self.max_output, "answer")
    }

    fn check(&self, text: &str, max: Option<usize>, what: &str) -> Verdict {
        let mut warnings = Vec::new();
        if let Some(max) = max {
            let n = text.chars().count();
            if n > max {
                let msg = format!("the {what} is {n} characters, over the limit of {max}");
                match self.oversize {
                    Action::Allow => {}
                    Action::Warn => warnings.push(msg),
                    Action::Block => return Verdict::Block(msg),
                }
            }
        }
        for rule in &self.rules {
            if rule.pattern.is_match(text) {
                let msg = format!("the {what} matches the blocked pattern \"{}\"", rule.name);
                match rule.action {
                    Action::Allow => {}
                    Action::Warn => warnings.push(msg),
                    Action::Block => return Verdict::Block(msg),
                }
            }
        }
        if warnings.is_empty() {
            Verdict::Pass
        } else {
            Verdict::Warn(warnings.join("; "))
        }
    }
}
