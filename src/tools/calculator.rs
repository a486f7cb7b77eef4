//! The `calculator` tool: exact arithmetic, and nothing else.
//!
//! Small models are bad at arithmetic and good at writing `12.5 * 4`; this evaluates it
//! exactly, with rational numbers, so `0.1 + 0.2` is `0.3`. Only numbers, arithmetic's
//! operators, parentheses and unary minus are understood: a name, a call or any other
//! character is an error (there is no call or attribute access to refuse: nothing but
//! arithmetic exists).
//!
//! The operators are Python's, and so is every value of an expression Python reads
//! (`tests/calculator_reference.rs`). The way people write arithmetic is read too, where
//! Python would refuse it and a person's meaning is plain: `2^20` is a power, `×` `÷` `−`
//! are `*` `/` `-`, `2,340` is 2340, `3,5` and `1.250,50` are read with their decimal
//! comma, and `17% * 2,340` takes 17/100. A model copies these from the request: "What is
//! 17% of 2,340?" and "What's 2 to the power of 20?" came to the calculator as `17% *
//! 2,340` and `2^20`, were refused, and were written the same way again after the error, so
//! the run ended on the error instead of the value. Where a reading could be another (a comma that
//! groups thousands or a decimal one, a percent), it comes with the value
//! ([`Evaluated::read`]); where it is a guess (`100 + 10%`: a tenth of a unit, or ten
//! percent more?), the expression is refused with what to write instead.

use std::fmt;

use num_bigint::BigInt;
use num_integer::Integer;
use num_rational::BigRational;
use num_traits::{One, Signed, ToPrimitive, Zero};

/// Why an expression has no value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CalcError {
    /// Not arithmetic.
    #[error("{0}")]
    Syntax(String),
    /// Division or modulo by zero.
    #[error("division by zero")]
    DivisionByZero,
    /// The exact result does not fit.
    #[error("result too large for exact arithmetic")]
    Overflow,
}

/// An exact rational number of any size, up to `MAX_BITS` bits in the numerator and
/// the denominator.
///
/// A hand-written `i128` fraction once printed `(3**80-1)/3**80` as `0.0100101…`: its
/// decimal expansion overflowed. Big integers are `num-bigint`'s, fractions
/// `num-rational`'s; this type only bounds their size and prints them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rational(BigRational);

/// The most bits of a numerator or denominator: about 1,200 decimal digits, far past
/// any answer a person reads, and small enough that no expression of 2,000 characters
/// can make the tool slow.
pub(crate) const MAX_BITS: u64 = 4096;

impl Rational {
    fn checked(v: BigRational) -> Result<Self, CalcError> {
        if v.numer().bits() > MAX_BITS || v.denom().bits() > MAX_BITS {
            return Err(CalcError::Overflow);
        }
        Ok(Rational(v))
    }

    fn int(n: i64) -> Self {
        Rational(BigRational::from_integer(BigInt::from(n)))
    }

    fn add(self, o: Self) -> Result<Self, CalcError> {
        Self::checked(self.0 + o.0)
    }

    fn neg(self) -> Result<Self, CalcError> {
        Ok(Rational(-self.0))
    }

    fn mul(self, o: Self) -> Result<Self, CalcError> {
        Self::checked(self.0 * o.0)
    }

    fn recip(self) -> Result<Self, CalcError> {
        if self.0.is_zero() {
            return Err(CalcError::DivisionByZero);
        }
        Ok(Rational(self.0.recip()))
    }

    fn floor(self) -> Self {
        Rational(self.0.floor())
    }

    fn pow(self, exp: Self) -> Result<Self, CalcError> {
        if !exp.0.is_integer() {
            return Err(CalcError::Syntax(
                "the exponent of ** must be a whole number".into(),
            ));
        }
        let e = exp.0.to_integer();
        let base = if e.is_negative() { self.recip()? } else { self };
        let e = e.magnitude().to_u64().ok_or(CalcError::Overflow)?;
        // The size of the result is known before it is computed: refuse `9 ** 9 ** 9`
        // without trying.
        let bits = base.0.numer().bits().max(base.0.denom().bits());
        if bits > 1 && bits.saturating_sub(1).saturating_mul(e) > MAX_BITS {
            return Err(CalcError::Overflow);
        }
        let e = i32::try_from(e).map_err(|_| CalcError::Overflow)?;
        Self::checked(base.0.pow(e))
    }

