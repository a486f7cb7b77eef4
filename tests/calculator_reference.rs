//! The calculator against an independent reference: Python's `fractions`, which does
//! exact rational arithmetic with Python's own operator rules (`//` floors, `%` takes the
//! divisor's sign, `**` binds tighter than unary minus). Every small case of each
//! operator, and a few thousand random expressions, must give the same exact value, or
//! the same division by zero.

use std::io::Write;
use std::process::{Command, Stdio};

use toolloop::tools::calculator::{CalcError, evaluate};

const REFERENCE: &str = r#"
import ast, re, sys
from fractions import Fraction
lit = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)")
class Exact(ast.NodeTransformer):
    # Fraction // Fraction is an int, and int / int a float: keep every value a Fraction.
    def visit_BinOp(self, node):
        self.generic_visit(node)
        return ast.Call(ast.Name("Fraction", ast.Load()), [node], [])
for line in sys.stdin:
    expr = lit.sub(lambda m: "Fraction('%s')" % m.group(1), line.rstrip("\n"))
    tree = ast.fix_missing_locations(Exact().visit(ast.parse(expr, mode="eval")))
    try:
        print(Fraction(eval(compile(tree, "<expr>", "eval"), {"Fraction": Fraction})))
    except ZeroDivisionError:
        print("division by zero")
"#;

/// The reference's answers, one per expression.
fn reference(exprs: &[String]) -> Option<Vec<String>> {
    let child = Command::new("python3")
        .args(["-c", REFERENCE])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => panic!("python3 is needed as the reference ({e}): run scripts/test-all.sh"),
    };
    let mut stdin = child.stdin.take().unwrap();
    let input = exprs.join("\n") + "\n";
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success(), "the reference failed");
    Some(
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .map(str::to_string)
            .collect(),
    )
}

fn ours(expr: &str) -> String {
    match evaluate(expr) {
        Ok(v) => v.fraction(),
        Err(CalcError::DivisionByZero) => "division by zero".into(),
        // Past the calculator's bound (`MAX_BITS`): not a disagreement.
        Err(CalcError::Overflow) => "too large".into(),
        Err(e) => panic!("{expr}: {e}"),
    }
}

fn compare(exprs: Vec<String>) {
    let Some(expected) = reference(&exprs) else {
        return;
    };
    assert_eq!(expected.len(), exprs.len());
    let too_large = exprs.iter().filter(|e| ours(e) == "too large").count();
    assert!(
        too_large * 20 < exprs.len(),
        "{too_large} cases past the bound"
    );
    let wrong: Vec<String> = exprs
        .iter()
        .zip(&expected)
        .filter(|(e, want)| ours(e) != "too large" && ours(e) != **want)
        .map(|(e, want)| format!("{e}: ours {}, Python {want}", ours(e)))
        .take(10)
        .collect();
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
#[ignore = "needs python3 as the reference: run scripts/test-all.sh"]
fn every_small_case_of_every_operator_matches_python() {
    let values = [
        "0", "1", "2", "3", "7", "12", "(-1)", "(-2)", "(-5)", "0.5", "1.25", "(-0.75)",
    ];
    let mut exprs = Vec::new();
    for a in values {
        for b in values {
            for op in ["+", "-", "*", "/", "//", "%"] {
                exprs.push(format!("{a} {op} {b}"));
            }
        }
        for e in ["0", "1", "2", "3", "(-1)", "(-2)", "-3"] {
            exprs.push(format!("{a} ** {e}"));
            exprs.push(format!("-{a} ** {e}"));
        }
    }
    exprs.push("(3**80-1)/3**80".into());
    exprs.push("2**100 // 3**20 % 1000003".into());
    compare(exprs);
}

/// A small xorshift generator: the cases are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    fn expr(&mut self, depth: u32) -> String {
        if depth == 0 || self.next(3) == 0 {
            return match self.next(4) {
                0 => format!("{}.{}", self.next(100), self.next(100)),
                1 => format!("(-{})", self.next(50)),
                _ => self.next(1000).to_string(),
            };
        }
        let a = self.expr(depth - 1);
        match self.next(8) {
            0 => format!("({a}) ** {}", self.next(7) as i64 - 2),
            1 => format!("-{a}"),
            n => {
                let op = ["+", "-", "*", "/", "//", "%"][(n - 2) as usize];
                let b = self.expr(depth - 1);
                if self.next(2) == 0 {
                    format!("({a}) {op} ({b})")
                } else {
                    format!("{a} {op} {b}")
                }
            }
        }
    }
}

#[test]
#[ignore = "needs python3 as the reference: run scripts/test-all.sh"]
fn random_expressions_match_python() {
    let mut rng = Rng(0x5eed_1234_abcd_ef01);
    let exprs = (0..3000).map(|_| rng.expr(4)).collect();
    compare(exprs);
}
