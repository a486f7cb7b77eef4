//! Unit tests of what the checks share.

#[test]
fn a_decline_line_shows_its_figure_below_its_bar() {
    assert_eq!(super::below(0.62, 0.85), "0.62 < 0.85");
    // Two places would read "1.00 < 1.00" and "0.48 < 0.48".
    assert_eq!(super::below(0.99894, 0.999), "0.9989 < 0.9990");
    assert_eq!(super::below(0.4805, 0.4811), "0.480 < 0.481");
    // A "sure" level under 1 never reads as 1.
    assert_eq!(super::below(0.99, 0.99999), "0.99000 < 0.99999");
    assert_eq!(super::below(0.5, 1.0), "0.50 < 1.00");
}
