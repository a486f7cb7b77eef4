//! `toolloop eval`: a BFCL-format data set run through the loop and scored, or recorded
//! reports judged again under today's checks (`--rescore`).

use std::process::ExitCode;
use std::time::Duration;

use super::flags::{ModelArgs, ToolArgs, with_flags};
use super::{config, fail, output_status, print_stdout, usage};
use crate::Deadline;
use crate::eval;
use crate::run::ending::EXIT_RUNTIME;

/// `eval --rescore`: recorded replies judged again, no model contacted.
pub(super) fn run_rescore(
    data: &std::path::Path,
    model: &ModelArgs,
    reports: &[std::path::PathBuf],
) -> ExitCode {
    let config = match config(model, &ToolArgs::default(), true).calibrated() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    let mut thresholds = config.thresholds();
    // Judged as the run was: a run of a model file toolloop ships a calibration for took
    // it, so the server, when it answers, is asked which file it runs. None answering,
    // the defaults judge, and this says so.
    if let Some(t) = thresholds.as_mut().filter(|t| t.uncalibrated()) {
        // The preflight is where a server says which file it runs (llama-server's
        // `/props`); ten seconds at most, as a run's own.
        let deadline = crate::Deadline::after(std::time::Duration::from_secs(10));
        let asked = config
            .backend()
            .map_err(|e| e.to_string())
            .and_then(|mut b| b.preflight(deadline).map(|()| b).map_err(|e| e.to_string()));
        match asked.map(|b| t.take_shipped(b.as_ref())) {
            Ok(true) => eprintln!(
                "toolloop: judged with the calibration toolloop ships for the model file the server runs"
            ),
            Ok(false) => eprintln!(
                "toolloop: judged uncalibrated: no calibration file, and the server runs no model file toolloop ships a calibration for"
            ),
            // A run of a shipped file judged without its calibration moves cases that
            // did not move: say why, so the figures are not taken for the run's.
            Err(e) => eprintln!(
                "toolloop: judged uncalibrated: no calibration file, and the server could not be asked which model file it runs ({e}); start it to judge as the run did"
            ),
        }
    }
    for report in reports {
        match eval::rescore(data, report, &config.checks, thresholds.as_ref()) {
            Ok(text) => {
                if let Err(e) = print_stdout(text.trim_end()) {
                    return output_status(Err(e), EXIT_RUNTIME);
                }
            }
            Err(e) => return fail(e),
        }
    }
    ExitCode::SUCCESS
}

