//! The tools' leanings kept between processes, per model and server.
//!
//! A tool's leaning, the model's answer to the fit question with the request left empty
//! ([`super::baseline_question`]), depends on the question and the model only, and one at a
//! time llama-server gives the same answer to it every time (the question goes without the
//! prompt cache). Yet each `toolloop ask` is a process of its own, and asked it again for
//! every tool it put to the fit question: a second request, its whole prompt evaluated,
//! about as long as the fit question itself (about 1 s each on two cores: a quarter of the
//! whole questions' time went to the two). Kept in a file, a tool's leaning is asked the
//! first time a person's tools meet the model, and read after that.
//!
//! The key is the question's own text and the schema of its answer, so a toolloop that
//! words the question otherwise asks again; `toolloop calibrate` forgets its model's
//! leanings, since a model calibrated again may be another model under the same name.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The most leanings kept per model: past this, a tool's leaning is still asked once per
/// process, and not written down. It bounds the file where tools are made up per run (a
/// benchmark's thousand functions).
pub(crate) const MOST: usize = 2000;

/// The file: the leanings of each model and server.
#[derive(Debug, Default, Serialize, Deserialize)]
struct LeaningsFile {
    entries: Vec<Entry>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Entry {
    model: String,
    server: String,
    /// The share of "yes" for no request, by the question's text.
    leanings: BTreeMap<String, f64>,
}

/// Where one model's leanings are kept.
#[derive(Debug)]
pub(crate) struct Kept {
    path: PathBuf,
    model: (String, String),
}

impl Kept {
    pub(crate) fn new(path: &Path, model: (String, String)) -> Self {
        Kept {
            path: path.to_path_buf(),
            model,
        }
    }

    /// Whether `entry` holds this model's leanings.
    fn mine(&self, entry: &Entry) -> bool {
        (&entry.model, &entry.server) == (&self.model.0, &self.model.1)
    }

    /// The leanings kept for the model, by key. A file that cannot be read keeps none,
    /// with a warning: the leanings are asked again.
    pub(crate) fn read(&self) -> BTreeMap<String, f64> {
        let mut file = self.file();
        file.entries
            .iter_mut()
            .find(|e| self.mine(e))
            .map(|e| std::mem::take(&mut e.leanings))
            .unwrap_or_default()
    }

    /// Keeps the leaning `share` under `key`, beside what other processes kept since this
    /// one read the file. A file that cannot be written is left as it was, with a warning:
    /// the run goes on, and the next process asks again.
    pub(crate) fn keep(&self, key: &str, share: f64) {
        let mut file = self.file();
        let i = match file.entries.iter().position(|e| self.mine(e)) {
            Some(i) => i,
            None => {
                file.entries.push(Entry {
                    model: self.model.0.clone(),
                    server: self.model.1.clone(),
                    leanings: BTreeMap::new(),
                });
                file.entries.len() - 1
            }
        };
        let leanings = &mut file.entries[i].leanings;
        if leanings.len() >= MOST && !leanings.contains_key(key) {
            return;
        }
        leanings.insert(key.to_string(), share);
        self.write(&file);
    }

    /// Forgets the model's leanings: a model calibrated again may not be the model they
    /// were asked of.
    #[cfg(any(feature = "cli", test))]
    pub(crate) fn forget(&self) {
        if !self.path.exists() {
            return;
        }
        let mut file = self.file();
        let before = file.entries.len();
        file.entries.retain(|e| !self.mine(e));
        if file.entries.len() != before {
            self.write(&file);
        }
    }

    fn file(&self) -> LeaningsFile {
        let text = match std::fs::read_to_string(&self.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return LeaningsFile::default(),
            Err(e) => {
                log::warn!(
                    "could not read the tools' leanings from {} ({e}); asking them again",
                    self.path.display()
                );
                return LeaningsFile::default();
            }
        };
        serde_json::from_str(&text).unwrap_or_else(|e| {
            log::warn!(
                "{} is not a leanings file ({e}); asking the tools' leanings again, and \
                 writing it anew",
                self.path.display()
            );
            LeaningsFile::default()
        })
    }

