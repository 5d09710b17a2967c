//! Status conditions: the one rule every workload's `set condition` follows.

/// Puts `fresh` into `conditions`: it replaces the condition `same_type` finds unless
/// `unchanged` says that one already reads the same (then its times are kept, so an
/// unchanged condition causes no status write); without one it is appended.
pub fn upsert<C>(
    conditions: &mut Vec<C>,
    fresh: C,
    same_type: impl Fn(&C) -> bool,
    unchanged: impl Fn(&C) -> bool,
) {
    match conditions.iter_mut().find(|c| same_type(c)) {
        Some(c) if unchanged(c) => {}
        Some(c) => *c = fresh,
        None => conditions.push(fresh),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unchanged_condition_keeps_its_time_a_changed_one_is_replaced_a_new_one_appended() {
        // (type, message, time)
        let mut conditions = vec![("Failed", "quota", 1), ("Other", "x", 1)];
        let set = |c: &mut Vec<(&'static str, &'static str, i32)>, fresh: (_, _, _)| {
            upsert(c, fresh, |e| e.0 == fresh.0, |e| e.1 == fresh.1)
        };
        set(&mut conditions, ("Failed", "quota", 2));
        assert_eq!(conditions[0], ("Failed", "quota", 1));
        set(&mut conditions, ("Failed", "denied", 3));
        assert_eq!(conditions[0], ("Failed", "denied", 3));
        set(&mut conditions, ("New", "n", 4));
        assert_eq!(conditions.len(), 3);
        assert_eq!(conditions[1], ("Other", "x", 1));
    }
}
