//! Which checks a run turns on: each check's default ([`CheckInfo::default_on`]) unless
//! the person set it by name (`--check NAME=on|off`, a web run's levels).

use std::collections::BTreeMap;

use super::{ALL, CheckInfo};

/// Which checks are on: each check's default unless set here by name.
///
/// ```
/// use toolloop::checks::CheckLevels;
///
/// let mut levels = CheckLevels::default();
/// levels.set("more-calls", false).unwrap();
/// assert!(!levels.is_on("more-calls"));
/// assert!(levels.is_on("tool-probability"));
/// assert!(levels.set("no-such-check", true).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CheckLevels {
    set: BTreeMap<&'static str, bool>,
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
                .any(|c| c.info().name == name && c.info().default_on),
        }
    }

    /// Turns every check on or off.
    pub fn set_all(&mut self, on: bool) {
        for c in ALL {
            self.set.insert(c.info().name, on);
        }
    }
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
