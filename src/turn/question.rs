//! A person's question read for what it is about: without the values it names, which
//! say what to pass to a tool, not what the question is about or what language it is in.

/// The question without the values it names: quoted text ('Guardian Sword+') and
/// capitalised words inside a sentence (Berkeley, Legend of Zelda). Those are what the
/// person passes to a tool, not what the tool is about, and a tool's description never
/// has them; counted, they made a question full of names look unrelated to the tool
/// that fits it.
pub(crate) fn topic(question: &str) -> String {
    let question = unquoted(question);
    let mut out = String::with_capacity(question.len());
    let mut quote: Option<char> = None;
    let mut sentence_start = true;
    for word in question.split_inclusive(char::is_whitespace) {
        let trimmed = word.trim();
        let first = trimmed.chars().next();
        match quote {
            Some(q) => {
                if trimmed.ends_with(q)
                    || trimmed.trim_end_matches(['.', ',', '?', '!']).ends_with(q)
                {
                    quote = None;
                }
                continue;
            }
            None if matches!(first, Some('"' | '\'' | '“')) => {
                let q = if first == Some('“') {
                    '”'
                } else {
                    first.unwrap_or('"')
                };
                let rest = &trimmed[first.map_or(0, char::len_utf8)..];
                if !rest.trim_end_matches(['.', ',', '?', '!']).ends_with(q) {
                    quote = Some(q);
                }
                continue;
            }
            None => {}
        }
        let named = !sentence_start && first.is_some_and(char::is_uppercase);
        if !named {
            out.push_str(word);
        }
        if !trimmed.is_empty() {
            sentence_start = trimmed.ends_with(['.', '?', '!', ':']);
        }
    }
    out
}

/// A request written inside one pair of quotes is the request, not a value it names:
/// BFCL writes 59 of its 200 `parallel` questions and 142 of `parallel_multiple`'s so,
/// and with the quotes read as a value the whole request was left out, no word counted
/// for the tool that fit, and a right call was questioned and declined. The quotes come
/// off only when the closing mark is nowhere inside, so `"a" or "b"` stays two values.
fn unquoted(question: &str) -> &str {
    let t = question.trim();
    let mut chars = t.chars();
    let close = match chars.next() {
        Some('"') => '"',
        Some('“') => '”',
        Some('\'') => '\'',
        _ => return question,
    };
    let inner = chars.as_str();
    match inner.strip_suffix(close) {
        Some(inner) if !inner.contains(close) => inner,
        _ => question,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_quoted_values_are_not_the_topic() {
        assert_eq!(
            topic("What's the power rating of 'Guardian Sword+' in Zelda? Tell me."),
            "What's the power rating of in Tell me."
        );
        assert_eq!(topic("Is \"two words\" here"), "Is here");
        // A request inside one pair of quotes is the request (BFCL `parallel_113`).
        let whole = "\"Could you predict the likelihood of diabetes for 'lightly active' people?\"";
        assert_eq!(
            topic(whole),
            "Could you predict the likelihood of diabetes for people?"
        );
        assert_eq!(topic("\"Paris\" or \"Tokyo\""), "or ");
    }
}