pub(super) fn run_eval(
    path: &std::path::Path,
    model: &ModelArgs,
    (limit, category, half): (Option<usize>, Option<&str>, Option<eval::Half>),
    (no_constraint, native_tools): (bool, bool),
    jobs: usize,
    json: bool,
) -> ExitCode {
    // Flags of `ask` that a case's run does not take are refused, not passed over: an
    // eval that ignored `--replay` asked the live server instead.
    if model.replay.is_some() {
        return usage(
            "eval takes no --replay: `toolloop eval DATA --rescore REPORT` judges the replies \
             an eval recorded (--json) again, without a model",
        );
    }
    if model.transcript.is_some() {
        return usage(
            "eval takes no --transcript: --json gives each case's calls, replies and budget",
        );
    }
    // The data is checked before the model is contacted.
    let hint = "fetch BFCL data with scripts/bfcl-data.sh";
    let cases = match eval::load(path)
        .map_err(|e| format!("{e}; {hint}"))
        .map(|mut c| {
            c.retain(|c| half.is_none_or(|h| eval::half(&c.id) == h));
            c
        })
        .and_then(|c| {
            eval::select(c, category, limit).map_err(|e| format!("{e} in {}", path.display()))
        }) {
        Ok(c) if c.is_empty() => {
            return fail(format!("no BFCL case in {}; {hint}", path.display()));
        }
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // The calibration file is read once here, not again for every case.
    let mut config = match config(model, &ToolArgs::default(), true).calibrated() {
        Ok(c) => c,
        Err(e) => return fail(e),
    };
    // Each eval asks its tools' leanings afresh, as the runs it is compared with did: what
    // an earlier process kept would make this one's requests and time its own no more.
    config.leanings = None;
    if native_tools && config.backend != crate::config::BackendKind::OpenAi {
        return fail("--native-tools needs --backend openai (an OpenAI-compatible server)");
    }
    let run = eval::EvalSettings {
        native: native_tools.then(|| eval::NativeTarget {
            base_url: config.base_url.trim_end_matches('/').to_string(),
            model: config.model.clone(),
        }),
        constraint: if no_constraint {
            eval::Constraint::Off
        } else {
            eval::Constraint::Narrowed
        },
        config,
    };
    let started = std::time::Instant::now();
    let results = match run_cases(&run, &cases, jobs, model.verbose) {
        Ok(r) => r,
        Err(code) => return code,
    };
    let written = if json {
        print_stdout(&eval::report_json(&results).to_string())
    } else {
        print_stdout(eval::table(&eval::summarize(&results)).trim_end())
    };
    if written.is_err() {
        return output_status(written, EXIT_RUNTIME);
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "toolloop: {} cases in {:.1} min ({:.1} cases per minute, {jobs} at once)",
        results.len(),
        minutes,
        results.len() as f64 / minutes.max(1e-9)
    );
    if let Some(line) = checks_line(&results) {
        eprintln!("{line}");
    }
    if let Some(line) = unsaid_line(&results) {
        eprintln!("{line}");
    }
    let errors = results.iter().filter(|r| r.error.is_some()).count();
    if errors > 0 {
        eprintln!("toolloop: {errors} cases could not run (see --json for why)");
    }
    ExitCode::SUCCESS
}

/// What the checks did over the run, without `-v`: for each check, the cases it acted on
/// (declined, held, asked again, refused an answer), most first. Each case's own lines
/// are in `--json` (`checks`) and under `-v`.
fn checks_line(results: &[eval::CaseResult]) -> Option<String> {
    let mut cases: std::collections::BTreeMap<&str, usize> = Default::default();
    for r in results {
        let mut names: Vec<&str> = r
            .checks
            .iter()
            .filter_map(|l| l.split_once(':').map(|(name, _)| name))
            .collect();
        names.sort_unstable();
        names.dedup();
        for name in names {
            *cases.entry(name).or_default() += 1;
        }
    }
    let mut counts: Vec<(&str, usize)> = cases.into_iter().collect();
    counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
    (!counts.is_empty()).then(|| {
        let each: Vec<String> = counts
            .iter()
            .map(|(name, n)| format!("{name} {n}"))
            .collect();
        format!(
            "toolloop: checks acted on cases: {} (of {}); each case's lines in --json (\"checks\") or with -v",
            each.join(", "),
            results.len()
        )
    })
}

/// How many calls carried a value the request does not hold, by half: what a person
/// asked to approve them would be shown ([`crate::Unsaid`]); each case's in `--json`
/// (`unsaid`).
fn unsaid_line(results: &[eval::CaseResult]) -> Option<String> {
    let count = |half: eval::Half| {
        let rs = results.iter().filter(|r| eval::half(&r.id) == half);
        let (mut calls, mut carrying, mut values, mut unasked) = (0, 0, 0, 0);
        for r in rs {
            calls += r.calls.len();
            values += r.unsaid.iter().map(Vec::len).sum::<usize>();
            carrying += r.unsaid.iter().filter(|u| !u.is_empty()).count();
            unasked += r.unasked_optional;
        }
        (calls, carrying, values, unasked)
    };
    let (t, v) = (count(eval::Half::Tuning), count(eval::Half::Validation));
    (t.0 + v.0 > 0).then(|| {
        format!(
            "toolloop: of {} / {} calls (tuning / validation), {} / {} carry a value the \
             request does not hold ({} / {} values, \"unsaid\" in --json); optional values \
             the ground truth does not accept: {} / {}",
            t.0, v.0, t.1, v.1, t.2, v.2, t.3, v.3
        )
    })
}

/// Runs `cases` with `jobs` at once, a progress bar on stderr; the model server is
/// checked first.
fn run_cases(
    run: &eval::EvalSettings,
    cases: &[eval::Case],
    jobs: usize,
    verbose: bool,
) -> Result<Vec<eval::CaseResult>, ExitCode> {
    // One backend per job, made alike.
    let mut backends = Vec::with_capacity(jobs);
    for _ in 0..jobs.clamp(1, cases.len().max(1)) {
        match run.config.backend() {
            Ok(b) => backends.push(b),
            Err(e) => return Err(fail(with_flags(e))),
        }
    }
    // Each one, so that each knows what server it talks to from its first request.
    for b in &mut backends {
        if let Err(e) = b.preflight(Deadline::after(Duration::from_secs(30))) {
            return Err(fail(with_flags(e)));
        }
    }
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(cases.len() as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    // How long is left, once a case has ended and there is a pace to go by: a person
    // deciding whether to wait for a ten-minute calibration wants that, not a bare count.
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:30} {pos}/{len} {msg} {elapsed}{left}")
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
            .with_key(
                "left",
                |state: &indicatif::ProgressState, w: &mut dyn std::fmt::Write| {
                    if state.pos() > 0 && state.pos() < state.len().unwrap_or(0) {
                        let _ = write!(w, ", about {} left", indicatif::HumanDuration(state.eta()));
                    }
                },
            ),
    );
    let results = eval::run_all(backends, cases, run, |r| {
        if verbose {
            bar.suspend(|| {
                let why = r.reason.as_deref().unwrap_or("");
                eprintln!("{} {} {why}", if r.pass { "PASS" } else { "FAIL" }, r.id);
                for line in &r.checks {
                    eprintln!("    [Check] {line}");
                }
            });
        }
        bar.set_message(r.id.clone());
        bar.inc(1);
    });
    bar.finish_and_clear();
    Ok(results)
}

