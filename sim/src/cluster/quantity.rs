//! Just enough of `resource.Quantity` for the scheduler's resource fit: cpu in
//! millicores, memory and pod counts in base units.

use serde_json::Value;

/// Parses a quantity ("100m", "1.5", "128Mi", "1G", "1e3") into base units.
pub fn parse(q: &str) -> Option<f64> {
    let q = q.trim();
    let split = q
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-' || c == '+'))
        .unwrap_or(q.len());
    let (num, suffix) = q.split_at(split);
    let n: f64 = num.parse().ok()?;
    let mult = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024f64,
        "Mi" => 1024f64.powi(2),
        "Gi" => 1024f64.powi(3),
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        s if s.starts_with(['e', 'E']) => 10f64.powi(s[1..].parse().ok()?),
        _ => return None,
    };
    Some(n * mult)
}

/// A quantity given as a JSON string or number.
pub fn parse_value(v: &Value) -> Option<f64> {
    match v {
        Value::String(s) => parse(s),
        Value::Number(n) => n.as_f64(),
        _ => None,
    }
}

/// cpu in millicores (rounded up, as `MilliValue` does).
pub fn millis(v: &Value) -> i64 {
    parse_value(v).map_or(0, |x| (x * 1000.0).ceil() as i64)
}

/// memory, pods and other integer resources in base units (rounded up).
pub fn units(v: &Value) -> i64 {
    parse_value(v).map_or(0, |x| x.ceil() as i64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn quantities() {
        assert_eq!(millis(&json!("100m")), 100);
        assert_eq!(millis(&json!("2")), 2000);
        assert_eq!(millis(&json!(0.5)), 500);
        assert_eq!(units(&json!("1Gi")), 1 << 30);
        assert_eq!(units(&json!("1G")), 1_000_000_000);
        assert_eq!(units(&json!("1e3")), 1000);
        assert_eq!(parse("abc"), None);
    }
}
