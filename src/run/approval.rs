//! Which calls run: a tool that only reads runs unasked; any other call runs only once the
//! person allowed it, ahead of the run ([`Permissions`]) or when it comes
//! ([`Approver`]). Where nobody can be asked, a call that would ask is not run.
//!
//! A denied call is not run. The model gets a tool error that says the person did not
//! allow it, never a result that passes for one, and the run goes on to an answer.

use std::collections::{BTreeMap, BTreeSet, HashSet};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tool_spec::{ClassSource, Effect, ToolClass, ToolSpec};

/// What the person said ahead of a run about which calls may run, and of what class each
/// tool is. Their word wins over a server's hints: a server can claim anything.
///
/// ```
/// use toolloop::{Permissions, tools::{Effect, ToolSpec}};
///
/// let mut p = Permissions::default();
/// p.classes.insert("get_page".into(), "destructive".parse().unwrap());
/// let spec = ToolSpec::new("get_page", "", serde_json::json!({})).reading_only();
/// assert_eq!(p.class_of(&spec).0.effect, Effect::Destructive);
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Permissions {
    /// Tools whose calls run without asking (`--allow TOOL`).
    pub allow: BTreeSet<String>,
    /// Tools whose calls never run (`--deny TOOL`).
    pub deny: BTreeSet<String>,
    /// Every call that would ask runs (`--yes`); a denied tool still does not.
    pub yes: bool,
    /// The person's class for a tool (`--class TOOL=destructive`), over its hints.
    pub classes: BTreeMap<String, ToolClass>,
}

impl Permissions {
    /// The file the person's permissions are kept in: `$TOOLLOOP_PERMISSIONS` when set,
    /// else `toolloop/permissions.json` in the user's config folder (`~/.config` on
    /// Linux). JSON: `{"allow": ["git_status"], "deny": ["git_push"], "classes":
    /// {"fetch_page": "read-only, open world"}}`.
    pub fn path() -> Option<std::path::PathBuf> {
        match std::env::var_os("TOOLLOOP_PERMISSIONS") {
            Some(p) if !p.is_empty() => Some(p.into()),
            _ => dirs::config_dir().map(|d| d.join("toolloop").join("permissions.json")),
        }
    }

    /// The permissions in [`Permissions::path`]; none set when there is no such file.
    pub fn load() -> Result<Self, String> {
        let Some(path) = Self::path() else {
            return Ok(Self::default());
        };
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map_err(|e| format!("{}: {e}; fix the file or move it away", path.display())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("cannot read {}: {e}", path.display())),
        }
    }

    /// The class of `spec`'s calls: the person's, else the tool's hints with MCP's
    /// defaults, and where it came from.
    pub fn class_of(&self, spec: &ToolSpec) -> (ToolClass, ClassSource) {
        match self.classes.get(&spec.name) {
            Some(c) => (*c, ClassSource::Person),
            None => spec.class(),
        }
    }

    /// Whether `spec`'s calls run unasked and may start as soon as they are written.
    pub fn reads_only(&self, spec: &ToolSpec) -> bool {
        self.class_of(spec).0.effect == Effect::ReadOnly && !self.deny.contains(&spec.name)
    }

    /// An error naming the tools on offer when a name it holds is none of them.
    pub fn check(&self, specs: &[ToolSpec]) -> Result<(), String> {
        let names: HashSet<&str> = specs.iter().map(|s| s.name.as_str()).collect();
        let named = self
            .allow
            .iter()
            .map(|n| ("--allow", n))
            .chain(self.deny.iter().map(|n| ("--deny", n)))
            .chain(self.classes.keys().map(|n| ("--class", n)));
        for (flag, name) in named {
            if !names.contains(name.as_str()) {
                let mut on_offer: Vec<&str> = names.iter().copied().collect();
                on_offer.sort_unstable();
                return Err(format!(
                    "{flag} {name}: no tool of that name; the tools on offer are: {}",
                    on_offer.join(", ")
                ));
            }
        }
        Ok(())
    }
}

