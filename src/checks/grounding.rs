//! What the person and the tools said in a run, and whether a call's values are among it.
//!
//! A value the person gave appears in what they wrote or in a tool's result; an invented
//! one does not. The evidence is the person's messages and the tool results, never the
//! system prompt, and never toolloop's own feedback on a refused reply (it quotes the
//! model's values back).
//!
//! A required argument cannot be left out, and an invented one is the mark of a call the
//! question did not ask for: on BFCL `irrelevance` Qwen 0.5B answered "How can I apply
//! evolutionary algorithms in game AI?" with `evolve_creatures(population_size: 100, …)`
//! and "What's the latest trend in technology?" with `region: "world"`. When a required
//! value appears nowhere in the evidence, [`invented_required`] names it: `tool-fit`
//! puts such a call to the fit question, and `more-calls` holds back a call its asking
//! added on such a value. Required values
//! are checked leniently (one word of a string is enough, a two- or three-letter code
//! counts as said, numbers are read with their units and separators as each language writes them,
//! [`super::numbers`]; a value in a script the person did not write, "Moscow" for "из
//! Москвы", is one words cannot judge and counts as said, [`super::words`]), because a
//! wrong question costs the person a reply.
//!
//! It is lexical, and so lenient: it never changes a value, it only tells a check to ask
//! the model. A boolean cannot be judged this way and counts as said.

use std::collections::HashSet;

use serde_json::{Map, Value};
use unicode_script::Script;

use crate::checks::numbers;
use crate::checks::support::STEMMER;
use crate::checks::words::{self, number_word, script, spaceless, words};
use crate::turn::tool_schema;

/// The words and numbers of the run's evidence.
#[derive(Debug, Default, Clone)]
pub struct Evidence {
    words: HashSet<String>,
    stems: HashSet<String>,
    numbers: Vec<f64>,
    /// The numbers written as percentages ("8%", "8 percent"), as written (8).
    percents: Vec<f64>,
    /// The numbers written any other way.
    plain: Vec<f64>,
    /// The numbers said with a word for their size ("50 million", "$1.2M"), as values.
    scaled: Vec<f64>,
    /// The scripts the evidence's letters are written in ([`Evidence::judges`]).
    scripts: HashSet<Script>,
}

