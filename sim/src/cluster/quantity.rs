//! Quantities as the scheduler's resource fit, the PVC resize rules and the QoS class read
//! them: cpu in millicores, memory and pod counts in base units, through kruise-compat's
//! parser of Go's `resource.Quantity`.

use kruise_compat::quantity::{NANOS_PER_MILLI, NANOS_PER_UNIT, Nanos, parse_nanos, rounded_up};
use serde_json::Value;

/// A quantity given as a JSON string or number (a number reads as its text, as Go's
/// `Quantity.UnmarshalJSON` reads it), in nano-units.
pub fn parse_value(v: &Value) -> Option<Nanos> {
    match v {
        Value::String(s) => parse_nanos(s),
        Value::Number(n) => parse_nanos(&n.to_string()),
        _ => None,
    }
}

/// cpu in millicores.
pub fn millis(v: &Value) -> i64 {
    parse_value(v).map_or(0, |nanos| rounded_up(nanos, NANOS_PER_MILLI))
}

/// memory, pods and other integer resources in base units.
pub fn units(v: &Value) -> i64 {
    parse_value(v).map_or(0, |nanos| rounded_up(nanos, NANOS_PER_UNIT))
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
        assert_eq!(parse_value(&json!("abc")), None);
        assert_eq!(parse_value(&json!(1.5)), parse_value(&json!("1500m")));
    }
}
