//! The prompt's placeholder for an answer's text, and how an answer that is only that is
//! told from one that is the model's own. A part of [`super::reply`] in a file of its own,
//! where the answer stream ([`super::answer_stream`]) and the schema
//! ([`super::schema::CallSchema::check`]) read it.

/// What the prompt shows in place of an answer's text. A model too small to follow the
/// kinds writes it back word for word as its answer (Gemma 3 270M does, nearly always);
/// the schema refuses that turn
/// ([`crate::turn::schema::Rejection::Placeholder`]), so it never passes for an answer:
/// the model is asked once more with a prompt that shows no text there, and a second
/// copy ends the run.
pub(crate) const ANSWER_PLACEHOLDER: &str = "<the answer for the user>";

/// Whether an answer is the prompt's placeholder ([`ANSWER_PLACEHOLDER`]) written back, with
/// its angle brackets or without, in either case, with a full stop or not. Gemma 3 270M
/// wrote it without the brackets in 6 of the 122 copies in its recorded whole questions,
/// and those passed for answers.
pub(crate) fn is_placeholder(content: &str) -> bool {
    let t = content.trim();
    let t = t.strip_prefix('<').unwrap_or(t);
    let t = t.trim_end_matches(['.', '>']).trim();
    t.eq_ignore_ascii_case(placeholder_words())
}

/// Whether `text`, the start of an answer, could still turn out to be the placeholder
/// ([`is_placeholder`]) as more of it is written.
pub(crate) fn may_be_placeholder(text: &str) -> bool {
    let t = text.trim_start();
    let t = t.strip_prefix('<').unwrap_or(t);
    let words = placeholder_words();
    match words.get(..t.len()) {
        Some(head) => head.eq_ignore_ascii_case(t),
        // Past its words: only what may close it can follow.
        None => is_placeholder(text),
    }
}

fn placeholder_words() -> &'static str {
    ANSWER_PLACEHOLDER.trim_matches(['<', '>'])
}
