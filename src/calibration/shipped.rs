//! Calibrations measured here for model files anyone can fetch, shipped so that a fresh
//! install with one of those exact files decides as a calibrated one does.
//!
//! Each entry is keyed by the SHA-256 of the model's GGUF file and is used for that file
//! alone: another quantisation of the same model, or a fine-tune, gets the defaults. The
//! thresholds are the ones `toolloop calibrate` chose on the built-in everyday set against
//! that file on llama-server; a person's own calibration, in the calibration file, is read
//! first and stands over these.

use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::{Mutex, OnceLock};

use serde::Deserialize;

use super::Thresholds;
use crate::backend::{Backend, ModelFile};

/// How a shipped calibration names itself in [`Thresholds::calibrated_for`].
pub(crate) const SHIPPED_MARK: &str = "the calibration toolloop ships for this model file";

/// The shipped table: what was measured, on what, and the thresholds chosen.
const SHIPPED: &str = include_str!("shipped.json");

/// How much of a local file is read to tell it from others of its size
/// ([`Entry::head_sha256`]): hashing the whole file would cost seconds on every run for a
/// large model, and a GGUF file's first bytes hold its metadata, its tensors' table and
/// the start of its weights.
const HEAD: u64 = 16 << 20;

/// One shipped calibration.
#[derive(Debug, Deserialize)]
struct Entry {
    /// The model as a person names it.
    name: String,
    /// The SHA-256 of the whole GGUF file (what Ollama names the blob by).
    sha256: String,
    /// The file's length in bytes.
    bytes: u64,
    /// The SHA-256 of the file's first [`HEAD`] bytes.
    head_sha256: String,
    /// The thresholds `toolloop calibrate` chose.
    thresholds: Thresholds,
    /// When it was measured.
    when: String,
}

fn table() -> &'static [Entry] {
    static TABLE: OnceLock<Vec<Entry>> = OnceLock::new();
    TABLE.get_or_init(|| {
        #[derive(Deserialize)]
        struct File {
            models: Vec<Entry>,
        }
        serde_json::from_str::<File>(SHIPPED)
            .map(|f| f.models)
            .unwrap_or_default()
    })
}

/// The thresholds shipped for the model file `file` names, if it is one of them.
pub(crate) fn for_file(file: &ModelFile) -> Option<Thresholds> {
    let entry = match file {
        ModelFile::Sha256(hex) => table().iter().find(|e| e.sha256.eq_ignore_ascii_case(hex)),
        ModelFile::Path(path) => {
            let len = std::fs::metadata(path).ok()?.len();
            // Read nothing of a file no entry has the size of: nearly every model.
            if !table().iter().any(|e| e.bytes == len) {
                return None;
            }
            let head = head_sha256(path)?;
            table()
                .iter()
                .find(|e| e.bytes == len && e.head_sha256 == head)
        }
    }?;
    Some(Thresholds {
        calibrated_for: Some(format!("{} ({SHIPPED_MARK}, {})", entry.name, entry.when)),
        ..entry.thresholds.clone()
    })
}

/// The thresholds shipped for the model `backend` runs, once its server has named its
/// file (then known for the process); `None` for a model file not in the table, or a
/// server that has not named its file.
pub(crate) fn for_backend(backend: &dyn Backend) -> Option<Thresholds> {
    /// What each model and server was found to have, by [`Backend::identity`].
    type Seen = HashMap<(String, String), Option<Thresholds>>;
    static SEEN: OnceLock<Mutex<Seen>> = OnceLock::new();
    let key = backend.identity()?;
    let seen = SEEN.get_or_init(Mutex::default);
    if let Some(known) = seen.lock().unwrap_or_else(|e| e.into_inner()).get(&key) {
        return known.clone();
    }
    // A server that did not say (down, or still loading) is asked again by the next run.
    let file = backend.model_file()?;
    let found = for_file(&file);
    seen.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(key, found.clone());
    found
}

/// The SHA-256, in hex, of the first [`HEAD`] bytes of the file at `path`.
pub(crate) fn head_sha256(path: &Path) -> Option<String> {
    let mut head = Vec::new();
    std::fs::File::open(path)
        .ok()?
        .take(HEAD)
        .read_to_end(&mut head)
        .ok()?;
    Some(hex(
        ring::digest::digest(&ring::digest::SHA256, &head).as_ref()
    ))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_table_reads_and_every_entry_is_todays_question() {
        assert!(!table().is_empty(), "shipped.json did not parse");
        for e in table() {
            assert_eq!(e.sha256.len(), 64, "{}", e.name);
            assert_eq!(e.head_sha256.len(), 64, "{}", e.name);
            // An entry measured with another wording of the fit question would be a bar
            // on another scale.
            assert!(!super::super::outdated(&e.thresholds), "{}", e.name);
        }
    }

    #[test]
    fn a_digest_finds_its_entry_and_no_other_does() {
        let e = &table()[0];
        let t = for_file(&ModelFile::Sha256(e.sha256.to_uppercase())).expect("found");
        assert_eq!(t.fit_min, e.thresholds.fit_min);
        assert!(t.calibrated_for.unwrap().contains(&e.name));
        assert!(for_file(&ModelFile::Sha256("0".repeat(64))).is_none());
    }

    #[test]
    fn a_local_file_of_another_size_is_not_read_and_gets_nothing() {
        let dir = std::env::temp_dir().join(format!("toolloop-shipped-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("m.gguf");
        std::fs::write(&path, b"GGUF not a model").unwrap();
        assert!(for_file(&ModelFile::Path(path.clone())).is_none());
        assert_eq!(
            head_sha256(&path).as_deref(),
            Some(
                hex(ring::digest::digest(&ring::digest::SHA256, b"GGUF not a model").as_ref())
                    .as_str()
            )
        );
        assert!(for_file(&ModelFile::Path(dir.join("absent.gguf"))).is_none());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
