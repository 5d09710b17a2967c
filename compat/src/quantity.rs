//! Resource quantities written as Kubernetes writes them back: a quantity that went through
//! Go's `resource.Quantity` (decode, `SetDefaults_ResourceList`'s round-up to milli-units,
//! encode) comes out in canonical form — `"0.5"` as `"500m"`, `"1024Mi"` as `"1Gi"`,
//! `"1000"` as `"1k"`, `"0.0001"` as `"1m"`. OpenKruise's webhooks re-encode the whole object,
//! so every quantity in a defaulted template is in this form.
//!
//! The one parser of Kubernetes quantities in kruise-rs: [`parse`] (value in nano-units and
//! format), [`parse_nanos`] and [`quantities_equal`] for comparisons and sums, and the
//! canonical forms above for what is written back.

/// How a quantity's suffix asks for it to be written (Go's `resource.Format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// `1e3`, `5E-2`.
    DecimalExponent,
    /// `Ki`, `Mi`, … powers of 1024.
    BinarySi,
    /// No suffix or `n`, `u`, `m`, `k`, `M`, `G`, `T`, `P`, `E`.
    DecimalSi,
}

/// An exact quantity: `mantissa × 10^exponent`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Exact {
    mantissa: i128,
    exponent: i32,
    format: Format,
    /// Go keeps the string as written (and writes it back so) when it parses it on its fast
    /// path and finds it already in canonical shape: `+1` and `1E6` stay as they are.
    keeps_text: bool,
}

/// A quantity in nano-units (`1` = 10⁻⁹ of the base unit): the finest precision Go's
/// `resource.Quantity` keeps.
pub type Nanos = i128;

/// Nano-units in one milli-unit.
pub const NANOS_PER_MILLI: Nanos = 1_000_000;
/// Nano-units in one unit.
pub const NANOS_PER_UNIT: Nanos = 1_000_000_000;

/// A parsed quantity, as Go's `resource.ParseQuantity` holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parsed {
    /// The value in nano-units, rounded up away from zero below them (as Go rounds).
    pub nanos: Nanos,
    /// How its suffix asks for it to be written.
    pub format: Format,
}

/// Go's `resource.ParseQuantity` of `text` (surrounding spaces ignored). `None` when
/// Kubernetes would not accept it or its value does not fit.
pub fn parse(text: &str) -> Option<Parsed> {
    let mut exact = parse_exact(text.trim())?;
    round_up_to(&mut exact, NANO)?;
    let scale = 10i128.checked_pow(u32::try_from(exact.exponent - NANO).ok()?)?;
    Some(Parsed {
        nanos: exact.mantissa.checked_mul(scale)?,
        format: exact.format,
    })
}

/// `text`'s value in nano-units (`"100m"`, `"1.5"`, `"2Gi"`, `"1e3"`, …); `None` if malformed.
pub fn parse_nanos(text: &str) -> Option<Nanos> {
    parse(text).map(|parsed| parsed.nanos)
}

/// `nanos` in units of `per` nano-units, rounded up away from zero and saturated to `i64`, as
/// Go's `Quantity.MilliValue` (`per` = [`NANOS_PER_MILLI`]) and `Quantity.Value`
/// ([`NANOS_PER_UNIT`]) give it.
pub fn rounded_up(nanos: Nanos, per: Nanos) -> i64 {
    let mut value = nanos / per;
    if nanos % per != 0 {
        value += nanos.signum();
    }
    i64::try_from(value).unwrap_or(if value < 0 { i64::MIN } else { i64::MAX })
}

