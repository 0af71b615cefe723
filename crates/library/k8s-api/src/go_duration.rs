//! A clone of Go's `time.ParseDuration`, so that timeouts and TTLs are
//! accepted and rejected exactly as the Go control plane and its error
//! messages did: an optional sign, then one or more `<number><unit>` terms
//! (`1h2m3.5s`), units `ns`, `us`/`µs`/`μs`, `ms`, `s`, `m`, `h`; the bare
//! string `0` needs no unit.

use std::fmt::Write as _;

/// Why a duration string was rejected; `Display` is Go's message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    #[error("time: invalid duration {}", go_time_quote(.0))]
    Invalid(String),
    #[error("time: missing unit in duration {}", go_time_quote(.0))]
    MissingUnit(String),
    #[error("time: unknown unit {} in duration {}", go_time_quote(.unit), go_time_quote(.input))]
    UnknownUnit { unit: String, input: String },
}

const LIMIT: u64 = 1 << 63;

fn unit_nanos(unit: &str) -> Option<u64> {
    Some(match unit {
        "ns" => 1,
        "us" | "\u{b5}s" | "\u{3bc}s" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return None,
    })
}

/// Parses a Go duration into signed nanoseconds.
pub fn parse_go_duration(input: &str) -> Result<i64, DurationError> {
    let invalid = || DurationError::Invalid(input.to_string());
    let mut s = input.as_bytes();
    let mut negative = false;
    if let Some(&sign @ (b'-' | b'+')) = s.first() {
        negative = sign == b'-';
        s = &s[1..];
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // The integer part.
        let int_len = s.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut value: u64 = 0;
        for &c in &s[..int_len] {
            if value > LIMIT / 10 {
                return Err(invalid());
            }
            value = value * 10 + u64::from(c - b'0');
            if value > LIMIT {
                return Err(invalid());
            }
        }
        let had_int = int_len > 0;
        s = &s[int_len..];

        // The fraction: digits beyond what fits are ignored.
        let mut fraction: u64 = 0;
        let mut scale: f64 = 1.0;
        let mut had_fraction = false;
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let frac_len = s.iter().take_while(|c| c.is_ascii_digit()).count();
            let mut overflow = false;
            for &c in &s[..frac_len] {
                if overflow {
                    continue;
                }
                if fraction > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let next = fraction * 10 + u64::from(c - b'0');
                if next > LIMIT {
                    overflow = true;
                    continue;
                }
                fraction = next;
                scale *= 10.0;
            }
            had_fraction = frac_len > 0;
            s = &s[frac_len..];
        }
        if !had_int && !had_fraction {
            return Err(invalid());
        }

        // The unit: everything up to the next number.
        let unit_len = s
            .iter()
            .take_while(|&&c| c != b'.' && !c.is_ascii_digit())
            .count();
        if unit_len == 0 {
            return Err(DurationError::MissingUnit(input.to_string()));
        }
        let unit_bytes = &s[..unit_len];
        s = &s[unit_len..];
        let unit_str = String::from_utf8_lossy(unit_bytes);
        let Some(unit) = unit_nanos(&unit_str) else {
            return Err(DurationError::UnknownUnit {
                unit: unit_str.into_owned(),
                input: input.to_string(),
            });
        };
        if value > LIMIT / unit {
            return Err(invalid());
        }
        value *= unit;
        if fraction > 0 {
            // Same float arithmetic as Go, for the same rounding.
            #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
            let extra = (fraction as f64 * (unit as f64 / scale)) as u64;
            value = value.saturating_add(extra);
            if value > LIMIT {
                return Err(invalid());
            }
        }
        total = total.saturating_add(value);
        if total > LIMIT {
            return Err(invalid());
        }
    }
    if negative {
        // total <= 2^63, so the negation fits.
        return Ok((total as i128).wrapping_neg() as i64);
    }
    i64::try_from(total).map_err(|_| invalid())
}