/// A call waiting for the person's word.
#[derive(Debug, Clone, Copy)]
pub struct ApprovalRequest<'a> {
    /// The tool.
    pub tool: &'a str,
    /// The arguments the model wrote.
    pub arguments: &'a Map<String, Value>,
    /// The tool's class.
    pub class: ToolClass,
    /// Where the class came from.
    pub source: ClassSource,
}

/// The person's answer to an [`ApprovalRequest`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Answer {
    /// Run this call.
    Yes,
    /// Do not run it.
    No,
    /// Run it, and every call of this tool for the rest of the run.
    Always,
}

/// Asks the person whether a call may run. A closure `FnMut(&ApprovalRequest) -> Answer`
/// is one.
pub trait Approver: Send {
    /// The person's answer; `None` when nobody could be asked (no terminal, the person
    /// went away), which does not run the call.
    fn approve(&mut self, request: &ApprovalRequest<'_>) -> Option<Answer>;
}

impl<F: FnMut(&ApprovalRequest<'_>) -> Answer + Send> Approver for F {
    fn approve(&mut self, request: &ApprovalRequest<'_>) -> Option<Answer> {
        Some(self(request))
    }
}

impl Approver for Box<dyn Approver> {
    fn approve(&mut self, request: &ApprovalRequest<'_>) -> Option<Answer> {
        (**self).approve(request)
    }
}

/// Who decided whether a call ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DecidedBy {
    /// The person's `--allow` (or the config's).
    Allow,
    /// The person's `--deny`.
    Deny,
    /// The person's `--yes`.
    Yes,
    /// The person, asked now.
    Person,
    /// The person, who said "always" for this tool earlier in the run.
    Always,
    /// Nobody could be asked: not run.
    Nobody,
}

impl std::fmt::Display for DecidedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            DecidedBy::Allow => "--allow",
            DecidedBy::Deny => "--deny",
            DecidedBy::Yes => "--yes",
            DecidedBy::Person => "you",
            DecidedBy::Always => "you, always for this tool",
            DecidedBy::Nobody => "nobody could be asked",
        })
    }
}

/// What the gate decided of a call that asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Decided {
    /// Whether it runs.
    pub allowed: bool,
    /// Who said so.
    pub by: DecidedBy,
    /// The tool's class, and where it came from.
    pub class: (ToolClass, ClassSource),
}

/// One run's approvals: the person's settings, who to ask, and the tools they said
/// "always" for.
pub(crate) struct Gate<'a, 'b> {
    pub permissions: &'a Permissions,
    pub approver: Option<&'a mut (dyn Approver + 'b)>,
    pub always: &'a mut HashSet<String>,
}

impl Gate<'_, '_> {
    /// Whether the call of `spec` with `arguments` may run, and who said so; `None` for
    /// a call of a tool that only reads, which runs unasked and is not recorded.
    pub fn decide(&mut self, spec: &ToolSpec, arguments: &Map<String, Value>) -> Option<Decided> {
        let p = self.permissions;
        let name = &spec.name;
        let class = p.class_of(spec);
        let decided = |allowed, by| Some(Decided { allowed, by, class });
        if p.deny.contains(name) {
            return decided(false, DecidedBy::Deny);
        }
        if class.0.effect == Effect::ReadOnly {
            return None;
        }
        if p.allow.contains(name) {
            return decided(true, DecidedBy::Allow);
        }
        if self.always.contains(name) {
            return decided(true, DecidedBy::Always);
        }
        if p.yes {
            return decided(true, DecidedBy::Yes);
        }
        let request = ApprovalRequest {
            tool: name,
            arguments,
            class: class.0,
            source: class.1,
        };
        match self.approver.as_mut().and_then(|a| a.approve(&request)) {
            Some(Answer::Yes) => decided(true, DecidedBy::Person),
            Some(Answer::Always) => {
                self.always.insert(name.clone());
                decided(true, DecidedBy::Person)
            }
            Some(Answer::No) => decided(false, DecidedBy::Person),
            None => decided(false, DecidedBy::Nobody),
        }
    }
}

