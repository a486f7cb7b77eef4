//! The thresholds the decision step declines calls by, and the file that keeps them per
//! model and server.
//!
//! How sure a model is of a call, and how it answers the fit question, differ from model to
//! model: Qwen2.5-Coder 0.5B gives needless calls a median 0.89, Gemma 3 270M gives every
//! call 0.97–0.99. One threshold for all models either declines right calls of one or lets
//! every needless call of the other through. So `toolloop calibrate` measures them on a
//! labelled set against the person's own model and server and writes them here; `ask`,
//! `chat`, `eval`, `web` and the library ([`crate::OrchestratorBuilder`]) read the entry
//! for the model and server they use. A model nobody calibrated gets the one toolloop ships
//! for its model file, when it measured that file (`shipped.rs`), else
//! [`Thresholds::default`].
//!
//! Imports the leaf modules (`deadline`) and `backend`, to ask a server which model file
//! it runs; nothing of the loop.

use std::path::{Path, PathBuf};

mod shipped;

use shipped::for_backend as shipped_for;

use serde::{Deserialize, Serialize};

/// The thresholds of the decision step (`tool-probability`, `tool-fit`).
///
/// ```
/// use toolloop::Thresholds;
///
/// let t = Thresholds::default();
/// assert!(t.calibrated_for.is_none());
/// assert!(t.p_min <= t.p_sure);
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Thresholds {
    /// A call with less than this share of the model's probability is declined
    /// (`tool-probability`).
    pub p_min: f64,
    /// A call with at least this share goes ahead unquestioned; below it, a call whose
    /// tool shares no word with the request, or which carries a required value nobody
    /// said, is put to the model as the fit question (`tool-fit`).
    pub p_sure: f64,
    /// A questioned call is declined (`tool-fit`) when its share of "yes" to the fit
    /// question, plus `p_weight` times how far its p(tool) is below 1, is below this.
    pub fit_min: f64,
    /// How much the model's own p(tool) counts beside its answer to the fit question:
    /// 0, the answer alone. Calibrated: on Qwen2.5-Coder 0.5B the needless calls that
    /// answer "yes" as often as right ones are those it was less sure of.
    #[serde(default)]
    pub p_weight: f64,
    /// How much it counts against a questioned call that the model's probability at its
    /// tool's name went to names no tool on offer has (`NAME_SURE`, 0.2): 0, not at all.
    /// Calibrated: a small model that wanted a tool the catalogue lacks calls the nearest
    /// one listed, and answers the fit question for it about as a right call would.
    #[serde(default)]
    pub name_weight: f64,
    /// The model and server these were measured for; `None`: the defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub calibrated_for: Option<String>,
    /// Whether `fit_min` holds the fit answer set against the tool's own leaning
    /// (`tool-fit`'s score since that came in). An entry calibrated before holds a bar
    /// for the bare share of "yes", on another scale, and is not used: the defaults stand
    /// until the model is calibrated again, and the decline line says to.
    #[serde(default)]
    pub fit_against_leaning: bool,
    /// Which wording of the fit question `fit_min` was measured with
    /// (`FIT_QUESTION`): each wording draws "yes" on a scale of its own, so an entry
    /// calibrated with another is not used, as above.
    #[serde(default)]
    pub fit_question: u32,
    /// The model whose calibration was found but not used, because it was measured with
    /// another wording of the fit question: the defaults stand, and the decline
    /// line says to calibrate again rather than that nobody did. Not saved.
    #[serde(skip)]
    pub outdated_for: Option<String>,
}

/// The wording of the fit question today (`tool-fit`'s `question`): 0 was "To reply to this
/// request, should the assistant call the tool NAME?", 1 is "Is the tool NAME needed to
/// reply to this request?".
pub(crate) const FIT_QUESTION: u32 = 1;

impl Default for Thresholds {
    /// For a model nobody calibrated: every call whose tool shares no word with the request
    /// (or that carries a value nobody said) is put to the fit question, however sure the
    /// model was, and declined below 0.40. A small model is sure of nearly every call it
    /// makes, needless ones too, so a sure level let them all through. The bar keeps a
    /// margin below the lowest fit of a right call on the tuning halves of the everyday and
    /// languages sets, for both real models.
    fn default() -> Self {
        Thresholds {
            p_min: 0.5,
            p_sure: 1.01,
            fit_min: 0.40,
            p_weight: 0.0,
            name_weight: 0.0,
            calibrated_for: None,
            fit_against_leaning: true,
            fit_question: FIT_QUESTION,
            outdated_for: None,
        }
    }
}

