//! Kubernetes resource quantities, parsed exactly (to nano-units) for comparison and sums.

/// A quantity in nano-units (`1` = 10⁻⁹ of the base unit), rounded up like Kubernetes.
pub type Nanos = i128;

/// Parse `"100m"`, `"1.5"`, `"2Gi"`, `"1e3"`, ... into nano-units. `None` if malformed.
pub fn parse_quantity(s: &str) -> Option<Nanos> {
    let s = s.trim();
    let (neg, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let num_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (num, suffix) = body.split_at(num_end);
    if num.is_empty() || num == "." {
        return None;
    }
    let (int_part, frac_part) = num.split_once('.').unwrap_or((num, ""));
    if frac_part.contains('.') {
        return None;
    }
    let digits = format!("{int_part}{frac_part}");
    let mantissa: i128 = digits.parse().ok()?;
    let mut exp10: i32 = -(frac_part.len() as i32);
    let mut mul2: u32 = 0;
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
        "Ki" => mul2 = 10,
        "Mi" => mul2 = 20,
        "Gi" => mul2 = 30,
        "Ti" => mul2 = 40,
        "Pi" => mul2 = 50,
        "Ei" => mul2 = 60,
        other => {
            let e = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))?;
            let e: i32 = e.parse().ok()?;
            exp10 = exp10.checked_add(e)?;
        }
    }
    let mut v = mantissa.checked_mul(1i128.checked_shl(mul2)?)?;
    let scale = exp10 + 9;
    if scale >= 0 {
        v = v.checked_mul(10i128.checked_pow(u32::try_from(scale).ok()?)?)?;
    } else {
        let d = 10i128.checked_pow(u32::try_from(-scale).ok()?)?;
        v = (v + d - 1) / d;
    }
    Some(if neg { -v } else { v })
}

/// Whether two quantity strings denote the same amount (`"1"` == `"1000m"`).
pub fn quantities_equal(a: &str, b: &str) -> bool {
    match (parse_quantity(a), parse_quantity(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_table() {
        let g = 1_000_000_000i128;
        for (s, want) in [
            ("1", g),
            ("1000m", g),
            ("0.5", g / 2),
            ("500m", g / 2),
            ("1Ki", 1024 * g),
            ("2Gi", 2 * (1 << 30) * g),
            ("1k", 1000 * g),
            ("1e3", 1000 * g),
            ("1E-3", g / 1000),
            ("1n", 1),
            ("-1", -g),
        ] {
            assert_eq!(parse_quantity(s), Some(want), "{s}");
        }
        for bad in ["", "abc", "1x", "1.2.3", "."] {
            assert_eq!(parse_quantity(bad), None, "{bad}");
        }
        assert!(quantities_equal("0.1", "100m"));
        assert!(!quantities_equal("1", "1Mi"));
    }
}