/// How long calibrating `cases` will take on this server, said before it starts. Two
/// requests are timed here: one like a case's turn (the system prompt with the first
/// case's tools, its question, a short reply) and one like a question aside (a line and
/// a word back), after an untimed turn that has the server load the model. A calibration
/// makes about one turn a case and one question aside a case and a tool, and a quarter
/// more to measure how much the answers move. With `jobs` at once, the turns of the first
/// `jobs` cases are sent at once and their time shared among them: the server's slots
/// share its cores, and one turn's time divided by `jobs` said "about 6 min" for a run
/// that took 8.6 (two at a time on two cores). `None` when the server does not answer;
/// the progress bar then says how long is left once a case has ended.
fn time_estimate(config: &crate::Config, cases: &[eval::Case], jobs: usize) -> Option<String> {
    let first = cases.first()?;
    let timed = |backend: &mut dyn crate::Backend, messages: &[crate::Message], num_predict| {
        let options = crate::GenOptions {
            num_predict: Some(num_predict),
            temperature: Some(0.0),
            ..Default::default()
        };
        let request = crate::backend::ChatRequest {
            messages,
            schema: None,
            options: &options,
        };
        // A probe waits no longer than a case may (`--timeout`).
        let deadline = crate::Deadline::after(config.timeout);
        let asked = std::time::Instant::now();
        let replied = backend.chat(&request, deadline, &mut crate::backend::keep_going);
        replied.ok().map(|_| asked.elapsed().as_secs_f64())
    };
    // A server that keeps prompts (llama-server's slots) answers a prompt it has seen in a
    // fraction of the time: a second `calibrate` timed its cached probe at 1.7 s a turn
    // against 4.6 and said "about 4 min" for a run of 12. Each probe begins with a line of
    // its own, so it is timed as a case's first turn is, evaluated whole.
    let nonce = format!(
        "Probe {:?}.",
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)
    );
    let turn_of = |case: &eval::Case| {
        let prompt = crate::turn::prompt::build_system_prompt(&case.tools, None);
        [
            crate::Message::system(format!("{nonce}\n{prompt}")),
            crate::Message::user(case.question.clone()),
        ]
    };
    let mut backend = config.backend().ok()?;
    // A server's first requests after it started (or after Ollama unloaded the model)
    // include loading it, and its first long prompt more besides: timed, a llama-server
    // started a moment before was read at 5.9 s a turn and said "about 13 min" for a run
    // of 8.5, and after one short request first, 9.0 s and "about 18 min" for 8.7. One
    // turn first, untimed, on a prompt of its own.
    let [system, question] = turn_of(first);
    // It differs from the timed probes at its first token: they find nothing of it kept.
    let warm = crate::Message::system(format!("Loading. {}", system.content));
    timed(backend.as_mut(), &[warm, question], 8)?;
    // The first `at_once` cases' turns, sent at once (one alone at `--jobs 1`).
    let at_once = jobs.clamp(1, cases.len());
    let started = std::time::Instant::now();
    let all = std::thread::scope(|s| {
        let sent: Vec<_> = cases[..at_once]
            .iter()
            .map(|case| {
                s.spawn(move || {
                    let mut own = config.backend().ok()?;
                    timed(own.as_mut(), &turn_of(case), 40)
                })
            })
            .collect();
        sent.into_iter().all(|t| t.join().ok().flatten().is_some())
    });
    if !all {
        return None;
    }
    let turn = started.elapsed().as_secs_f64() / at_once as f64;
    let aside = timed(
        backend.as_mut(),
        &[crate::Message::user(format!(
            "{nonce}\nRequest: {}\nIs a tool needed? Answer yes or no.",
            first.question
        ))],
        6,
    )?;
    let tools: std::collections::BTreeSet<&str> = cases
        .iter()
        .flat_map(|c| c.tools.iter().map(|t| t.name.as_str()))
        .collect();
    let (turns, asides) = (cases.len() as f64, (cases.len() + tools.len()) as f64);
    // The turns were timed at once, so their time is already shared. A question aside,
    // a few tokens, was timed alone: divided among the jobs, it is optimistic, but a
    // small part of the whole.
    let seconds = 1.25 * (turns * turn + asides * aside / at_once as f64);
    let minutes = (seconds / 60.0).ceil().max(1.0);
    Some(format!(
        "calibrating on {} cases, about {} model requests ({turn:.1} s a turn and {aside:.1} s \
         a question aside here): about {minutes} min at {jobs} at a time. Ctrl-C stops it; \
         nothing is saved until it ends",
        cases.len(),
        (1.25 * (turns + asides)).round()
    ))
}

