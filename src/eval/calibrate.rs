//! `toolloop calibrate`: the decision step's thresholds, measured for one model on one
//! server.
//!
//! Each case of a labelled set runs through the loop (`super::run_all`) with thresholds
//! that decline nothing and put the fit question to every call, so the first call's
//! tool, the model's share of probability for it and its answer to the fit question are
//! all recorded. A case that needs a tool and whose first call names one of the tools of
//! its answer is a *right call*; a case that needs none and gets a call is a *needless
//! call*. [`choose`] then picks, on the tuning half only (`super::half`), the thresholds
//! that decline the most needless calls while keeping at least 97% of the right ones,
//! and [`measure`] reports what they do on both halves: the validation half says whether
//! they hold.
//!
//! The fit answer of one call is not a fixed number. On a server with several slots the
//! same question, asked again, moved by up to 0.044 (Qwen2.5-Coder 0.5B at four slots),
//! about the whole gap between right and needless calls, and a bar set just under the
//! tuning half's lowest right call declined right calls of the next run that had read a
//! little lower. So the tuning half's questioned calls are asked a second time ([`noise`]),
//! and [`choose`] keeps the right calls as though each read [`NOISE_Z`] times that spread
//! lower.
//!
//! Nor is one set's lowest right call another's. A bar just under the everyday set's
//! lowest declined right calls of other requests that read a little lower, with no noise
//! at all; so the bar is also held under a floor drawn from how the tuning half's right
//! calls spread ([`right_fit`], [`PREDICT`]).

use serde::Serialize;

use super::{Case, CaseResult, Half, half};
use crate::calibration::Thresholds;
use crate::checks;
use crate::checks::Evidence;

/// What one case showed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Observation {
    /// The case id.
    pub id: String,
    /// Whether the case needs a tool.
    pub needs_tool: bool,
    /// The tool of the model's first call.
    pub tool: String,
    /// The model's share of probability for that call.
    pub p_tool: f64,
    /// Whether the request shares words with the tool, or the call carries the request's
    /// own numbers and nothing else (`tool-fit`'s own numbers): then it is not questioned
    /// unless `unsaid`.
    pub supported: bool,
    /// Whether the call carries a required value the request never said
    /// (`tool-fit`'s unsaid values).
    pub unsaid: bool,
    /// Its share of "yes" to the fit question; 1 when it could not be read.
    pub fit: f64,
    /// The model's share for the names on offer at the call's tool name, when read
    /// ([`crate::checks::name_share`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub p_name: Option<f64>,
}

/// What a set of thresholds does on one half.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct HalfFigures {
    /// Right calls that go ahead.
    pub right_kept: usize,
    /// Right calls in all.
    pub right: usize,
    /// Needless calls declined.
    pub needless_declined: usize,
    /// Needless calls in all.
    pub needless: usize,
    /// Calls the fit question is put to.
    pub questioned: usize,
}

/// What a set of thresholds does on each half.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Measured {
    /// On the tuning half (the thresholds were chosen on it).
    pub tuning: HalfFigures,
    /// On the validation half.
    pub validation: HalfFigures,
}

/// The least share of right calls the chosen thresholds keep on the tuning half.
pub const KEEP: f64 = 0.97;

/// How many times the fit's spread between two asks a right call must clear the bar by,
/// unless `toolloop calibrate --margin` says otherwise.
///
/// The bar has to hold for every right call of the next run, each read with a draw of its
/// own. Two, chosen by [`KEEP`] on the tuning half: the bars of earlier calibration runs,
/// applied to a later run, kept [`KEEP`] of its right calls with two and fewer with one
/// or none.
pub const NOISE_Z: f64 = 2.0;

/// The fewest calls read twice from which [`noise`] estimates a spread.
pub const NOISE_PAIRS: usize = 5;

