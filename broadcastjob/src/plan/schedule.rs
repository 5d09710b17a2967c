//! AdvancedCronJob schedules as OpenKruise reads them (robfig/cron's `ParseStandard` after
//! `formatSchedule`): five fields (minute, hour, day of month, month, day of week) with
//! `*`, `?`, lists, ranges, steps and month/weekday names; the descriptors `@yearly`,
//! `@annually`, `@monthly`, `@weekly`, `@daily`, `@midnight`, `@hourly` and `@every <duration>`;
//! an optional `TZ=<zone> ` or `CRON_TZ=<zone> ` prefix; and the `timeZone` field, which
//! applies when the schedule names no zone. The zone's rules come from the IANA database
//! compiled into the binary, so a zone works on an image without tzdata (K#1070).
//!
//! Run times are computed on the zone's wall clock with croner, so a daylight-saving change
//! neither skips nor repeats a daily run: a time that falls into a spring-forward gap runs at
//! the first instant after the gap, a time the fall-back repeats runs once.

use croner::Cron;
use croner::parser::{CronParser, Seconds, Year};
use jiff::tz::TimeZone;
use jiff::{SignedDuration, Timestamp, Zoned};

/// Why a schedule or time zone is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ScheduleError {
    /// The schedule is empty.
    #[error("schedule cannot be empty, please provide valid cron schedule.")]
    Empty,
    /// The zone named by `timeZone` or a `TZ=` prefix is not an IANA zone.
    #[error("unknown time zone {zone}")]
    UnknownTimeZone {
        /// The name as written.
        zone: String,
    },
    /// The zone is `Local` (the controller's zone is not a schedule's to choose).
    #[error("timeZone must be an explicit time zone as defined in https://www.iana.org/time-zones")]
    LocalTimeZone,
    /// The expression is not a standard cron expression.
    #[error("{0}")]
    Invalid(String),
}

/// A parsed schedule: when it runs, in which zone.
#[derive(Debug, Clone)]
pub struct Schedule {
    when: When,
    zone: TimeZone,
}

#[derive(Debug, Clone)]
enum When {
    Cron(Box<Cron>),
    /// `@every <duration>`: a fixed delay after the previous time, in whole seconds.
    Every(SignedDuration),
}

/// The shortest `@every` delay (robfig rounds shorter ones up to a second).
const MIN_EVERY: SignedDuration = SignedDuration::from_secs(1);

/// The time zone named `name` (IANA), refusing `Local` and the empty name.
pub fn time_zone(name: &str) -> Result<TimeZone, ScheduleError> {
    if name.eq_ignore_ascii_case("local") {
        return Err(ScheduleError::LocalTimeZone);
    }
    if name.is_empty() {
        return Err(ScheduleError::UnknownTimeZone { zone: name.into() });
    }
    TimeZone::get(name).map_err(|_| ScheduleError::UnknownTimeZone { zone: name.into() })
}

/// Parses `schedule` with the `timeZone` field `time_zone`; a schedule naming no zone runs
/// in `default_zone`.
pub fn parse(
    schedule: &str,
    time_zone_field: Option<&str>,
    default_zone: &TimeZone,
) -> Result<Schedule, ScheduleError> {
    let trimmed = schedule.trim();
    if trimmed.is_empty() {
        return Err(ScheduleError::Empty);
    }
    let (prefix_zone, expression) = split_zone_prefix(trimmed)?;
    let zone = match (prefix_zone, time_zone_field) {
        (Some(name), _) => time_zone(name)?,
        (None, Some(name)) => time_zone(name)?,
        (None, None) => default_zone.clone(),
    };
    let when = parse_expression(expression)?;
    Ok(Schedule { when, zone })
}

/// Splits a `TZ=<zone> ` / `CRON_TZ=<zone> ` prefix off.
fn split_zone_prefix(schedule: &str) -> Result<(Option<&str>, &str), ScheduleError> {
    for prefix in ["TZ=", "CRON_TZ="] {
        if let Some(rest) = schedule.strip_prefix(prefix) {
            let Some((zone, expression)) = rest.split_once(char::is_whitespace) else {
                return Err(ScheduleError::Invalid(format!(
                    "provided bad spec {schedule:?}: a time zone prefix needs an expression after it"
                )));
            };
            return Ok((Some(zone), expression.trim()));
        }
    }
    Ok((None, schedule))
}

/// The five-field expression a descriptor stands for.
fn descriptor(name: &str) -> Option<&'static str> {
    Some(match name {
        "@yearly" | "@annually" => "0 0 1 1 *",
        "@monthly" => "0 0 1 * *",
        "@weekly" => "0 0 * * 0",
        "@daily" | "@midnight" => "0 0 * * *",
        "@hourly" => "0 * * * *",
        _ => return None,
    })
}