/// `calibrate`: the decision's thresholds measured for the model and server the flags
/// name, written to the calibration file unless `no_save`; with `dry_run`, only what would
/// be done.
pub(super) fn run_calibrate(
    data: Option<&std::path::Path>,
    model: &ModelArgs,
    (jobs, margin, floor): (usize, f64, Option<f64>),
    (json, dry_run, no_save): (bool, bool, bool),
) -> ExitCode {
    let cases = match data {
        Some(path) => match eval::load(path) {
            Ok(c) if !c.is_empty() => c,
            Ok(_) => return fail(format!("no BFCL case in {}", path.display())),
            Err(e) => return fail(e.to_string()),
        },
        None => eval::everyday(),
    };
    let mut config = config(model, &ToolArgs::default(), true);
    // The model is measured afresh: no leaning another process kept is read, and those
    // kept for it are forgotten once the thresholds are saved.
    let leanings = config.leanings.take();
    if config.decide != crate::turn::schema::Decide::Probability {
        return fail("calibrate measures the decision by probability: leave out --decide");
    }
    let Some(file_path) = config.calibration.clone() else {
        return fail("no calibration file: give --calibration FILE");
    };
    if dry_run {
        let tools: std::collections::BTreeSet<&str> = cases
            .iter()
            .flat_map(|c| c.tools.iter().map(|t| t.name.as_str()))
            .collect();
        let plan = format!(
            "toolloop calibrate would measure {} at {} on {} cases ({}), about two model \
             requests each and one for each of its {} tools, a quarter more to measure how \
             much the answers move, {} at a time; it would save the thresholds in {}. \
             Nothing was sent.",
            config.model,
            config.server(),
            cases.len(),
            data.map_or("the everyday set, built in".into(), |p| p
                .display()
                .to_string()),
            tools.len(),
            jobs,
            file_path.display(),
        );
        return output_status(print_stdout(&plan), 0);
    }
    let mut file = match crate::CalibrationFile::read(&file_path) {
        Ok(f) => f,
        Err(e) => return fail(e),
    };
    // Nothing declined, every call questioned: what is measured is the model's own.
    config.thresholds = Some(crate::Thresholds {
        p_min: 0.0,
        p_sure: 1.01,
        fit_min: 0.0,
        p_weight: 0.0,
        name_weight: 0.0,
        ..crate::Thresholds::default()
    });
    let _ = config.checks.set("tool-probability", true);
    let _ = config.checks.set("tool-fit", true);
    let run = eval::EvalSettings {
        native: None,
        constraint: eval::Constraint::Narrowed,
        config: config.clone(),
    };
    if let Some(line) = time_estimate(&config, &cases, jobs) {
        eprintln!("toolloop: {line}");
    }
    let started = std::time::Instant::now();
    let results = match run_cases(&run, &cases, jobs, model.verbose) {
        Ok(r) => r,
        Err(code) => return code,
    };
    // A run that could not measure must not leave thresholds behind that look measured.
    let failed: Vec<&eval::CaseResult> = results.iter().filter(|r| r.error.is_some()).collect();
    if failed.len() * 10 > results.len() {
        let why = failed[0].error.as_deref().unwrap_or_default();
        return fail(format!(
            "{} of {} cases could not run (the first: {why}); nothing was saved. Check the \
             server, or give a longer --timeout",
            failed.len(),
            results.len()
        ));
    }
    let obs = eval::calibrate::observe(&cases, &results);
    let tuning_right = obs
        .iter()
        .filter(|o| o.needs_tool && eval::half(&o.id) == eval::Half::Tuning)
        .count();
    if tuning_right == 0 {
        return fail(
            "no right call with its probability was seen on the tuning half, so nothing can \
             be calibrated and nothing was saved: the server must report log-probabilities \
             (llama-server, Ollama 0.12.11 or later), and the data must have cases that need \
             a tool",
        );
    }
    let who = format!("{} at {}", config.model, config.server());
    // The tuning half's questioned calls once more, each tool's leaning asked afresh as a
    // run of its own asks it: how far one fit answer moves is part of where the bar goes.
    let asked: Vec<eval::Case> = cases
        .iter()
        .filter(|c| {
            obs.iter()
                .any(|o| o.id == c.id && o.fit < 1.0 && eval::half(&o.id) == eval::Half::Tuning)
        })
        .cloned()
        .collect();
    let noise = if asked.len() < eval::calibrate::NOISE_PAIRS || margin == 0.0 {
        None
    } else {
        eprintln!(
            "toolloop: asking the fit question of the tuning half's {} questioned calls again, to measure how much its answer moves",
            asked.len()
        );
        crate::checks::Leanings::forget_all();
        match run_cases(&run, &asked, jobs, model.verbose) {
            Ok(r) => eval::calibrate::noise(&obs, &eval::calibrate::observe(&asked, &r)),
            Err(code) => return code,
        }
    };
    let thresholds =
        eval::calibrate::choose(&obs, &config.model, margin * noise.unwrap_or(0.0), floor);
    let measured = eval::calibrate::measure(&obs, &thresholds);
    let level = floor.unwrap_or(eval::calibrate::PREDICT);
    let right =
        eval::calibrate::right_fit(&obs, (thresholds.p_weight, thresholds.name_weight), level);
    let entry = crate::Calibration {
        model: config.model.clone(),
        server: config.server(),
        thresholds: thresholds.clone(),
        data: data.map_or("the everyday set (built in)".into(), |p| {
            p.display().to_string()
        }),
        when: eval::calibrate::now(),
        measured: {
            let mut m = serde_json::to_value(measured).unwrap_or_default();
            m["fit_noise"] = serde_json::json!(noise);
            m["right_fit"] = serde_json::json!(right);
            m["floor_held"] = serde_json::json!(floor.is_some());
            m
        },
    };
    let written = if json {
        let mut v = serde_json::to_value(&entry).unwrap_or_default();
        v["observations"] = serde_json::to_value(&obs).unwrap_or_default();
        print_stdout(&serde_json::to_string_pretty(&v).unwrap_or_default())
    } else if model.verbose {
        print_stdout(&eval::calibrate::table(
            &who,
            &thresholds,
            &measured,
            (noise, margin),
            (right, floor.is_some()),
        ))
    } else {
        print_stdout(&eval::calibrate::summary(&who, &measured))
    };
    if written.is_err() {
        return output_status(written, EXIT_RUNTIME);
    }
    eprintln!(
        "toolloop: {} cases in {:.1} min",
        results.len(),
        started.elapsed().as_secs_f64() / 60.0
    );
    if !no_save {
        if let Err(e) = file.save(&file_path, entry) {
            return fail(e);
        }
        if let Some(path) = &leanings {
            crate::checks::Leanings::forget_kept(path, (config.model.clone(), config.server()));
        }
        eprintln!(
            "toolloop: saved for {who} in {}; ask, chat, eval and web use it from now on",
            file_path.display()
        );
    }
    ExitCode::SUCCESS
}