/// Whether two quantity strings denote the same amount (`"1"` == `"1000m"`); texts that do
/// not parse are compared as written.
pub fn quantities_equal(a: &str, b: &str) -> bool {
    match (parse_nanos(a), parse_nanos(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Go's canonical form of `quantity` after `SetDefaults_ResourceList` (rounded up, away from
/// zero, to milli-units). `None` when `quantity` is not a quantity Kubernetes accepts, or
/// too large to be written with a suffix (such values are left as they are).
pub fn canonical_milli_quantity(quantity: &str) -> Option<String> {
    canonical(quantity.trim(), MILLI)
}

/// Go's canonical form of `quantity` as `json.Marshal` writes a parsed `resource.Quantity`
/// (no rounding beyond the nano-units Go keeps). `None` as for [`canonical_milli_quantity`].
pub fn canonical_quantity(quantity: &str) -> Option<String> {
    canonical(quantity.trim(), NANO)
}

fn canonical(text: &str, scale: i32) -> Option<String> {
    if text == "0" {
        return Some(text.into());
    }
    let mut exact = parse_exact(text)?;
    if exact.keeps_text && exact.exponent >= scale {
        return Some(text.into());
    }
    round_up_to(&mut exact, scale)?;
    format(exact)
}

/// The smallest unit Go's `Quantity` keeps (it rounds up below it while parsing).
const NANO: i32 = -9;
/// The unit `SetDefaults_ResourceList` rounds up to.
const MILLI: i32 = -3;

fn parse_exact(s: &str) -> Option<Exact> {
    let (negative, body) = match s.as_bytes().first()? {
        b'-' => (true, &s[1..]),
        b'+' => (false, &s[1..]),
        _ => (false, s),
    };
    let number_end = body
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(body.len());
    let (number, suffix) = body.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return None;
    }
    let digits = format!("{whole}{fraction}");
    let mut mantissa: i128 = digits.parse().ok()?;
    let mut exponent = -i32::try_from(fraction.len()).ok()?;
    // Go strips the whole part's leading zeros (an empty one reads as "0") before deciding
    // whether the text is canonical: "0697T" is kept as written, "0.5" is not.
    let significant = match whole.trim_start_matches('0') {
        "" => format!("0{fraction}"),
        stripped => format!("{stripped}{fraction}"),
    };
    let digit_count = i32::try_from(significant.len()).ok()?;
    let (format, shift) = match suffix {
        // For binary suffixes `shift` is the power of two (already applied to the mantissa).
        "" => (Format::DecimalSi, 0),
        "n" => (Format::DecimalSi, -9),
        "u" => (Format::DecimalSi, -6),
        "m" => (Format::DecimalSi, -3),
        "k" => (Format::DecimalSi, 3),
        "M" => (Format::DecimalSi, 6),
        "G" => (Format::DecimalSi, 9),
        "T" => (Format::DecimalSi, 12),
        "P" => (Format::DecimalSi, 15),
        "E" => (Format::DecimalSi, 18),
        "Ki" | "Mi" | "Gi" | "Ti" | "Pi" | "Ei" => {
            let power = match suffix {
                "Ki" => 10,
                "Mi" => 20,
                "Gi" => 30,
                "Ti" => 40,
                "Pi" => 50,
                _ => 60,
            };
            // Beyond i128 it is far beyond the cap below.
            mantissa = mantissa.checked_mul(1i128 << power).unwrap_or(i128::MAX);
            (Format::BinarySi, power)
        }
        other => {
            let digits = other
                .strip_prefix('e')
                .or_else(|| other.strip_prefix('E'))?;
            let unsigned = digits.strip_prefix(['+', '-']).unwrap_or(digits);
            if unsigned.is_empty() || !unsigned.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            (Format::DecimalExponent, digits.parse::<i32>().ok()?)
        }
    };
    if format != Format::BinarySi {
        exponent = exponent.checked_add(shift)?;
    }
    let fits_int64 = i64::try_from(mantissa).is_ok();
    let keeps_text = fits_int64
        && match format {
            Format::BinarySi => {
                let precision = 15 - digit_count - shift * 3 / 10 - 1;
                let value: i128 = digits.parse().ok()?;
                fraction.is_empty() && precision >= 0 && value & 0x07 != 0
            }
            _ => {
                18 - digit_count >= 0
                    && exponent >= NANO
                    && exponent % 3 == 0
                    && !significant.ends_with("000")
                    && !significant.starts_with('0')
            }
        };
    // Go caps a binary-suffixed amount at the largest int64 (either sign), in whole units.
    if format == Format::BinarySi && exceeds_int64(mantissa, exponent) {
        mantissa = i128::from(i64::MAX);
        exponent = 0;
    }
    if negative {
        mantissa = -mantissa;
    }
    Some(Exact {
        mantissa,
        exponent,
        format,
        keeps_text,
    })
}

/// Whether `mantissa × 10^exponent` (non-negative) is above `i64::MAX`.
fn exceeds_int64(mantissa: i128, exponent: i32) -> bool {
    let max = i128::from(i64::MAX);
    match 10i128.checked_pow(exponent.unsigned_abs()) {
        Some(scale) if exponent >= 0 => mantissa.checked_mul(scale).is_none_or(|v| v > max),
        Some(scale) => max.checked_mul(scale).is_some_and(|bound| mantissa > bound),
        // 10^power beyond i128: a positive exponent is far above, a negative one far below.
        None => exponent > 0 && mantissa > 0,
    }
}

/// `Quantity.RoundUp(scale)`: fewer digits, rounding away from zero.
fn round_up_to(q: &mut Exact, scale: i32) -> Option<()> {
    if q.exponent >= scale {
        return Some(());
    }
    let divisor = 10i128.checked_pow(u32::try_from(scale - q.exponent).ok()?)?;
    let mut rounded = q.mantissa / divisor;
    if q.mantissa % divisor != 0 {
        rounded += q.mantissa.signum();
    }
    q.mantissa = rounded;
    q.exponent = scale;
    Some(())
}

/// Divides out `base` while the magnitude is at least `base` and divisible by it.
fn remove_factors(mut value: i128, base: i128) -> (i128, i32) {
    let mut times = 0;
    while value.abs() >= base && value % base == 0 {
        value /= base;
        times += 1;
    }
    (value, times)
}

/// Go's `CanonicalizeBytes`.
fn format(q: Exact) -> Option<String> {
    if q.mantissa == 0 {
        return Some("0".into());
    }
    let mut format = q.format;
    let mut integer = None;
    if format == Format::BinarySi {
        let as_integer = if q.exponent >= 0 {
            q.mantissa
                .checked_mul(10i128.checked_pow(u32::try_from(q.exponent).ok()?)?)
        } else {
            let divisor = 10i128.checked_pow(u32::try_from(-q.exponent).ok()?)?;
            (q.mantissa % divisor == 0).then_some(q.mantissa / divisor)
        };
        match as_integer {
            // Below 1Ki, and values that are not whole, are written in decimal.
            Some(v) if v.abs() >= 1024 => integer = Some(v),
            _ => format = Format::DecimalSi,
        }
    }
    if let Some(value) = integer {
        let (amount, times) = remove_factors(value, 1024);
        let suffix = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"].get(usize::try_from(times).ok()?)?;
        return Some(format!("{amount}{suffix}"));
    }
    let (mut amount, times) = remove_factors(q.mantissa, 10);
    let mut exponent = q.exponent + times;
    // The exponent a suffix can name is a multiple of 3.
    match exponent.rem_euclid(3) {
        1 => {
            amount = amount.checked_mul(10)?;
            exponent -= 1;
        }
        2 => {
            amount = amount.checked_mul(100)?;
            exponent -= 2;
        }
        _ => {}
    }
    let suffix = match format {
        Format::DecimalExponent if exponent == 0 => String::new(),
        Format::DecimalExponent => format!("e{exponent}"),
        _ => match exponent {
            -9 => "n",
            -6 => "u",
            -3 => "m",
            0 => "",
            3 => "k",
            6 => "M",
            9 => "G",
            12 => "T",
            15 => "P",
            18 => "E",
            _ => return None,
        }
        .to_string(),
    };
    Some(format!("{amount}{suffix}"))
}

#[cfg(test)]
mod tests {
    use super::{
        NANOS_PER_MILLI, NANOS_PER_UNIT, Nanos, canonical_milli_quantity, parse_nanos,
        quantities_equal, rounded_up,
    };

    // Expected values from Go: `resource.MustParse(in)`, `SetDefaults_ResourceList`, then
    // `json.Marshal` (k8s.io/apimachinery v0.32.10, the version OpenKruise builds with;
    // `testkit/oracles/quantities` prints them).
    #[test]
    fn canonical_forms_match_go() {
        for (input, want) in [
            ("1", "1"),
            ("0", "0"),
            // Found by the differential test (cloneset/tests/openkruise_oracle.rs): leading
            // zeros do not stop Go keeping the text, and binary amounts are capped.
            ("0697T", "0697T"),
            ("+0920893.914E6", "+0920893.914E6"),
            ("-059554E", "-059554E"),
            ("1568540Ei", "9223372036854775807"),
            ("-45323Ei", "-9223372036854775807"),
            ("-960768.8317Pi", "-9223372036854775807"),
            ("0m", "0"),
            ("100m", "100m"),
            ("1000m", "1"),
            ("1500m", "1500m"),
            ("0.5", "500m"),
            ("1.5", "1500m"),
            ("0.0001", "1m"),
            ("1n", "1m"),
            ("1500000u", "1500m"),
            ("1000", "1k"),
            ("1200", "1200"),
            ("1024", "1024"),
            ("1e3", "1e3"),
            ("1E6", "1E6"),
            ("10e3", "10e3"),
            ("100e-3", "100e-3"),
            ("1e-4", "1e-3"),
            ("1.5e3", "1500"),
            ("5e-2", "50e-3"),
            ("1Gi", "1Gi"),
            ("1024Mi", "1Gi"),
            ("1536Mi", "1536Mi"),
            ("0.5Gi", "512Mi"),
            ("1.5Gi", "1536Mi"),
            ("1.5Ki", "1536"),
            ("512", "512"),
            ("100Ki", "100Ki"),
            ("1023Ki", "1023Ki"),
            ("0.5Ki", "512"),
            ("0.1Ki", "102400m"),
            ("0.001Ki", "1024m"),
            ("2G", "2G"),
            ("2000M", "2G"),
            ("1E", "1E"),
            ("1Ei", "1Ei"),
            ("12345678901234", "12345678901234"),
            ("-1", "-1"),
            ("-0.0001", "-1m"),
            ("+1", "+1"),
        ] {
            assert_eq!(
                canonical_milli_quantity(input).as_deref(),
                Some(want),
                "quantity {input}"
            );
        }
    }

    #[test]
    fn malformed_quantities_are_left_alone() {
        for input in ["", "abc", "1x", "1Kb", "1e", "1..2"] {
            assert_eq!(canonical_milli_quantity(input), None, "quantity {input:?}");
        }
    }

    #[test]
    fn nanos_and_equality() {
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
            assert_eq!(parse_nanos(s), Some(want), "{s}");
        }
        for bad in ["", "abc", "1x", "1.2.3", "."] {
            assert_eq!(parse_nanos(bad), None, "{bad}");
        }
        assert!(quantities_equal("0.1", "100m"));
        assert_eq!(rounded_up(1_500_001, NANOS_PER_MILLI), 2);
        assert_eq!(rounded_up(-1_500_001, NANOS_PER_MILLI), -2);
        assert_eq!(rounded_up(NANOS_PER_UNIT, NANOS_PER_UNIT), 1);
        assert_eq!(rounded_up(Nanos::MAX, 1), i64::MAX);
        assert!(!quantities_equal("1", "1Mi"));
    }
}
