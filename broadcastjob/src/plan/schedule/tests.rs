use super::*;

fn ts(s: &str) -> Timestamp {
    s.parse().unwrap()
}

fn next(schedule: &str, zone_field: Option<&str>, after: &str) -> Option<Timestamp> {
    parse(schedule, zone_field, &TimeZone::UTC)
        .unwrap_or_else(|e| panic!("{schedule}: {e}"))
        .next_after(ts(after))
}

/// The reference set: (schedule, timeZone field, after, next run).
const CASES: &[(&str, Option<&str>, &str, &str)] = &[
    (
        "*/5 * * * *",
        None,
        "2026-01-01T00:02:00Z",
        "2026-01-01T00:05:00Z",
    ),
    (
        "*/5 * * * *",
        None,
        "2026-01-01T00:05:00Z",
        "2026-01-01T00:10:00Z",
    ),
    (
        "*/1 * * * *",
        None,
        "2026-01-01T00:00:30Z",
        "2026-01-01T00:01:00Z",
    ),
    (
        "0 9 * * 1-5",
        Some("Asia/Shanghai"),
        "2026-11-21T00:00:00Z",
        "2026-11-23T01:00:00Z",
    ),
    (
        "@hourly",
        None,
        "2026-01-01T10:30:00Z",
        "2026-01-01T11:00:00Z",
    ),
    (
        "@daily",
        None,
        "2026-01-01T10:30:00Z",
        "2026-01-02T00:00:00Z",
    ),
    (
        "@midnight",
        None,
        "2026-01-01T10:30:00Z",
        "2026-01-02T00:00:00Z",
    ),
    (
        "@weekly",
        None,
        "2026-11-03T00:00:00Z",
        "2026-11-08T00:00:00Z",
    ),
    (
        "@monthly",
        None,
        "2026-11-03T00:00:00Z",
        "2026-12-01T00:00:00Z",
    ),
    (
        "@yearly",
        None,
        "2026-11-03T00:00:00Z",
        "2027-01-01T00:00:00Z",
    ),
    (
        "@annually",
        None,
        "2026-11-03T00:00:00Z",
        "2027-01-01T00:00:00Z",
    ),
    (
        "TZ=America/New_York 0 0 * * *",
        None,
        "2026-06-01T00:00:00Z",
        "2026-06-01T04:00:00Z",
    ),
    (
        "CRON_TZ=Europe/Berlin 0 12 * * *",
        None,
        "2026-01-10T00:00:00Z",
        "2026-01-10T11:00:00Z",
    ),
    (
        "0 0 * * *",
        Some("Europe/Berlin"),
        "2026-07-10T00:00:00Z",
        "2026-07-10T22:00:00Z",
    ),
    // Day of month and day of week: either matches (Vixie cron), a `*` in one defers to the other.
    (
        "0 0 * * 1",
        None,
        "2026-11-03T00:00:00Z",
        "2026-11-09T00:00:00Z",
    ),
    (
        "0 0 13 * 5",
        None,
        "2026-11-07T00:00:00Z",
        "2026-11-13T00:00:00Z",
    ),
    (
        "0 0 13 * 5",
        None,
        "2026-11-01T00:00:00Z",
        "2026-11-06T00:00:00Z",
    ),
    (
        "0 0 1 JAN *",
        None,
        "2026-02-01T00:00:00Z",
        "2027-01-01T00:00:00Z",
    ),
    (
        "0 0 * * MON-FRI",
        None,
        "2026-11-07T00:00:00Z",
        "2026-11-09T00:00:00Z",
    ),
    (
        "0 0 ? * SUN",
        None,
        "2026-11-03T00:00:00Z",
        "2026-11-08T00:00:00Z",
    ),
    (
        "5,35 1-2 * * *",
        None,
        "2026-01-01T01:06:00Z",
        "2026-01-01T01:35:00Z",
    ),
    (
        "@every 90s",
        None,
        "2026-01-01T10:00:00.5Z",
        "2026-01-01T10:01:30Z",
    ),
    (
        "@every 1h30m",
        None,
        "2026-01-01T10:00:00Z",
        "2026-01-01T11:30:00Z",
    ),
    // New York's spring-forward day (2026-03-08): 02:30 does not exist, the run is at 03:00 EDT.
    (
        "30 2 * * *",
        Some("America/New_York"),
        "2026-03-07T12:00:00Z",
        "2026-03-08T07:00:00Z",
    ),
    (
        "30 2 * * *",
        Some("America/New_York"),
        "2026-03-08T07:00:00Z",
        "2026-03-09T06:30:00Z",
    ),
    // Fall-back day (2026-11-01): 01:00-02:00 repeats, 01:30 runs once (the first).
    (
        "30 1 * * *",
        Some("America/New_York"),
        "2026-10-31T12:00:00Z",
        "2026-11-01T05:30:00Z",
    ),
    (
        "30 1 * * *",
        Some("America/New_York"),
        "2026-11-01T05:30:00Z",
        "2026-11-02T06:30:00Z",
    ),
];

#[test]
fn reference_cases() {
    for (schedule, zone, after, expected) in CASES {
        assert_eq!(
            next(schedule, *zone, after),
            Some(ts(expected)),
            "{schedule} (timeZone {zone:?}) after {after}"
        );
    }
}

