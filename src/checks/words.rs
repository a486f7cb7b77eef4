//! How grounding cuts text into words: the same cut for what the person wrote and for
//! a call's values, so that a value is found in the request wherever the request says
//! it, in any script.
//!
//! Five things differ from splitting at spaces, each from a right call that was taken
//! for a value nobody said:
//! - a script written without spaces (kana, Han, Hangul, Thai) has no word ends to cut
//!   at, so a run of it is one word and a value is looked for inside it ([`spaceless`]),
//!   and a mark that is no letter (a Thai tone mark, a Devanagari virama) stays in its
//!   word;
//! - accents are left out ([`unaccented`]), so "z Krakowa" says "Kraków";
//! - each letter's script is kept ([`script`]), so that a value in a script the person
//!   did not write is known to be one words cannot judge;
//! - Hebrew and Arabic write "to", "from", "and" and "the" joined to the front of the
//!   next word ([`joins_particles`]), so "לשקשוקה" says "שקשוקה";
//! - numbers spelled out in words are read in eight languages ([`spelled_numbers`]), so
//!   "três pessoas" says 3.

use std::sync::LazyLock;

use text2num::{Language, replace_numbers_in_text};
use unicode_normalization::UnicodeNormalization;
use unicode_normalization::char::is_combining_mark;
use unicode_script::{Script, UnicodeScript};

use crate::checks::numbers;