    /// The exact value as `numerator/denominator` in lowest terms (`7`, `-1/3`).
    pub fn fraction(&self) -> String {
        self.0.to_string()
    }

    /// Whether the decimal expansion ends.
    fn terminates(&self) -> bool {
        let mut d = self.0.denom().clone();
        for p in [2u32, 5] {
            let p = BigInt::from(p);
            while (&d % &p).is_zero() {
                d /= &p;
            }
        }
        d.is_one()
    }

    fn decimal(&self, max_digits: usize) -> String {
        let mut out = String::new();
        if self.0.is_negative() {
            out.push('-');
        }
        let n = self.0.numer().abs();
        let d = self.0.denom();
        let (whole, mut rem) = n.div_rem(d);
        out.push_str(&whole.to_string());
        if rem.is_zero() {
            return out;
        }
        out.push('.');
        let ten = BigInt::from(10);
        for _ in 0..max_digits {
            rem *= &ten;
            let (digit, r) = rem.div_rem(d);
            out.push_str(&digit.to_string());
            rem = r;
            if rem.is_zero() {
                break;
            }
        }
        out
    }
}

impl fmt::Display for Rational {
    /// `50`, `0.3`, or `0.333333333333333… (exactly 1/3)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_integer() {
            write!(f, "{}", self.0.numer())
        } else if self.terminates() {
            write!(f, "{}", self.decimal(40))
        } else {
            write!(f, "{}… (exactly {})", self.decimal(15), self.0)
        }
    }
}

/// Evaluates an arithmetic expression exactly.
///
/// ```
/// use toolloop::tools::calculator::evaluate;
///
/// assert_eq!(evaluate("12.5 * 4").unwrap().to_string(), "50");
/// assert_eq!(evaluate("0.1 + 0.2").unwrap().to_string(), "0.3");
/// assert_eq!(evaluate("-2 ** 2").unwrap().to_string(), "-4");
/// assert_eq!(evaluate("7 // 2 + 7 % 3").unwrap().to_string(), "4");
/// assert!(evaluate("__import__('os')").is_err());
/// ```
pub fn evaluate(expr: &str) -> Result<Rational, CalcError> {
    evaluate_read(expr).map(|e| e.value)
}

/// An expression's value, and how its written forms that Python would not read were read.
#[derive(Debug, Clone, PartialEq)]
pub struct Evaluated {
    /// The exact value.
    pub value: Rational,
    /// Each number written with a comma (thousands or a decimal comma) or a percent sign,
    /// as it was read (`2,340 as 2340`, `3,5 as 3.5`, `17% as 0.17`), in the order written.
    pub read: Vec<String>,
}

impl fmt::Display for Evaluated {
    /// The value, then how it was read where that could be questioned:
    /// `397.8 (read 17% as 0.17, 2,340 as 2340)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.value)?;
        if !self.read.is_empty() {
            write!(f, " (read {})", self.read.join(", "))?;
        }
        Ok(())
    }
}

/// [`evaluate`], with how the written forms people use were read.
///
/// ```
/// use toolloop::tools::calculator::evaluate_read;
///
/// let e = evaluate_read("17% * 2,340").unwrap();
/// assert_eq!(e.to_string(), "397.8 (read 17% as 0.17, 2,340 as 2340)");
/// assert_eq!(evaluate_read("2^20").unwrap().to_string(), "1048576");
/// assert!(evaluate_read("100 + 10%").is_err());
/// ```
pub fn evaluate_read(expr: &str) -> Result<Evaluated, CalcError> {
    if expr.len() > 2000 {
        return Err(CalcError::Syntax(
            "expression longer than 2000 characters".into(),
        ));
    }
    let tokens = tokenize(expr)?;
    let mut p = Parser {
        src: expr,
        tokens,
        pos: 0,
        read: Vec::new(),
    };
    let value = p.expr(0)?.0;
    if let Some(t) = p.peek() {
        return Err(CalcError::Syntax(format!(
            "unexpected {t} after a complete expression"
        )));
    }
    Ok(Evaluated {
        value,
        read: p.read,
    })
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Num(Rational),
    Op(&'static str),
    Open,
    Close,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Num(n) => write!(f, "number {n}"),
            Tok::Op(o) => write!(f, "'{o}'"),
            Tok::Open => write!(f, "'('"),
            Tok::Close => write!(f, "')'"),
        }
    }
}

