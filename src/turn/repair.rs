//! Recovering JSON from what a small model actually emits.
//!
//! A grammar-constrained model still produces broken JSON: the token limit cuts a reply in
//! the middle of a string, an unconstrained backend wraps the object in a code fence and
//! prose, a chat template leaks `<end_of_turn>`, a Python-minded model writes `True` and
//! single quotes. [`repair`] turns any `&str` into a JSON value plus the list of [`Fix`]es it
//! applied, or a [`RepairError`] when nothing JSON-like is there.
//!
//! Design rules, each pinned by tests:
//! - Valid JSON comes back unchanged (a strict parse is tried first).
//! - Truncation keeps every complete value and drops only the incomplete tail: a cut
//!   string is kept as the prefix it is, a cut number or key is dropped, a cut literal is
//!   completed (`tr` can only be `true`), and open containers are closed. Nothing is
//!   invented.
//! - One pass, linear time: the parser writes its output once and only ever truncates the
//!   tail of the output buffer to drop an incomplete member.
//! - Never panics; recursion is bounded by `MAX_DEPTH` and deeper nesting is an error.

use std::borrow::Cow;
use std::fmt;

use serde_json::Value;

/// The deepest nesting of arrays and objects the repairer accepts.
///
/// `serde_json` refuses input nested deeper than 128 levels, so the repairer stops at the
/// same place and reports [`RepairError::TooDeep`] instead of producing text nobody can
/// read back.
pub(crate) const MAX_DEPTH: usize = 127;

/// One kind of repair that was applied to the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum Fix {
    /// A Markdown code fence around the JSON was removed.
    CodeFence,
    /// Text before or after the JSON value was ignored.
    SurroundingText,
    /// Chat-template tokens such as `<end_of_turn>` were removed.
    TemplateTokens,
    /// The input ended early: open strings and containers were closed, an incomplete
    /// tail (a cut key or number) was dropped and a cut literal completed.
    Truncated,
    /// The input ended inside a value: a string was closed, a cut number dropped, or a
    /// cut literal or bare word ended there. Always with [`Fix::Truncated`]. A value
    /// written so may not be the one the writer meant (a path, a SQL statement cut
    /// part-way), unlike closers added after complete values.
    CutValue,
    /// A closer of the wrong kind (`]` for `{`) was read as the right one.
    MismatchedCloser,
    /// Closers after the end of the value were ignored.
    ExtraCloser,
    /// Single-quoted strings were turned into double-quoted ones.
    SingleQuotes,
    /// Typographic quotes (“ ” ‘ ’) were used as string delimiters.
    SmartQuotes,
    /// Object keys without quotes were quoted.
    UnquotedKey,
    /// A bare word in value position was read as a string.
    UnquotedString,
    /// A comma before a closer, or a doubled comma, was removed.
    TrailingComma,
    /// A missing comma between two members was inserted.
    MissingComma,
    /// A missing colon between a key and its value was inserted.
    MissingColon,
    /// A key without a value was dropped.
    MissingValue,
    /// `//`, `/* */` or `#` comments were removed.
    Comment,
    /// Python's `True`, `False` and `None` became `true`, `false` and `null`.
    PythonLiteral,
    /// `NaN`, `Infinity` or an out-of-range number became `null`.
    NonFiniteNumber,
    /// A number was rewritten to JSON's form (leading `+`, leading zeros, `.5`, `5.`).
    NumberFormat,
    /// Raw control characters (newline, tab...) inside a string were escaped.
    ControlCharacter,
    /// Quotes inside a string that did not end it were escaped.
    InnerQuote,
    /// An invalid escape sequence was kept as literal text.
    InvalidEscape,
    /// A lone UTF-16 surrogate escape became U+FFFD.
    LoneSurrogate,
    /// A character that belongs nowhere in JSON was skipped.
    SkippedCharacter,
    /// `arguments` arrived as a JSON-encoded string and was decoded.
    EncodedArguments,
    /// The turn had no `kind` (or an alias of one) and it was inferred from its fields.
    InferredKind,
}

impl Fix {
    const ALL: [Fix; 26] = [
        Fix::CodeFence,
        Fix::SurroundingText,
        Fix::TemplateTokens,
        Fix::Truncated,
        Fix::CutValue,
        Fix::MismatchedCloser,
        Fix::ExtraCloser,
        Fix::SingleQuotes,
        Fix::SmartQuotes,
        Fix::UnquotedKey,
        Fix::UnquotedString,
        Fix::TrailingComma,
        Fix::MissingComma,
        Fix::MissingColon,
        Fix::MissingValue,
        Fix::Comment,
        Fix::PythonLiteral,
        Fix::NonFiniteNumber,
        Fix::NumberFormat,
        Fix::ControlCharacter,
        Fix::InnerQuote,
        Fix::InvalidEscape,
        Fix::LoneSurrogate,
        Fix::SkippedCharacter,
        Fix::EncodedArguments,
        Fix::InferredKind,
    ];

    /// A short name for logs and `--json` output, e.g. `truncated`.
    pub fn name(self) -> &'static str {
        match self {
            Fix::CodeFence => "code_fence",
            Fix::SurroundingText => "surrounding_text",
            Fix::TemplateTokens => "template_tokens",
            Fix::Truncated => "truncated",
            Fix::CutValue => "cut_value",
            Fix::MismatchedCloser => "mismatched_closer",
            Fix::ExtraCloser => "extra_closer",
            Fix::SingleQuotes => "single_quotes",
            Fix::SmartQuotes => "smart_quotes",
            Fix::UnquotedKey => "unquoted_key",
            Fix::UnquotedString => "unquoted_string",
            Fix::TrailingComma => "trailing_comma",
            Fix::MissingComma => "missing_comma",
            Fix::MissingColon => "missing_colon",
            Fix::MissingValue => "missing_value",
            Fix::Comment => "comment",
            Fix::PythonLiteral => "python_literal",
            Fix::NonFiniteNumber => "non_finite_number",
            Fix::NumberFormat => "number_format",
            Fix::ControlCharacter => "control_character",
            Fix::InnerQuote => "inner_quote",
            Fix::InvalidEscape => "invalid_escape",
            Fix::LoneSurrogate => "lone_surrogate",
            Fix::SkippedCharacter => "skipped_character",
            Fix::EncodedArguments => "encoded_arguments",
            Fix::InferredKind => "inferred_kind",
        }
    }
}