    /// Written beside and renamed over, so that a process reading it never sees half.
    fn write(&self, file: &LeaningsFile) {
        let written = (|| -> std::io::Result<()> {
            if let Some(dir) = self.path.parent().filter(|d| !d.as_os_str().is_empty()) {
                std::fs::create_dir_all(dir)?;
            }
            let text = serde_json::to_string_pretty(file).map_err(std::io::Error::other)?;
            let mut beside = self.path.clone().into_os_string();
            beside.push(format!(".{}.tmp", std::process::id()));
            std::fs::write(&beside, text)?;
            std::fs::rename(&beside, &self.path)
        })();
        if let Err(e) = written {
            log::warn!(
                "could not keep a tool's leaning in {} ({e}); the next run asks it again",
                self.path.display()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder of the test's own, empty, removed when the test ends.
    fn scratch(test: &str) -> tempfile::TempDir {
        tempfile::Builder::new()
            .prefix(&format!("toolloop-kept-{test}-"))
            .tempdir()
            .unwrap()
    }

    fn model(name: &str) -> (String, String) {
        (name.into(), "http://127.0.0.1:8080/v1".into())
    }

    #[test]
    fn a_leaning_kept_by_one_process_is_read_by_the_next_for_its_model_only() {
        let held = scratch("a_leaning_kept");
        let dir = held.path();
        let path = dir.join("cache/leanings.json");
        Kept::new(&path, model("qwen")).keep("calculator?", 0.6);
        Kept::new(&path, model("gemma")).keep("calculator?", 0.9);
        Kept::new(&path, model("qwen")).keep("weather?", 0.55);
        let qwen = Kept::new(&path, model("qwen")).read();
        assert_eq!(qwen.get("calculator?"), Some(&0.6));
        assert_eq!(qwen.get("weather?"), Some(&0.55));
        assert_eq!(Kept::new(&path, model("gemma")).read().len(), 1);
        // Another server is another model.
        let other = ("qwen".to_string(), "http://127.0.0.1:9090/v1".to_string());
        assert!(Kept::new(&path, other).read().is_empty());
    }

    #[test]
    fn calibrating_again_forgets_that_models_leanings_only() {
        let held = scratch("calibrating_again");
        let dir = held.path();
        let path = dir.join("leanings.json");
        Kept::new(&path, model("qwen")).keep("calculator?", 0.6);
        Kept::new(&path, model("gemma")).keep("calculator?", 0.9);
        Kept::new(&path, model("qwen")).forget();
        assert!(Kept::new(&path, model("qwen")).read().is_empty());
        assert_eq!(Kept::new(&path, model("gemma")).read().len(), 1);
    }

    #[test]
    fn a_file_that_is_no_leanings_file_is_asked_again_and_written_anew() {
        let held = scratch("not_json");
        let dir = held.path();
        let path = dir.join("leanings.json");
        std::fs::create_dir_all(dir).unwrap();
        std::fs::write(&path, "not json").unwrap();
        let kept = Kept::new(&path, model("qwen"));
        assert!(kept.read().is_empty());
        kept.keep("calculator?", 0.6);
        assert_eq!(kept.read().get("calculator?"), Some(&0.6));
    }

    #[test]
    fn past_the_most_a_new_leaning_is_not_written_down() {
        let held = scratch("most");
        let dir = held.path();
        let path = dir.join("leanings.json");
        let kept = Kept::new(&path, model("qwen"));
        let full = LeaningsFile {
            entries: vec![Entry {
                model: "qwen".into(),
                server: "http://127.0.0.1:8080/v1".into(),
                leanings: (0..MOST).map(|i| (format!("tool {i}?"), 0.5)).collect(),
            }],
        };
        kept.write(&full);
        kept.keep("one more?", 0.7);
        assert!(!kept.read().contains_key("one more?"));
        // One already kept is still brought up to date.
        kept.keep("tool 3?", 0.6);
        assert_eq!(kept.read().get("tool 3?"), Some(&0.6));
    }
}