/// Runs of `schedule` in New York whose local date is `day`.
fn runs_on_local_day(schedule: &str, day: &str) -> usize {
    let ny = TimeZone::get("America/New_York").unwrap();
    let parsed = parse(schedule, Some("America/New_York"), &TimeZone::UTC).unwrap();
    let day: jiff::civil::Date = day.parse().unwrap();
    let mut t = day
        .yesterday()
        .unwrap()
        .to_zoned(ny.clone())
        .unwrap()
        .timestamp();
    let mut count = 0;
    for _ in 0..200 {
        let Some(n) = parsed.next_after(t) else { break };
        let local = n.to_zoned(ny.clone()).date();
        if local > day {
            break;
        }
        if local == day {
            count += 1;
        }
        t = n;
    }
    count
}

#[test]
fn half_past_two_in_new_york_runs_exactly_once_on_both_dst_change_days() {
    for day in [
        "2026-03-08",
        "2026-11-01",
        "2027-03-14",
        "2027-11-07",
        "2026-07-01",
    ] {
        assert_eq!(runs_on_local_day("30 2 * * *", day), 1, "{day}");
        assert_eq!(runs_on_local_day("30 1 * * *", day), 1, "{day}");
    }
    // An hourly schedule runs every hour that passes: 23 on the short day, 25 on the long one.
    assert_eq!(runs_on_local_day("0 * * * *", "2026-03-08"), 23);
    assert_eq!(runs_on_local_day("0 * * * *", "2026-11-01"), 25);
}

#[test]
fn a_date_that_never_comes_has_no_next_run() {
    assert_eq!(next("0 0 30 2 *", None, "2026-01-01T00:00:00Z"), None);
}

#[test]
fn a_schedule_without_zone_runs_in_the_default_zone() {
    let tokyo = TimeZone::get("Asia/Tokyo").unwrap();
    let s = parse("0 0 * * *", None, &tokyo).unwrap();
    assert_eq!(
        s.next_after(ts("2026-01-01T00:00:00Z")),
        Some(ts("2026-01-01T15:00:00Z"))
    );
}

#[test]
fn refused_schedules() {
    let cases: &[(&str, Option<&str>)] = &[
        ("", None),
        ("   ", None),
        ("* * * *", None),
        ("0 * * * * *", None),
        ("60 * * * *", None),
        ("0 24 * * *", None),
        ("0 0 0 * *", None),
        ("0 0 * 13 *", None),
        ("0 0 * * 7", None),
        ("0 0 L * *", None),
        ("0 0 1W * *", None),
        ("0 0 * * 1#2", None),
        ("0 0 * * 5L", None),
        ("*/0 * * * *", None),
        ("5-1 * * * *", None),
        ("? * * * *", None),
        ("@reboot", None),
        ("@every", None),
        ("@every soon", None),
        ("TZ=Mars/Olympus 0 0 * * *", None),
        ("TZ=America/New_York", None),
        ("0 0 * * *", Some("Mars/Olympus")),
        ("0 0 * * *", Some("Local")),
        ("0 0 * * *", Some("")),
    ];
    for (schedule, zone) in cases {
        assert!(
            parse(schedule, *zone, &TimeZone::UTC).is_err(),
            "{schedule:?} with timeZone {zone:?} was accepted"
        );
    }
}

#[test]
fn errors_name_what_is_wrong() {
    let err = |s: &str, z: Option<&str>| parse(s, z, &TimeZone::UTC).unwrap_err().to_string();
    assert_eq!(
        err("", None),
        "schedule cannot be empty, please provide valid cron schedule."
    );
    assert_eq!(
        err("0 0 * * *", Some("Mars/Olympus")),
        "unknown time zone Mars/Olympus"
    );
    assert!(err("0 0 * * 7", None).contains("day of week: 7 is out of range (0-6)"));
    assert!(err("* * * *", None).contains("expected exactly 5 fields, found 4"));
}

proptest::proptest! {
    /// For any minute/hour pair and any instant, the next run is after it, on that minute and
    /// hour of the zone's wall clock (or the first instant after a gap), and no run of the
    /// schedule lies between.
    #[test]
    fn next_run_is_the_first_matching_time_after(
        minute in 0u32..60,
        hour in 0u32..24,
        secs in 1_700_000_000i64..1_900_000_000,
        zone in proptest::sample::select(vec!["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata", "Australia/Lord_Howe"]),
    ) {
        let s = parse(&format!("{minute} {hour} * * *"), Some(zone), &TimeZone::UTC).unwrap();
        let after = Timestamp::from_second(secs).unwrap();
        let n = s.next_after(after).unwrap();
        proptest::prop_assert!(n > after);
        proptest::prop_assert!(n.duration_since(after) <= SignedDuration::from_hours(49));
        let tz = TimeZone::get(zone).unwrap();
        let local = n.to_zoned(tz.clone());
        let on_time = local.hour() as u32 == hour && local.minute() as u32 == minute;
        // Off the minute only when the wall-clock time does not exist that day.
        if !on_time {
            let wanted = local.date().at(hour as i8, minute as i8, 0, 0);
            proptest::prop_assert!(matches!(tz.to_ambiguous_zoned(wanted).offset(), jiff::tz::AmbiguousOffset::Gap { .. }), "{n} in {zone}");
        }
        // Nothing in between: the next run after (n - 1s) is n itself.
        let just_before = n.checked_sub(SignedDuration::from_secs(1)).unwrap();
        proptest::prop_assert_eq!(s.next_after(just_before.max(after)), Some(n));
    }
}