impl fmt::Display for Fix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let text = match self {
            Fix::CodeFence => "removed a code fence",
            Fix::SurroundingText => "ignored text around the JSON",
            Fix::TemplateTokens => "removed chat-template tokens",
            Fix::Truncated => "closed truncated input and dropped its incomplete tail",
            Fix::CutValue => "ended a value the input cut part-way",
            Fix::MismatchedCloser => "read a mismatched closer as the right one",
            Fix::ExtraCloser => "ignored extra closers",
            Fix::SingleQuotes => "replaced single quotes",
            Fix::SmartQuotes => "replaced typographic quotes",
            Fix::UnquotedKey => "quoted bare keys",
            Fix::UnquotedString => "quoted bare words",
            Fix::TrailingComma => "removed extra commas",
            Fix::MissingComma => "inserted missing commas",
            Fix::MissingColon => "inserted missing colons",
            Fix::MissingValue => "dropped keys without a value",
            Fix::Comment => "removed comments",
            Fix::PythonLiteral => "replaced Python literals",
            Fix::NonFiniteNumber => "replaced NaN/Infinity with null",
            Fix::NumberFormat => "normalised number syntax",
            Fix::ControlCharacter => "escaped control characters in strings",
            Fix::InnerQuote => "escaped quotes inside strings",
            Fix::InvalidEscape => "kept invalid escapes as text",
            Fix::LoneSurrogate => "replaced lone surrogates",
            Fix::SkippedCharacter => "skipped stray characters",
            Fix::EncodedArguments => "decoded arguments given as a string",
            Fix::InferredKind => "inferred the turn's kind",
        };
        f.write_str(text)
    }
}

/// A small set of [`Fix`]es, kept as a bit set so recording one costs nothing in the hot
/// loop.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Fixes(u32);

impl Fixes {
    /// Adds one fix.
    pub fn insert(&mut self, fix: Fix) {
        self.0 |= 1 << (fix as u32);
    }

    /// Adds every fix of `other`.
    pub fn extend(&mut self, other: Fixes) {
        self.0 |= other.0;
    }

    /// Whether `fix` was applied.
    pub fn contains(self, fix: Fix) -> bool {
        self.0 & (1 << (fix as u32)) != 0
    }

    /// Whether no fix was applied.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The fixes in a fixed order.
    pub fn to_vec(self) -> Vec<Fix> {
        Fix::ALL
            .iter()
            .copied()
            .filter(|f| self.contains(*f))
            .collect()
    }
}

/// Why nothing could be recovered.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RepairError {
    /// The input holds no object, array, string, number or literal.
    #[error("no JSON value found in the input")]
    NoJson,
    /// Arrays and objects are nested deeper than `MAX_DEPTH`.
    #[error("JSON nested deeper than {MAX_DEPTH} levels")]
    TooDeep,
}

/// The result of [`repair`].
#[derive(Debug, Clone, PartialEq)]
pub struct Repaired {
    /// The recovered value.
    pub value: Value,
    /// What was changed to get it; empty when the input was valid JSON.
    pub fixes: Fixes,
}

/// Recovers a JSON value from `input`.
///
/// ```
/// use toolloop::turn::repair::{repair, Fix};
///
/// let got = repair("```json\n{'city': 'Tokyo', 'days': 3,\n").unwrap();
/// assert_eq!(got.value, serde_json::json!({"city": "Tokyo", "days": 3}));
/// assert!(got.fixes.contains(Fix::CodeFence));
/// assert!(got.fixes.contains(Fix::SingleQuotes));
/// ```
pub fn repair(input: &str) -> Result<Repaired, RepairError> {
    let trimmed = input.trim();
    // Skipping is several times cheaper than building a value that is then thrown away,
    // so broken input is recognised before any value is built.
    if serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok()
        && let Ok(value) = serde_json::from_str::<Value>(trimmed)
    {
        return Ok(Repaired {
            value,
            fixes: Fixes::default(),
        });
    }
    let (text, fixes) = repair_lenient(input)?;
    Ok(Repaired {
        value: into_value(&text)?,
        fixes,
    })
}

/// Like [`repair`], but returns the repaired JSON text without building a value.
///
/// Valid JSON comes back as the input with surrounding whitespace trimmed, byte for byte.
///
/// ```
/// let (text, fixes) = toolloop::turn::repair::repair_to_string("[1, 2, 3,").unwrap();
/// assert_eq!(text, "[1,2,3]");
/// assert!(!fixes.is_empty());
/// ```
pub fn repair_to_string(input: &str) -> Result<(String, Fixes), RepairError> {
    let trimmed = input.trim();
    if is_strict_json(trimmed) {
        return Ok((trimmed.to_string(), Fixes::default()));
    }
    repair_lenient(input)
}

/// Whether `text` is JSON that `serde_json` reads into a [`Value`], checked without
/// building one where possible. Skipping a value accepts two things reading it refuses
/// (numbers out of range and lone surrogate escapes), so text that might hold either is
/// read in full.
/// How deep the text's first JSON value is still open where the text ends: the objects
/// and arrays not closed, and one more when it ends inside a string. 0 for a value that
/// closed, or no value at all. It tells where a reply was cut: `{"a": [1, ` is open 2
/// deep, `{"a": "x` too. A strict scan, not a repair: the repairer's own reading of a
/// broken text is what it made of it, not where the writer stopped.
pub(crate) fn open_depth(text: &str) -> usize {
    let Some(start) = text.find(['{', '[']) else {
        return 0;
    };
    let mut depth = 0usize;
    let (mut in_string, mut escaped) = (false, false);
    for b in text[start..].bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return 0;
                }
            }
            _ => {}
        }
    }
    depth + usize::from(in_string)
}

fn is_strict_json(text: &str) -> bool {
    if serde_json::from_str::<serde::de::IgnoredAny>(text).is_err() {
        return false;
    }
    // Out-of-range numbers are an exponent or a long run of digits (found by fuzzing:
    // a 466-digit integer is valid JSON that serde_json cannot read).
    let mut digits = 0usize;
    let mut long_number = false;
    for &b in text.as_bytes() {
        if b.is_ascii_digit() {
            digits += 1;
            long_number |= digits > 300;
        } else {
            digits = 0;
        }
    }
    let risky = long_number
        || text.contains("\\u")
        || text
            .as_bytes()
            .windows(2)
            .any(|w| w[0].is_ascii_digit() && (w[1] == b'e' || w[1] == b'E'));
    !risky || serde_json::from_str::<Value>(text).is_ok()
}

/// Parses text the lenient parser wrote. The parser only writes valid JSON, so a failure
/// here is a bug; it is still reported as an error rather than a panic.
pub(crate) fn into_value(text: &str) -> Result<Value, RepairError> {
    serde_json::from_str(text).map_err(|e| {
        log::warn!("repaired text did not parse ({e}); please report this input");
        RepairError::NoJson
    })
}

