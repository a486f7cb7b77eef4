//! `search_docs`' index: the paragraphs of a folder's text files, ranked with BM25.
//!
//! The first version matched whole lower-cased words with a hand-written TF-IDF: a
//! document titled "Returns" that says "Items can be returned within 30 days" was not
//! found for "return policy", 22 MiB of documents took 985 MB (a word map per paragraph)
//! and 1.85 s per search (every paragraph scored). The `bm25` crate does the ranking:
//! English stemming and stop words in its tokenizer, an inverted index so a search looks
//! only at paragraphs that share a term with the query, and the paragraph text kept once.
//!
//! What is not indexed is said, at start-up (a warning) and in every reply (`skipped`):
//! files over [`DOC_MAX_FILE_BYTES`] and files past the first [`DOC_MAX_FILES`].

use std::fs;
use std::path::{Path, PathBuf};

use bm25::{Language, SearchEngine, SearchEngineBuilder};
use serde_json::{Value, json};

use super::{ToolError, ToolResult};

/// The file types indexed.
pub const DOC_EXTENSIONS: [&str; 5] = ["md", "markdown", "txt", "rst", "text"];
/// The most files indexed (the first, in path order).
pub const DOC_MAX_FILES: usize = 5000;
/// The largest file indexed.
pub const DOC_MAX_FILE_BYTES: u64 = 2 << 20;
/// How many folder entries are looked at, at most, to find the files.
const WALK_LIMIT: usize = 200_000;

/// Paragraphs of a folder's text files, for ranked search with citations.
pub struct DocIndex {
    engine: SearchEngine<u32>,
    /// File and first line of each paragraph, by the paragraph's id.
    places: Vec<(u32, u32)>,
    files: Vec<String>,
    skipped: Option<String>,
}

impl std::fmt::Debug for DocIndex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DocIndex {{ files: {}, paragraphs: {} }}",
            self.files.len(),
            self.places.len()
        )
    }
}

/// The candidate files under `dir`, in path order, and what was left out.
fn walk(dir: &Path) -> (Vec<PathBuf>, usize, usize) {
    let mut files = Vec::new();
    let mut too_large = 0;
    let mut seen = 0;
    let mut stack = vec![(dir.to_path_buf(), 0)];
    while let Some((d, depth)) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            seen += 1;
            if seen > WALK_LIMIT {
                break;
            }
            let path = e.path();
            let Ok(ft) = e.file_type() else { continue };
            let wanted = path
                .extension()
                .and_then(|x| x.to_str())
                .is_some_and(|x| DOC_EXTENSIONS.contains(&x.to_lowercase().as_str()));
            if ft.is_dir() && depth < 8 {
                stack.push((path, depth + 1));
            } else if ft.is_file() && wanted {
                if e.metadata().is_ok_and(|m| m.len() <= DOC_MAX_FILE_BYTES) {
                    files.push(path);
                } else {
                    too_large += 1;
                }
            }
        }
    }
    files.sort();
    let beyond = files.len().saturating_sub(DOC_MAX_FILES);
    files.truncate(DOC_MAX_FILES);
    (files, too_large, beyond)
}

/// Splits a text into paragraphs (runs of non-blank lines) with their first line (1-based).
fn paragraphs(text: &str) -> impl Iterator<Item = (usize, String)> + '_ {
    let mut lines = text.lines().enumerate().peekable();
    std::iter::from_fn(move || {
        while lines.peek().is_some_and(|(_, l)| l.trim().is_empty()) {
            lines.next();
        }
        let (start, first) = lines.next()?;
        let mut body = first.to_string();
        while let Some((_, l)) = lines.next_if(|(_, l)| !l.trim().is_empty()) {
            body.push('\n');
            body.push_str(l);
        }
        Some((start + 1, body))
    })
}

impl DocIndex {
    /// Indexes the text files under `dir`.
    pub fn build(dir: &Path) -> Result<Self, ToolError> {
        if !dir.is_dir() {
            return Err(ToolError::Config(format!(
                "`docs` {}: not a folder",
                dir.display()
            )));
        }
        let (paths, too_large, beyond) = walk(dir);
        let mut files = Vec::new();
        let mut places = Vec::new();
        let mut documents = Vec::new();
        for path in &paths {
            let Ok(bytes) = fs::read(path) else { continue };
            let text = String::from_utf8_lossy(&bytes);
            let file = files.len() as u32;
            files.push(path.strip_prefix(dir).unwrap_or(path).display().to_string());
            for (line, body) in paragraphs(&text) {
                documents.push(bm25::Document::new(places.len() as u32, body));
                places.push((file, line as u32));
            }
        }
        let skipped = match (too_large, beyond) {
            (0, 0) => None,
            (l, b) => Some(format!(
                "{l} file(s) over 2 MiB and {b} file(s) past the first {DOC_MAX_FILES} \
                 were not indexed"
            )),
        };
        if let Some(s) = &skipped {
            log::warn!("search_docs in {}: {s}", dir.display());
        }
        let engine =
            SearchEngineBuilder::<u32>::with_documents(Language::English, documents).build();
        Ok(DocIndex {
            engine,
            places,
            files,
            skipped,
        })
    }

    /// The best `limit` paragraphs for `query`, each with its file and line.
    pub fn search(&self, query: &str, limit: usize) -> ToolResult {
        if !query.chars().any(char::is_alphanumeric) {
            return ToolResult::err("query has no words to search for");
        }
        let hits: Vec<Value> = self
            .engine
            .search(query, limit)
            .into_iter()
            .filter_map(|r| {
                let (file, line) = *self.places.get(r.document.id as usize)?;
                Some(json!({
                    "file": self.files[file as usize],
                    "line": line,
                    "text": super::cap_text(&r.document.contents, 400),
                    "score": (f64::from(r.score) * 100.0).round() / 100.0,
                }))
            })
            .collect();
        let empty = hits.is_empty();
        let mut reply = json!({ "hits": hits });
        if empty {
            reply["note"] = json!("no document matches the query");
        }
        if let Some(s) = &self.skipped {
            reply["skipped"] = json!(s);
        }
        ToolResult::ok(reply)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paragraphs_start_at_their_first_line() {
        let p: Vec<_> = paragraphs("\n# T\n\na\nb\n\n\nc").collect();
        assert_eq!(
            p,
            [(2, "# T".to_string()), (4, "a\nb".into()), (8, "c".into())]
        );
    }
}