/// The share of the model's probability for the names on offer, at its call's tool name
/// (`name_share`, in `tool-probability`), at and above which the name counts as the model's
/// own choice ([`Thresholds::name_weight`] does not count). Below it the model's choice
/// mostly went to a name no tool has (`recipe`, `calculator` from the prompt's example): on
/// the held-back sets of other tools and languages Qwen2.5-Coder 0.5B called the right tool
/// 11 times in 27 there, 33 in 39 above.
pub(crate) const NAME_SURE: f64 = 0.2;

impl Thresholds {
    /// The score a questioned call is held to [`Thresholds::fit_min`] by: its fit, less
    /// [`Thresholds::p_weight`] times how far its p(tool) is below 1, less
    /// [`Thresholds::name_weight`] times how far its share for the names on offer
    /// (`p_name`, when read) is below `NAME_SURE`, as a fraction of it.
    ///
    /// ```
    /// use toolloop::Thresholds;
    ///
    /// let t = Thresholds { name_weight: 0.02, ..Thresholds::default() };
    /// assert_eq!(t.fit_score(1.0, Some(0.9), 0.5), 0.5);
    /// assert!((t.fit_score(1.0, Some(0.0), 0.5) - 0.48).abs() < 1e-9);
    /// assert_eq!(t.fit_score(1.0, None, 0.5), 0.5);
    /// ```
    pub fn fit_score(&self, p_tool: f64, p_name: Option<f64>, fit: f64) -> f64 {
        fit + self.p_weight * (p_tool - 1.0) + self.name_weight * name_short(p_name)
    }

    /// Whether a call with `p_tool` is put to the model as the fit question: it was not
    /// declined outright (`p_min`), the model was not sure of it (`p_sure`), and either
    /// the request shares no word with the tool (`supported` false) or the call carries a
    /// required value nobody said (`unsaid`): shared words are evidence for a call, an
    /// invented value evidence against it, and the model's answer weighs the two.
    pub fn questions(&self, p_tool: f64, supported: bool, unsaid: bool) -> bool {
        p_tool >= self.p_min && p_tool < self.p_sure && (!supported || unsaid)
    }

    /// Whether a call with `p_tool` and, when asked, `fit` is declined: below `p_min`
    /// (`tool-probability`), or questioned and answered with too little "yes"
    /// (`tool-fit`).
    pub fn declines(
        &self,
        (p_tool, p_name): (f64, Option<f64>),
        supported: bool,
        unsaid: bool,
        fit: Option<f64>,
    ) -> bool {
        p_tool < self.p_min
            || (self.questions(p_tool, supported, unsaid)
                && fit.is_some_and(|f| self.fit_score(p_tool, p_name, f) < self.fit_min))
    }

    /// Where these came from, for the line that says a call was declined.
    pub fn source(&self) -> String {
        match (&self.calibrated_for, &self.outdated_for) {
            (Some(m), _) => format!("calibrated for {m}"),
            (None, Some(m)) => format!(
                "defaults: {m}'s calibration was made by an earlier toolloop's fit question; \
                 run toolloop calibrate again"
            ),
            (None, None) => "not calibrated: defaults; run toolloop calibrate".into(),
        }
    }
    /// Whether these are the calibration toolloop ships for the model file in use (a
    /// file it measured), rather than the person's own or the defaults.
    ///
    /// ```
    /// assert!(!toolloop::Thresholds::default().shipped());
    /// ```
    pub fn shipped(&self) -> bool {
        self.calibrated_for
            .as_deref()
            .is_some_and(|c| c.contains(shipped::SHIPPED_MARK))
    }

    /// Whether these are the defaults for a model nobody calibrated, as the calibration
    /// file fills them in (an entry measured with an earlier fit question read as none):
    /// thresholds a person set are not.
    pub(crate) fn uncalibrated(&self) -> bool {
        *self
            == Thresholds {
                outdated_for: self.outdated_for.clone(),
                ..Thresholds::default()
            }
    }

    /// Takes the calibration toolloop ships for the model file `backend` runs, where these
    /// hold none of the person's own and the server has named its file (at the preflight:
    /// Ollama's `/api/show`, llama-server's `/props`); whether it did. A run, `doctor`
    /// and a rescore all find it this one way, so they judge alike.
    pub(crate) fn take_shipped(&mut self, backend: &dyn crate::backend::Backend) -> bool {
        if !self.uncalibrated() {
            return false;
        }
        match shipped_for(backend) {
            Some(t) => {
                *self = t;
                true
            }
            None => false,
        }
    }
}

/// How far `p_name` is below [`NAME_SURE`], as a fraction of it, negated: -1 for a share
/// of 0, 0 at or above it and when it was not read.
pub(crate) fn name_short(p_name: Option<f64>) -> f64 {
    p_name.map_or(0.0, |p| (p.clamp(0.0, NAME_SURE) / NAME_SURE) - 1.0)
}

