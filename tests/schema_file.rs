//! `schemas/call_schema.json` is generated from the Rust types; this fails when it is
//! stale. Regenerate with `TOOLLOOP_BLESS=1 cargo test --test schema_file`.

use std::path::Path;

#[test]
fn call_schema_file_is_current() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("schemas/call_schema.json");
    let generated = toolloop::turn::schema::call_schema_json();
    if std::env::var_os("TOOLLOOP_BLESS").is_some() {
        std::fs::write(&path, &generated).unwrap();
    }
    let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
    assert!(
        on_disk == generated,
        "schemas/call_schema.json is stale: run TOOLLOOP_BLESS=1 cargo test --test schema_file"
    );
}

#[test]
fn call_schema_is_a_one_of_of_four_kinds_with_const() {
    let schema = toolloop::turn::schema::call_schema();
    let variants = schema["oneOf"].as_array().unwrap();
    assert_eq!(variants.len(), 4);
    for (v, kind) in variants
        .iter()
        .zip(["tool_call", "tool_calls", "final_answer", "clarify"])
    {
        assert_eq!(v["properties"]["kind"]["const"], kind);
        assert_eq!(v["required"][0], "kind");
    }
    // `properties` next to `oneOf` would be ignored by llama.cpp's converter.
    assert!(schema.get("properties").is_none());
}
