//! The checks' docs, made from their declarations alone: the list and the page for one
//! check that `toolloop checks` prints, and `docs/checks.md` (a test fails when the file
//! is not what [`markdown`] makes).

use super::{CheckInfo, all};

fn default(c: &CheckInfo) -> String {
    match (c.default_on, c.off_for) {
        (false, _) => "off".into(),
        (true, []) => "on".into(),
        (true, families) => format!("on (off for {})", families.join(", ")),
    }
}

/// Every check in a line: its name, its default and what it does.
pub fn list() -> String {
    let width = all().map(|c| c.name.len()).max().unwrap_or(0);
    let dwidth = all().map(|c| default(c).len()).max().unwrap_or(0);
    let mut out = String::new();
    for c in all() {
        let d = format!("{:dwidth$}", default(c));
        out.push_str(&format!("{:width$}  {d}  {}\n", c.name, c.what));
    }
    out.push_str("\nSet one with --check NAME=on|off; `toolloop checks NAME` shows its doc.");
    out
}

/// One check's doc, in its sections.
pub fn page(name: &str) -> Option<String> {
    let c = all().find(|c| c.name == name)?;
    Some(format!(
        "{} (default {}; {})\n\nWhat it does: {}\n\nWhat it reads: {}\n\nWhy: {}\n\nExample: {}\n\nIts default: {}",
        c.name,
        default(c),
        c.effect,
        c.what,
        c.reads,
        c.why,
        c.example,
        c.safety
    ))
}

/// Every check as JSON: what `toolloop checks --json` prints.
pub fn json() -> serde_json::Value {
    all()
        .map(|c| {
            serde_json::json!({"name": c.name, "default": default(c), "reads": c.reads.to_string(),
                "effect": c.effect.to_string(), "what": c.what, "why": c.why,
                "example": c.example, "safety": c.safety})
        })
        .collect()
}

/// `docs/checks.md`: a table of every check, then each one's doc.
pub fn markdown() -> String {
    let mut out = String::from(
        "# The checks\n\n\
         <!-- Made by `toolloop checks --markdown` from each check's declaration in \
         `src/checks/`; a test fails when this file is not what it prints. -->\n\n\
         Between the model's reply and the tool, toolloop runs these checks, in this order. \
         None changes a value the model wrote: a check lets a call through as written, \
         declines it (the model is asked again), holds it back, asks the model again for \
         more, or asks the person. Each one's line is printed when it acts, without `-v`. \
         Turn one on or off with `--check NAME=on|off`; the figures behind each default \
         are in `BENCHMARKS.md`.\n\n\
         | check | default | reads | what it does |\n|---|---|---|---|\n",
    );
    for c in all() {
        out.push_str(&format!(
            "| [`{}`](#{}) | {} | {} | {} |\n",
            c.name,
            c.name,
            default(c),
            c.reads,
            c.what.replace('|', "\\|")
        ));
    }
    for c in all() {
        out.push_str(&format!(
            "\n## {}\n\nDefault **{}**; it {}; it reads {}.\n\n\
             **What it does.** {}\n\n**Why.** {}\n\n**Example.** {}\n\n**Its default.** {}\n",
            c.name,
            default(c),
            c.effect,
            c.reads,
            c.what,
            c.why,
            c.example,
            c.safety
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_checks_page_begins_with_its_name_default_and_effect() {
        let doc = super::page("tool-fit").unwrap();
        assert!(doc.starts_with("tool-fit (default on; declines the call)"));
        assert!(super::page("no-such-check").is_none());
    }
}
