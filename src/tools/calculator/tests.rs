//! The calculator's own cases; `tests/calculator_reference.rs` holds it to Python's.
use super::*;

/// The value, or the error, as the model reads it.
fn shown(r: Result<impl std::fmt::Display, CalcError>) -> String {
    r.map(|v| v.to_string())
        .unwrap_or_else(|e| format!("error: {e}"))
}

fn ev(s: &str) -> String {
    shown(evaluate(s))
}

#[test]
fn arithmetic() {
    assert_eq!(ev("1 + 2 * 3"), "7");
    assert_eq!(ev("(1 + 2) * 3"), "9");
    assert_eq!(ev("2 ** 3 ** 2"), "512");
    assert_eq!(ev("2 ** -1"), "0.5");
    assert_eq!(ev("-7 // 2"), "-4");
    assert_eq!(ev("-7 % 3"), "2");
    assert_eq!(ev("7 % -3"), "-2");
    assert_eq!(ev("1 / 3"), "0.333333333333333… (exactly 1/3)");
    assert_eq!(ev("1.5e3 + .5"), "1500.5");
    assert_eq!(ev("123456789 * 987654321"), "121932631112635269");
    assert_eq!(ev("--3"), "3");
    assert_eq!(ev("10 ** 30 + 1"), "1000000000000000000000000000001");
    // The i128 version printed 0.0100101… here.
    assert!(
        ev("(3**80-1)/3**80").starts_with("0.999999999999999… (exactly "),
        "{}",
        ev("(3**80-1)/3**80")
    );
}

#[test]
fn errors() {
    assert_eq!(ev("1 / 0"), "error: division by zero");
    assert_eq!(ev("5 % 0"), "error: division by zero");
    assert_eq!(
        ev("2 ** 0.5"),
        "error: the exponent of ** must be a whole number"
    );
    assert_eq!(
        ev("10 ** 10000"),
        "error: result too large for exact arithmetic"
    );
    assert_eq!(
        ev("9 ** 9 ** 9"),
        "error: result too large for exact arithmetic"
    );
    assert!(ev("abs(1)").starts_with("error: only numbers"));
    assert!(ev("().__class__").starts_with("error:"));
    assert!(ev("1 +").starts_with("error: the expression ends too early"));
    assert!(ev("(1").starts_with("error: missing ')'"));
    assert!(ev("").starts_with("error: empty expression"));
    assert!(ev(&"(".repeat(500)).starts_with("error: expression nested too deeply"));
}

/// With how the forms people write were read.
fn read(s: &str) -> String {
    shown(evaluate_read(s))
}

#[test]
fn the_forms_people_write_are_read_and_the_doubtful_ones_said() {
    // Powers and the signs of typeset arithmetic: one meaning each.
    assert_eq!(read("2^20"), "1048576");
    assert_eq!(read("2 ^ 3 ^ 2"), "512");
    assert_eq!(read("-2^2"), "-4");
    assert_eq!(read("3.5^2"), "12.25");
    assert_eq!(read("12 × 3 ÷ 4 − 1"), "8");
    // Thousands separators, and the percent, come with how they were read.
    assert_eq!(
        read("17% * 2,340"),
        "397.8 (read 17% as 0.17, 2,340 as 2340)"
    );
    assert_eq!(
        read("17% of 2,340"),
        "397.8 (read 17% as 0.17, 2,340 as 2340)"
    );
    assert_eq!(
        read("1,234,567.5 / 2"),
        "617283.75 (read 1,234,567.5 as 1234567.5)"
    );
    assert_eq!(read("18%"), "0.18 (read 18% as 0.18)");
    assert_eq!(read("84 * (18)%"), "15.12 (read (18)% as 0.18)");
    assert_eq!(read("12.5% * 80"), "10 (read 12.5% as 0.125)");
}

#[test]
fn what_python_reads_keeps_its_value_and_a_guess_is_refused() {
    // `%` with a right-hand side is Python's modulo, as before.
    assert_eq!(read("7 % 3"), "1");
    assert_eq!(read("7 % -3"), "-2");
    assert_eq!(read("7 % (3)"), "1");
    assert_eq!(read("1_000 + 1"), "1001");
    // A comma that is not a group of three is a decimal comma, said with the value.
    assert_eq!(read("3,2 * 10"), "32 (read 3,2 as 3.2)");
    assert_eq!(read("3,5 * 8"), "28 (read 3,5 as 3.5)");
    assert_eq!(read("0,5 + 0,25"), "0.75 (read 0,5 as 0.5, 0,25 as 0.25)");
    assert_eq!(read("1.250,50 * 2"), "2501 (read 1.250,50 as 1250.5)");
    assert_eq!(read("1234,567"), "1234.567 (read 1234,567 as 1234.567)");
    assert_eq!(read("12,5% * 80"), "10 (read 12,5% as 0.125)");
    // A group of three stays thousands, as before; the reading says which it took.
    assert_eq!(read("1,250 * 2"), "2500 (read 1,250 as 1250)");
    assert_eq!(
        read("(2,5)% * 2"),
        "0.05 (read 2,5 as 2.5, (2,5)% as 0.025)"
    );
    // Neither a group nor a decimal comma: refused, as before.
    assert!(read("1,234,5").starts_with("error: only numbers"));
    assert!(read("3,5,7").starts_with("error: only numbers"));
    assert!(read("1.25,5").starts_with("error: only numbers"));
    assert!(read("3, 5").starts_with("error: only numbers"));
    assert!(read("3,").starts_with("error: only numbers"));
    assert!(read("3,5.2").starts_with("error: unexpected number"));
    // A percent added or taken away could mean two things.
    assert!(read("100 + 10%").starts_with("error: a percent added or taken away is ambiguous"));
    assert!(read("(100 - 10%) * 2").starts_with("error: a percent added"));
    assert!(read("(10%) + 5").starts_with("error: a percent added"));
    assert_eq!(read("100 + 10% * 100"), "110 (read 10% as 0.1)");
    // Words stay refused, but for "of" after a percent.
    assert!(read("5 of 3").starts_with("error: 'of' is read only after a percent"));
    assert!(read("2 to the power of 20").starts_with("error: only numbers"));
    assert!(read("17% off 100").starts_with("error: only numbers"));
    // A word is named whole, a unit too, and nothing is read without it.
    assert_eq!(
        read("420 km / 28 litres"),
        "error: only numbers, + - * / // % ** and parentheses are allowed, not the word \"km\": \
         write the numbers alone, without units or names"
    );
    assert!(read("2 dozen * 3").contains("not the word \"dozen\""));
    assert!(read("3 ÷ 4 €").ends_with("not '€'"));
}

#[test]
fn a_decimal_comma_is_bounded_like_any_number() {
    assert!(read("1,5e999999999").starts_with("error"));
    assert!(read("1,5e99999").starts_with("error: result too large"));
    let digits = "9".repeat(1990);
    assert_eq!(read(&format!("1,{digits}")), read(&format!("1.{digits}")));
    assert!(read("999.999.999,5 ** 999").starts_with("error: result too large"));
}