/// The numbers `text` spells out in words of a language `text2num` reads (Danish,
/// Dutch, English, French, German, Italian, Portuguese, Spanish): "três pessoas" says 3,
/// "vingt-cinq minutes" 25, "zwei Tickets" 2. Read in every one of them, since which
/// language the person wrote cannot be told from a short request; a word that is a
/// number in one and not in another ("een" is Dutch for "a" and for 1) only lets one
/// more value count as said. Numbers written in digits are [`numbers::written`]'s.
pub(crate) fn spelled_numbers(text: &str) -> Vec<f64> {
    static LANGUAGES: LazyLock<[Language; 8]> = LazyLock::new(|| {
        [
            Language::english(),
            Language::german(),
            Language::french(),
            Language::spanish(),
            Language::italian(),
            Language::portugese(),
            Language::dutch(),
            Language::danish(),
        ]
    });
    let readings = |t: &str| -> Vec<f64> {
        numbers::written(t)
            .into_iter()
            .flat_map(|w| w.readings)
            .collect()
    };
    let digits = readings(text);
    let mut out: Vec<f64> = Vec::new();
    for language in LANGUAGES.iter() {
        let replaced = replace_numbers_in_text(text, language, 0.0);
        if replaced == text {
            continue;
        }
        for n in readings(&replaced) {
            if !digits.contains(&n) && !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

/// The number a word names: "two tickets" gives the model `2` (BFCL's
/// `num_tickets: 2` was dropped as invented before this).
pub(crate) fn number_word(w: &str) -> Option<f64> {
    const SMALL: [&str; 21] = [
        "zero",
        "one",
        "two",
        "three",
        "four",
        "five",
        "six",
        "seven",
        "eight",
        "nine",
        "ten",
        "eleven",
        "twelve",
        "thirteen",
        "fourteen",
        "fifteen",
        "sixteen",
        "seventeen",
        "eighteen",
        "nineteen",
        "twenty",
    ];
    const TENS: [&str; 7] = [
        "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety",
    ];
    if let Some(i) = SMALL.iter().position(|s| *s == w) {
        return Some(i as f64);
    }
    if let Some(i) = TENS.iter().position(|s| *s == w) {
        return Some(30.0 + 10.0 * i as f64);
    }
    match w {
        "once" | "single" => Some(1.0),
        "twice" | "pair" | "couple" | "double" => Some(2.0),
        "dozen" => Some(12.0),
        // Periods, as the counts people mean by them: "compounded monthly" is 12 times a
        // year, "for the next week" is 7 days (BFCL's right answers read them so).
        "annually" | "yearly" => Some(1.0),
        "semiannually" | "biannually" => Some(2.0),
        "quarterly" => Some(4.0),
        "monthly" => Some(12.0),
        "weekly" => Some(52.0),
        "week" => Some(7.0),
        "fortnight" => Some(14.0),
        "month" => Some(30.0),
        "decade" => Some(10.0),
        "century" => Some(100.0),
        "hundred" => Some(100.0),
        "thousand" => Some(1000.0),
        _ => None,
    }
}

/// The words of a name or a text as [`words`] reads them, with camelCase split too
/// (`getWeather`: `get`, `weather`); snake_case parts at its `_` already.
pub(crate) fn name_words(text: &str) -> Vec<String> {
    let mut spaced = String::with_capacity(text.len() + 8);
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_uppercase() && prev_lower {
            spaced.push(' ');
        }
        prev_lower = c.is_lowercase();
        spaced.push(c);
    }
    words(&spaced)
}

/// Lower-cased runs of letters and digits; a decimal point inside a number stays. A run
/// also ends where a script written without spaces meets another ("注文A1234は" says
/// the order `A1234`), or a value inside Japanese or Chinese would be no word at all.
pub(crate) fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut spaceless_run = false;
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let in_number = c == '.'
            && cur.chars().last().is_some_and(|p| p.is_ascii_digit())
            && chars.get(i + 1).is_some_and(|n| n.is_ascii_digit());
        // A mark that is not a letter (Thai's tone marks, Devanagari's virama) is part of
        // the word it sits on: "เชียงใหม่" and "दिल्ली" are one word each, not cut at it.
        let mark = !cur.is_empty() && is_combining_mark(c);
        if c.is_alphanumeric() || in_number || mark {
            if !cur.is_empty() && spaceless(c) != spaceless_run {
                out.push(std::mem::take(&mut cur));
            }
            spaceless_run = spaceless(c);
            cur.extend(c.to_lowercase());
        } else if !cur.is_empty() {
            out.push(std::mem::take(&mut cur));
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out.into_iter().map(unaccented).collect()
}

/// `w` without the accents Latin, Greek and Cyrillic letters carry: "krakow" for
/// "Kraków", so that "z Krakowa" says it; "istanbul" for "İstanbul", whose lower case
/// is an `i` with a dot above. A model drops or adds such marks when it writes a value
/// out, and the person may type without them.
fn unaccented(w: String) -> String {
    if w.is_ascii() {
        return w;
    }
    w.nfd()
        .filter(|c| !('\u{300}'..='\u{36f}').contains(c))
        .nfc()
        .collect()
}

/// Whether `w` is written in a script that joins its short particles to the next word:
/// Hebrew (ו ה ב כ ל מ ש, "מהכותל" is "from the Wall") and Arabic (و ف ب ك ل and the
/// article ال). A word of these scripts is said where a said word ends with it after
/// at most [`PARTICLES_MAX`] letters.
pub(crate) fn joins_particles(w: &str) -> bool {
    w.chars().count() >= 2
        && w.chars()
            .all(|c| matches!(script(c), Some(Script::Hebrew | Script::Arabic)))
}

/// The most letters of particles either script joins before a word: "ומה", "وبال".
pub(crate) const PARTICLES_MAX: usize = 3;

/// The script of a letter; none for digits, signs and marks that every script shares.
pub(crate) fn script(c: char) -> Option<Script> {
    let s = c.script();
    (c.is_alphabetic() && !matches!(s, Script::Common | Script::Inherited | Script::Unknown))
        .then_some(s)
}

/// Whether `c` belongs to a script written without spaces between words: kana, Han
/// ideographs, Hangul syllables, and Thai, Lao, Khmer and Myanmar, which mark no word's
/// end ("ในเชียงใหม่" is "in Chiang Mai").
pub(crate) fn spaceless(c: char) -> bool {
    matches!(c, '\u{3040}'..='\u{30ff}' | '\u{3400}'..='\u{9fff}' | '\u{f900}'..='\u{faff}' | '\u{ac00}'..='\u{d7af}' | '\u{ff66}'..='\u{ff9f}')
        || matches!(
            c.script(),
            Script::Thai | Script::Lao | Script::Khmer | Script::Myanmar
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_spaceless_script_ends_a_word_where_it_meets_another() {
        assert_eq!(
            words("注文A1234は発送済み"),
            ["注文", "a1234", "は発送済み"]
        );
        assert_eq!(words("서울에서 부산까지"), ["서울에서", "부산까지"]);
        assert_eq!(words("ร้านในเชียงใหม่"), ["ร้านในเชียงใหม่"]);
    }

    #[test]
    fn a_mark_that_is_no_letter_stays_in_its_word() {
        assert_eq!(words("เชียงใหม่ 30 นาที"), ["เชียงใหม่", "30", "นาที"]);
        assert_eq!(words("दिल्ली से"), ["दिल्ली", "से"]);
        // Latin accents are still left out, written apart or not.
        assert_eq!(words("Brne\u{30c} Brně"), ["brne", "brne"]);
    }

    #[test]
    fn accents_are_left_out_and_scripts_kept_apart() {
        assert_eq!(
            words("z Krakowa, İstanbul'dan, Berlín"),
            ["z", "krakowa", "istanbul", "dan", "berlin"]
        );
        // Marks that are letters of their own script stay: Devanagari's vowel signs.
        assert_eq!(words("मुंबई"), ["मुंबई"]);
        assert_eq!(script('M'), Some(Script::Latin));
        assert_eq!(script('М'), Some(Script::Cyrillic));
        assert_eq!(script('7'), None);
        assert_eq!(script('-'), None);
    }

    #[test]
    fn numbers_spelled_out_in_eight_languages_are_read() {
        let read = |t: &str| spelled_numbers(t);
        // "um" is "a" and 1 at once: read as 1 too.
        assert_eq!(read("Pede um táxi para três pessoas"), [1.0, 3.0]);
        assert_eq!(read("Stell einen Timer auf zehn Minuten"), [10.0]);
        assert!(read("Mets un minuteur de vingt-cinq minutes").contains(&25.0));
        assert!(read("twenty five minutes").contains(&25.0));
        // Digits are not read again, and a text with no number says none.
        assert!(read("Timer for 25 minutes").is_empty());
        assert!(read("Wie ist das Wetter in Berlin?").is_empty());
    }
}
