//! The page in a real headless Chromium: `tests/web/e2e.cjs` run by node with
//! playwright-core (`scripts/browser.sh` installs both and prints where they are).

/// The browser and its driver. The tests that drive one are ignored in a plain `cargo
/// test`; asked to run, a missing browser fails them.
fn browser() -> Option<(String, String)> {
    let found = (
        std::env::var("TOOLLOOP_CHROMIUM").ok(),
        std::env::var("TOOLLOOP_PLAYWRIGHT").ok(),
    );
    match found {
        (Some(c), Some(p)) if std::path::Path::new(&c).exists() => Some((c, p)),
        _ => panic!(
            "no browser: run scripts/test-all.sh, or `eval \"$(scripts/browser.sh)\"` first \
             (TOOLLOOP_CHROMIUM, TOOLLOOP_PLAYWRIGHT)"
        ),
    }
}

/// Runs `tests/web/e2e.cjs SCENARIO URL` in the browser; panics with its output on failure.
pub fn drive(scenario: &str, url: &str) -> Option<String> {
    let (chromium, modules) = browser()?;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/web/e2e.cjs");
    let out = std::process::Command::new("node")
        .arg(script)
        .arg(scenario)
        .arg(url)
        .env("TOOLLOOP_CHROMIUM", chromium)
        .env("TOOLLOOP_PLAYWRIGHT", modules)
        .output()
        .expect("node runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "the browser test failed:\n{text}");
    Some(text)
}