/// One calibrated model: what it was measured on and the thresholds chosen.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Calibration {
    /// The model's name as the server knows it.
    pub model: String,
    /// The server's address (Ollama's host or the OpenAI-compatible base URL).
    pub server: String,
    /// The thresholds chosen.
    pub thresholds: Thresholds,
    /// The labelled set it was measured on.
    pub data: String,
    /// When (UTC, RFC 3339).
    pub when: String,
    /// What was measured, per half: right calls kept and needless calls declined.
    pub measured: serde_json::Value,
}

/// The calibration file: one entry per model and server.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CalibrationFile {
    /// The entries, newest last.
    pub entries: Vec<Calibration>,
}

/// The calibration file's path: `$TOOLLOOP_CALIBRATION` when set, else
/// `toolloop/calibration.json` in the user's configuration folder
/// (`~/.config` on Linux).
pub fn default_path() -> Option<PathBuf> {
    match std::env::var_os("TOOLLOOP_CALIBRATION") {
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => dirs::config_dir().map(|d| d.join("toolloop").join("calibration.json")),
    }
}

/// The file the tools' leanings are kept in ([`crate::Config::leanings`]): `$TOOLLOOP_LEANINGS` when set (`off` keeps none), else
/// `toolloop/leanings.json` in the user's cache folder (`~/.cache` on Linux).
///
/// ```
/// // Whatever the machine, the file is named leanings.json unless the person names one.
/// if std::env::var_os("TOOLLOOP_LEANINGS").is_none() {
///     if let Some(p) = toolloop::leanings_path() {
///         assert!(p.ends_with("toolloop/leanings.json"));
///     }
/// }
/// ```
pub fn leanings_path() -> Option<PathBuf> {
    match std::env::var_os("TOOLLOOP_LEANINGS") {
        Some(p) if p == "off" => None,
        Some(p) if !p.is_empty() => Some(PathBuf::from(p)),
        _ => dirs::cache_dir().map(|d| d.join("toolloop").join("leanings.json")),
    }
}

impl CalibrationFile {
    /// Reads `path`; a file that does not exist is an empty one.
    pub fn read(path: &Path) -> Result<Self, String> {
        match std::fs::read_to_string(path) {
            Ok(text) => serde_json::from_str(&text).map_err(|e| {
                format!(
                    "{}: not a calibration file ({e}); run toolloop calibrate again or delete it",
                    path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Self::default()),
            Err(e) => Err(format!("{}: {e}", path.display())),
        }
    }

    /// The thresholds measured for `model` on `server`, if any.
    pub fn lookup(&self, model: &str, server: &str) -> Option<&Thresholds> {
        self.entry(model, server).filter(|t| !outdated(t))
    }

    /// Whether `model` on `server` has an entry that [`CalibrationFile::lookup`] does not
    /// use because it was measured with an earlier wording of the fit question. (An entry
    /// older still, for the bare share of "yes", reads as no calibration at all.)
    pub fn outdated(&self, model: &str, server: &str) -> bool {
        self.entry(model, server)
            .is_some_and(|t| t.fit_against_leaning && outdated(t))
    }

    fn entry(&self, model: &str, server: &str) -> Option<&Thresholds> {
        self.entries
            .iter()
            .rev()
            .find(|e| e.model == model && same_server(&e.server, server))
            .map(|e| &e.thresholds)
    }

    /// Puts `entry` in, in place of an earlier one for the same model and server, and
    /// writes the file (its folder made if need be).
    pub fn save(&mut self, path: &Path, entry: Calibration) -> Result<(), String> {
        self.entries
            .retain(|e| !(e.model == entry.model && same_server(&e.server, &entry.server)));
        self.entries.push(entry);
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(self).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("{}: {e}", path.display()))
    }
}

/// Whether `t` holds a bar for another fit question than today's.
fn outdated(t: &Thresholds) -> bool {
    !t.fit_against_leaning || t.fit_question != FIT_QUESTION
}

/// Whether two server addresses name the same server: compared without a trailing slash.
fn same_server(a: &str, b: &str) -> bool {
    a.trim_end_matches('/') == b.trim_end_matches('/')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(model: &str, p_sure: f64) -> Calibration {
        Calibration {
            model: model.into(),
            server: "http://127.0.0.1:8080/v1".into(),
            thresholds: Thresholds {
                p_sure,
                calibrated_for: Some(model.into()),
                ..Thresholds::default()
            },
            data: "tests/data/everyday".into(),
            when: "2026-11-25T00:00:00Z".into(),
            measured: serde_json::json!({}),
        }
    }

    #[test]
    fn an_entry_is_found_by_model_and_server_and_replaced_by_a_newer_one() {
        let dir = std::env::temp_dir().join(format!("toolloop-cal-{}", std::process::id()));
        let path = dir.join("sub/calibration.json");
        let mut file = CalibrationFile::read(&path).unwrap();
        file.save(&path, entry("qwen", 0.95)).unwrap();
        file.save(&path, entry("gemma", 0.99)).unwrap();
        file.save(&path, entry("qwen", 0.97)).unwrap();
        let again = CalibrationFile::read(&path).unwrap();
        assert_eq!(again.entries.len(), 2);
        let t = again.lookup("qwen", "http://127.0.0.1:8080/v1/").unwrap();
        assert_eq!(t.p_sure, 0.97);
        assert!(again.lookup("qwen", "http://127.0.0.1:9999/v1").is_none());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn an_entry_calibrated_before_the_fit_was_read_against_the_leaning_is_not_used() {
        // As the file of an earlier toolloop has it: a bar for the bare share of "yes".
        let text = r#"{"entries": [{"model": "qwen", "server": "http://127.0.0.1:8080/v1",
            "thresholds": {"p_min": 0.0, "p_sure": 1.01, "fit_min": 0.516, "p_weight": 0.0,
                           "calibrated_for": "qwen"},
            "data": "the everyday set (built in)", "when": "2026-11-25T22:14:33+00:00",
            "measured": {}}]}"#;
        let file: CalibrationFile = serde_json::from_str(text).unwrap();
        assert!(file.lookup("qwen", "http://127.0.0.1:8080/v1").is_none());
        let config = crate::Config {
            model: "qwen".into(),
            backend: crate::BackendKind::OpenAi,
            base_url: "http://127.0.0.1:8080/v1".into(),
            ..crate::Config::default()
        };
        let path = std::env::temp_dir().join(format!("toolloop-calold-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let config = crate::Config {
            calibration: Some(path.clone()),
            ..config
        };
        let t = config.calibrated().unwrap().thresholds.unwrap();
        assert_eq!(
            t.source(),
            "not calibrated: defaults; run toolloop calibrate"
        );
        std::fs::remove_file(&path).unwrap();
    }

