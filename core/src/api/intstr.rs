//! Int-or-percent arithmetic with OpenKruise's rounding (reference §0.1).
//!
//! * [`value_from_int_or_percent`]: Kubernetes' `GetScaledValueFromIntOrPercent` /
//!   `GetValueFromIntOrPercent` — the percent must be an integer (`"25%"`).
//! * [`scaled_value_from_int_or_percent`]: Kruise's variant — the percent may be a float (`"12.5%"`).
//! * [`calculate_partition_replicas`]: Kruise's `CalculatePartitionReplicas`.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Why an int-or-percent value could not be resolved.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IntOrPercentError {
    /// No value was given where one is required.
    #[error("nil value for IntOrString")]
    Missing,
    /// A string value without a trailing `%`.
    #[error("invalid value for IntOrString: invalid type: string is not a percentage: {0:?}")]
    NotAPercentage(String),
    /// The number before `%` does not parse.
    #[error("invalid value for IntOrString: invalid percentage {0:?}")]
    BadNumber(String),
    /// The scaled value does not fit an `i32`.
    #[error("int-or-percent value {0:?} out of range")]
    OutOfRange(String),
}

fn round_scaled(raw: &str, pct: f64, total: i32, round_up: bool) -> Result<i32, IntOrPercentError> {
    let v = pct * f64::from(total) / 100.0;
    let v = if round_up { v.ceil() } else { v.floor() };
    if !v.is_finite() || v > f64::from(i32::MAX) || v < f64::from(i32::MIN) {
        return Err(IntOrPercentError::OutOfRange(raw.to_string()));
    }
    // In range and integral: the conversion is exact.
    Ok(v as i32)
}

/// Kubernetes' `GetScaledValueFromIntOrPercent`: an int is returned as is; a string must be an
/// integer percentage (`"25%"`), scaled against `total` and rounded up or down.
pub fn value_from_int_or_percent(
    v: &IntOrString,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    match v {
        IntOrString::Int(i) => Ok(*i),
        IntOrString::String(s) => {
            let Some(num) = s.strip_suffix('%') else {
                return Err(IntOrPercentError::NotAPercentage(s.clone()));
            };
            let pct: i64 = num
                .parse()
                .map_err(|_| IntOrPercentError::BadNumber(s.clone()))?;
            // Go computes in float64; percents are small integers so this is exact enough.
            round_scaled(s, pct as f64, total, round_up)
        }
    }
}

/// Kruise's `util.GetScaledValueFromIntOrPercent`: like [`value_from_int_or_percent`] but the
/// percentage is parsed as a float (`"12.5%"`), and a missing value is an error.
pub fn scaled_value_from_int_or_percent(
    v: Option<&IntOrString>,
    total: i32,
    round_up: bool,
) -> Result<i32, IntOrPercentError> {
    match v {
        None => Err(IntOrPercentError::Missing),
        Some(IntOrString::Int(i)) => Ok(*i),
        Some(IntOrString::String(s)) => {
            let Some(num) = s.strip_suffix('%') else {
                return Err(IntOrPercentError::NotAPercentage(s.clone()));
            };
            let pct: f64 = num
                .parse()
                .map_err(|_| IntOrPercentError::BadNumber(s.clone()))?;
            if !pct.is_finite() {
                return Err(IntOrPercentError::BadNumber(s.clone()));
            }
            round_scaled(s, pct, total, round_up)
        }
    }
}

