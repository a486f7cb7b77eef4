//! Which checks a run turns on: each check's default ([`CheckInfo::default_on`], off for
//! the model families in [`CheckInfo::off_for`]) unless the person set it by name
//! (`--check NAME=on|off`, a web run's levels).

use std::collections::BTreeMap;

use super::{ALL, CheckInfo};

/// Which checks are on: each check's default for the model's family unless set here by
/// name.
///
/// ```
/// use toolloop::checks::CheckLevels;
///
/// let mut levels = CheckLevels::default();
/// levels.set("more-calls", false).unwrap();
/// assert!(!levels.is_on("more-calls"));
/// assert!(levels.is_on("tool-probability"));
/// assert!(levels.set("no-such-check", true).is_err());
/// // A Gemma model has its own defaults; a name set outright wins over them.
/// levels.for_model("gemma3:4b");
/// assert!(!levels.is_on("numbers-left"));
/// levels.set("numbers-left", true).unwrap();
/// assert!(levels.is_on("numbers-left"));
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckLevels {
    set: BTreeMap<&'static str, bool>,
    family: Option<&'static str>,
}

impl CheckLevels {
    /// Turns the check called `name` on or off; an unknown name is an error that lists
    /// the known ones.
    pub fn set(&mut self, name: &str, on: bool) -> Result<(), String> {
        match ALL.iter().find(|c| c.info().name == name) {
            Some(c) => {
                self.set.insert(c.info().name, on);
                Ok(())
            }
            None => Err(format!(
                "no check is called '{name}'; the checks are: {}",
                ALL.iter()
                    .map(|c| c.info().name)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        }
    }

    /// Whether the check called `name` runs.
    pub fn is_on(&self, name: &str) -> bool {
        match self.set.get(name) {
            Some(on) => *on,
            None => ALL
                .iter()
                .any(|c| c.info().name == name && self.default_on(c.info())),
        }
    }

    /// Each check's default from now on is the one for `model`'s family ([`family_of`]).
    pub fn for_model(&mut self, model: &str) {
        self.family = family_of(model);
    }

    /// The checks on by default that are off by default for the model's family, and left
    /// so (not set by name): what a run says as it starts.
    pub fn off_for_family(&self) -> Option<(&'static str, Vec<&'static str>)> {
        let family = self.family?;
        let off: Vec<_> = all()
            .filter(|c| c.off_for.contains(&family) && !self.set.contains_key(c.name))
            .map(|c| c.name)
            .collect();
        (!off.is_empty()).then_some((family, off))
    }

    /// The line that says which checks the model's family runs without
    /// ([`CheckLevels::off_for_family`]) and how to have them, if any.
    ///
    /// ```
    /// use toolloop::checks::CheckLevels;
    ///
    /// let mut levels = CheckLevels::default();
    /// assert_eq!(levels.family_note(), None);
    /// levels.for_model("/models/gemma3-270m-q4_k_m.gguf");
    /// levels.set("more-calls", true).unwrap();
    /// assert!(levels.family_note().unwrap().starts_with("numbers-left off by default for gemma models"));
    /// ```
    pub fn family_note(&self) -> Option<String> {
        let (family, off) = self.off_for_family()?;
        Some(family_note(family, &off))
    }

    fn default_on(&self, c: &CheckInfo) -> bool {
        c.default_on && !self.family.is_some_and(|f| c.off_for.contains(&f))
    }

    /// Turns every check on or off.
    pub fn set_all(&mut self, on: bool) {
        for c in ALL {
            self.set.insert(c.info().name, on);
        }
    }
}

/// The line for checks `off` by default for `family`'s models, and how to turn them on.
pub(crate) fn family_note(family: &str, off: &[impl AsRef<str>]) -> String {
    let off: Vec<&str> = off.iter().map(AsRef::as_ref).collect();
    let flags: Vec<_> = off.iter().map(|c| format!("--check {c}=on")).collect();
    format!(
        "{} off by default for {family} models (measured there: more requests, no right call \
         gained); {} turns {} on",
        off.join(", "),
        flags.join(" "),
        if off.len() > 1 { "them" } else { "it" }
    )
}

/// The family of a model, read from its name as Ollama or the server has it
/// (`gemma3:4b`, `/models/gemma3-270m-q4_k_m.gguf`): one of the families some check's
/// default is set for ([`CheckInfo::off_for`]), or `None`.
///
/// ```
/// assert_eq!(toolloop::checks::family_of("gemma3:270m"), Some("gemma"));
/// assert_eq!(toolloop::checks::family_of("qwen2.5-coder:0.5b"), None);
/// ```
pub fn family_of(model: &str) -> Option<&'static str> {
    let name = model
        .rsplit(['/', '\\'])
        .next()
        .unwrap_or(model)
        .to_lowercase();
    all()
        .flat_map(|c| c.off_for.iter().copied())
        .find(|family| name.contains(family))
}

/// Every check's declaration, in the order the checks run.
///
/// ```
/// let names: Vec<_> = toolloop::checks::all().map(|c| c.name).collect();
/// assert!(names.contains(&"tool-probability"));
/// ```
pub fn all() -> impl Iterator<Item = &'static CheckInfo> {
    ALL.iter().map(|c| c.info())
}