/// The standard deviation of one fit answer, from the calls `first` and `again` both
/// asked the fit question of, for the same tool: the spread of their differences over
/// √2. `None` with fewer than [`NOISE_PAIRS`] such calls.
pub fn noise(first: &[Observation], again: &[Observation]) -> Option<f64> {
    let diffs: Vec<f64> = first
        .iter()
        .filter(|o| o.fit < 1.0)
        .filter_map(|o| {
            let a = again.iter().find(|a| a.id == o.id && a.tool == o.tool)?;
            (a.fit < 1.0).then_some(a.fit - o.fit)
        })
        .collect();
    if diffs.len() < NOISE_PAIRS {
        return None;
    }
    let n = diffs.len() as f64;
    let mean = diffs.iter().sum::<f64>() / n;
    let var = diffs.iter().map(|d| (d - mean).powi(2)).sum::<f64>() / (n - 1.0);
    Some((var / 2.0).sqrt())
}

/// The share of a new set's right calls the bar is drawn to keep, read as a one-sided
/// prediction bound from the tuning half's right calls ([`right_fit`]).
///
/// [`KEEP`] alone puts the bar just under the lowest of the tuning half's right calls,
/// about ten of them asked; a right call of another set reads below the lowest of ten one
/// time in eleven even drawn alike, and other sets are not drawn alike: bars set that way
/// on the everyday set declined right first calls of the whole questions. PREDICT was
/// chosen on the tuning halves of sets calibration never runs and
/// held on their validation halves.
pub const PREDICT: f64 = 0.9;

/// The fewest right calls of the tuning half asked the fit question from which
/// [`right_fit`] draws a floor. With fewer, the fit question declines nothing: where a
/// right call reads cannot be told.
pub const FLOOR_CALLS: usize = 5;

/// Where the tuning half's right calls read, and the floor under them.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct RightFit {
    /// Right calls of the tuning half asked the fit question.
    pub calls: usize,
    /// Their mean score ([`Thresholds::fit_score`]).
    pub mean: f64,
    /// Their standard deviation.
    pub sd: f64,
    /// The share of right calls like them the floor is drawn to keep ([`PREDICT`] unless
    /// `toolloop calibrate --floor` says otherwise).
    pub level: f64,
    /// The bar under which one more right call like them reads only `1 - level` of the
    /// time: `mean - t(level, calls - 1) * sd * sqrt(1 + 1/calls)`, Student's prediction
    /// bound for one new draw from a normal sample.
    pub floor: f64,
}

