//! Properties of the built-in calculator over generated expressions: whatever a model (or
//! text it was steered by) writes, the calculator answers with a value or an error and
//! never panics; and a number written with a decimal comma has the value of the same
//! number written with a dot.

use proptest::prelude::*;
use toolloop::tools::calculator::evaluate_read;

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    /// Strings made of what the tokenizer treats specially: digits, both separators,
    /// operators, the percent, `of`, typeset signs, letters of other scripts.
    #[test]
    fn any_expression_gives_a_value_or_an_error(
        s in "[0-9,._ +\\-*/%^()eofa×÷−é日\u{1F600}]{0,24}"
    ) {
        let _ = evaluate_read(&s);
    }

    /// `3,5` is 3.5 wherever the comma is not a group of three thousands, with dots
    /// grouping the whole part or not, and the reading is said.
    #[test]
    fn a_decimal_comma_reads_as_a_dot(
        whole in prop_oneof!["[1-9][0-9]{0,5}", "[1-9][0-9]{0,2}(\\.[0-9]{3}){1,2}"],
        frac in "[0-9]{1,6}",
    ) {
        let grouped_thousands = whole.len() <= 3 && frac.len() == 3;
        prop_assume!(!grouped_thousands);
        let with_comma = evaluate_read(&format!("{whole},{frac} * 2")).unwrap();
        let with_dot = evaluate_read(&format!("{}.{frac} * 2", whole.replace('.', ""))).unwrap();
        prop_assert_eq!(&with_comma.value, &with_dot.value);
        prop_assert_eq!(with_comma.read.len(), 1);
    }
}