/// A token, and where it starts and ends in the expression.
type Spanned = (Tok, (usize, usize));

/// The tokens of `s`.
fn tokenize(s: &str) -> Result<Vec<Spanned>, CalcError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        let start = i;
        let tok = match c {
            b' ' | b'\t' | b'\n' | b'\r' => {
                i += 1;
                continue;
            }
            b'0'..=b'9' | b'.' => {
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                    i += 1;
                }
                let mut text = s[start..i].to_string();
                let ungrouped = i;
                // Thousands grouped with commas, as English writes them: one to three
                // digits, then groups of exactly three. There is no call or list here for
                // a comma to separate.
                if (1..=3).contains(&text.len()) && text.bytes().all(|d| d.is_ascii_digit()) {
                    let group = |at: usize| {
                        b.get(at) == Some(&b',')
                            && (1..=3).all(|k| b.get(at + k).is_some_and(u8::is_ascii_digit))
                            && !b.get(at + 4).is_some_and(u8::is_ascii_digit)
                    };
                    while group(i) {
                        text.push_str(&s[i + 1..i + 4]);
                        i += 4;
                    }
                    if i > ungrouped && b.get(i) == Some(&b'.') {
                        let frac = i;
                        i += 1;
                        while i < b.len() && b[i].is_ascii_digit() {
                            i += 1;
                        }
                        text.push_str(&s[frac..i]);
                    }
                }
                // Any other comma between digits is a decimal comma, as most of Europe and
                // Latin America write one (`3,5`, `19,99`, `1.250,50` with its thousands
                // grouped by dots): a model copies it from the request ("Calcule 3,5 fois
                // 8" came as `3,5 * 8`), and arithmetic has no other reading for it.
                // Refused, the model wrote it again. Only a comma not taken as a group of
                // thousands above is read so, and the reading comes with the value, like a
                // group's.
                if i == ungrouped
                    && b.get(i) == Some(&b',')
                    && b.get(i + 1).is_some_and(u8::is_ascii_digit)
                    && dot_grouped_or_digits(&text)
                {
                    let frac = i + 1;
                    i = frac;
                    while i < b.len() && b[i].is_ascii_digit() {
                        i += 1;
                    }
                    text = format!("{}.{}", text.replace('.', ""), &s[frac..i]);
                }
                let mut exp = 0i32;
                if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
                    let mut j = i + 1;
                    if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
                        j += 1;
                    }
                    let ds = j;
                    while j < b.len() && b[j].is_ascii_digit() {
                        j += 1;
                    }
                    if j > ds {
                        exp = s[i + 1..j]
                            .parse()
                            .map_err(|_| CalcError::Syntax("bad exponent".into()))?;
                        i = j;
                    }
                }
                Tok::Num(number(&text, exp)?)
            }
            b'*' if b.get(i + 1) == Some(&b'*') => {
                i += 2;
                Tok::Op("**")
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                i += 2;
                Tok::Op("//")
            }
            b'+' | b'-' | b'*' | b'/' | b'%' | b'^' | b'(' | b')' => {
                i += 1;
                match c {
                    b'+' => Tok::Op("+"),
                    b'-' => Tok::Op("-"),
                    b'*' => Tok::Op("*"),
                    b'/' => Tok::Op("/"),
                    b'%' => Tok::Op("%"),
                    // A power, as every calculator but Python's reads it (Python's is
                    // exclusive or, which is not arithmetic).
                    b'^' => Tok::Op("**"),
                    b'(' => Tok::Open,
                    _ => Tok::Close,
                }
            }
            // "17% of 2,340": read only after a percent (`Parser::term`).
            b'o' if s[i..].starts_with("of")
                && !b.get(i + 2).is_some_and(u8::is_ascii_alphanumeric) =>
            {
                i += 2;
                Tok::Op("of")
            }
            _ => {
                let ch = s[i..].chars().next().unwrap_or('?');
                i += ch.len_utf8();
                match ch {
                    '×' => Tok::Op("*"),
                    '÷' => Tok::Op("/"),
                    '−' => Tok::Op("-"),
                    // A word is named whole, and said to go: the model wrote `420 km / 28
                    // litres` again after "not 'k'". The expression is not read without it:
                    // `2 dozen * 3` is not `2 * 3`.
                    _ if ch.is_alphabetic() => {
                        let word: String = s[start..]
                            .chars()
                            .take_while(|c| c.is_alphanumeric() || *c == '_')
                            .take(40)
                            .collect();
                        return Err(CalcError::Syntax(format!(
                            "only numbers, + - * / // % ** and parentheses are allowed, not the \
                             word {word:?}: write the numbers alone, without units or names"
                        )));
                    }
                    _ => {
                        return Err(CalcError::Syntax(format!(
                            "only numbers, + - * / // % ** and parentheses are allowed, not {ch:?}"
                        )));
                    }
                }
            }
        };
        out.push((tok, (start, i)));
    }
    if out.is_empty() {
        return Err(CalcError::Syntax("empty expression".into()));
    }
    Ok(out)
}