/// Kruise's `CalculatePartitionReplicas`: the number of pods kept at the old revision.
///
/// `None` partition -> 0; `None` replicas counts as 1. Percentages round **up**; when
/// `replicas > 1` and a percentage other than `"100%"` would keep every pod old, one pod is
/// still updated. The result is clamped to `[0, replicas]`.
pub fn calculate_partition_replicas(
    partition: Option<&IntOrString>,
    replicas: Option<i32>,
) -> Result<i32, IntOrPercentError> {
    let Some(p) = partition else { return Ok(0) };
    let replicas = replicas.unwrap_or(1);
    let mut value = scaled_value_from_int_or_percent(Some(p), replicas, true)?;
    if replicas > 1
        && value == replicas
        && let IntOrString::String(s) = p
        && s != "100%"
    {
        value = replicas - 1;
    }
    Ok(value.min(replicas).max(0))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn s(v: &str) -> IntOrString {
        IntOrString::String(v.to_string())
    }

    #[test]
    fn k8s_integer_percent() {
        let cases: &[(IntOrString, i32, bool, Result<i32, ()>)] = &[
            (IntOrString::Int(3), 10, true, Ok(3)),
            (s("25%"), 10, true, Ok(3)),
            (s("25%"), 10, false, Ok(2)),
            (s("0%"), 10, true, Ok(0)),
            (s("100%"), 7, false, Ok(7)),
            (s("12.5%"), 10, true, Err(())),
            (s("5"), 10, true, Err(())),
            (s("abc%"), 10, true, Err(())),
        ];
        for (v, total, up, want) in cases {
            let got = value_from_int_or_percent(v, *total, *up).map_err(|_| ());
            assert_eq!(&got, want, "{v:?} of {total} up={up}");
        }
    }

    #[test]
    fn kruise_float_percent() {
        assert_eq!(
            scaled_value_from_int_or_percent(Some(&s("12.5%")), 10, true),
            Ok(2)
        );
        assert_eq!(
            scaled_value_from_int_or_percent(Some(&s("12.5%")), 10, false),
            Ok(1)
        );
        assert_eq!(
            scaled_value_from_int_or_percent(None, 10, false),
            Err(IntOrPercentError::Missing)
        );
        assert!(matches!(
            scaled_value_from_int_or_percent(Some(&s("3")), 10, false),
            Err(IntOrPercentError::NotAPercentage(_))
        ));
        assert!(matches!(
            scaled_value_from_int_or_percent(Some(&s("inf%")), 10, false),
            Err(IntOrPercentError::BadNumber(_))
        ));
    }

    #[test]
    fn partition_table() {
        let cases: &[(Option<IntOrString>, Option<i32>, i32)] = &[
            (None, Some(3), 0),
            (Some(IntOrString::Int(2)), Some(3), 2),
            (Some(IntOrString::Int(5)), Some(3), 3),
            (Some(IntOrString::Int(-1)), Some(3), 0),
            // percent partition on 3 replicas rounds up: 50% of 3 = 1.5 -> 2 kept old
            (Some(s("50%")), Some(3), 2),
            // 10% of 3 = 0.3 -> 1: any pct > 0 keeps one old pod
            (Some(s("10%")), Some(3), 1),
            // 99% of 3 = 2.97 -> 3 -> but < 100% keeps one pod updated
            (Some(s("99%")), Some(3), 2),
            (Some(s("100%")), Some(3), 3),
            (Some(s("0%")), Some(3), 0),
            (Some(s("50%")), None, 1),
            (Some(s("50%")), Some(1), 1),
        ];
        for (p, r, want) in cases {
            assert_eq!(
                calculate_partition_replicas(p.as_ref(), *r),
                Ok(*want),
                "{p:?} {r:?}"
            );
        }
        assert!(calculate_partition_replicas(Some(&s("x")), Some(3)).is_err());
    }

    fn pct() -> impl Strategy<Value = IntOrString> {
        prop_oneof![
            (0i32..=100).prop_map(|p| IntOrString::String(format!("{p}%"))),
            (0i32..=20).prop_map(IntOrString::Int),
        ]
    }

    proptest! {
        #[test]
        fn partition_within_replicas(p in pct(), replicas in 0i32..200) {
            let v = calculate_partition_replicas(Some(&p), Some(replicas)).unwrap();
            prop_assert!((0..=replicas).contains(&v));
            if let IntOrString::String(ref sv) = p {
                let num: i32 = sv.trim_end_matches('%').parse().unwrap();
                if num > 0 && replicas > 0 { prop_assert!(v >= 1); }
                if num < 100 && replicas > 1 { prop_assert!(v < replicas); }
            }
        }
    }
}
