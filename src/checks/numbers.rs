//! Numbers as people write them, in the ways languages group and split their digits.
//!
//! The checks ask whether a value is a number the person gave ([`super::grounding`]'s
//! evidence, `tool-fit`'s values nobody said, `numbers-left`'s numbers a call left out).
//! Read the English way only, "3,5 Meilen" said 3 and 5, "1.500 €" said 1.5, "1 500 €"
//! said 1 and 500, and "３５ドル" said nothing: a right call in German, French, Spanish
//! or Japanese then carried a value "nobody said" (put to the fit question) or left a
//! number "out" (asked again).
//!
//! Every reading a written number has is kept, the English one first. Which one the
//! person meant cannot be told from the digits ("1,234" is 1234 in English and 1.234 in
//! German), and evidence that holds both only lets more values count as said, which is
//! the direction a right call needs. The readings of the English-only rule are kept too
//! ("3,5,7" still says 3, 5 and 7), so nothing that counted as said before stops counting.

use std::borrow::Cow;
use std::sync::LazyLock;

use regex::Regex;

/// A number as people write it: `12,000`, `12.000`, `12 000`, `12'000`, `3,5`, `-4`,
/// `1.2M`, `40%`, `298K`, `1e-9`, with the word or sign for its size after it.
static WRITTEN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"(?i)(\d+(?:[.,]\d+|[ \u{a0}\u{202f}'’]\d{3}\b)*(?:e-?\d+)?)(\s*)(%|percent\b|k\b|thousand\b|m\b|million\b|bn\b|b\b|billion\b)?",
    )
    .expect("a valid pattern")
});

/// The English reading toolloop had before, kept for what it splits ("3,5,7"), except
/// that thousands end where the digits do ("20,2023" is not 20202 and 3).
static ENGLISH_PARTS: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)\d{1,3}(?:,\d{3})+\b(?:\.\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?")
        .expect("a valid pattern")
});

/// `12,000.5`, `12.5`, `1e-9`: commas group thousands, a dot starts the fraction.
static ENGLISH: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?i)^(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?(?:e-?\d+)?)$")
        .expect("a valid pattern")
});

/// `12.000`, `1.500,75`: dots group thousands, a comma starts the fraction (German,
/// Spanish, Italian, Portuguese, Dutch).
static DOTS: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d{1,3}(?:\.\d{3})+(?:,\d+)?$").expect("a valid pattern"));

/// `12 000`, `12 000,5`, `12'000.50`: spaces (French, also no-break) or apostrophes
/// (Swiss) group thousands.
static SPACES: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^\d{1,3}(?:[ \u{a0}\u{202f}'’]\d{3})+(?:[.,]\d+)?$").expect("a valid pattern")
});

/// `3,5`, `19,99`: a comma starts the fraction.
static COMMA: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^\d+,\d+$").expect("a valid pattern"));

/// One number as the person wrote it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Written {
    /// The number with its size word, as written (`1.500 €` gives `1.500`).
    pub text: String,
    /// What it can mean, the English reading first; never empty.
    pub readings: Vec<f64>,
    /// The word or sign for its size after it, as written (`%`, `k`, `million`).
    pub suffix: Option<String>,
    /// Whether space stands between the digits and the suffix (`100 m`, not `$1.2M`).
    pub spaced: bool,
}

/// The numbers written in `text`, each with every reading it has: "Wie viel sind 3,5
/// Meilen?" writes one number, read as 3.5, 3 and 5.
pub(crate) fn written(text: &str) -> Vec<Written> {
    let text = halfwidth(text);
    WRITTEN
        .captures_iter(&text)
        .filter_map(|m| {
            let readings = readings(&m[1]);
            (!readings.is_empty()).then(|| Written {
                text: m[0].to_string(),
                readings,
                suffix: m.get(3).map(|s| s.as_str().to_string()),
                spaced: !m[2].is_empty(),
            })
        })
        .collect()
}

/// Every reading of the digits and separators of one written number.
fn readings(token: &str) -> Vec<f64> {
    let mut out: Vec<f64> = Vec::new();
    let mut add = |s: &str| {
        if let Ok(n) = s.parse::<f64>()
            && n.is_finite()
            && !out.contains(&n)
        {
            out.push(n);
        }
    };
    if ENGLISH.is_match(token) {
        add(&token.replace(',', ""));
    }
    if DOTS.is_match(token) {
        add(&token.replace('.', "").replace(',', "."));
    }
    if SPACES.is_match(token) {
        let digits: String = token
            .chars()
            .filter(|c| c.is_ascii_digit() || matches!(c, '.' | ','))
            .collect();
        add(&digits.replace(',', "."));
    }
    if COMMA.is_match(token) {
        add(&token.replace(',', "."));
    }
    for part in ENGLISH_PARTS.find_iter(token) {
        add(&part.as_str().replace(',', ""));
    }
    out
}