impl Evidence {
    /// The evidence of these texts.
    pub fn of<'a>(texts: impl IntoIterator<Item = &'a str>) -> Self {
        let mut e = Evidence::default();
        for text in texts {
            let text = numbers::halfwidth(text);
            e.scripts.extend(text.chars().filter_map(script));
            for w in numbers::written(&text) {
                for &n in &w.readings {
                    e.number(n, &w);
                }
            }
            for w in words(&text) {
                if let Some(n) = number_word(&w) {
                    e.numbers.push(n);
                    e.plain.push(n);
                } else if let Ok(n) = w.parse::<f64>() {
                    e.numbers.push(n);
                }
                e.stems.insert(STEMMER.stem(&w).into_owned());
                e.words.insert(w);
            }
        }
        e
    }

    /// Takes in the numbers `text` spells out in words of a language `text2num` reads
    /// ([`words::spelled_numbers`]): "três pessoas" says 3. Read for the person's own
    /// messages only ([`crate::run::feedback::evidence`]), which are short; a tool's
    /// result can run to pages and gives its numbers in digits, and the values of a call
    /// are not the person's words.
    pub fn spelled(&mut self, text: &str) {
        for n in words::spelled_numbers(&numbers::halfwidth(text)) {
            self.numbers.push(n);
            self.plain.push(n);
        }
    }

    /// Takes in `n`, one reading of the written number `w`, at the scale its suffix says.
    fn number(&mut self, n: f64, w: &numbers::Written) {
        self.numbers.push(n);
        let suffix = w.suffix.as_deref().map(str::to_lowercase);
        match suffix.as_deref() {
            Some("%" | "percent") => self.percents.push(n),
            _ => self.plain.push(n),
        }
        // Whether the suffix surely names a size: "100 m" is a hundred metres, so a
        // lone letter counts only as a capital against the digits ("$1.2M").
        let written = w.suffix.as_deref().unwrap_or("");
        let letter = ["M", "B", "K"].contains(&written) && !w.spaced;
        let (scale, size) = match suffix.as_deref() {
            Some("%" | "percent") => (0.01, false),
            Some("k") => (1e3, letter),
            Some("m") => (1e6, letter),
            Some("b") => (1e9, letter),
            Some("thousand") => (1e3, true),
            Some("million") => (1e6, true),
            Some("bn" | "billion") => (1e9, true),
            _ => return,
        };
        self.numbers.push(n * scale);
        if size {
            self.scaled.push(n * scale);
        }
    }

    /// The numbers written with digits, as written (`17` for "17%", `2340` for "2,340").
    pub(crate) fn written_numbers(&self) -> impl Iterator<Item = f64> + '_ {
        self.plain.iter().chain(&self.percents).copied()
    }

    /// Whether any number read, at any scale, meets `f`.
    pub(crate) fn any_number(&self, f: impl Fn(f64) -> bool) -> bool {
        self.numbers.iter().any(|&n| f(n))
    }

    /// A sign is not evidence: "coefficients 2, 3 and -4" and "a loss of 4" both say 4.
    pub(crate) fn has_number(&self, n: f64) -> bool {
        let n = n.abs();
        self.numbers
            .iter()
            .any(|m| (m.abs() - n).abs() <= 1e-9 * m.abs().max(n).max(1.0))
    }

    /// Whether words can say anything about `w`: it has no letters, or some of its
    /// letters are of a script the evidence is written in. A value in a script the
    /// person did not write ("Madrid" for "今日マドリードで傘は必要ですか？", "Moscow" for
    /// "из Москвы") is the model's transliteration or translation: no word could show
    /// it said, and a missing word is no evidence against it, so as a required value it
    /// counts as said ([`Evidence::mentions`]).
    fn judges(&self, w: &str) -> bool {
        let mut letters = w.chars().filter_map(script).peekable();
        letters.peek().is_none() || letters.any(|s| self.scripts.contains(&s))
    }

    /// A word with the same first five letters: "Germany" for "German history", which
    /// the stemmer keeps apart.
    fn has_kin(&self, w: &str) -> bool {
        let head = |w: &str| w.char_indices().nth(KIN).map(|(i, _)| w[..i].to_string());
        head(w).is_some_and(|h| self.words.iter().any(|e| e.starts_with(&h)))
    }

    /// The word, or another form of it ("tolls" for "toll roads"); a number said in any
    /// form ("24" for "24h"); a measure written short, its number said and its unit the
    /// short for a word ("24h" for "24 hour format", "5km" for "5 kilometres").
    fn has_word(&self, w: &str) -> bool {
        if self.words.contains(w) || self.stems.contains(STEMMER.stem(w).as_ref()) {
            return true;
        }
        // Words of a script written without spaces cannot be cut apart, so a value is
        // said where it stands inside one: "上海" in "从上海到北京的火车几点开".
        if w.chars().all(spaceless) && self.words.iter().any(|e| e.contains(w)) {
            return true;
        }
        if words::joins_particles(w)
            && self.words.iter().any(|e| {
                e.ends_with(w) && e.chars().count() - w.chars().count() <= words::PARTICLES_MAX
            })
        {
            return true;
        }
        if let Ok(n) = w.parse::<f64>() {
            return self.has_number(n);
        }
        // A word cut short: "mi" for miles, "dict" for "in the form of a dictionary".
        if w.len() >= 2
            && w.chars().all(char::is_alphabetic)
            && self
                .words
                .iter()
                .any(|e| e.len() > w.len() && e.starts_with(w))
        {
            return true;
        }
        let digits = w.find(|c: char| !(c.is_ascii_digit() || c == '.'));
        let Some((number, unit)) = digits.map(|i| w.split_at(i)) else {
            return false;
        };
        !number.is_empty()
            && unit.chars().all(char::is_alphabetic)
            && number.parse::<f64>().is_ok_and(|n| self.has_number(n))
            && self.words.iter().any(|e| abbreviates(unit, e))
    }

    /// Whether `v` is something the evidence says: every word of a string, a number that
    /// appears, every number of an array and some of its words. Booleans and objects cannot be told apart from
    /// a default this way and count as said.
    pub fn grounds(&self, v: &Value) -> bool {
        match v {
            Value::String(s) => {
                // A two-letter code after a name the person said ("Chicago, IL", which
                // the schema asks for a city and state) qualifies it; it is not a value.
                let (codes, ws): (Vec<String>, Vec<String>) = words(s)
                    .into_iter()
                    .partition(|w| w.len() == 2 && s.contains(&w.to_uppercase()));
                let named = !ws.is_empty() && ws.iter().all(|w| self.has_word(w));
                named || (ws.is_empty() && codes.iter().all(|w| self.has_word(w)))
            }
            Value::Number(n) => n.as_f64().is_some_and(|n| self.has_number(n)),
            // Words the person named some of: the model read the list from them, mapping
            // the rest to the tool's words ("vegetarian and gluten-free" gave `["vegan",
            // "gluten-free"]`, BFCL multiple_92). Numbers are exact: each must be said
            // (`years: [1, 2, 3, 4, 5, 6]` was invented from "annually").
            Value::Array(items) => {
                let (words, others): (Vec<&Value>, Vec<&Value>) =
                    items.iter().partition(|i| i.is_string());
                !items.is_empty()
                    && others.iter().all(|i| self.grounds(i))
                    && (words.is_empty() || words.iter().any(|i| self.grounds(i)))
            }
            Value::Null => false,
            Value::Bool(_) | Value::Object(_) => true,
        }
    }
}

