//! Kubernetes quantities: the destination's `milli_value` (traffic-split
//! weights) against the sp-validator's syntax check and an exact
//! reference written independently here.

use destination::k8s::profiles::milli_value;
use sp_validator::quantity;

/// The milli-value of a quantity by exact decimal arithmetic, rounded up
/// and saturated at `u64::MAX`; `None` when `sp_validator::quantity` would
/// refuse the text or it is below zero. Written for clarity, not speed:
/// only for inputs of a few hundred bytes.
pub fn reference_milli_value(text: &str) -> Option<u64> {
    let text = text.trim();
    let parsed = quantity::parse(text).ok()?;
    if parsed.negative {
        return None;
    }
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    let number_len = unsigned
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(unsigned.len());
    let (number, suffix) = unsigned.split_at(number_len);
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    // value = digits × 10^exp10 × 2^exp2
    let digits: String = format!("{int}{frac}");
    let mut exp10: i128 = -(frac.len() as i128) + 3;
    let mut exp2: u32 = 0;
    match suffix {
        "" => {}
        "n" => exp10 -= 9,
        "u" => exp10 -= 6,
        "m" => exp10 -= 3,
        "k" => exp10 += 3,
        "M" => exp10 += 6,
        "G" => exp10 += 9,
        "T" => exp10 += 12,
        "P" => exp10 += 15,
        "E" => exp10 += 18,
        "Ki" => exp2 = 10,
        "Mi" => exp2 = 20,
        "Gi" => exp2 = 30,
        "Ti" => exp2 = 40,
        "Pi" => exp2 = 50,
        "Ei" => exp2 = 60,
        exponent => {
            let e = &exponent[1..];
            let (negative, e) = match e.strip_prefix('-') {
                Some(rest) => (true, rest),
                None => (false, e.strip_prefix('+').unwrap_or(e)),
            };
            let e = e.trim_start_matches('0');
            // Beyond 30 digits the answer is 0-or-1 or saturated anyway.
            let magnitude: i128 = if e.len() > 30 {
                10i128.pow(30)
            } else {
                e.parse().unwrap_or(0)
            };
            exp10 += if negative { -magnitude } else { magnitude };
        }
    }
    let digits = digits.trim_start_matches('0');
    if digits.is_empty() {
        return Some(0);
    }
    let len = digits.len() as i128;
    if len + exp10 > 21 {
        return Some(u64::MAX);
    }
    if len + exp10 < -25 {
        return Some(1);
    }
    // Now |exp10| is bounded by the length of the text plus 25.
    let mut scaled = digits.to_string();
    let point: i128 = len + exp10; // position of the decimal point in `scaled`
    let (int_part, frac_part) = if point <= 0 {
        (
            String::new(),
            format!("{}{scaled}", "0".repeat((-point) as usize)),
        )
    } else if point >= len {
        scaled.push_str(&"0".repeat((point - len) as usize));
        (scaled, String::new())
    } else {
        let (i, f) = scaled.split_at(point as usize);
        (i.to_string(), f.to_string())
    };
    let int_value: u128 = if int_part.is_empty() {
        0
    } else {
        int_part.parse().ok()?
    };
    // Multiply the fraction by 2^exp2 digit by digit.
    let mut frac_digits: Vec<u8> = frac_part.bytes().map(|b| b - b'0').collect();
    let mut carry_total: u128 = 0;
    for _ in 0..exp2 {
        let mut carry = 0u8;
        for d in frac_digits.iter_mut().rev() {
            let doubled = *d * 2 + carry;
            *d = doubled % 10;
            carry = doubled / 10;
        }
        carry_total = carry_total * 2 + u128::from(carry);
    }
    let rest = u128::from(frac_digits.iter().any(|&d| d != 0));
    let total = int_value
        .checked_mul(1u128 << exp2)
        .and_then(|v| v.checked_add(carry_total))
        .and_then(|v| v.checked_add(rest));
    Some(total.map_or(u64::MAX, |t| u64::try_from(t).unwrap_or(u64::MAX)))
}

/// `milli_value` gives a value exactly when the sp-validator admits the
/// quantity (and it is not negative), and that value is the exact one.
pub fn check(data: &[u8]) {
    let Some(text) = crate::text(data) else {
        return;
    };
    if text.len() > 400 {
        return;
    }
    let want = reference_milli_value(text);
    assert_eq!(milli_value(text), want, "{text:?}");
}
