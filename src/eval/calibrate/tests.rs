//! `calibrate`'s choice of thresholds, on observations written by hand.

use super::*;

fn o(id: &str, needs_tool: bool, p_tool: f64, fit: f64) -> Observation {
    Observation {
        id: id.into(),
        needs_tool,
        tool: "t".into(),
        supported: false,
        unsaid: false,
        p_tool,
        fit,
        p_name: None,
    }
}

#[test]
fn a_call_with_a_value_nobody_said_is_questioned_though_its_tool_shares_words() {
    // Tuning ids are even. The needless calls share words with their tools and carry
    // a value nobody said, so they are questioned and a low "yes" declines them; the
    // right call that shares words and carries the person's values is not asked.
    let unsaid = |id: &str, needs_tool: bool, fit: f64| Observation {
        supported: true,
        unsaid: true,
        ..o(id, needs_tool, 0.95, fit)
    };
    let said = Observation {
        supported: true,
        ..o("s_2", true, 0.95, 0.3)
    };
    let obs = vec![
        o("s_0", true, 0.95, 0.55),
        o("s_4", true, 0.95, 0.6),
        o("s_6", true, 0.95, 0.62),
        o("s_8", true, 0.95, 0.58),
        o("s_10", true, 0.95, 0.65),
        said,
        unsaid("i_0", false, 0.5),
        unsaid("i_2", false, 0.45),
        unsaid("i_1", false, 0.4),
    ];
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    let m = measure(&obs, &t);
    assert_eq!(m.tuning.right_kept, 6, "{t:?}");
    assert_eq!(m.tuning.needless_declined, 2, "{t:?}");
    assert_eq!(m.validation.needless_declined, 1, "{t:?}");
    assert_eq!(
        m.tuning.questioned, 7,
        "the right call with said values is not asked"
    );
}

#[test]
fn the_chosen_thresholds_keep_every_right_call_of_a_small_tuning_half() {
    // Tuning ids are even. Right calls: fit 0.58–0.62; needless: fit 0.4–0.5, one
    // needless call the model was surer of than of any right call.
    let obs = vec![
        o("s_0", true, 0.95, 0.6),
        o("s_2", true, 0.99, 0.58),
        o("s_4", true, 0.90, 0.62),
        o("s_6", true, 0.92, 0.6),
        o("s_8", true, 0.97, 0.61),
        o("i_0", false, 0.93, 0.45),
        o("i_2", false, 0.97, 0.4),
        o("i_4", false, 0.999, 0.5),
        o("s_1", true, 0.92, 0.52),
        o("i_1", false, 0.9, 0.3),
    ];
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    let m = measure(&obs, &t);
    assert_eq!(m.tuning.right_kept, 5);
    assert_eq!(m.tuning.needless_declined, 3, "{t:?}");
    assert!(t.fit_min > 0.5 && t.fit_min < 0.58, "{t:?}");
    assert_eq!(m.validation.right_kept, 0, "0.52 is below the cut: {t:?}");
    assert_eq!(t.calibrated_for.as_deref(), Some("m"));
}

#[test]
fn the_noise_is_one_answers_spread_read_from_calls_asked_twice() {
    let first: Vec<_> = (0..6)
        .map(|i| o(&format!("c_{i}"), true, 0.9, 0.5))
        .collect();
    let again: Vec<_> = (0..6)
        .map(|i| o(&format!("c_{i}"), true, 0.9, 0.5 + 0.01 * (i % 2) as f64))
        .collect();
    let s = noise(&first, &again).unwrap();
    // Differences 0 and 0.01 alternating: sample sd 0.00548, over √2.
    assert!((s - 0.00387).abs() < 1e-4, "{s}");
    assert_eq!(noise(&first[..3], &again), None, "too few pairs");
    let unread: Vec<_> = (0..6)
        .map(|i| o(&format!("c_{i}"), true, 0.9, 1.0))
        .collect();
    assert_eq!(noise(&unread, &again), None, "a fit never read is no pair");
}