/// Whether `text` is digits alone (`19` of `19,99`) or thousands grouped by dots
/// (`1.250` of `1.250,50`): the whole numbers a decimal comma may follow.
fn dot_grouped_or_digits(text: &str) -> bool {
    let mut groups = text.split('.');
    let first = groups.next().unwrap_or("");
    let digits = |g: &str| !g.is_empty() && g.bytes().all(|d| d.is_ascii_digit());
    if !text.contains('.') {
        return digits(first);
    }
    digits(first) && first.len() <= 3 && groups.all(|g| g.len() == 3 && digits(g))
}

fn number(text: &str, exp: i32) -> Result<Rational, CalcError> {
    let text: String = text.chars().filter(|c| *c != '_').collect();
    let (int, frac) = text.split_once('.').unwrap_or((&text, ""));
    if int.is_empty() && frac.is_empty() || frac.contains('.') {
        return Err(CalcError::Syntax(format!("bad number {text:?}")));
    }
    let digits: BigInt = format!("{int}{frac}")
        .parse()
        .map_err(|_| CalcError::Syntax(format!("bad number {text:?}")))?;
    let scale = Rational::int(10).pow(Rational::int(frac.len() as i64))?;
    let base = Rational::checked(BigRational::from_integer(digits))?.mul(scale.recip()?)?;
    if exp == 0 {
        Ok(base)
    } else {
        base.mul(Rational::int(10).pow(Rational::int(exp.into()))?)
    }
}

struct Parser<'a> {
    src: &'a str,
    tokens: Vec<Spanned>,
    pos: usize,
    /// Each number written with a comma and each percent as it was read, in the
    /// order written ([`Evaluated::read`]).
    read: Vec<String>,
}

const MAX_NESTING: usize = 64;

/// A value, and whether it is a percent alone (`10%`, `-10%`): added to or taken from
/// something else, a percent could mean a share of a unit or of what it is added to.
type Term = (Rational, bool);