/// Where the tuning half's right calls of `obs` score with the weights of p(tool) and of the
/// name beside the fit,
/// and the floor a bar keeps `level` of right calls above ([`PREDICT`] by default).
/// `None` with fewer than [`FLOOR_CALLS`] right calls asked.
pub fn right_fit(
    obs: &[Observation],
    (p_weight, name_weight): (f64, f64),
    level: f64,
) -> Option<RightFit> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    // Every call the fit question could be put to, whatever its p(tool).
    let t = Thresholds {
        p_weight,
        name_weight,
        p_min: 0.0,
        p_sure: f64::INFINITY,
        ..Thresholds::default()
    };
    let scores: Vec<f64> = obs
        .iter()
        .filter(|o| o.needs_tool && o.fit < 1.0 && half(&o.id) == Half::Tuning)
        .filter(|o| t.questions(o.p_tool, o.supported, o.unsaid))
        .map(|o| t.fit_score(o.p_tool, o.p_name, o.fit))
        .collect();
    if scores.len() < FLOOR_CALLS {
        return None;
    }
    let n = scores.len() as f64;
    let mean = scores.iter().sum::<f64>() / n;
    let sd = (scores.iter().map(|s| (s - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt();
    let quantile = StudentsT::new(0.0, 1.0, n - 1.0).ok()?.inverse_cdf(level);
    Some(RightFit {
        calls: scores.len(),
        mean,
        sd,
        level,
        floor: mean - quantile * sd * (1.0 + 1.0 / n).sqrt(),
    })
}

/// The observations of `results` (one per case of `cases` that made a call).
pub fn observe(cases: &[Case], results: &[CaseResult]) -> Vec<Observation> {
    results
        .iter()
        .filter_map(|r| {
            let case = cases.iter().find(|c| c.id == r.id)?;
            let call = r.call.as_ref()?;
            let p_tool = r.p_tool?;
            let needs_tool = !case.ground_truth.is_empty();
            let right_tool = case
                .ground_truth
                .iter()
                .any(|g| g.as_object().is_some_and(|o| o.contains_key(&call.name)));
            // Only the calls the thresholds act on: the right tool for a case that needs
            // one, any tool for a case that needs none.
            let said = Evidence::of([case.question.as_str()]);
            let calls = [(call.name.clone(), call.arguments.clone())];
            let unsaid = !checks::unsaid(&case.tools, &calls, &said).is_empty();
            let own_numbers = !checks::own_numbers(&calls, &said).is_empty();
            (!needs_tool || right_tool).then(|| Observation {
                id: r.id.clone(),
                unsaid,
                needs_tool,
                tool: call.name.clone(),
                supported: own_numbers
                    || case
                        .tools
                        .iter()
                        .find(|t| t.name == call.name)
                        .is_some_and(|t| checks::words_support(&case.question, t)),
                p_tool,
                fit: r.fit.unwrap_or(1.0),
                p_name: r.p_name,
            })
        })
        .collect()
}

/// Whether `t` declines the call `o` saw.
fn declines(t: &Thresholds, o: &Observation) -> bool {
    t.declines((o.p_tool, o.p_name), o.supported, o.unsaid, Some(o.fit))
}

/// The weights of p(tool) beside the fit answer that [`choose`] tries.
pub const P_WEIGHTS: [f64; 5] = [0.0, 0.1, 0.2, 0.3, 0.5];

/// The weights of a call named without the model's choice ([`Thresholds::name_weight`])
/// that [`choose`] tries. Up to 0.04, not more: a tuning half picked 0.06 when it was
/// offered, and on the held-back sets' validation halves that declined right calls that
/// 0.04 kept, for hardly more needless calls declined. Right calls of tools whose names the model writes differently ("remind" for
/// `set_reminder`) read short too.
pub const NAME_WEIGHTS: [f64; 3] = [0.0, 0.02, 0.04];

/// What `t` does on each half of `obs`.
pub fn measure(obs: &[Observation], t: &Thresholds) -> Measured {
    let mut m = Measured::default();
    for o in obs {
        let h = match half(&o.id) {
            Half::Tuning => &mut m.tuning,
            Half::Validation => &mut m.validation,
        };
        let declined = declines(t, o);
        h.questioned += usize::from(t.questions(o.p_tool, o.supported, o.unsaid));
        if o.needs_tool {
            h.right += 1;
            h.right_kept += usize::from(!declined);
        } else {
            h.needless += 1;
            h.needless_declined += usize::from(declined);
        }
    }
    m
}

/// Thresholds between the observed values: the midpoints of neighbouring distinct
/// values, and one below and one above them all.
fn cuts(values: impl Iterator<Item = f64>) -> Vec<f64> {
    let mut v: Vec<f64> = values.filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v.dedup();
    let mut out = vec![0.0];
    out.extend(v.windows(2).map(|w| (w[0] + w[1]) / 2.0));
    out.push(1.01);
    out
}

/// The thresholds that decline the most needless calls of the tuning half while keeping
/// at least [`KEEP`] of its right calls; among equals, the one that questions most
/// calls, then the lowest (most lenient) thresholds.
///
/// Questioning more is the tie-break because a p(tool) near 1 is no evidence that a call
/// fits: asking fewer (a "sure" level just above the tuning half's needless calls, 0.999 on
/// Qwen2.5-Coder 0.5B) let validation needless calls at 0.9991 and 0.9998 through unasked.
/// A question costs a second; a needless call costs the person a wrong answer.
///
/// That holds only where questions decline something. When the best thresholds decline
/// no needless call of the tuning half, the model's answers to the fit question carried
/// nothing that separates its calls (Gemma 3 270M puts a right call below every needless
/// one), so the thresholds chosen question no call: each question would cost a request
/// and seconds for a decline the measurement never saw. This lives here, not in
/// [`Thresholds::questions`], because `calibrate` itself measures with a bar that
/// declines nothing and must still ask.
///
/// A right call counts as kept only when it would be kept read `margin` lower (by default
/// [`NOISE_Z`] times one fit answer's spread, [`noise`]); needless calls are counted as
/// read. And the bar on the fit goes no higher than the floor under the tuning half's right
/// calls ([`right_fit`], drawn at `floor`, by default [`PREDICT`]): the lowest of them says
/// where this set's right calls end, the floor where another set's are likely to. With
/// `floor` `None` the bar is held under nothing, as before the floor: it declines more
/// needless calls, and right calls of other requests that read lower.
pub fn choose(
    obs: &[Observation],
    calibrated_for: &str,
    margin: f64,
    floor: Option<f64>,
) -> Thresholds {
    let lowered: Vec<Observation> = obs
        .iter()
        .filter(|o| half(&o.id) == Half::Tuning)
        .map(|o| match o.needs_tool && o.fit < 1.0 {
            true => Observation {
                fit: o.fit - margin,
                ..o.clone()
            },
            false => o.clone(),
        })
        .collect();
    let tuning: Vec<&Observation> = lowered.iter().collect();
    let right = tuning.iter().filter(|o| o.needs_tool).count();
    let may_lose = ((1.0 - KEEP) * right as f64).floor() as usize;
    let p_cuts = cuts(tuning.iter().map(|o| o.p_tool));
    let mut best: Option<((usize, usize), Thresholds)> = None;
    for (p_weight, name_weight) in P_WEIGHTS
        .iter()
        .flat_map(|&p| NAME_WEIGHTS.iter().map(move |&n| (p, n)))
    {
        let probe = Thresholds {
            p_weight,
            name_weight,
            ..Thresholds::default()
        };
        // The bar goes no higher than the floor the right calls as read give.
        let floor = floor.map_or(f64::INFINITY, |level| {
            right_fit(obs, (p_weight, name_weight), level).map_or(0.0, |r| r.floor)
        });
        let fit_cuts: Vec<f64> = cuts(
            tuning
                .iter()
                .map(|o| probe.fit_score(o.p_tool, o.p_name, o.fit)),
        )
        .into_iter()
        .filter(|c| *c <= floor.max(0.0))
        .collect();
        for &p_min in p_cuts.iter().filter(|p| **p <= 0.5) {
            for &p_sure in &p_cuts {
                if p_sure < p_min {
                    continue;
                }
                for &fit_min in &fit_cuts {
                    let t = Thresholds {
                        p_min,
                        p_sure,
                        fit_min,
                        p_weight,
                        name_weight,
                        ..Thresholds::default()
                    };
                    let lost = tuning
                        .iter()
                        .filter(|o| o.needs_tool && declines(&t, o))
                        .count();
                    if lost > may_lose {
                        continue;
                    }
                    let declined = tuning
                        .iter()
                        .filter(|o| !o.needs_tool && declines(&t, o))
                        .count();
                    let questioned = tuning
                        .iter()
                        .filter(|o| t.questions(o.p_tool, o.supported, o.unsaid))
                        .count();
                    let score = (declined, if declined > 0 { questioned } else { 0 });
                    // Strictly better only: the first found of equals has the lowest
                    // thresholds.
                    if best.as_ref().is_none_or(|(s, _)| score > *s) {
                        best = Some((score, t));
                    }
                }
            }
        }
    }
    let mut t = best.map(|(_, t)| t).unwrap_or_default();
    t.calibrated_for = Some(calibrated_for.to_string());
    t
}

/// Now, in UTC, as RFC 3339 (`2026-11-25T10:30:00+00:00`).
pub fn now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.to_rfc3339())
        .unwrap_or_default()
}