#[test]
fn a_noisy_fit_keeps_right_calls_by_a_margin_below_their_read() {
    // The lowest right call of the tuning half reads 0.50 and a needless one 0.49:
    // without noise the bar falls between them; with a spread of 0.01 it must sit
    // under 0.48, and the needless call at 0.49 goes ahead.
    let obs = vec![
        o("s_0", true, 0.95, 0.50),
        o("s_2", true, 0.95, 0.51),
        o("s_4", true, 0.95, 0.52),
        o("s_6", true, 0.95, 0.51),
        o("s_8", true, 0.95, 0.52),
        o("i_0", false, 0.95, 0.49),
        o("i_2", false, 0.95, 0.40),
    ];
    let tight = choose(&obs, "m", 0.0, Some(PREDICT));
    assert!(tight.fit_min > 0.49 && tight.fit_min < 0.50, "{tight:?}");
    let t = choose(&obs, "m", NOISE_Z * 0.01, Some(PREDICT));
    assert!(t.fit_min < 0.48 && t.fit_min > 0.40, "{t:?}");
    let m = measure(&obs, &t);
    assert_eq!((m.tuning.right_kept, m.tuning.needless_declined), (5, 1));
    let printed = table(
        "m",
        &t,
        &m,
        (Some(0.01), NOISE_Z),
        (right_fit(&obs, (0.0, 0.0), PREDICT), true),
    );
    assert!(printed.contains("moved by 0.010"), "{printed}");
    assert!(printed.contains("kept 0.020 above the bar"), "{printed}");
    // A Markdown table a person can paste: every row starts at the line's start.
    assert!(
        printed
            .lines()
            .filter(|l| l.contains('|'))
            .all(|l| l.starts_with('|')),
        "{printed}"
    );
}

#[test]
fn with_nothing_that_separates_the_thresholds_decline_nothing_right() {
    let obs = vec![
        o("s_0", true, 0.98, 0.5),
        o("s_2", true, 0.97, 0.5),
        o("i_0", false, 0.98, 0.5),
    ];
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    let m = measure(&obs, &t);
    assert_eq!(m.tuning.right_kept, 2);
    assert_eq!(m.tuning.needless_declined, 0);
    assert_eq!(
        m.tuning.questioned + m.validation.questioned,
        0,
        "a question that declines nothing is not worth a request: {t:?}"
    );
    let printed = table(
        "m",
        &t,
        &m,
        (None, NOISE_Z),
        (right_fit(&obs, (0.0, 0.0), PREDICT), true),
    );
    assert!(
        printed.contains("no call is put to the fit question"),
        "{printed}"
    );
}

#[test]
fn the_bar_stays_under_the_floor_of_right_calls_that_spread_widely() {
    // Right calls of the tuning half read 0.45 to 0.65 and one needless call 0.44,
    // just under the lowest: a bar just under the lowest right call would decline it,
    // and a right call of another set at 0.44 with it. The floor, 0.55 less 1.533
    // times the spread, keeps the bar lower: the needless call at 0.44 goes ahead,
    // the one at 0.35 is declined.
    let fits = [0.45, 0.5, 0.55, 0.6, 0.65];
    let mut obs: Vec<Observation> = fits
        .iter()
        .enumerate()
        .map(|(i, &f)| o(&format!("s_{}", 2 * i), true, 0.95, f))
        .collect();
    obs.push(o("i_0", false, 0.95, 0.44));
    obs.push(o("i_2", false, 0.95, 0.35));
    let r = right_fit(&obs, (0.0, 0.0), PREDICT).unwrap();
    assert_eq!(r.calls, 5);
    assert!((r.mean - 0.55).abs() < 1e-9, "{r:?}");
    // sd 0.0791; t(0.9, 4) = 1.5332; sqrt(1 + 1/5) = 1.0954.
    assert!(
        (r.floor - (0.55 - 1.5332 * 0.079_057 * 1.095_445)).abs() < 1e-4,
        "{r:?}"
    );
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    assert!(t.fit_min <= r.floor && t.fit_min > 0.35, "{t:?}");
    let m = measure(&obs, &t);
    assert_eq!((m.tuning.right_kept, m.tuning.needless_declined), (5, 1));
    let printed = table("m", &t, &m, (None, 0.0), (Some(r), true));
    assert!(
        printed.contains("the bar stays at or below 0.417"),
        "{printed}"
    );
    // Held under no floor (`--floor off`), the bar goes up to just under the lowest
    // right call: the needless call at 0.44 is declined too, and the table says why.
    let off = choose(&obs, "m", 0.0, None);
    assert!(off.fit_min > 0.44 && off.fit_min <= 0.45, "{off:?}");
    let m = measure(&obs, &off);
    assert_eq!((m.tuning.right_kept, m.tuning.needless_declined), (5, 2));
    let printed = table("m", &off, &m, (None, 0.0), (Some(r), false));
    assert!(
        printed.contains("held under no floor (--floor off)"),
        "{printed}"
    );
    // A higher level draws a lower floor.
    let r99 = right_fit(&obs, (0.0, 0.0), 0.99).unwrap();
    assert!(r99.floor < r.floor, "{r99:?}");
}