/// Whether `short` is a way of writing `word` short: its letters in order, the first
/// the same ("km" for "kilometres", "h" for "hour").
fn abbreviates(short: &str, word: &str) -> bool {
    let mut letters = word.chars();
    short.chars().next() == word.chars().next() && short.chars().all(|c| letters.any(|w| w == c))
}

/// The required arguments of a call whose values nobody gave: a value the model
/// invented where the schema demands one. Checked leniently (see the module docs); an
/// `enum` parameter, a boolean, an object and composed text are never counted.
pub fn invented_required(
    arguments: &Map<String, Value>,
    schema: &Value,
    evidence: &Evidence,
) -> Vec<String> {
    tool_schema::required(schema)
        .into_iter()
        .filter(|k| {
            arguments
                .get(*k)
                .is_some_and(|v| unsaid(schema, k, v, evidence))
        })
        .map(str::to_string)
        .collect()
}

/// Whether the value `v` of the argument `key` is one nobody gave, as
/// [`invented_required`] reads a required one: not picked from the parameter's own list
/// of values, and not mentioned, leniently, by `evidence`.
pub(crate) fn unsaid(schema: &Value, key: &str, v: &Value, evidence: &Evidence) -> bool {
    !vocabulary(&schema["properties"][key]) && !evidence.mentions(v, true)
}

/// [`unsaid`], but a word in a script the person did not write counts as unsaid too:
/// for a value known to come from elsewhere (the tool's own example), which the person
/// writing in another script would have had to name in theirs ("Queen" for a request in
/// Russian that names no band).
pub(crate) fn unsaid_in_their_script(
    schema: &Value,
    key: &str,
    v: &Value,
    evidence: &Evidence,
) -> bool {
    !vocabulary(&schema["properties"][key]) && !evidence.mentions(v, false)
}

impl Evidence {
    /// The lenient form of [`Evidence::grounds`], for required values: one word of a
    /// string is enough (`"Los Angeles, CA"`, `"2022-07-10"` for "July 10, 2022"), a
    /// code of two or three letters counts as said (`"EUR"` for "Euros"), and composed
    /// text counts as said, and so does a single letter that begins a word said. A word
    /// in a script the person did not write counts too ([`Evidence::judges`]): words
    /// cannot judge a value the person wrote in another script ("Moscow" for "из
    /// Москвы"), unless `other_scripts` is false.
    fn mentions(&self, v: &Value, other_scripts: bool) -> bool {
        match v {
            Value::String(s) => {
                let ws = words(s);
                let code = (2..=3).contains(&s.len()) && s.chars().all(|c| c.is_ascii_alphabetic());
                // A unit of one letter is the first of a word said: "l" for "2,5 liter".
                let initial = s.chars().count() == 1
                    && s.chars().all(char::is_alphabetic)
                    && ws
                        .first()
                        .is_some_and(|l| self.words.iter().any(|e| e.starts_with(l.as_str())));
                code || initial
                    || composed(v)
                    || ws.iter().any(|w| {
                        (other_scripts && !self.judges(w)) || self.has_word(w) || self.has_kin(w)
                    })
            }
            Value::Array(items) => {
                !items.is_empty() && items.iter().all(|i| self.mentions(i, other_scripts))
            }
            _ => self.grounds(v),
        }
    }
}

/// Whether a parameter's values come from a list the tool gives (`enum`, or `enum` on an
/// array's items). Such a value is the tool's word for what the person said, not the
/// person's own: "goals and assists" gave `["Goals Scored", "Assists Made"]`, "carbs"
/// gave `"Carbohydrates"` (BFCL simple_python_305, 374), and the model can only pick
/// from the list, so it is never counted as invented.
fn vocabulary(param: &Value) -> bool {
    tool_schema::listed_values(param).next().is_some()
}

/// A string of more than [`SETTING_WORDS`] words: text the model wrote, not a value it
/// chose for a setting.
fn composed(v: &Value) -> bool {
    v.as_str().is_some_and(|s| words(s).len() > SETTING_WORDS)
}