fn parse_expression(expression: &str) -> Result<When, ScheduleError> {
    if let Some(delay) = expression.strip_prefix("@every ") {
        let delay = parse_go_duration(delay.trim()).ok_or_else(|| {
            ScheduleError::Invalid(format!("failed to parse duration {expression}"))
        })?;
        return Ok(When::Every(delay.max(MIN_EVERY)));
    }
    let expression = if expression.starts_with('@') {
        descriptor(expression).ok_or_else(|| {
            ScheduleError::Invalid(format!("unrecognized descriptor: {expression}"))
        })?
    } else {
        expression
    };
    let fields: Vec<&str> = expression.split_whitespace().collect();
    if fields.len() != 5 {
        return Err(ScheduleError::Invalid(format!(
            "expected exactly 5 fields, found {}: {expression}",
            fields.len()
        )));
    }
    for (field, spec) in fields.iter().zip(FIELDS) {
        check_field(field, &spec)?;
    }
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(&fields.join(" "))
        .map_err(|e| ScheduleError::Invalid(format!("{e}: {expression}")))?;
    Ok(When::Cron(Box::new(cron)))
}

/// One field's bounds and names, as robfig/cron has them.
struct FieldSpec {
    name: &'static str,
    min: u32,
    max: u32,
    names: &'static [&'static str],
    question_mark: bool,
}

const MONTHS: &[&str] = &[
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const WEEKDAYS: &[&str] = &["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

const FIELDS: [FieldSpec; 5] = [
    FieldSpec {
        name: "minute",
        min: 0,
        max: 59,
        names: &[],
        question_mark: false,
    },
    FieldSpec {
        name: "hour",
        min: 0,
        max: 23,
        names: &[],
        question_mark: false,
    },
    FieldSpec {
        name: "day of month",
        min: 1,
        max: 31,
        names: &[],
        question_mark: true,
    },
    FieldSpec {
        name: "month",
        min: 1,
        max: 12,
        names: MONTHS,
        question_mark: false,
    },
    FieldSpec {
        name: "day of week",
        min: 0,
        max: 6,
        names: WEEKDAYS,
        question_mark: true,
    },
];

/// Refuses what robfig/cron refuses but croner accepts (Quartz's `L`, `W`, `#`, a Sunday
/// written `7`, values out of range), with robfig's wording where it has one.
fn check_field(field: &str, spec: &FieldSpec) -> Result<(), ScheduleError> {
    let bad = |why: String| ScheduleError::Invalid(format!("{}: {why}", spec.name));
    for part in field.split(',') {
        let (range, step) = match part.split_once('/') {
            Some((range, step)) => (range, Some(step)),
            None => (part, None),
        };
        if let Some(step) = step {
            match step.parse::<u32>() {
                Ok(0) | Err(_) => return Err(bad(format!("bad step in {part:?}"))),
                Ok(_) => {}
            }
        }
        if range == "*" || (range == "?" && spec.question_mark) {
            continue;
        }
        let (low, high) = match range.split_once('-') {
            Some((low, high)) => (low, Some(high)),
            None => (range, None),
        };
        let value = |v: &str| -> Result<u32, ScheduleError> {
            let n = match v.parse::<u32>() {
                Ok(n) => n,
                Err(_) => spec
                    .names
                    .iter()
                    .position(|name| name.eq_ignore_ascii_case(v))
                    .and_then(|i| u32::try_from(i).ok())
                    .map(|i| i + spec.min)
                    .ok_or_else(|| bad(format!("failed to parse int from {v:?}")))?,
            };
            if n < spec.min || n > spec.max {
                return Err(bad(format!(
                    "{n} is out of range ({}-{})",
                    spec.min, spec.max
                )));
            }
            Ok(n)
        };
        let low = value(low)?;
        if let Some(high) = high {
            let high = value(high)?;
            if high < low {
                return Err(bad(format!(
                    "beginning of range ({low}) beyond end of range ({high}): {part}"
                )));
            }
        }
    }
    Ok(())
}

/// A Go duration (`1h30m`, `90s`, `1.5h`, `500ms`), whole or fractional numbers per unit.
fn parse_go_duration(text: &str) -> Option<SignedDuration> {
    if text.is_empty() {
        return None;
    }
    let mut rest = text;
    let mut nanos: f64 = 0.0;
    while !rest.is_empty() {
        let number_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        let number: f64 = rest.get(..number_len)?.parse().ok()?;
        rest = rest.get(number_len..)?;
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = match rest.get(..unit_len)? {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            _ => return None,
        };
        rest = rest.get(unit_len..)?;
        nanos += number * unit;
    }
    // Whole seconds: robfig's delay is rounded to the second below.
    let seconds = (nanos / 1e9).floor();
    (seconds.is_finite() && seconds < 1e12).then(|| SignedDuration::from_secs(seconds as i64))
}

impl Schedule {
    /// The zone the schedule runs in.
    pub fn zone(&self) -> &TimeZone {
        &self.zone
    }

    /// The first run strictly after `after`; `None` when there is none (a date that never
    /// comes, such as February 30th).
    pub fn next_after(&self, after: Timestamp) -> Option<Timestamp> {
        match &self.when {
            When::Every(delay) => {
                // robfig: the delay is added to the time truncated to the second.
                let whole = Timestamp::from_second(after.as_second()).ok()?;
                whole.checked_add(*delay).ok()
            }
            When::Cron(cron) => {
                let start = Zoned::new(after, self.zone.clone());
                cron.find_next_occurrence(&start, false)
                    .ok()
                    .map(|z| z.timestamp())
            }
        }
    }
}

#[cfg(test)]
mod tests;
