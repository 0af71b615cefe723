//! Syntax check of Kubernetes quantities (`1`, `500m`, `1.5Gi`, `1e3`), with
//! the error messages of Go's `resource.ParseQuantity`.

/// Why a quantity does not parse; `Display` is the Go message.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

/// A syntactically valid quantity.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Parsed {
    /// Whether the number is below zero (`-0` is not).
    pub negative: bool,
}

/// Checks the syntax of `text` (already trimmed).
pub fn parse(text: &str) -> Result<Parsed, QuantityError> {
    let bytes = text.as_bytes();
    if bytes.is_empty() {
        return Err(QuantityError::Format);
    }
    let mut i = 0;
    let mut sign_negative = false;
    if let Some(&sign @ (b'+' | b'-')) = bytes.first() {
        sign_negative = sign == b'-';
        i = 1;
    }
    // The number: digits with at most one dot, at least one digit.
    let start = i;
    let mut dots = 0;
    let mut nonzero = false;
    while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'.') {
        if bytes[i] == b'.' {
            dots += 1;
        } else if bytes[i] != b'0' {
            nonzero = true;
        }
        i += 1;
    }
    let number = &bytes[start..i];
    if number.is_empty() || dots > 1 || number.iter().all(|&b| b == b'.') {
        return Err(QuantityError::Format);
    }
    // The suffix: letters from a fixed set, then an optional signed integer.
    let suffix = &text[i..];
    let letters = suffix
        .bytes()
        .take_while(|b| b"eEinumkKMGTP".contains(b))
        .count();
    let rest = &suffix.as_bytes()[letters..];
    let rest = rest
        .strip_prefix(b"-")
        .or_else(|| rest.strip_prefix(b"+"))
        .unwrap_or(rest);
    if !rest.iter().all(u8::is_ascii_digit) {
        return Err(QuantityError::Format);
    }
    let valid_suffix = matches!(
        suffix,
        "" | "Ki"
            | "Mi"
            | "Gi"
            | "Ti"
            | "Pi"
            | "Ei"
            | "n"
            | "u"
            | "m"
            | "k"
            | "M"
            | "G"
            | "T"
            | "P"
            | "E"
    ) || is_exponent(suffix);
    if !valid_suffix {
        return Err(QuantityError::Suffix);
    }
    Ok(Parsed {
        negative: sign_negative && nonzero,
    })
}

/// `e3`, `E-2`, `e+10`.
fn is_exponent(suffix: &str) -> bool {
    let Some(rest) = suffix.strip_prefix(['e', 'E']) else {
        return false;
    };
    let digits = rest.strip_prefix(['+', '-']).unwrap_or(rest);
    !digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_kubernetes_quantities() {
        for ok in [
            "0", "1", "+1", "1.", ".5", "1.5", "500m", "1k", "2Ki", "1Gi", "3e3", "1E-2", "7e+1",
            "0.0", "12n", "3u",
        ] {
            assert_eq!(parse(ok), Ok(Parsed { negative: false }), "{ok}");
        }
        for negative in ["-1", "-0.5", "-500m", "-1e3"] {
            assert_eq!(parse(negative), Ok(Parsed { negative: true }), "{negative}");
        }
        assert_eq!(parse("-0"), Ok(Parsed { negative: false }));
    }

    #[test]
    fn rejects_malformed_quantities() {
        for bad in [
            "", "one", "-", ".", "1.2.3", "1Q", "1 k", "true", "{}", "k1", "1m1x",
        ] {
            assert_eq!(parse(bad), Err(QuantityError::Format), "{bad}");
        }
        for bad in ["1Ki1", "1KK", "1e", "1mi", "1ki", "1i"] {
            assert_eq!(parse(bad), Err(QuantityError::Suffix), "{bad}");
        }
    }
}
