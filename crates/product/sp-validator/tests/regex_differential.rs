//! Differential property test: the sp-validator's `pathRegex` check
//! (`validate::check_regex`, which builds only the NFA) accepts exactly
//! the patterns `regex::Regex::new` compiles. The proxy compiles route
//! regexes with the `regex` crate, so that, not Go's RE2, is the rule a
//! ServiceProfile must pass; the sp-validator documents this stricter
//! check as deliberate.

use proptest::prelude::*;
use sp_validator::validate::check_regex;

/// Pieces of regex syntax, valid and broken, so that generated patterns
/// hit both sides of every rule (groups, classes, repetitions, escapes,
/// flags, Unicode classes, size limits).
fn token() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-z/0-9]{1,3}",
        1 => Just("(".to_string()),
        1 => Just(")".to_string()),
        1 => Just("(?:".to_string()),
        1 => Just("(?P<n>".to_string()),
        1 => Just("(?<n>".to_string()),
        1 => Just("[".to_string()),
        1 => Just("]".to_string()),
        1 => Just("[^/]".to_string()),
        1 => Just("[z-a]".to_string()),
        1 => Just("[[:alpha:]]".to_string()),
        1 => Just("[[:nope:]]".to_string()),
        1 => prop_oneof![Just("*"), Just("+"), Just("?"), Just("*?"), Just("++"), Just("**")].prop_map(String::from),
        1 => (0u32..2000, proptest::option::of(0u32..2000)).prop_map(|(a, b)| match b {
            Some(b) => format!("{{{a},{b}}}"),
            None => format!("{{{a}}}"),
        }),
        1 => Just("{".to_string()),
        1 => prop_oneof![Just("^"), Just("$"), Just("\\b"), Just("\\B"), Just("\\A"), Just("\\z"), Just("\\Z")].prop_map(String::from),
        1 => prop_oneof![Just("\\d"), Just("\\w"), Just("\\s"), Just("\\pL"), Just("\\p{Greek}"), Just("\\p{Nope}"), Just("\\x41"), Just("\\x{110000}"), Just("\\u0041"), Just("\\Q"), Just("\\1"), Just("\\k<n>"), Just("\\"), Just("\\/"), Just("\\-")].prop_map(String::from),
        1 => prop_oneof![Just("(?i)"), Just("(?s)"), Just("(?x)"), Just("(?U)"), Just("(?z)"), Just("(?-i)"), Just("(?="), Just("(?!"), Just("(?<=")].prop_map(String::from),
        1 => Just(".".to_string()),
        1 => Just("|".to_string()),
        1 => any::<char>().prop_map(String::from),
    ]
}

fn pattern() -> impl Strategy<Value = String> {
    prop_oneof![
        6 => proptest::collection::vec(token(), 0..12).prop_map(|t| t.concat()),
        1 => any::<String>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    #[test]
    fn check_regex_agrees_with_regex_new(pattern in pattern()) {
        let ours = check_regex(&pattern);
        let theirs = regex::Regex::new(&pattern);
        prop_assert_eq!(ours.is_ok(), theirs.is_ok(), "{:?}: check_regex {:?}, Regex::new {:?}", pattern, ours, theirs.err());
    }
}

/// Patterns at the size limit (the compiled program, not the text): both
/// refuse the same ones.
#[test]
fn size_limits_agree() {
    for pattern in [
        "\\w{500}", // forward NFA fits, reverse does not (found by fuzzing)
        "\\w{400}",
        "\\w{1000}",
        "\\w{100}{100}",
        "(\\pL{50}){50}",
        "a{1000}{1000}",
        "[a-z]{10000}",
    ] {
        assert_eq!(
            check_regex(pattern).is_ok(),
            regex::Regex::new(pattern).is_ok(),
            "{pattern}"
        );
    }
}