fn repair_lenient(input: &str) -> Result<(String, Fixes), RepairError> {
    let mut fixes = Fixes::default();
    let cleaned = strip_template_tokens(input, &mut fixes);
    let body = strip_code_fence(&cleaned, &mut fixes);
    let start = body
        .bytes()
        .position(|b| b == b'{' || b == b'[')
        .unwrap_or(body.len());
    if start < body.len() {
        if !body[..start].trim().is_empty() {
            fixes.insert(Fix::SurroundingText);
        }
        let found = parse_from(body, start)?;
        fixes.extend(found.fixes);
        return Ok((found.text, fixes));
    }
    // No container anywhere: a lone string, number or literal is still JSON-like.
    let skip = body.len() - body.trim_start().len();
    let found = parse_scalar(body, skip).ok_or(RepairError::NoJson)?;
    fixes.extend(found.fixes);
    Ok((found.text, fixes))
}

/// One value parsed from a position of a text.
#[derive(Debug)]
pub(crate) struct Found {
    /// Valid JSON text.
    pub text: String,
    /// Fixes applied inside the value, plus [`Fix::SurroundingText`] or
    /// [`Fix::ExtraCloser`] for what follows it.
    pub fixes: Fixes,
    /// Byte offset just past the value in the text.
    pub end: usize,
}

/// Parses the value that starts at byte `start` of `text` (an `{` or `[`), leniently.
pub(crate) fn parse_from(text: &str, start: usize) -> Result<Found, RepairError> {
    let mut p = Parser::new(text, start);
    let value = p.value(0, Ctx::Top)?;
    debug_assert!(!matches!(value, Val::Dropped | Val::NotValue));
    let end = p.pos;
    p.trailing();
    Ok(Found {
        text: p.out,
        fixes: p.fixes,
        end,
    })
}

fn parse_scalar(text: &str, start: usize) -> Option<Found> {
    let mut p = Parser::new(text, start);
    match p.value(0, Ctx::Top) {
        Ok(Val::Complete | Val::Partial) => {}
        _ => return None,
    }
    let end = p.pos;
    p.trailing();
    Some(Found {
        text: p.out,
        fixes: p.fixes,
        end,
    })
}

/// Removes chat-template control tokens (`<end_of_turn>`, `<|im_end|>`...) that leak into
/// replies when a server renders a template the model was not trained on.
pub(crate) fn strip_template_tokens<'a>(input: &'a str, fixes: &mut Fixes) -> Cow<'a, str> {
    let bytes = input.as_bytes();
    let mut out: Option<String> = None;
    let mut copied = 0;
    let mut i = 0;
    while let Some(off) = bytes[i..].iter().position(|&b| b == b'<') {
        let at = i + off;
        let len = template_token_len(&bytes[at..]);
        if len > 0 {
            let buf = out.get_or_insert_with(|| String::with_capacity(input.len()));
            buf.push_str(&input[copied..at]);
            copied = at + len;
            i = copied;
        } else {
            i = at + 1;
        }
    }
    match out {
        None => Cow::Borrowed(input),
        Some(mut buf) => {
            buf.push_str(&input[copied..]);
            fixes.insert(Fix::TemplateTokens);
            Cow::Owned(buf)
        }
    }
}

fn template_token_len(s: &[u8]) -> usize {
    const NAMED: [&[u8]; 6] = [
        b"<start_of_turn>",
        b"<end_of_turn>",
        b"<eos>",
        b"<bos>",
        b"</s>",
        b"<s>",
    ];
    for name in NAMED {
        if s.starts_with(name) {
            return name.len();
        }
    }
    // `<|anything_like_this|>`: ChatML, Llama 3, Phi and friends.
    if s.starts_with(b"<|") {
        let body = &s[2..];
        let n = body
            .iter()
            .take(40)
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        if n > 0 && body[n..].starts_with(b"|>") {
            return n + 4;
        }
    }
    0
}

/// Returns the inside of the first Markdown code fence, when the fence opens before any
/// JSON does (a fence inside a JSON string is content, not a wrapper).
fn strip_code_fence<'a>(text: &'a str, fixes: &mut Fixes) -> &'a str {
    let Some(fence) = text.find("```") else {
        return text;
    };
    let first_json = text
        .bytes()
        .position(|b| b == b'{' || b == b'[')
        .unwrap_or(text.len());
    if fence > first_json {
        return text;
    }
    let after = &text[fence + 3..];
    // Skip the info string (`json`, `JSON`, `jsonc`...) up to the end of its line.
    let info = after
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'-' || *b == b'_')
        .count();
    let inner = &after[info..];
    let inner = match inner.find("```") {
        Some(close) => &inner[..close],
        None => inner,
    };
    if !inner.bytes().any(|b| b == b'{' || b == b'[') {
        // A fence with no JSON in it (an example, a shell command): look elsewhere.
        return text;
    }
    fixes.insert(Fix::CodeFence);
    if !text[..fence].trim().is_empty() {
        fixes.insert(Fix::SurroundingText);
    }
    inner
}

/// Where a value sits; decides what may follow it and so whether a quote ends a string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    Top,
    Object,
    Array,
}

/// How parsing one value ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Val {
    /// The value is complete.
    Complete,
    /// The input ended inside the value; what was written is closed and worth keeping.
    Partial,
    /// The input ended inside the value and nothing of it is worth keeping; the output
    /// was restored to where the value began.
    Dropped,
    /// No value starts here; nothing was consumed or written.
    NotValue,
}

struct Parser<'a> {
    src: &'a str,
    s: &'a [u8],
    pos: usize,
    out: String,
    fixes: Fixes,
}

/// Bytes that end a run of ordinary string content: quotes, backslash, control
/// characters, and 0xE2 (the first byte of typographic quotes).
static STRING_SPECIAL: [bool; 256] = {
    let mut t = [false; 256];
    let mut i = 0;
    while i < 0x20 {
        t[i] = true;
        i += 1;
    }
    t[b'"' as usize] = true;
    t[b'\'' as usize] = true;
    t[b'\\' as usize] = true;
    t[0xE2] = true;
    t
};

const LEFT_DOUBLE: &[u8] = "\u{201C}".as_bytes();
const RIGHT_DOUBLE: &[u8] = "\u{201D}".as_bytes();
const LEFT_SINGLE: &[u8] = "\u{2018}".as_bytes();
const RIGHT_SINGLE: &[u8] = "\u{2019}".as_bytes();

/// How a string is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Quote {
    Double,
    Single,
    SmartDouble,
    SmartSingle,
}