/// The thresholds chosen and what they do on each half, as the command prints them;
/// `right`: where the right calls read and their floor, `held` whether the bar was held
/// under it.
/// What calibration changed, in words and one table, for the person who ran it: no
/// thresholds and no formulas ([`table`] has those, behind `-v`).
pub fn summary(who: &str, m: &Measured) -> String {
    let row = |name: &str, h: &HalfFigures| {
        format!(
            "| {name} | {} of {} | {} of {} |\n",
            h.needless_declined, h.needless, h.right_kept, h.right
        )
    };
    format!(
        "Calibrated for {who}: calls that need no tool are now declined by bars measured for \
         this model.\n\n| half of the set | requests that need no tool but got a call, now \
         answered without one | right calls that still run |\n|---|---|---|\n{}{}\n\
         (`-v` shows the bars and how they were chosen.)",
        row("the half the bars were chosen on", &m.tuning),
        row("the other half, kept apart to check them", &m.validation),
    )
}

/// The chosen thresholds, how they were chosen, and what they do on each half: what
/// `toolloop calibrate -v` prints.
pub fn table(
    who: &str,
    t: &Thresholds,
    m: &Measured,
    (noise, z): (Option<f64>, f64),
    (right, held): (Option<RightFit>, bool),
) -> String {
    let row = |name: &str, h: &HalfFigures| {
        format!(
            "| {name} | {}/{} | {}/{} | {}/{} |\n",
            h.right_kept,
            h.right,
            h.needless_declined,
            h.needless,
            h.questioned,
            h.right + h.needless
        )
    };
    let asked = if t.p_sure > t.p_min {
        let mut less = String::new();
        if t.p_weight != 0.0 {
            less += &format!(", less {} × (1 − p(tool))", t.p_weight);
        }
        if t.name_weight != 0.0 {
            less += &format!(
                ",\n  less {} × how far the model's share for the names on offer was below {}",
                t.name_weight,
                crate::calibration::NAME_SURE
            );
        }
        format!(
            "below {:.3} the fit question is asked, and a share of yes{less} below {:.3}\n  declines it",
            t.p_sure.min(1.0),
            t.fit_min
        )
    } else {
        "no call is put to the fit question: on the tuning half its answers declined no needless call".into()
    };
    let spread = match noise {
        Some(n) => format!(
            "\n  the fit answer of a call asked twice moved by {n:.3} (one standard deviation):\n  right calls of the tuning half were kept {:.3} above the bar ({z} times that).",
            z * n
        ),
        None if z == 0.0 => "\n  no margin for how much the fit answer moves (--margin 0).".into(),
        None => {
            "\n  too few calls were asked twice to measure how much the fit answer moves.".into()
        }
    };
    let floor = match (right, held) {
        (Some(r), true) => format!(
            "\n  the {} right calls of the tuning half asked read {:.3} on average (sd {:.3}):\n  the bar stays at or below {:.3}, which {:.0}% of right calls like them clear.",
            r.calls,
            r.mean,
            r.sd,
            r.floor,
            r.level * 100.0
        ),
        (Some(r), false) => format!(
            "\n  the {} right calls of the tuning half asked read {:.3} on average (sd {:.3}):\n  the bar is held under no floor (--floor off); {:.0}% of right calls like them clear {:.3}.",
            r.calls,
            r.mean,
            r.sd,
            r.level * 100.0,
            r.floor
        ),
        (None, true) => format!(
            "\n  fewer than {FLOOR_CALLS} right calls of the tuning half were asked the fit question,\n  too few to say where right calls read: the fit question declines nothing."
        ),
        (None, false) => String::new(),
    };
    format!(
        "Calibrated for {who}:\n  a call below p(tool) {:.3} is declined;\n  {asked}.{spread}{floor}\n\n| half | right calls kept | needless calls declined | calls questioned |\n|---|---|---|---|\n{}{}",
        t.p_min,
        row("tuning (chosen on)", &m.tuning),
        row("validation", &m.validation),
    )
}

#[cfg(test)]
mod tests;
