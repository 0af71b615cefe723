//! Go's `time.Duration.String()`, written from its documented output
//! (`1h2m3.5s`, `1.5µs`, `0s`), to check that every duration the parser
//! accepts survives being printed the Go way and parsed again.

/// `d` nanoseconds as Go prints them.
pub fn go_duration_string(d: i64) -> String {
    if d == 0 {
        return "0s".into();
    }
    let sign = if d < 0 { "-" } else { "" };
    let u = d.unsigned_abs();
    if u < 1_000_000_000 {
        let (unit, decimals) = if u < 1_000 {
            ("ns", 0)
        } else if u < 1_000_000 {
            ("\u{b5}s", 3)
        } else {
            ("ms", 6)
        };
        return format!("{sign}{}{unit}", decimal(u, decimals));
    }
    let secs = u / 1_000_000_000;
    let nanos = u % 1_000_000_000;
    let (h, m, s) = (secs / 3600, secs / 60 % 60, secs % 60);
    let mut out = sign.to_string();
    if h > 0 {
        out.push_str(&format!("{h}h"));
    }
    if h > 0 || m > 0 {
        out.push_str(&format!("{m}m"));
    }
    out.push_str(&decimal(s * 1_000_000_000 + nanos, 9));
    out.push('s');
    out
}

/// `v / 10^decimals` with the fraction's trailing zeros dropped.
fn decimal(v: u64, decimals: u32) -> String {
    let scale = 10u64.pow(decimals);
    let (int, frac) = (v / scale, v % scale);
    if frac == 0 {
        return int.to_string();
    }
    let frac = format!("{frac:0width$}", width = decimals as usize);
    format!("{int}.{}", frac.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::go_duration_string as s;

    #[test]
    fn prints_like_go() {
        assert_eq!(s(0), "0s");
        assert_eq!(s(1), "1ns");
        assert_eq!(s(1_500), "1.5\u{b5}s");
        assert_eq!(s(1_000_000), "1ms");
        assert_eq!(s(1_500_000_000), "1.5s");
        assert_eq!(s(3_600_000_000_000), "1h0m0s");
        assert_eq!(s(3_723_004_005_006), "1h2m3.004005006s");
        assert_eq!(s(-90_000_000_000), "-1m30s");
        assert_eq!(s(i64::MIN), "-2562047h47m16.854775808s");
    }
}
