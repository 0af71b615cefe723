//! Property tests of the destination's parsers of outside input: Service
//! authorities round-trip through `parse_target`, and quantities' milli
//! values (traffic-split weights) match exact integer arithmetic.

use destination::{
    core::authority::{ServiceId, Target, parse_target},
    k8s::profiles::milli_value,
};
use proptest::prelude::*;

/// A DNS-label-like name, or any text without the separators `.` and `:`.
fn label() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?",
        1 => "[^.:\\[\\]]{1,12}",
    ]
}

fn domain() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("cluster.local".to_string()),
        proptest::collection::vec("[a-z]{1,8}", 1..4).prop_map(|l| l.join(".")),
    ]
}

fn render(target: &Target, domain: &str, explicit_port: bool) -> String {
    let mut host = String::new();
    if let Some(instance) = &target.instance {
        host.push_str(instance);
        host.push('.');
    }
    host.push_str(&format!(
        "{}.{}.svc.{domain}",
        target.service.name, target.service.namespace
    ));
    if explicit_port || target.port != 80 {
        format!("{host}:{}", target.port)
    } else {
        host
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(3000))]

    /// `[instance.]name.ns.svc.<domain>[:port]` parses to exactly its
    /// parts (port 80 when absent), whatever the cluster domain.
    #[test]
    fn service_authorities_round_trip(
        name in label(),
        namespace in label(),
        instance in proptest::option::of(label()),
        port in 1u16..,
        explicit_port in any::<bool>(),
        domain in domain(),
    ) {
        let target = Target {
            service: ServiceId { namespace, name },
            instance,
            port,
        };
        let text = render(&target, &domain, explicit_port);
        prop_assert_eq!(parse_target(&text, &domain), Ok(target), "{}", text);
    }

    /// Any path: never a panic, and an accepted one re-renders to itself.
    #[test]
    fn any_path_parses_or_is_refused(path in prop_oneof![
        "[a-z0-9.:\\[\\]+-]{0,40}",
        "[a-z]{1,5}\\.[a-z]{1,5}\\.svc\\.cluster\\.local(:[-+0-9]{0,7})?",
        any::<String>(),
    ]) {
        if let Ok(target) = parse_target(&path, "cluster.local")
            && !path.contains(['[', ']'])
        {
            let again = render(&target, "cluster.local", true);
            prop_assert_eq!(parse_target(&again, "cluster.local"), Ok(target));
        }
    }
}

const SUFFIXES: &[(&str, i32, u32)] = &[
    // (suffix, power of ten, power of two)
    ("", 0, 0),
    ("n", -9, 0),
    ("u", -6, 0),
    ("m", -3, 0),
    ("k", 3, 0),
    ("M", 6, 0),
    ("G", 9, 0),
    ("T", 12, 0),
    ("P", 15, 0),
    ("E", 18, 0),
    ("Ki", 0, 10),
    ("Mi", 0, 20),
    ("Gi", 0, 30),
    ("Ti", 0, 40),
    ("Pi", 0, 50),
    ("Ei", 0, 60),
    ("e2", 2, 0),
    ("E-4", -4, 0),
    ("e+1", 1, 0),
];

proptest! {
    #![proptest_config(ProptestConfig::with_cases(5000))]

    /// `<int>[.<frac>]<suffix>` has milli value ⌈(int.frac) × 1000 ×
    /// 10^e × 2^b⌉ (saturated at u64::MAX), computed here with integers.
    #[test]
    fn milli_values_are_exact(
        int in 0u64..1_000_000,
        frac in 0u64..1_000_000,
        digits in 0u32..7,
        suffix in 0..SUFFIXES.len(),
        plus in any::<bool>(),
    ) {
        let (name, e10, e2) = SUFFIXES[suffix];
        let frac = frac % 10u64.pow(digits);
        let text = if digits == 0 {
            format!("{}{int}{name}", if plus { "+" } else { "" })
        } else {
            format!("{}{int}.{frac:0w$}{name}", if plus { "+" } else { "" }, w = digits as usize)
        };
        // value × 1000 = mantissa × 10^(e10 + 3 - digits) × 2^e2
        let mantissa = u128::from(int) * 10u128.pow(digits) + u128::from(frac);
        let scaled = mantissa << e2;
        let exp = e10 + 3 - digits as i32;
        let want = if exp >= 0 {
            scaled.checked_mul(10u128.pow(exp as u32))
        } else {
            Some(scaled.div_ceil(10u128.pow((-exp) as u32)))
        };
        let want = want.map_or(u64::MAX, |w| u64::try_from(w).unwrap_or(u64::MAX));
        prop_assert_eq!(milli_value(&text), Some(want), "{}", text);
    }

    /// Negative non-zero quantities and anything unparsable have none.
    #[test]
    fn negative_and_malformed_quantities_have_no_value(int in 1u64..1_000_000, junk in "[a-zA-Z]{1,3}") {
        prop_assert_eq!(milli_value(&format!("-{int}")), None);
        let valid = SUFFIXES.iter().any(|(s, _, _)| *s == junk) || junk.starts_with(['e', 'E']) && junk.len() > 1 && junk[1..].bytes().all(|b| b.is_ascii_digit());
        if !valid {
            prop_assert_eq!(milli_value(&format!("{int}{junk}")), None, "{}{}", int, junk);
        }
    }
}
