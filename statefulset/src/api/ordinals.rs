//! Ordinal arithmetic: `reserveOrdinals` (ints and `"a-b"` inclusive ranges) and the window
//! of ordinals `replicas` occupies, reserved ones skipped (OpenKruise's
//! `getStatefulSetReplicasRange`).
//!
//! Reserved ordinals are kept as ranges, never expanded, so `"0-2000000000"` costs nothing.

use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// A `reserveOrdinals` entry that is neither a non-negative int nor `"a-b"` with `a <= b`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid reserveOrdinals entry {entry:?}: {reason}")]
pub struct ReserveOrdinalError {
    /// The entry as written.
    pub entry: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// The reserved ordinals, as inclusive ranges.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReservedOrdinals {
    ranges: Vec<(i64, i64)>,
}

impl ReservedOrdinals {
    /// Parses `reserveOrdinals`. OpenKruise's controller treats the whole list as empty when
    /// one range is invalid (its webhook refuses such a list), and so does
    /// [`ReservedOrdinals::from_spec`]; this is the checked form.
    pub fn parse(entries: &[IntOrString]) -> Result<Self, ReserveOrdinalError> {
        let mut ranges = Vec::with_capacity(entries.len());
        for entry in entries {
            ranges.push(parse_entry(entry)?);
        }
        Ok(Self { ranges })
    }

    /// The controller's reading: an invalid list reserves nothing.
    pub fn from_spec(entries: &[IntOrString]) -> Self {
        Self::parse(entries).unwrap_or_default()
    }

    /// Whether `ordinal` is reserved.
    pub fn contains(&self, ordinal: i64) -> bool {
        self.ranges
            .iter()
            .any(|&(lo, hi)| lo <= ordinal && ordinal <= hi)
    }

    /// The end (exclusive) of the window that holds `replicas` unreserved ordinals from
    /// `start`.
    pub fn end_ordinal(&self, start: i64, replicas: i64) -> i64 {
        let mut end = start;
        let mut placed = 0;
        while placed < replicas {
            match self.range_at(end) {
                // Skip a whole reserved range at once.
                Some(hi) => end = hi + 1,
                None => {
                    placed += 1;
                    end += 1;
                }
            }
        }
        end
    }

    /// The ordinals `replicas` occupies from `start`, ascending.
    pub fn replica_ordinals(&self, start: i64, replicas: i64) -> Vec<i64> {
        let end = self.end_ordinal(start, replicas);
        let mut out = Vec::with_capacity(usize::try_from(replicas.max(0)).unwrap_or(0));
        let mut ordinal = start;
        while ordinal < end {
            match self.range_at(ordinal) {
                Some(hi) => ordinal = hi + 1,
                None => {
                    out.push(ordinal);
                    ordinal += 1;
                }
            }
        }
        out
    }

    /// The highest end of the reserved ranges holding `ordinal`, if it is reserved.
    fn range_at(&self, ordinal: i64) -> Option<i64> {
        self.ranges
            .iter()
            .filter(|&&(lo, hi)| lo <= ordinal && ordinal <= hi)
            .map(|&(_, hi)| hi)
            .max()
    }
}

fn parse_entry(entry: &IntOrString) -> Result<(i64, i64), ReserveOrdinalError> {
    match entry {
        IntOrString::Int(i) if *i >= 0 => Ok((i64::from(*i), i64::from(*i))),
        IntOrString::Int(i) => Err(ReserveOrdinalError {
            entry: i.to_string(),
            reason: "must be non-negative",
        }),
        IntOrString::String(s) => {
            let err = |reason| ReserveOrdinalError {
                entry: s.clone(),
                reason,
            };
            let (lo, hi) = s
                .split_once('-')
                .ok_or_else(|| err("must be an integer or a range \"start-end\""))?;
            let number = |part: &str| {
                if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                    return Err(err("range bounds must be non-negative integers"));
                }
                part.parse::<i32>()
                    .map(i64::from)
                    .map_err(|_| err("range bound out of range"))
            };
            let (lo, hi) = (number(lo)?, number(hi)?);
            if lo > hi {
                return Err(err("range start must not exceed its end"));
            }
            Ok((lo, hi))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn int(i: i32) -> IntOrString {
        IntOrString::Int(i)
    }
    fn range(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn replicas_extend_past_reserved_ordinals() {
        let r = ReservedOrdinals::parse(&[int(1)]).unwrap();
        assert_eq!(r.replica_ordinals(0, 3), [0, 2, 3]);
        // OpenKruise's own example: replicas 4, reserved {1,3}, start 2 -> 2,4,5,6.
        let r = ReservedOrdinals::parse(&[int(1), int(3)]).unwrap();
        assert_eq!(r.end_ordinal(2, 4), 7);
        assert_eq!(r.replica_ordinals(2, 4), [2, 4, 5, 6]);
        let r = ReservedOrdinals::parse(&[int(0), range("2-5")]).unwrap();
        assert_eq!(r.replica_ordinals(0, 3), [1, 6, 7]);
        assert_eq!(r.replica_ordinals(0, 0), Vec::<i64>::new());
    }

    #[test]
    fn huge_ranges_are_not_expanded() {
        let r = ReservedOrdinals::parse(&[range("1-2000000000")]).unwrap();
        assert_eq!(r.replica_ordinals(0, 2), [0, 2_000_000_001]);
    }

    #[test]
    fn invalid_entries_are_refused_and_reserve_nothing_in_the_controller() {
        for bad in [
            range("3-1"),
            range("a-b"),
            range("5"),
            range("-1-2"),
            int(-1),
        ] {
            assert!(
                ReservedOrdinals::parse(&[int(1), bad.clone()]).is_err(),
                "{bad:?}"
            );
            assert_eq!(
                ReservedOrdinals::from_spec(&[int(1), bad]),
                ReservedOrdinals::default()
            );
        }
    }

    proptest! {
        #[test]
        fn window_holds_exactly_replicas_unreserved_ordinals(
            reserved in proptest::collection::vec(0i32..30, 0..8),
            ranges in proptest::collection::vec((0i32..30, 0i32..5), 0..3),
            start in 0i64..5,
            replicas in 0i64..20,
        ) {
            let mut entries: Vec<IntOrString> = reserved.into_iter().map(IntOrString::Int).collect();
            entries.extend(ranges.into_iter().map(|(lo, len)| range(&format!("{lo}-{}", lo + len))));
            let r = ReservedOrdinals::parse(&entries).unwrap();
            let ords = r.replica_ordinals(start, replicas);
            prop_assert_eq!(ords.len() as i64, replicas);
            prop_assert!(ords.iter().all(|o| !r.contains(*o) && *o >= start));
            prop_assert!(ords.windows(2).all(|w| w[0] < w[1]));
            let end = r.end_ordinal(start, replicas);
            prop_assert!(ords.last().is_none_or(|l| *l == end - 1));
        }
    }
}
