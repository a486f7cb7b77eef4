//! The repairer never panics, and whatever it returns is JSON that serde_json reads.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    if let Ok((json, _)) = toolloop::turn::repair::repair_to_string(&text) {
        assert!(
            serde_json::from_str::<serde_json::Value>(&json).is_ok(),
            "repair produced invalid JSON: {json:?}"
        );
    }
    let _ = toolloop::turn::repair::repair(&text);
});
