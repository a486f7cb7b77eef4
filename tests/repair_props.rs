//! Properties of the repairer over generated JSON: valid JSON comes back unchanged, and a
//! document cut at any byte comes back as valid JSON that invents nothing.

use proptest::prelude::*;
use serde_json::{Map, Number, Value};
use toolloop::turn::repair::{repair, repair_to_string};

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| Value::Number(n.into())),
        any::<f64>()
            .prop_filter("finite", |f| f.is_finite())
            .prop_map(|f| Value::Number(Number::from_f64(f).unwrap())),
        ".{0,12}".prop_map(Value::String),
        // Strings full of the characters the repairer treats specially.
        "[\"'\\\\{}\\[\\],:/#\n\t “”‘’\u{1F600}a-c]{0,10}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::vec(("[a-z\"\\\\ ]{0,6}", inner), 0..6)
                .prop_map(|kv| Value::Object(kv.into_iter().collect::<Map<_, _>>())),
        ]
    })
}

/// Whether `got` could be what is left of `orig` after cutting its text: scalars equal,
/// strings a prefix, containers holding a prefix of the members with all but the last
/// equal.
fn is_cut_of(got: &Value, orig: &Value) -> bool {
    match (got, orig) {
        (Value::String(g), Value::String(o)) => o.starts_with(g.as_str()),
        (Value::Array(g), Value::Array(o)) => {
            g.len() <= o.len()
                && g.iter().zip(o).enumerate().all(|(i, (a, b))| {
                    if i + 1 == g.len() {
                        is_cut_of(a, b)
                    } else {
                        a == b
                    }
                })
        }
        (Value::Object(g), Value::Object(o)) => {
            g.len() <= o.len()
                && g.iter()
                    .zip(o)
                    .enumerate()
                    .all(|(i, ((gk, gv), (ok, ov)))| {
                        gk == ok
                            && if i + 1 == g.len() {
                                is_cut_of(gv, ov)
                            } else {
                                gv == ov
                            }
                    })
        }
        _ => got == orig,
    }
}

fn check_prefixes(text: &str, orig: &Value) -> Result<(), TestCaseError> {
    for (cut, _) in text.char_indices().skip(1) {
        let prefix = &text[..cut];
        let got = repair(prefix);
        if !orig.is_array() && !orig.is_object() {
            // A cut scalar may be unrecoverable ("tr") or a different number ("1" of "12").
            continue;
        }
        let got = got.map_err(|e| TestCaseError::fail(format!("{prefix:?}: {e}")))?;
        prop_assert!(
            is_cut_of(&got.value, orig),
            "cut {:?}\n gave {}\n orig {}",
            prefix,
            got.value,
            orig
        );
        let (text_form, _) = repair_to_string(prefix).unwrap();
        prop_assert_eq!(
            serde_json::from_str::<Value>(&text_form).ok(),
            Some(got.value)
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn valid_json_comes_back_unchanged(v in json_value()) {
        for text in [serde_json::to_string(&v).unwrap(), serde_json::to_string_pretty(&v).unwrap()] {
            let r = repair(&text).unwrap();
            prop_assert_eq!(&r.value, &v);
            prop_assert!(r.fixes.is_empty());
            prop_assert_eq!(repair_to_string(&text).unwrap().0, text.trim());
        }
    }

    #[test]
    fn every_prefix_is_valid_and_invents_nothing(v in json_value()) {
        check_prefixes(&serde_json::to_string(&v).unwrap(), &v)?;
        check_prefixes(&serde_json::to_string_pretty(&v).unwrap(), &v)?;
    }

    #[test]
    fn any_text_gives_valid_json_or_a_clean_error(s in "\\PC{0,64}|[\\[\\]{}\"',:a-z0-9\\\\ \n]{0,64}") {
        if let Ok((text, _)) = repair_to_string(&s) {
            prop_assert!(serde_json::from_str::<Value>(&text).is_ok(), "{:?} -> {:?}", s, text);
        }
        let _ = toolloop::turn::Turn::parse(&s);
    }
}