/// Quotes like Go's `time` package: `"` and `\` are escaped, and bytes of
/// control or non-ASCII characters are written as `\xNN`.
pub fn go_time_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c.is_ascii() && !c.is_ascii_control() {
            if c == '"' || c == '\\' {
                out.push('\\');
            }
            out.push(c);
        } else {
            let mut buf = [0u8; 4];
            for b in c.encode_utf8(&mut buf).bytes() {
                let _ = write!(out, "\\x{b:02x}");
            }
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    #[test]
    fn accepts_go_syntax() {
        let cases: &[(&str, i64)] = &[
            ("0", 0),
            ("-0", 0),
            ("+0", 0),
            ("5s", 5 * S),
            ("30s", 30 * S),
            ("1478s", 1478 * S),
            ("-5s", -5 * S),
            ("+5s", 5 * S),
            ("-0s", 0),
            ("5.0s", 5 * S),
            ("5.6s", 5 * S + 600_000_000),
            ("5.s", 5 * S),
            (".5s", S / 2),
            ("1.004s", S + 4_000_000),
            ("1.0040s", S + 4_000_000),
            ("100.00100s", 100 * S + 1_000_000),
            ("10ns", 10),
            ("11us", 11_000),
            ("12\u{b5}s", 12_000),
            ("12\u{3bc}s", 12_000),
            ("13ms", 13_000_000),
            ("14s", 14 * S),
            ("15m", 15 * 60 * S),
            ("16h", 16 * 3600 * S),
            ("3h30m", (3 * 3600 + 30 * 60) * S),
            ("10.5s4m", 4 * 60 * S + 10 * S + S / 2),
            ("-2m3.4s", -(2 * 60 * S + 3 * S + 400_000_000)),
            ("1h2m3s4ms5us6ns", 3_723_004_005_006),
            ("39h9m14.425s", 140_954_425_000_000),
            ("52763797000ns", 52_763_797_000),
            ("0.3333333333333333333h", 20 * 60 * S),
            ("9007199254740993ns", 9_007_199_254_740_993),
            ("9223372036854775807ns", i64::MAX),
            ("9223372036854775.807us", i64::MAX),
            ("-9223372036854775808ns", i64::MIN),
            ("0.100000000000000000000h", 6 * 60 * S),
            ("0.830103483285477580700h", 2_988_372_539_827),
        ];
        for (input, want) in cases {
            assert_eq!(parse_go_duration(input), Ok(*want), "{input}");
        }
    }

    #[test]
    fn rejects_with_go_messages() {
        let cases: &[(&str, &str)] = &[
            ("", r#"time: invalid duration """#),
            ("3", r#"time: missing unit in duration "3""#),
            ("-", r#"time: invalid duration "-""#),
            ("s", r#"time: invalid duration "s""#),
            (".", r#"time: invalid duration ".""#),
            ("-.", r#"time: invalid duration "-.""#),
            (".s", r#"time: invalid duration ".s""#),
            ("+.s", r#"time: invalid duration "+.s""#),
            ("x", r#"time: invalid duration "x""#),
            ("1d", r#"time: unknown unit "d" in duration "1d""#),
            ("1.5sec", r#"time: unknown unit "sec" in duration "1.5sec""#),
            ("10 s", r#"time: unknown unit " s" in duration "10 s""#),
            ("1s 2s", r#"time: unknown unit "s " in duration "1s 2s""#),
            ("\"1s\"", r#"time: invalid duration "\"1s\"""#),
            (
                "1\u{e9}",
                r#"time: unknown unit "\xc3\xa9" in duration "1\xc3\xa9""#,
            ),
            (
                "9223372036854775808ns",
                r#"time: invalid duration "9223372036854775808ns""#,
            ),
            (
                "9223372036854775.808us",
                r#"time: invalid duration "9223372036854775.808us""#,
            ),
            ("3000000h", r#"time: invalid duration "3000000h""#),
            (
                "-9223372036854775809ns",
                r#"time: invalid duration "-9223372036854775809ns""#,
            ),
        ];
        for (input, want) in cases {
            let error = parse_go_duration(input).expect_err(input);
            assert_eq!(error.to_string(), *want, "{input}");
        }
    }
}