impl<'a> Parser<'a> {
    fn new(src: &'a str, pos: usize) -> Self {
        Parser {
            src,
            s: src.as_bytes(),
            pos,
            out: String::with_capacity(src.len().saturating_sub(pos) + 16),
            fixes: Fixes::default(),
        }
    }

    fn fix(&mut self, fix: Fix) {
        self.fixes.insert(fix);
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    /// Looks at what follows the value: extra closers or other text.
    fn trailing(&mut self) {
        let rest = &self.src[self.pos.min(self.src.len())..];
        let rest = rest.trim();
        if rest.is_empty() {
            return;
        }
        if rest
            .bytes()
            .all(|b| matches!(b, b'}' | b']') || b.is_ascii_whitespace())
        {
            self.fix(Fix::ExtraCloser);
        } else {
            self.fix(Fix::SurroundingText);
        }
    }

    /// Skips whitespace and comments.
    fn skip_ws(&mut self) {
        loop {
            match self.peek() {
                Some(b' ' | b'\t' | b'\n' | b'\r') => self.pos += 1,
                Some(0xC2) if self.s.get(self.pos + 1) == Some(&0xA0) => self.pos += 2,
                Some(0xEF) if self.s[self.pos..].starts_with("\u{FEFF}".as_bytes()) => {
                    self.pos += 3
                }
                Some(b'#') => {
                    self.fix(Fix::Comment);
                    self.skip_line();
                }
                Some(b'/') => match self.s.get(self.pos + 1) {
                    Some(b'/') => {
                        self.fix(Fix::Comment);
                        self.skip_line();
                    }
                    Some(b'*') => {
                        self.fix(Fix::Comment);
                        let body = &self.s[self.pos + 2..];
                        self.pos = match body.windows(2).position(|w| w == b"*/") {
                            Some(end) => self.pos + 2 + end + 2,
                            None => self.s.len(),
                        };
                    }
                    _ => return,
                },
                _ => return,
            }
        }
    }

    fn skip_line(&mut self) {
        self.pos = match self.s[self.pos..].iter().position(|&b| b == b'\n') {
            Some(n) => self.pos + n + 1,
            None => self.s.len(),
        };
    }

    fn quote_at(&self, pos: usize) -> Option<Quote> {
        let rest = &self.s[pos.min(self.s.len())..];
        match rest.first()? {
            b'"' => Some(Quote::Double),
            b'\'' => Some(Quote::Single),
            0xE2 if rest.starts_with(LEFT_DOUBLE) || rest.starts_with(RIGHT_DOUBLE) => {
                Some(Quote::SmartDouble)
            }
            0xE2 if rest.starts_with(LEFT_SINGLE) || rest.starts_with(RIGHT_SINGLE) => {
                Some(Quote::SmartSingle)
            }
            _ => None,
        }
    }

    fn value(&mut self, depth: usize, ctx: Ctx) -> Result<Val, RepairError> {
        self.skip_ws();
        let Some(c) = self.peek() else {
            return Ok(Val::Dropped);
        };
        if let Some(q) = self.quote_at(self.pos) {
            return Ok(self.string(q, false, ctx));
        }
        match c {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'-' | b'+' | b'.' | b'0'..=b'9' => Ok(self.number(ctx)),
            c if is_word_start(c) => Ok(self.word(ctx)),
            _ => Ok(Val::NotValue),
        }
    }

    fn object(&mut self, depth: usize) -> Result<Val, RepairError> {
        if depth > MAX_DEPTH {
            return Err(RepairError::TooDeep);
        }
        self.pos += 1;
        self.out.push('{');
        let mut first = true;
        let mut comma = false;
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else {
                return Ok(self.close_truncated('}'));
            };
            match c {
                b'}' | b']' => {
                    if c == b']' {
                        self.fix(Fix::MismatchedCloser);
                    }
                    if comma {
                        self.fix(Fix::TrailingComma);
                    }
                    self.pos += 1;
                    self.out.push('}');
                    return Ok(Val::Complete);
                }
                b',' => {
                    if comma || first {
                        self.fix(Fix::TrailingComma);
                    }
                    comma = true;
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            let mark = self.out.len();
            if !first {
                if !comma {
                    self.fix(Fix::MissingComma);
                }
                self.out.push(',');
            }
            match self.key() {
                Val::Complete => {}
                Val::Dropped | Val::Partial => {
                    self.out.truncate(mark);
                    return Ok(self.close_truncated('}'));
                }
                Val::NotValue => {
                    self.out.truncate(mark);
                    self.skip_char();
                    continue;
                }
            }
            self.skip_ws();
            match self.peek() {
                None => {
                    self.out.truncate(mark);
                    return Ok(self.close_truncated('}'));
                }
                Some(b':') => self.pos += 1,
                Some(b'=') => {
                    self.fix(Fix::MissingColon);
                    self.pos += 1;
                }
                Some(b',' | b'}' | b']') => {
                    self.fix(Fix::MissingValue);
                    self.out.truncate(mark);
                    continue;
                }
                Some(_) => self.fix(Fix::MissingColon),
            }
            self.out.push(':');
            match self.value(depth, Ctx::Object)? {
                Val::Complete => {}
                Val::Partial => {
                    self.out.push('}');
                    return Ok(Val::Partial);
                }
                Val::Dropped => {
                    self.out.truncate(mark);
                    return Ok(self.close_truncated('}'));
                }
                Val::NotValue => {
                    self.fix(Fix::MissingValue);
                    self.out.truncate(mark);
                    continue;
                }
            }
            first = false;
            comma = false;
            self.skip_ws();
            if self.peek() == Some(b',') {
                self.pos += 1;
                comma = true;
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<Val, RepairError> {
        if depth > MAX_DEPTH {
            return Err(RepairError::TooDeep);
        }
        self.pos += 1;
        self.out.push('[');
        let mut first = true;
        let mut comma = false;
        loop {
            self.skip_ws();
            let Some(c) = self.peek() else {
                return Ok(self.close_truncated(']'));
            };
            match c {
                b']' | b'}' => {
                    if c == b'}' {
                        self.fix(Fix::MismatchedCloser);
                    }
                    if comma {
                        self.fix(Fix::TrailingComma);
                    }
                    self.pos += 1;
                    self.out.push(']');
                    return Ok(Val::Complete);
                }
                b',' => {
                    if comma || first {
                        self.fix(Fix::TrailingComma);
                    }
                    comma = true;
                    self.pos += 1;
                    continue;
                }
                _ => {}
            }
            let mark = self.out.len();
            if !first {
                self.out.push(',');
            }
            match self.value(depth, Ctx::Array)? {
                Val::Complete => {}
                Val::Partial => {
                    self.out.push(']');
                    return Ok(Val::Partial);
                }
                Val::Dropped => {
                    self.out.truncate(mark);
                    return Ok(self.close_truncated(']'));
                }
                Val::NotValue => {
                    self.out.truncate(mark);
                    self.skip_char();
                    continue;
                }
            }
            if !first && !comma {
                self.fix(Fix::MissingComma);
            }
            first = false;
            comma = false;
            self.skip_ws();
            if self.peek() == Some(b',') {
                self.pos += 1;
                comma = true;
            }
        }
    }

    fn close_truncated(&mut self, closer: char) -> Val {
        self.fix(Fix::Truncated);
        self.out.push(closer);
        Val::Partial
    }

    /// Skips one stray character (a whole UTF-8 sequence).
    fn skip_char(&mut self) {
        self.fix(Fix::SkippedCharacter);
        let len = self.src[self.pos..]
            .chars()
            .next()
            .map_or(1, char::len_utf8);
        self.pos += len;
    }

    fn key(&mut self) -> Val {
        if let Some(q) = self.quote_at(self.pos) {
            return self.string(q, true, Ctx::Object);
        }
        let start = self.pos;
        let len = self.s[start..]
            .iter()
            .take_while(|&&b| is_bare_key_byte(b))
            .count();
        if len == 0 {
            return Val::NotValue;
        }
        self.pos += len;
        if self.at_end() {
            return Val::Dropped;
        }
        self.fix(Fix::UnquotedKey);
        let key = &self.src[start..start + len];
        self.push_quoted(key);
        Val::Complete
    }

    /// Writes `text` as a JSON string.
    fn push_quoted(&mut self, text: &str) {
        self.out.push('"');
        let mut copied = 0;
        for (i, b) in text.bytes().enumerate() {
            if b == b'"' || b == b'\\' || b < 0x20 {
                self.out.push_str(&text[copied..i]);
                push_escaped_byte(&mut self.out, b);
                copied = i + 1;
            }
        }
        self.out.push_str(&text[copied..]);
        self.out.push('"');
    }

    fn string(&mut self, quote: Quote, is_key: bool, ctx: Ctx) -> Val {
        match quote {
            Quote::Double => {}
            Quote::Single => self.fix(Fix::SingleQuotes),
            Quote::SmartDouble | Quote::SmartSingle => self.fix(Fix::SmartQuotes),
        }
        self.pos += if matches!(quote, Quote::Double | Quote::Single) {
            1
        } else {
            3
        };
        let mark = self.out.len();
        self.out.push('"');
        loop {
            // Copy the run of ordinary bytes in one go.
            let run = self.s[self.pos..]
                .iter()
                .position(|&b| STRING_SPECIAL[b as usize])
                .unwrap_or(self.s.len() - self.pos);
            self.out.push_str(&self.src[self.pos..self.pos + run]);
            self.pos += run;
            let Some(b) = self.peek() else {
                self.fix(Fix::Truncated);
                if is_key {
                    self.out.truncate(mark);
                    return Val::Dropped;
                }
                self.fix(Fix::CutValue);
                self.out.push('"');
                return Val::Partial;
            };
            if self.closes(quote) {
                let after = self.pos + if b == 0xE2 { 3 } else { 1 };
                if is_key || self.ends_value(after, ctx) {
                    self.pos = after;
                    if is_key && self.at_end() {
                        self.out.truncate(mark);
                        return Val::Dropped;
                    }
                    self.out.push('"');
                    return Val::Complete;
                }
                self.fix(Fix::InnerQuote);
            }
            match b {
                b'"' => {
                    self.out.push_str("\\\"");
                    self.pos += 1;
                }
                b'\'' => {
                    self.out.push('\'');
                    self.pos += 1;
                }
                0xE2 => {
                    // Any other character starting with 0xE2 (smart quotes that do not
                    // close this string, arrows, dashes...) is copied whole.
                    let len = self.src[self.pos..]
                        .chars()
                        .next()
                        .map_or(1, char::len_utf8);
                    self.out.push_str(&self.src[self.pos..self.pos + len]);
                    self.pos += len;
                }
                b'\\' => {
                    if !self.escape() {
                        self.fix(Fix::Truncated);
                        if is_key {
                            self.out.truncate(mark);
                            return Val::Dropped;
                        }
                        self.fix(Fix::CutValue);
                        self.out.push('"');
                        return Val::Partial;
                    }
                }
                _ => {
                    self.fix(Fix::ControlCharacter);
                    push_escaped_byte(&mut self.out, b);
                    self.pos += 1;
                }
            }
        }
    }

    /// Whether the byte at `pos` is the closing quote of a string opened with `quote`.
    fn closes(&self, quote: Quote) -> bool {
        let rest = &self.s[self.pos..];
        match quote {
            Quote::Double => rest[0] == b'"',
            Quote::Single => rest[0] == b'\'',
            Quote::SmartDouble => {
                rest[0] == b'"' || rest.starts_with(RIGHT_DOUBLE) || rest.starts_with(LEFT_DOUBLE)
            }
            Quote::SmartSingle => rest.starts_with(RIGHT_SINGLE) || rest.starts_with(LEFT_SINGLE),
        }
    }

    /// Decides whether a quote ends its string by what follows it: a model that writes
    /// `"He said "hi" to me"` means one string, and the quote before `hi` is followed by
    /// a letter, which cannot follow a value.
    fn ends_value(&self, after: usize, ctx: Ctx) -> bool {
        if ctx == Ctx::Top {
            return true;
        }
        let mut i = after;
        while i < self.s.len() && matches!(self.s[i], b' ' | b'\t' | b'\n' | b'\r') {
            i += 1;
        }
        let Some(&c) = self.s.get(i) else {
            return true;
        };
        match c {
            b'}' | b']' | b'"' => true,
            b'/' | b'#' => true,
            b',' => {
                i = self.past_space_and_comments(i + 1);
                let Some(&d) = self.s.get(i) else {
                    return true;
                };
                if matches!(d, b'"' | b'\'' | b'{' | b'[' | b'}' | b']') || d == 0xE2 {
                    return true;
                }
                match ctx {
                    Ctx::Array => d.is_ascii_digit() || d == b'-' || is_word_start(d),
                    Ctx::Object => {
                        let len = self.s[i..]
                            .iter()
                            .take(64)
                            .take_while(|&&b| is_bare_key_byte(b))
                            .count();
                        let mut j = i + len;
                        while j < self.s.len() && matches!(self.s[j], b' ' | b'\t') {
                            j += 1;
                        }
                        len > 0 && self.s.get(j) == Some(&b':')
                    }
                    Ctx::Top => true,
                }
            }
            _ => false,
        }
    }

    /// The first position from `i` that is not white space or inside a comment: what a
    /// `,` after a string is followed by decides whether the string ended there.
    fn past_space_and_comments(&self, mut i: usize) -> usize {
        loop {
            while i < self.s.len() && matches!(self.s[i], b' ' | b'\t' | b'\n' | b'\r') {
                i += 1;
            }
            let rest = &self.s[i.min(self.s.len())..];
            if rest.starts_with(b"//") || rest.starts_with(b"#") {
                i += rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
            } else if rest.starts_with(b"/*") {
                i += rest
                    .windows(2)
                    .position(|w| w == b"*/")
                    .map_or(rest.len(), |p| p + 2);
            } else {
                return i;
            }
        }
    }

    /// Copies one escape sequence (the backslash is at `pos`). Returns false when the input
    /// ends inside it; the incomplete escape is then dropped.
    fn escape(&mut self) -> bool {
        let Some(&next) = self.s.get(self.pos + 1) else {
            self.pos = self.s.len();
            return false;
        };
        match next {
            b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => {
                self.out.push('\\');
                self.out.push(next as char);
                self.pos += 2;
            }
            b'\'' => {
                self.out.push('\'');
                self.pos += 2;
            }
            b'u' => return self.unicode_escape(),
            _ => {
                // `\x`, `\a`, `\é`: keep the backslash as a literal character.
                self.fix(Fix::InvalidEscape);
                self.out.push_str("\\\\");
                self.pos += 1;
            }
        }
        true
    }

    fn hex4(&self, at: usize) -> Option<Result<u16, ()>> {
        let digits = self.s.get(at..at + 4);
        match digits {
            None => {
                let rest = &self.s[at.min(self.s.len())..];
                if rest.iter().all(u8::is_ascii_hexdigit) {
                    None
                } else {
                    Some(Err(()))
                }
            }
            Some(d) => {
                if d.iter().all(u8::is_ascii_hexdigit) {
                    let text = std::str::from_utf8(d).unwrap_or("0000");
                    Some(u16::from_str_radix(text, 16).map_err(|_| ()))
                } else {
                    Some(Err(()))
                }
            }
        }
    }

    fn unicode_escape(&mut self) -> bool {
        let code = match self.hex4(self.pos + 2) {
            None => {
                self.pos = self.s.len();
                return false;
            }
            Some(Err(())) => {
                self.fix(Fix::InvalidEscape);
                self.out.push_str("\\\\");
                self.pos += 1;
                return true;
            }
            Some(Ok(code)) => code,
        };
        match code {
            0xD800..=0xDBFF => {
                let low_at = self.pos + 6;
                let rest = &self.s[low_at.min(self.s.len())..];
                if rest.len() < 2 && b"\\u".starts_with(rest) {
                    // Cut between the two halves of a pair.
                    self.pos = self.s.len();
                    return false;
                }
                if rest.starts_with(b"\\u") {
                    match self.hex4(low_at + 2) {
                        None => {
                            self.pos = self.s.len();
                            return false;
                        }
                        Some(Ok(low @ 0xDC00..=0xDFFF)) => {
                            self.out.push_str(&self.src[self.pos..self.pos + 12]);
                            let _ = low;
                            self.pos += 12;
                            return true;
                        }
                        _ => {}
                    }
                }
                self.fix(Fix::LoneSurrogate);
                self.out.push_str("\\ufffd");
                self.pos += 6;
            }
            0xDC00..=0xDFFF => {
                self.fix(Fix::LoneSurrogate);
                self.out.push_str("\\ufffd");
                self.pos += 6;
            }
            _ => {
                self.out.push_str(&self.src[self.pos..self.pos + 6]);
                self.pos += 6;
            }
        }
        true
    }

    fn number(&mut self, ctx: Ctx) -> Val {
        let start = self.pos;
        let mark = self.out.len();
        let s = self.s;
        let mut i = self.pos;
        let mut reformatted = false;
        if s[i] == b'+' {
            reformatted = true;
            i += 1;
        } else if s[i] == b'-' {
            self.out.push('-');
            i += 1;
        }
        if s.get(i).is_some_and(|b| b.is_ascii_alphabetic()) {
            // `-Infinity`, `+NaN`.
            self.pos = i;
            let got = self.word(ctx);
            if got == Val::Dropped {
                self.out.truncate(mark);
                return Val::Dropped;
            }
            if got == Val::Complete && self.out[mark..].trim_start_matches('-') == "null" {
                self.out.truncate(mark);
                self.out.push_str("null");
                return Val::Complete;
            }
            self.out.truncate(mark);
            self.pos = start;
            return self.bare_string(ctx);
        }
        let int_start = i;
        while s.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let int_digits = &self.src[int_start..i];
        if int_digits.is_empty() {
            if s.get(i) == Some(&b'.') && s.get(i + 1).is_some_and(u8::is_ascii_digit) {
                reformatted = true;
                self.out.push('0');
            } else if i >= s.len() {
                self.fix(Fix::CutValue);
                self.pos = i;
                self.out.truncate(mark);
                return Val::Dropped;
            } else {
                // A lone sign or dot: not a value; the caller skips it.
                self.out.truncate(mark);
                self.pos = start;
                return Val::NotValue;
            }
        } else {
            let trimmed = int_digits.trim_start_matches('0');
            if trimmed.len() != int_digits.len() && int_digits.len() > 1 {
                reformatted = true;
                self.out
                    .push_str(if trimmed.is_empty() { "0" } else { trimmed });
            } else {
                self.out.push_str(int_digits);
            }
        }
        let mut exponent = false;
        if s.get(i) == Some(&b'.') {
            let frac_start = i + 1;
            let mut j = frac_start;
            while s.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j == frac_start {
                if j >= s.len() && ctx != Ctx::Top {
                    self.fix(Fix::CutValue);
                    self.pos = j;
                    self.out.truncate(mark);
                    return Val::Dropped;
                }
                reformatted = true;
            } else {
                self.out.push_str(&self.src[i..j]);
            }
            i = j;
        }
        if matches!(s.get(i), Some(b'e' | b'E')) {
            let mut j = i + 1;
            if matches!(s.get(j), Some(b'+' | b'-')) {
                j += 1;
            }
            let digits_start = j;
            while s.get(j).is_some_and(u8::is_ascii_digit) {
                j += 1;
            }
            if j == digits_start {
                if j >= s.len() && ctx != Ctx::Top {
                    self.fix(Fix::CutValue);
                    self.pos = j;
                    self.out.truncate(mark);
                    return Val::Dropped;
                }
                if s.get(j).is_some_and(|b| b.is_ascii_alphabetic()) {
                    // `12em`, `3e-rd`: a word, not a number.
                    self.out.truncate(mark);
                    self.pos = start;
                    return self.bare_string(ctx);
                }
                reformatted = true;
            } else {
                exponent = true;
                self.out.push_str(&self.src[i..j]);
            }
            i = j;
        }
        if s.get(i)
            .is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_')
        {
            // `12px`, `1st`: a word that starts with digits.
            self.out.truncate(mark);
            self.pos = start;
            return self.bare_string(ctx);
        }
        self.pos = i;
        if i >= s.len() && ctx != Ctx::Top {
            // The number may have been cut: `12` of `123`. Nothing is invented.
            self.fix(Fix::CutValue);
            self.out.truncate(mark);
            return Val::Dropped;
        }
        if reformatted {
            self.fix(Fix::NumberFormat);
        }
        if exponent || self.out.len() - mark > 300 {
            let finite = self.out[mark..].parse::<f64>().is_ok_and(f64::is_finite);
            if !finite {
                self.fix(Fix::NonFiniteNumber);
                self.out.truncate(mark);
                self.out.push_str("null");
            }
        }
        Val::Complete
    }

    fn word(&mut self, ctx: Ctx) -> Val {
        let start = self.pos;
        let len = self.s[start..]
            .iter()
            .take_while(|b| b.is_ascii_alphanumeric() || **b == b'_')
            .count();
        let word = &self.src[start..start + len];
        let at_end = start + len >= self.s.len();
        let (json, fix) = match word {
            "true" | "false" | "null" => (word, None),
            "True" => ("true", Some(Fix::PythonLiteral)),
            "False" => ("false", Some(Fix::PythonLiteral)),
            "None" => ("null", Some(Fix::PythonLiteral)),
            "NaN" | "Infinity" | "inf" | "nan" | "undefined" => {
                ("null", Some(Fix::NonFiniteNumber))
            }
            _ => {
                const LITERALS: [&str; 9] = [
                    "true",
                    "false",
                    "null",
                    "True",
                    "False",
                    "None",
                    "NaN",
                    "Infinity",
                    "undefined",
                ];
                // A literal cut at the end of the input is unambiguous: every literal a
                // prefix can start stands for one JSON value (`n` for null or nan, both
                // null), so it is completed rather than dropped.
                if at_end
                    && !word.is_empty()
                    && let Some(l) = LITERALS.iter().find(|l| l.starts_with(word))
                {
                    self.fix(Fix::Truncated);
                    self.fix(Fix::CutValue);
                    self.out.push_str(match *l {
                        "true" | "True" => "true",
                        "false" | "False" => "false",
                        _ => "null",
                    });
                    self.pos = self.s.len();
                    return Val::Partial;
                }
                return self.bare_string(ctx);
            }
        };
        if let Some(fix) = fix {
            self.fix(fix);
        }
        self.out.push_str(json);
        self.pos = start + len;
        Val::Complete
    }

    /// A bare word or phrase in value position, read up to the next delimiter of its
    /// container: `{"city": Tokyo}`.
    fn bare_string(&mut self, ctx: Ctx) -> Val {
        if ctx == Ctx::Top {
            return Val::NotValue;
        }
        let start = self.pos;
        let stop: &[u8] = match ctx {
            Ctx::Object => b",}\n",
            _ => b",]\n",
        };
        let len = self.s[start..]
            .iter()
            .position(|b| stop.contains(b))
            .unwrap_or(self.s.len() - start);
        let text = self.src[start..start + len].trim();
        if text.is_empty() {
            // Nothing consumed, as `NotValue` promises: the caller skips one character.
            // Moving to the end here made the caller skip past it (found by fuzzing: `[`
            // and an em space).
            return Val::NotValue;
        }
        self.pos = start + len;
        self.fix(Fix::UnquotedString);
        self.push_quoted(text);
        if self.at_end() {
            self.fix(Fix::Truncated);
            self.fix(Fix::CutValue);
            Val::Partial
        } else {
            Val::Complete
        }
    }
}

fn is_word_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_' || c == b'$' || c >= 0x80
}

fn is_bare_key_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'-' | b'.') || b >= 0x80
}

fn push_escaped_byte(out: &mut String, b: u8) {
    match b {
        b'"' => out.push_str("\\\""),
        b'\\' => out.push_str("\\\\"),
        b'\n' => out.push_str("\\n"),
        b'\r' => out.push_str("\\r"),
        b'\t' => out.push_str("\\t"),
        0x08 => out.push_str("\\b"),
        0x0C => out.push_str("\\f"),
        _ => {
            const HEX: &[u8; 16] = b"0123456789abcdef";
            out.push_str("\\u00");
            out.push(HEX[(b >> 4) as usize] as char);
            out.push(HEX[(b & 0xF) as usize] as char);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fixed(input: &str) -> (Value, Vec<Fix>) {
        let r = repair(input).unwrap_or_else(|e| panic!("{input:?}: {e}"));
        (r.value, r.fixes.to_vec())
    }

    #[test]
    fn open_depth_says_where_a_value_was_cut() {
        assert_eq!(open_depth(r#"{"a": [1, 2]}"#), 0);
        assert_eq!(open_depth(r#"{"a": [1, "#), 2);
        assert_eq!(open_depth(r#"{"a": "x]"#), 2);
        assert_eq!(open_depth(r#"```json {"a": {"b": "\"}"#), 3);
        assert_eq!(open_depth("no json here"), 0);
    }

    #[test]
    fn valid_json_is_unchanged() {
        let (v, f) = fixed(r#" {"a": [1, 2.5, "x"]} "#);
        assert_eq!(v, json!({"a": [1, 2.5, "x"]}));
        assert!(f.is_empty());
    }

    #[test]
    fn code_fence() {
        let (v, f) = fixed("```JSON\n{\"a\": 1}\n```");
        assert_eq!(v, json!({"a": 1}));
        assert_eq!(f, vec![Fix::CodeFence]);
    }

    #[test]
    fn fence_inside_a_string_is_content() {
        let (v, _) = fixed("{\"a\": \"```py\\nx\\n```\"");
        assert_eq!(v, json!({"a": "```py\nx\n```"}));
    }

    #[test]
    fn surrounding_text() {
        let (v, f) = fixed("Sure! {\"a\": 1} Hope this helps.");
        assert_eq!(v, json!({"a": 1}));
        assert_eq!(f, vec![Fix::SurroundingText]);
    }

    #[test]
    fn template_tokens() {
        let (v, f) = fixed("<start_of_turn>model\n{\"a\": \"b<end_of_turn>");
        assert_eq!(v, json!({"a": "b"}));
        assert!(f.contains(&Fix::TemplateTokens));
    }

    #[test]
    fn truncated_string_is_kept_as_prefix() {
        assert_eq!(fixed(r#"{"a": "hel"#).0, json!({"a": "hel"}));
    }

    #[test]
    fn truncated_number_is_dropped() {
        assert_eq!(fixed(r#"{"a": 1, "b": 12"#).0, json!({"a": 1}));
    }

    #[test]
    fn truncated_literal_is_completed() {
        assert_eq!(fixed(r#"{"a": 1, "b": tr"#).0, json!({"a": 1, "b": true}));
        assert_eq!(fixed(r#"{"a": [fals"#).0, json!({"a": [false]}));
        assert_eq!(fixed(r#"{"a": nul"#).0, json!({"a": null}));
        assert_eq!(fixed(r#"{"a": Tr"#).0, json!({"a": true}));
    }

    #[test]
    fn a_comment_after_a_string_value_ends_the_string() {
        let (v, fixes) = fixed("{\"a\": \"x\", // note\n\"b\": \"y\"}");
        assert_eq!(v, json!({"a": "x", "b": "y"}));
        assert!(fixes.contains(&Fix::Comment));
        let (v, _) = fixed("{\"a\": \"x\", /* note */ \"b\": \"y\"}");
        assert_eq!(v, json!({"a": "x", "b": "y"}));
        let (v, _) = fixed("[\"x\", # note\n\"y\"]");
        assert_eq!(v, json!(["x", "y"]));
    }

    #[test]
    fn truncated_key_is_dropped() {
        assert_eq!(fixed(r#"{"a": 1, "ke"#).0, json!({"a": 1}));
        assert_eq!(fixed(r#"{"a": 1, "key""#).0, json!({"a": 1}));
        assert_eq!(fixed(r#"{"a": 1, "key":"#).0, json!({"a": 1}));
    }

    #[test]
    fn truncated_escape_is_dropped() {
        assert_eq!(fixed(r#"{"a": "x\"#).0, json!({"a": "x"}));
        assert_eq!(fixed(r#"{"a": "x\u00"#).0, json!({"a": "x"}));
        assert_eq!(fixed(r#"{"a": "x\ud83d"#).0, json!({"a": "x"}));
        assert_eq!(fixed(r#"{"a": "x\ud83d\ude"#).0, json!({"a": "x"}));
    }

    #[test]
    fn mismatched_closer() {
        let (v, f) = fixed(r#"{"a": [1, 2}}"#);
        assert_eq!(v, json!({"a": [1, 2]}));
        assert!(f.contains(&Fix::MismatchedCloser));
    }

    #[test]
    fn extra_closer() {
        let (v, f) = fixed(r#"{"a": 1}}]"#);
        assert_eq!(v, json!({"a": 1}));
        assert_eq!(f, vec![Fix::ExtraCloser]);
    }

    #[test]
    fn single_quotes() {
        assert_eq!(fixed("{'a': 'it\\'s'}").0, json!({"a": "it's"}));
    }

    #[test]
    fn smart_quotes() {
        assert_eq!(fixed("{“a”: “b”}").0, json!({"a": "b"}));
    }

    #[test]
    fn unquoted_key() {
        assert_eq!(fixed("{a: 1, b_c: 2}").0, json!({"a": 1, "b_c": 2}));
    }

    #[test]
    fn trailing_and_missing_commas() {
        assert_eq!(fixed(r#"{"a": 1,}"#).0, json!({"a": 1}));
        assert_eq!(fixed(r#"[1,,2,]"#).0, json!([1, 2]));
        assert_eq!(fixed("{\"a\": 1\n\"b\": 2}").0, json!({"a": 1, "b": 2}));
        assert_eq!(fixed("[1 2]").0, json!([1, 2]));
    }

    #[test]
    fn comments() {
        let (v, f) = fixed("{// c\n\"a\": /* x */ 1, # y\n}");
        assert_eq!(v, json!({"a": 1}));
        assert!(f.contains(&Fix::Comment));
    }

    #[test]
    fn python_literals() {
        assert_eq!(fixed("[True, False, None]").0, json!([true, false, null]));
    }

    #[test]
    fn non_finite() {
        assert_eq!(
            fixed("[NaN, Infinity, -Infinity, 1e999]").0,
            json!([null, null, null, null])
        );
    }

    #[test]
    fn raw_control_characters() {
        assert_eq!(fixed("{\"a\": \"x\ny\tz\"}").0, json!({"a": "x\ny\tz"}));
    }

    #[test]
    fn unescaped_inner_quotes() {
        let (v, f) = fixed(r#"{"a": "He said "hi, there" to me", "b": 1}"#);
        assert_eq!(v, json!({"a": "He said \"hi, there\" to me", "b": 1}));
        assert!(f.contains(&Fix::InnerQuote));
    }

    #[test]
    fn deep_nesting_is_an_error() {
        let deep = "[".repeat(100_000);
        assert_eq!(repair(&deep), Err(RepairError::TooDeep));
        let ok = "[".repeat(MAX_DEPTH);
        assert!(repair(&ok).is_ok());
    }

    #[test]
    fn fuzz_crash_a_466_digit_integer_is_not_passed_through() {
        let input = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/fuzz/regressions/repair-466-digit-integer"
        ))
        .unwrap();
        let (text, _) = repair_to_string(&input).unwrap();
        assert!(serde_json::from_str::<Value>(&text).is_ok(), "{text}");
        assert_eq!(repair(&input).unwrap().value, Value::Null);
    }

    #[test]
    fn fuzz_crash_a_stray_unicode_space_in_a_container_stays_inside_the_input() {
        // An em space where a value should be was skipped one byte past the end of the
        // text, and Turn::parse then sliced out of bounds.
        for text in [
            "[\u{2003}",
            "[1,\u{2003}",
            "{\"a\":[ \u{2003}",
            "{a[ \u{2003}",
        ] {
            let found = parse_from(text, 0).unwrap();
            assert!(found.end <= text.len(), "{text:?}: end {}", found.end);
        }
        assert_eq!(repair("[1,\u{2003}").unwrap().value, json!([1]));
        assert_eq!(repair("[\u{2003}x]").unwrap().value, json!(["x"]));
    }

    #[test]
    fn nothing_json_like() {
        assert_eq!(repair("hello world"), Err(RepairError::NoJson));
        assert_eq!(repair(""), Err(RepairError::NoJson));
    }
}