    #[test]
    fn an_entry_calibrated_with_another_wording_of_the_fit_question_is_not_used() {
        // As the file of the toolloop before the fit question was worded otherwise has it:
        // read against the leaning, but no `fit_question`.
        let text = r#"{"entries": [{"model": "qwen", "server": "http://127.0.0.1:8080/v1",
            "thresholds": {"p_min": 0.0, "p_sure": 0.99999, "fit_min": 0.428, "p_weight": 0.2,
                           "name_weight": 0.04, "calibrated_for": "qwen",
                           "fit_against_leaning": true},
            "data": "the everyday set (built in)", "when": "2026-12-01T21:19:00+00:00",
            "measured": {}}]}"#;
        let file: CalibrationFile = serde_json::from_str(text).unwrap();
        assert!(file.lookup("qwen", "http://127.0.0.1:8080/v1").is_none());
        let mut now = entry("qwen", 0.99999);
        now.thresholds.fit_min = 0.414;
        let file = CalibrationFile { entries: vec![now] };
        let t = file.lookup("qwen", "http://127.0.0.1:8080/v1").unwrap();
        assert_eq!((t.fit_min, t.fit_question), (0.414, FIT_QUESTION));
    }

    #[test]
    fn a_calibration_of_another_fit_question_says_to_calibrate_again() {
        let text = r#"{"entries": [{"model": "qwen", "server": "http://127.0.0.1:8080/v1",
            "thresholds": {"p_min": 0.0, "p_sure": 0.99999, "fit_min": 0.428,
                           "calibrated_for": "qwen", "fit_against_leaning": true},
            "data": "the everyday set (built in)", "when": "2026-12-01T21:19:00+00:00",
            "measured": {}}]}"#;
        let path = std::env::temp_dir().join(format!("toolloop-calwording-{}", std::process::id()));
        std::fs::write(&path, text).unwrap();
        let config = crate::Config {
            model: "qwen".into(),
            backend: crate::BackendKind::OpenAi,
            base_url: "http://127.0.0.1:8080/v1".into(),
            calibration: Some(path.clone()),
            ..crate::Config::default()
        };
        let t = config.calibrated().unwrap().thresholds.unwrap();
        std::fs::remove_file(&path).unwrap();
        assert_eq!(t.fit_min, Thresholds::default().fit_min);
        assert_eq!(
            t.source(),
            "defaults: qwen's calibration was made by an earlier toolloop's fit question; run \
             toolloop calibrate again"
        );
    }

    #[test]
    fn a_broken_file_says_what_to_do() {
        let path = std::env::temp_dir().join(format!("toolloop-calbad-{}", std::process::id()));
        std::fs::write(&path, "{").unwrap();
        let e = CalibrationFile::read(&path).unwrap_err();
        assert!(e.contains("run toolloop calibrate again"), "{e}");
        std::fs::remove_file(&path).unwrap();
    }
}
