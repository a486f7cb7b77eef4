//! Unit tests of the checks that rewrite values, one or more per check, run in their
//! order as a turn runs them.

use serde_json::{Map, Value, json};

use super::date_layout::{DateLayout, Layout};
use super::percent_fraction::PercentFraction;
use super::repeated_value::RepeatedValue;
use super::size_word_zeros::SizeWordZeros;
use super::*;

/// The rewriting checks on `arguments` of a tool with `schema`, in their order.
fn conform(arguments: &mut Map<String, Value>, schema: &Value, said: &Evidence) -> Vec<Finding> {
    let spec = ToolSpec::new("t", "", schema.clone());
    let reply = ChatReply::default();
    let ctx = TurnContext {
        question: "",
        said,
        specs: std::slice::from_ref(&spec),
        reply: &reply,
        thresholds: None,
        fit: None,
        fit_tool: None,
        person: &[],
        earlier: &[],
        unsaid: &[],
        own_numbers: &[],
        again: false,
        added_from: None,
        left: &[],
    };
    let mut call = CallUnderCheck {
        spec: &spec,
        arguments,
        rewritten: BTreeSet::new(),
        index: 0,
    };
    let mut findings = Vec::new();
    let rewriting: [&dyn Check; 4] = [
        &DateLayout,
        &PercentFraction,
        &SizeWordZeros,
        &RepeatedValue,
    ];
    for c in rewriting {
        c.judge_call(&ctx, &mut call, &mut findings);
    }
    findings
}

fn conformed(description: &str, value: &str) -> String {
    let schema = json!({"properties": {"d": {"type": "string", "description": description}}});
    let mut args = json!({"d": value}).as_object().unwrap().clone();
    conform(&mut args, &schema, &Evidence::default());
    args["d"].as_str().unwrap().to_string()
}

fn rate(param: Value, question: &str, value: Value) -> Value {
    let schema = json!({"properties": {"rate": param}});
    let mut args = json!({"rate": value}).as_object().unwrap().clone();
    conform(&mut args, &schema, &Evidence::of([question]));
    args["rate"].clone()
}

#[test]
fn a_percentage_goes_to_a_float_parameter_as_a_fraction() {
    let float = json!({"type": "number", "description": "The annual rate of return."});
    let q = "an annual rate of return of 8%, $20000 invested for 5 years";
    assert_eq!(rate(float.clone(), q, json!(8)), json!(0.08));
    assert_eq!(rate(float.clone(), q, json!(0.08)), json!(0.08));
    // Not said as a percentage, or said plainly too: as the model wrote it.
    assert_eq!(
        rate(float.clone(), "a rate of 8 points", json!(8)),
        json!(8)
    );
    assert_eq!(rate(float.clone(), "8% for 8 years", json!(8)), json!(8));
    let decimal = json!({"type": "number", "description": "Enter as a decimal. E.g, 5% is 0.05, not a percentage"});
    assert_eq!(rate(decimal, "at 3%", json!(3)), json!(0.03));
}

#[test]
fn a_parameter_that_takes_a_percentage_or_an_integer_keeps_it() {
    let q = "a depreciation rate of 5 percent";
    let pct =
        json!({"type": "number", "description": "The annual depreciation rate in percentage."});
    assert_eq!(rate(pct, q, json!(5)), json!(5));
    let named = json!({"type": "number"});
    let schema = json!({"properties": {"increase_percent": named}});
    let mut args = json!({"increase_percent": 5}).as_object().unwrap().clone();
    assert!(conform(&mut args, &schema, &Evidence::of([q])).is_empty());
    let int = json!({"type": "integer", "description": "The rate."});
    assert_eq!(rate(int, q, json!(5)), json!(5));
}

#[test]
fn a_year_first_date_takes_the_documented_layout() {
    let mdy = "Start of the date range in the format of MM-DD-YYY.";
    assert_eq!(conformed(mdy, "2021-01-01"), "01-01-2021");
    assert_eq!(conformed("Format - DD-MM-YYYY.", "2022/8/16"), "16-08-2022");
    assert_eq!(
        conformed("in the format mm/dd/yyyy.'", "2023-06-01"),
        "06/01/2023"
    );
    assert_eq!(
        conformed("Date of the concert in 'mm-yyyy' format.", "2023-05"),
        "05-2023"
    );
    assert_eq!(conformed("Format: 'YYYY-MM'", "2023-05-01"), "2023-05");
    assert_eq!(
        conformed("The date (month-day-year) you want.", "2022/08/16"),
        "08-16-2022"
    );
}

#[test]
fn a_date_with_the_months_name_takes_the_documented_layout() {
    let mdy = "Must be in MM-DD-YYYY format.";
    assert_eq!(conformed(mdy, "January 1, 2021"), "01-01-2021");
    assert_eq!(conformed(mdy, "17 March 1915"), "03-17-1915");
    assert_eq!(
        conformed("Format: yyyy-mm-dd.", "Mar 17, 1915"),
        "1915-03-17"
    );
}

#[test]
fn a_month_and_year_are_not_read_as_a_day_and_a_short_year() {
    // BFCL simple_python_286: "April 2022" went to the tool as "04-0022".
    let my = "Date of the concert in 'mm-yyyy' format.";
    assert_eq!(conformed(my, "April 2022"), "04-2022");
    assert_eq!(conformed(my, "Apr 2022"), "04-2022");
    // A layout with a day gets no day the model did not write.
    let mdy = "Must be in MM-DD-YYYY format.";
    assert_eq!(conformed(mdy, "April 2022"), "April 2022");
    assert_eq!(conformed(mdy, "2023-06"), "2023-06");
    assert_eq!(conformed(mdy, "April 20 22"), "April 20 22");
}