/// How many first letters make two words kin ([`Evidence::has_kin`]).
const KIN: usize = 5;

/// The most words a string argument has when it is a setting (`"kilometers"`,
/// `"Mission 1"`, `"Los Angeles, CA"`) rather than composed text.
const SETTING_WORDS: usize = 4;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn numbers_match_by_value_and_decimals_stay_whole() {
        let e = Evidence::of(["Invest 5000 at 4.5% for 3 years"]);
        assert!(e.grounds(&json!(5000)));
        assert!(e.grounds(&json!(5000.0)));
        assert!(e.grounds(&json!(4.5)));
        assert!(!e.grounds(&json!(5)));
        assert!(!e.grounds(&json!(9.81)));
        assert!(Evidence::of(["Get me two tickets"]).grounds(&json!(2)));
        let periods = Evidence::of(["compounded monthly, movies for the next week"]);
        assert!(periods.grounds(&json!(12)) && periods.grounds(&json!(7)));
        assert!(!periods.grounds(&json!(4)));
    }

    #[test]
    fn numbers_are_read_as_people_write_them() {
        let e = Evidence::of([
            "Revenues of $1.2M, dividends of $200,000, a 5% yield, 298K, charges of 1e-9 and -4",
        ]);
        for n in [
            1_200_000.0,
            200_000.0,
            0.05,
            5.0,
            298.0,
            298_000.0,
            1e-9,
            -4.0,
            4.0,
        ] {
            assert!(e.grounds(&json!(n)), "{n}");
        }
        assert!(!e.grounds(&json!(12)));
    }

    #[test]
    fn a_measure_written_short_is_grounded_by_its_number_and_unit() {
        // BFCL simple_python_376: `display_format: "24h"` was dropped as invented.
        let e = Evidence::of(["What time is it in London in 24 hour format? Run 5 kilometres."]);
        assert!(e.grounds(&json!("24h")));
        assert!(e.grounds(&json!("5km")));
        assert!(!e.grounds(&json!("12h")));
        assert!(e.grounds(&json!("kilo")) && e.grounds(&json!("lond")));
        assert!(!e.grounds(&json!("k")) && !e.grounds(&json!("kg")));
        assert!(!e.grounds(&json!("24m")));
        assert!(Evidence::of(["a 24h clock"]).grounds(&json!("24")));
    }

    #[test]
    fn another_form_of_a_word_grounds_it() {
        let e = Evidence::of(["directions avoiding highways and toll roads"]);
        assert!(e.grounds(&json!(["highways", "tolls"])));
        assert!(!e.grounds(&json!(["ferries"])));
    }

    #[test]
    fn a_value_written_as_another_script_writes_it_is_said() {
        let schema = json!({"type": "object", "required": ["city"],
            "properties": {"city": {"type": "string"}}});
        let unsaid = |request: &str, city: &str| {
            let args = json!({ "city": city });
            !invented_required(args.as_object().unwrap(), &schema, &Evidence::of([request]))
                .is_empty()
        };
        let ja = "今日マドリードで傘は必要ですか？";
        // Inside a run of kana, and in letters the person did not write at all.
        assert!(!unsaid(ja, "マドリード") && !unsaid(ja, "Madrid"));
        // In the person's own script a value is still judged.
        assert!(unsaid(ja, "東京"));
        assert!(unsaid("Is tipping customary in Japan?", "Tokyo"));
        assert!(!unsaid("Когда поезд из Москвы?", "Moscow") && !unsaid("z Krakowa", "Kraków"));
        assert!(unsaid("Когда поезд из Москвы?", "Казань"));
        // Read in the person's script only (for a value known to come from the tool's
        // own text), a Latin word they did not write is unsaid; a code still counts.
        let in_theirs = |request: &str, v: &str| {
            unsaid_in_their_script(&schema, "city", &json!(v), &Evidence::of([request]))
        };
        assert!(in_theirs("Расскажи анекдот.", "Queen"));
        assert!(!in_theirs("Включи Queen.", "Queen"));
        assert!(!in_theirs("Сколько это в долларах?", "USD"));
        // Every word of a value must be said for it to be grounded.
        let timer = Evidence::of(["Поставь таймер на 25 минут."]);
        assert!(!timer.grounds(&json!("Timer 25 minutes")) && timer.grounds(&json!(25)));
        // A unit of one letter, the first of a word said.
        assert!(!unsaid("Hoeveel is 2,5 liter in cups?", "l"));
        assert!(unsaid("Hoeveel is 2,5 liter in cups?", "x"));
        // Hebrew and Arabic join "from", "to" and "the" to the next word.
        assert!(!unsaid("תזמין מונית מהכותל", "הכותל"));
        assert!(!unsaid("قطار إلى الإسكندرية", "إسكندرية"));
        assert!(unsaid("תזמין מונית מהכותל", "ירושלים"));
        // A number the person spelled out, once their words are read for it.
        let mut taxi = Evidence::of(["Pede um táxi para três pessoas"]);
        assert!(!taxi.grounds(&json!(3)));
        taxi.spelled("Pede um táxi para três pessoas");
        assert!(taxi.grounds(&json!(3)));
    }

    #[test]
    fn required_values_nobody_gave_are_named_and_said_ones_are_not() {
        let schema = json!({"type": "object", "required": ["location", "date", "unit", "max_price"],
            "properties": {"location": {"type": "string"}, "date": {"type": "string"},
                "unit": {"type": "string", "enum": ["c", "f"]}, "max_price": {"type": "number"}}});
        let said = Evidence::of(["Find a hotel in Miami on July 10, 2022"]);
        let args =
            json!({"location": "Miami, FL", "date": "2022-07-10", "unit": "c", "max_price": 100});
        assert_eq!(
            invented_required(args.as_object().unwrap(), &schema, &said),
            ["max_price"]
        );
        let said = Evidence::of(["Find a hotel in Miami in May under 200 dollars"]);
        let args =
            json!({"location": "Miami", "date": "2023-05-01", "unit": "c", "max_price": 200});
        assert_eq!(
            invented_required(args.as_object().unwrap(), &schema, &said),
            ["date"]
        );
        let codes = json!({"type": "object", "required": ["from", "to"],
            "properties": {"from": {"type": "string"}, "to": {"type": "string"}}});
        let args = json!({"from": "EUR", "to": "CAD"});
        let said = Evidence::of(["Convert 150 Euros to Canadian dollars"]);
        assert!(invented_required(args.as_object().unwrap(), &codes, &said).is_empty());
        let country = json!({"type": "object", "required": ["country"],
            "properties": {"country": {"type": "string"}}});
        let args = json!({"country": "Germany"});
        let said = Evidence::of(["Key war events in German history"]);
        assert!(invented_required(args.as_object().unwrap(), &country, &said).is_empty());
    }

    #[test]
    fn a_required_value_from_the_tools_own_list_is_never_invented() {
        // "carbs" gave "Carbohydrates" (BFCL simple_python_374).
        let schema = json!({"type": "object", "required": ["food", "information"], "properties": {
            "food": {"type": "string"},
            "information": {"type": "array", "items": {"type": "string",
                "enum": ["Protein", "Calories", "Carbohydrates"]}}}});
        let said = Evidence::of(["Protein, calories and carbs in an avocado"]);
        let args =
            json!({"food": "Avocado", "information": ["Protein", "Calories", "Carbohydrates"]});
        assert!(invented_required(args.as_object().unwrap(), &schema, &said).is_empty());
    }

    #[test]
    fn strings_need_every_word_and_arrays_one_element() {
        let e = Evidence::of([
            "Find concerts in Los Angeles",
            "{\"venues\": [\"Hollywood Bowl\"]}",
        ]);
        assert!(e.grounds(&json!("los angeles")));
        assert!(e.grounds(&json!("Hollywood Bowl")));
        assert!(e.grounds(&json!("Los Angeles, CA")));
        assert!(!e.grounds(&json!("San Diego, CA")));
        assert!(!e.grounds(&json!("CA")));
        assert!(!e.grounds(&json!([])));
        assert!(e.grounds(&json!(["Los Angeles", "Paris"])));
        assert!(!e.grounds(&json!(["Paris", "Rome"])));
        assert!(!Evidence::of(["discounted at 8% annually"]).grounds(&json!([1, 2, 3])));
        assert!(e.grounds(&json!(true)));
        assert!(!e.grounds(&Value::Null));
    }
}

/// The examples of this module's docs, as tests: its items are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {

    #[test]
    fn a_required_value_nobody_said_is_invented() {
        use crate::checks::grounding::{Evidence, invented_required};
        use serde_json::json;

        let schema = json!({"type": "object", "required": ["category", "region"],
            "properties": {"category": {"type": "string"}, "region": {"type": "string"}}});
        let args = json!({"category": "technology", "region": "world"});
        let said = Evidence::of(["What's the latest trend in technology?"]);
        assert_eq!(
            invented_required(args.as_object().unwrap(), &schema, &said),
            ["region"]
        );
    }
}