#[test]
fn too_few_right_calls_asked_leave_the_fit_question_declining_nothing() {
    // Four right calls asked: where right calls read cannot be told, and a bar set
    // between them and the needless calls would be a guess.
    let mut obs: Vec<Observation> = (0..4)
        .map(|i| o(&format!("s_{}", 2 * i), true, 0.95, 0.6))
        .collect();
    obs.push(o("i_0", false, 0.95, 0.3));
    assert_eq!(right_fit(&obs, (0.0, 0.0), PREDICT), None);
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    let m = measure(&obs, &t);
    assert_eq!(m.tuning.needless_declined, 0, "{t:?}");
    let printed = table("m", &t, &m, (None, NOISE_Z), (None, true));
    assert!(printed.contains("fewer than 5 right calls"), "{printed}");
}

/// The built-in set `calibrate` uses without data parses whole: a file that stopped
/// parsing would otherwise leave it silently smaller.
#[test]
fn the_built_in_everyday_set_is_whole() {
    let cases = crate::eval::everyday();
    assert_eq!(cases.len(), 90);
    assert_eq!(
        cases.iter().filter(|c| c.ground_truth.is_empty()).count(),
        30
    );
}

#[test]
fn a_needless_call_the_model_named_without_choosing_is_held_to_more() {
    // Tuning ids are even. Two needless calls read as well as the weakest right call
    // (0.50) but the model's probability at their tool's name went elsewhere (p_name
    // 0.01): only a weight on the name tells them apart. The right calls' names were
    // the model's own choice, but for one that still reads well above the bar.
    let named = |id: &str, needs_tool: bool, fit: f64, p_name: f64| Observation {
        p_name: Some(p_name),
        ..o(id, needs_tool, 0.95, fit)
    };
    let mut obs = vec![
        named("s_0", true, 0.50, 0.9),
        named("s_2", true, 0.55, 0.8),
        named("s_4", true, 0.60, 0.01),
        named("s_6", true, 0.52, 0.9),
        named("s_8", true, 0.58, 0.7),
        named("i_0", false, 0.50, 0.01),
        named("i_2", false, 0.505, 0.01),
        named("i_4", false, 0.40, 0.9),
    ];
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    let m = measure(&obs, &t);
    assert_eq!(
        (m.tuning.right_kept, m.tuning.needless_declined),
        (5, 3),
        "{t:?}"
    );
    assert!(t.name_weight > 0.0, "{t:?}");
    assert!(table("m", &t, &m, (None, 0.0), (None, false)).contains("names on offer"));
    // Where the names tell nothing, no weight is put on them.
    for o in &mut obs {
        o.p_name = Some(0.9);
    }
    let t = choose(&obs, "m", 0.0, Some(PREDICT));
    assert_eq!(t.name_weight, 0.0, "{t:?}");
}

/// What a person reads after calibrating: a table in words, both halves, no bars and no
/// formulas.
#[test]
fn the_summary_says_what_changed_in_words() {
    let half = |declined, kept| HalfFigures {
        right_kept: kept,
        right: 30,
        needless_declined: declined,
        needless: 20,
        questioned: 25,
    };
    let said = summary(
        "qwen at http://localhost:8080",
        &Measured {
            tuning: half(17, 30),
            validation: half(15, 29),
        },
    );
    assert!(
        said.contains("| the half the bars were chosen on | 17 of 20 | 30 of 30 |"),
        "{said}"
    );
    assert!(
        said.contains("| the other half, kept apart to check them | 15 of 20 | 29 of 30 |"),
        "{said}"
    );
    for formula in ['×', '<', '≥'] {
        assert!(!said.contains(formula), "{said}");
    }
    assert!(!said.contains("0."), "no bar in it: {said}");
}