#[test]
fn a_number_said_in_words_gets_back_its_zeros() {
    let schema = json!({"properties": {"payout": {"type": "integer"}, "shares": {"type": "integer"},
        "area": {"type": "integer"}, "height": {"type": "number"}}});
    let said = Evidence::of([
        "100 million shares, a payout of 50 million USD, 8.5 million square kilometers",
    ]);
    let mut args = json!({"payout": 500000000, "shares": 100000000, "area": 850000000})
        .as_object()
        .unwrap()
        .clone();
    let changes = conform(&mut args, &schema, &said);
    assert_eq!(args["payout"], 50000000);
    assert_eq!(args["area"], 8500000);
    assert_eq!(args["shares"], 100000000);
    assert_eq!(changes.len(), 2);
    // "100 m" is metres; an unrelated number and one said plainly stay as written.
    let said = Evidence::of(["dropped from 100 m, $1.2M raised, 4 of them"]);
    let mut args = json!({"height": 1000, "payout": 12000000, "shares": 40})
        .as_object()
        .unwrap()
        .clone();
    let changes = conform(&mut args, &schema, &said);
    assert_eq!(args["height"], 1000);
    assert_eq!(args["payout"], 1200000);
    assert_eq!(args["shares"], 40);
    assert_eq!(changes.len(), 1);
    // "bn" is a size word; "percent" is not one (that is the percentage rule's).
    let said = Evidence::of(["a 5 bn payout at 8 percent"]);
    let mut args = json!({"payout": 50000000000i64, "shares": 800})
        .as_object()
        .unwrap()
        .clone();
    conform(&mut args, &schema, &said);
    assert_eq!(args["payout"], 5000000000i64);
    assert_eq!(args["shares"], 800);
}

fn stripped(args: Value) -> Map<String, Value> {
    let mut args = args.as_object().unwrap().clone();
    conform(&mut args, &json!({"properties": {}}), &Evidence::default());
    args
}

#[test]
fn a_name_loses_the_words_that_are_another_arguments_value() {
    let a = stripped(json!({"team": "Barcelona", "league": "2021 La Liga", "season": "2021"}));
    assert_eq!(a["league"], "La Liga");
    let a =
        stripped(json!({"act_name": "Criminal Law Amendment Act of 2013", "amendment_year": 2013}));
    assert_eq!(a["act_name"], "Criminal Law Amendment Act");
    let a = stripped(json!({"product": "organic bananas", "organic": true}));
    assert_eq!(a["product"], "bananas");
    let a = stripped(json!({"dish": "Gluten-Free Cookie", "diet": ["Gluten Free"]}));
    assert_eq!(a["dish"], "Cookie");
    let a = stripped(json!({"key": "C sharp major", "scale_type": "major"}));
    assert_eq!(a["key"], "C sharp");
}

#[test]
fn formulas_short_values_and_whole_names_are_not_cut() {
    for args in [
        json!({"function": "x**3", "end_x": 3}),
        json!({"function": "3x^2 + 2x - 1", "x_value": 1}),
        json!({"team_name": "Manchester United", "location": "Manchester United"}),
        json!({"key": "C major", "tonic": "C"}),
        json!({"location": "Golden Gate Park in San Francisco", "near": false}),
        json!({"name": "Plaza Hotel", "rate": 2.5}),
        json!({"venue": "Café de Flore", "near": "Caf"}),
        json!({"title": "2021 of", "season": "2021"}),
    ] {
        assert_eq!(stripped(args.clone()), *args.as_object().unwrap(), "{args}");
    }
    let schema = json!({"properties": {"league": {"type": "string", "enum": ["2021 La Liga"]}}});
    let mut args = json!({"league": "2021 La Liga", "season": "2021"})
        .as_object()
        .unwrap()
        .clone();
    assert!(conform(&mut args, &schema, &Evidence::default()).is_empty());
}

#[test]
fn what_could_be_read_two_ways_or_is_no_date_is_left_alone() {
    let dmy = "Format - DD-MM-YYYY.";
    // Already in the layout's shape: kept, even if the model swapped day and month.
    assert_eq!(conformed(dmy, "06-01-2023"), "06-01-2023");
    assert_eq!(conformed(dmy, "06/01/2023"), "06/01/2023");
    assert_eq!(conformed(dmy, "tomorrow"), "tomorrow");
    assert_eq!(conformed(dmy, "2023-13-01"), "2023-13-01");
    assert_eq!(conformed(dmy, "2023-06/01"), "2023-06/01");
    assert_eq!(conformed("The date.", "2023-06-01"), "2023-06-01");
    assert_eq!(
        conformed("yyyy-mm-dd or mm/dd/yyyy", "2023-06-01"),
        "2023-06-01"
    );
}

#[test]
fn a_schema_that_constrains_the_value_itself_is_left_to_do_so() {
    let schema = json!({"properties": {"d": {"type": "string", "pattern": "^\\d{4}$",
        "description": "Format: MM-DD-YYYY"}}});
    let mut args = json!({"d": "2023-06-01"}).as_object().unwrap().clone();
    assert!(conform(&mut args, &schema, &Evidence::default()).is_empty());
    assert_eq!(args["d"], "2023-06-01");
}

#[test]
fn layouts_that_are_not_dates_are_not_layouts() {
    for d in [
        "'YYYY-YYYY'",
        "yyyy/yyyy",
        "'HH:MM:SS'",
        "dd-dd-yyyy",
        "mm-dd",
    ] {
        assert_eq!(Layout::named_in(d), None, "{d}");
    }
}

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