/// What the model is told of a call that was not run: a tool error that says what
/// happened, in words an answer may repeat, so that it answers without the call rather
/// than take it as done. No instruction to the model: a small model copies such a text
/// into its answer.
pub(crate) fn denied_text(tool: &str, class: ToolClass, by: DecidedBy) -> String {
    let why = match by {
        DecidedBy::Nobody => "nobody was there to approve it",
        _ => "the person did not allow it",
    };
    format!("not run: {tool} ({class}) needs the person's approval, and {why}; nothing was changed")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn spec(name: &str, hints: Value) -> ToolSpec {
        serde_json::from_value(json!({"name": name, "annotations": hints})).unwrap()
    }

    fn gate_decides(
        p: &Permissions,
        approver: Option<&mut dyn Approver>,
        s: &ToolSpec,
    ) -> Option<(bool, DecidedBy)> {
        let mut always = HashSet::new();
        Gate {
            permissions: p,
            approver,
            always: &mut always,
        }
        .decide(s, &Map::new())
        .map(|d| (d.allowed, d.by))
    }

    #[test]
    fn a_tool_that_only_reads_runs_unasked_and_any_other_is_denied_with_nobody_to_ask() {
        let p = Permissions::default();
        let read = spec("get_page", json!({"readOnlyHint": true}));
        assert_eq!(gate_decides(&p, None, &read), None);
        let silent = spec("delete_all", json!(null));
        assert_eq!(
            gate_decides(&p, None, &silent),
            Some((false, DecidedBy::Nobody))
        );
    }

    #[test]
    fn the_persons_class_wins_over_a_servers_claim() {
        let mut p = Permissions::default();
        p.classes
            .insert("get_page".into(), "destructive".parse().unwrap());
        let claims = spec("get_page", json!({"readOnlyHint": true}));
        assert!(!p.reads_only(&claims));
        assert_eq!(
            gate_decides(&p, None, &claims),
            Some((false, DecidedBy::Nobody))
        );
    }

    #[test]
    fn allow_yes_and_deny_decide_without_asking_and_deny_wins() {
        let s = spec("git_push", json!({"destructiveHint": true}));
        let mut asked = 0;
        let mut approver = |_: &ApprovalRequest<'_>| {
            asked += 1;
            Answer::No
        };
        let mut p = Permissions {
            yes: true,
            ..Permissions::default()
        };
        assert_eq!(
            gate_decides(&p, Some(&mut approver), &s),
            Some((true, DecidedBy::Yes))
        );
        p.allow.insert("git_push".into());
        assert_eq!(
            gate_decides(&p, Some(&mut approver), &s),
            Some((true, DecidedBy::Allow))
        );
        p.deny.insert("git_push".into());
        assert_eq!(
            gate_decides(&p, Some(&mut approver), &s),
            Some((false, DecidedBy::Deny))
        );
        assert_eq!(asked, 0);
    }

    #[test]
    fn always_is_asked_once_a_run() {
        let p = Permissions::default();
        let s = spec("post_message", json!({}));
        let mut asked = 0;
        let mut approver = |r: &ApprovalRequest<'_>| {
            assert_eq!(r.source, ClassSource::Default);
            asked += 1;
            Answer::Always
        };
        let mut always = HashSet::new();
        let mut gate = Gate {
            permissions: &p,
            approver: Some(&mut approver),
            always: &mut always,
        };
        let by = |d: Option<Decided>| d.map(|d| (d.allowed, d.by));
        assert_eq!(
            by(gate.decide(&s, &Map::new())),
            Some((true, DecidedBy::Person))
        );
        assert_eq!(
            by(gate.decide(&s, &Map::new())),
            Some((true, DecidedBy::Always))
        );
        assert_eq!(asked, 1);
    }

    #[test]
    fn an_unknown_name_is_an_error_naming_the_tools_on_offer() {
        let p = Permissions {
            allow: ["git_psh".to_string()].into(),
            ..Permissions::default()
        };
        let e = p
            .check(&[spec("git_push", json!({})), spec("git_status", json!({}))])
            .unwrap_err();
        assert_eq!(
            e,
            "--allow git_psh: no tool of that name; the tools on offer are: git_push, git_status"
        );
    }
}