impl Parser<'_> {
    fn peek(&self) -> Option<&Tok> {
        self.tokens.get(self.pos).map(|(t, _)| t)
    }

    fn peek_op(&self) -> Option<&'static str> {
        match self.peek() {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn expr(&mut self, depth: usize) -> Result<Term, CalcError> {
        let (mut v, mut percent) = self.term(depth)?;
        let mut terms = 1;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let (r, p) = self.term(depth)?;
            terms += 1;
            percent |= p;
            v = if op == "+" {
                v.add(r)?
            } else {
                v.add(r.neg()?)?
            };
        }
        if percent && terms > 1 {
            return Err(CalcError::Syntax(
                "a percent added or taken away is ambiguous (100 + 10% could be 100.1 or \
                 110): write the share it is of, as 100 + 10% * 100 or 100 * 110 / 100"
                    .into(),
            ));
        }
        Ok((v, percent && terms == 1))
    }

    fn term(&mut self, depth: usize) -> Result<Term, CalcError> {
        let (mut v, mut percent) = self.unary(depth)?;
        while let Some(op @ ("*" | "/" | "//" | "%" | "of")) = self.peek_op() {
            if op == "of" && !percent {
                return Err(CalcError::Syntax(
                    "'of' is read only after a percent, as in 17% of 2340".into(),
                ));
            }
            self.pos += 1;
            let r = self.unary(depth)?.0;
            percent = false;
            v = match op {
                "*" | "of" => v.mul(r)?,
                "/" => v.mul(r.recip()?)?,
                "//" => v.mul(r.recip()?)?.floor(),
                _ => {
                    // Python's modulo: the result has the sign of the divisor.
                    let q = v.clone().mul(r.clone().recip()?)?.floor();
                    v.add(r.mul(q)?.neg()?)?
                }
            };
        }
        Ok((v, percent))
    }

    fn unary(&mut self, depth: usize) -> Result<Term, CalcError> {
        if depth > MAX_NESTING {
            return Err(CalcError::Syntax("expression nested too deeply".into()));
        }
        match self.peek_op() {
            Some("-") => {
                self.pos += 1;
                let (v, percent) = self.unary(depth + 1)?;
                Ok((v.neg()?, percent))
            }
            Some("+") => {
                self.pos += 1;
                self.unary(depth + 1)
            }
            _ => self.power(depth),
        }
    }

    fn power(&mut self, depth: usize) -> Result<Term, CalcError> {
        let (first, reads) = (self.pos, self.read.len());
        let (mut base, mut percent) = self.atom(depth)?;
        if self.percent_follows() {
            // `12,5% as 0.125` says how the number was read as well.
            if self.pos == first + 1 {
                self.read.truncate(reads);
            }
            let (from, to) = (self.tokens[first].1.0, self.tokens[self.pos].1.1);
            self.pos += 1;
            base = base.mul(Rational::int(100).recip()?)?;
            self.read.push(format!("{} as {base}", &self.src[from..to]));
            percent = true;
        }
        if self.peek_op() == Some("**") {
            self.pos += 1;
            let exp = self.unary(depth + 1)?.0;
            return Ok((base.pow(exp)?, false));
        }
        Ok((base, percent))
    }

    /// Whether the `%` next is a percent: nothing that could be its right-hand side
    /// follows it (the end, `)`, or an operator other than a sign). `7 % 3` and `7 % -3`
    /// stay Python's modulo; `17% * 2340`, which Python refuses, takes 17/100.
    fn percent_follows(&self) -> bool {
        if self.peek_op() != Some("%") {
            return false;
        }
        match self.tokens.get(self.pos + 1).map(|(t, _)| t) {
            None | Some(Tok::Close) => true,
            Some(Tok::Op(o)) => !matches!(*o, "+" | "-"),
            _ => false,
        }
    }

    /// A number, or an expression in parentheses (a percent alone when its inside is:
    /// `(10%) + 5` is as doubtful as `10% + 5`).
    fn atom(&mut self, depth: usize) -> Result<Term, CalcError> {
        match self.tokens.get(self.pos).cloned() {
            Some((Tok::Num(n), (from, to))) => {
                self.pos += 1;
                let written = &self.src[from..to];
                if written.contains(',') {
                    self.read.push(format!("{written} as {n}"));
                }
                Ok((n, false))
            }
            Some((Tok::Open, _)) => {
                self.pos += 1;
                let v = self.expr(depth + 1)?;
                if self.peek() != Some(&Tok::Close) {
                    return Err(CalcError::Syntax("missing ')'".into()));
                }
                self.pos += 1;
                Ok(v)
            }
            Some((t, _)) => Err(CalcError::Syntax(format!("expected a number, got {t}"))),
            None => Err(CalcError::Syntax("the expression ends too early".into())),
        }
    }
}

#[cfg(test)]
mod tests;
