//! The `calculator` tool: exact arithmetic, and nothing else.
//!
//! Small models are bad at arithmetic and good at writing `12.5 * 4`; this evaluates it
//! exactly, with rational numbers, so `0.1 + 0.2` is `0.3`. Only numbers, `+ - * / // %
//! **`, parentheses and unary minus are understood: a name, a call or any other character
//! is an error (there is no call or attribute access to refuse: nothing but arithmetic
//! exists).

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
    if expr.len() > 2000 {
        return Err(CalcError::Syntax(
            "expression longer than 2000 characters".into(),
        ));
    }
    let tokens = tokenize(expr)?;
    let mut p = Parser { tokens, pos: 0 };
    let v = p.expr(0)?;
    match p.tokens.get(p.pos) {
        None => Ok(v),
        Some(t) => Err(CalcError::Syntax(format!(
            "unexpected {t} after a complete expression"
        ))),
    }
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

fn tokenize(s: &str) -> Result<Vec<Tok>, CalcError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let c = b[i];
        match c {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'0'..=b'9' | b'.' => {
                let start = i;
                while i < b.len() && (b[i].is_ascii_digit() || b[i] == b'.' || b[i] == b'_') {
                    i += 1;
                }
                let mantissa_end = i;
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
                out.push(Tok::Num(number(&s[start..mantissa_end], exp)?));
            }
            b'+' => {
                out.push(Tok::Op("+"));
                i += 1;
            }
            b'-' => {
                out.push(Tok::Op("-"));
                i += 1;
            }
            b'*' if b.get(i + 1) == Some(&b'*') => {
                out.push(Tok::Op("**"));
                i += 2;
            }
            b'*' => {
                out.push(Tok::Op("*"));
                i += 1;
            }
            b'/' if b.get(i + 1) == Some(&b'/') => {
                out.push(Tok::Op("//"));
                i += 2;
            }
            b'/' => {
                out.push(Tok::Op("/"));
                i += 1;
            }
            b'%' => {
                out.push(Tok::Op("%"));
                i += 1;
            }
            b'(' => {
                out.push(Tok::Open);
                i += 1;
            }
            b')' => {
                out.push(Tok::Close);
                i += 1;
            }
            b'^' => {
                return Err(CalcError::Syntax(
                    "'^' is not supported: write powers with **".into(),
                ));
            }
            _ => {
                let ch = s[i..].chars().next().unwrap_or('?');
                return Err(CalcError::Syntax(format!(
                    "only numbers, + - * / // % ** and parentheses are allowed, not {ch:?}"
                )));
            }
        }
    }
    if out.is_empty() {
        return Err(CalcError::Syntax("empty expression".into()));
    }
    Ok(out)
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

struct Parser {
    tokens: Vec<Tok>,
    pos: usize,
}

const MAX_NESTING: usize = 64;

impl Parser {
    fn peek_op(&self) -> Option<&'static str> {
        match self.tokens.get(self.pos) {
            Some(Tok::Op(o)) => Some(o),
            _ => None,
        }
    }

    fn expr(&mut self, depth: usize) -> Result<Rational, CalcError> {
        let mut v = self.term(depth)?;
        while let Some(op @ ("+" | "-")) = self.peek_op() {
            self.pos += 1;
            let r = self.term(depth)?;
            v = if op == "+" {
                v.add(r)?
            } else {
                v.add(r.neg()?)?
            };
        }
        Ok(v)
    }

    fn term(&mut self, depth: usize) -> Result<Rational, CalcError> {
        let mut v = self.unary(depth)?;
        while let Some(op @ ("*" | "/" | "//" | "%")) = self.peek_op() {
            self.pos += 1;
            let r = self.unary(depth)?;
            v = match op {
                "*" => v.mul(r)?,
                "/" => v.mul(r.recip()?)?,
                "//" => v.mul(r.recip()?)?.floor(),
                _ => {
                    // Python's modulo: the result has the sign of the divisor.
                    let q = v.clone().mul(r.clone().recip()?)?.floor();
                    v.add(r.mul(q)?.neg()?)?
                }
            };
        }
        Ok(v)
    }

    fn unary(&mut self, depth: usize) -> Result<Rational, CalcError> {
        if depth > MAX_NESTING {
            return Err(CalcError::Syntax("expression nested too deeply".into()));
        }
        match self.peek_op() {
            Some("-") => {
                self.pos += 1;
                self.unary(depth + 1)?.neg()
            }
            Some("+") => {
                self.pos += 1;
                self.unary(depth + 1)
            }
            _ => self.power(depth),
        }
    }

    fn power(&mut self, depth: usize) -> Result<Rational, CalcError> {
        let base = self.atom(depth)?;
        if self.peek_op() == Some("**") {
            self.pos += 1;
            let exp = self.unary(depth + 1)?;
            return base.pow(exp);
        }
        Ok(base)
    }

    fn atom(&mut self, depth: usize) -> Result<Rational, CalcError> {
        match self.tokens.get(self.pos).cloned() {
            Some(Tok::Num(n)) => {
                self.pos += 1;
                Ok(n)
            }
            Some(Tok::Open) => {
                self.pos += 1;
                let v = self.expr(depth + 1)?;
                if self.tokens.get(self.pos) != Some(&Tok::Close) {
                    return Err(CalcError::Syntax("missing ')'".into()));
                }
                self.pos += 1;
                Ok(v)
            }
            Some(t) => Err(CalcError::Syntax(format!("expected a number, got {t}"))),
            None => Err(CalcError::Syntax("the expression ends too early".into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(s: &str) -> String {
        evaluate(s)
            .map(|v| v.to_string())
            .unwrap_or_else(|e| format!("error: {e}"))
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
        assert_eq!(
            ev("2 ^ 3"),
            "error: '^' is not supported: write powers with **"
        );
        assert!(ev("abs(1)").starts_with("error: only numbers"));
        assert!(ev("().__class__").starts_with("error:"));
        assert!(ev("1 +").starts_with("error: the expression ends too early"));
        assert!(ev("(1").starts_with("error: missing ')'"));
        assert!(ev("").starts_with("error: empty expression"));
        assert!(ev(&"(".repeat(500)).starts_with("error: expression nested too deeply"));
    }
}