/// `text` with the full-width forms East Asian text writes digits, signs and Latin
/// letters in (`３５％`) as their ASCII, and the ideographic space as a space.
///
/// Written by hand rather than with Unicode's NFKC: NFKC also turns superscripts and
/// fractions into digits ("m²" into "m2"), numbers the person did not give as values.
pub(crate) fn halfwidth(text: &str) -> Cow<'_, str> {
    let wide = |c: char| ('\u{ff01}'..='\u{ff5e}').contains(&c) || c == '\u{3000}';
    if !text.chars().any(wide) {
        return Cow::Borrowed(text);
    }
    Cow::Owned(
        text.chars()
            .map(|c| match c {
                '\u{3000}' => ' ',
                c if wide(c) => char::from_u32(c as u32 - 0xfee0).unwrap_or(c),
                c => c,
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::checks::grounding::Evidence;

    fn read(text: &str) -> Vec<Vec<f64>> {
        written(text).into_iter().map(|w| w.readings).collect()
    }

    #[test]
    fn a_decimal_comma_is_read_as_a_fraction_and_as_the_english_split() {
        assert_eq!(read("Wie viel sind 3,5 Meilen?"), [vec![3.5, 3.0, 5.0]]);
        assert_eq!(
            read("19,99 € mal 12"),
            [vec![19.99, 19.0, 99.0], vec![12.0]]
        );
    }

    #[test]
    fn thousands_grouped_by_dots_spaces_or_apostrophes_are_one_number() {
        assert_eq!(read("1.500 Euro")[0], [1.5, 1500.0]);
        assert_eq!(read("1.500,75 €")[0], [1500.75, 1.5, 75.0]);
        assert_eq!(read("1 500 €")[0], [1500.0, 1.0, 500.0]);
        assert_eq!(read("1\u{202f}500,5 €")[0], [1500.5, 1.0, 500.0, 5.0]);
        assert_eq!(read("CHF 12'000.50")[0], [12000.5, 12.0, 0.5]);
    }

    #[test]
    fn what_the_english_reading_said_still_counts() {
        assert_eq!(read("12,000 people"), [vec![12000.0, 12.0]]);
        // Both meanings of a comma before three digits.
        assert_eq!(read("1,234")[0], [1234.0, 1.234]);
        assert_eq!(read("sort 3,5,7"), [vec![3.0, 5.0, 7.0]]);
        assert_eq!(read("1e-9 and 2.5"), [vec![1e-9], vec![2.5]]);
        // A year then a count is not a grouped number.
        assert_eq!(read("in 2019 100 people")[0], [2019.0, 100.0]);
        assert_eq!(read("Jun.20,2023")[0], [20.2023, 20.0, 2023.0]);
    }

    #[test]
    fn full_width_digits_are_read() {
        let w = written("３５ドルは何円？");
        assert_eq!(w[0].readings, [35.0]);
        assert_eq!(read("消費税１０％"), [vec![10.0]]);
        assert_eq!(written("１０％")[0].suffix.as_deref(), Some("%"));
    }

    #[test]
    fn numbers_are_read_as_each_language_writes_them() {
        let e = Evidence::of(["Wie viel sind 3,5 Meilen? Überweise 1.500 € und 1 200 CHF"]);
        for n in [3.5, 1500.0, 1200.0] {
            assert!(e.grounds(&json!(n)), "{n}");
        }
        let e = Evidence::of(["３５ドルは何円ですか？消費税は１０％"]);
        assert!(e.grounds(&json!(35)) && e.grounds(&json!(0.1)));
    }

    #[test]
    fn a_value_inside_text_without_spaces_is_a_word_of_its_own() {
        let e = Evidence::of(["注文A1234はどこにありますか？"]);
        assert!(e.grounds(&json!("A1234")));
        assert!(!e.grounds(&json!("A1235")));
    }

    #[test]
    fn superscripts_are_not_numbers() {
        assert_eq!(read("10 m² to ft²"), [vec![10.0]]);
    }

    #[test]
    fn the_size_after_a_number_is_kept_with_whether_space_stands_before_it() {
        let w = &written("$1.2M raised")[0];
        assert_eq!((w.suffix.as_deref(), w.spaced), (Some("M"), false));
        let w = &written("dropped from 100 m")[0];
        assert_eq!((w.suffix.as_deref(), w.spaced), (Some("m"), true));
    }
}
