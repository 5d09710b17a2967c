//! The pure planners: `plan(&Input) -> Plan`, no I/O, time an input.
//!
//! * [`schedule`]: AdvancedCronJob schedules and their run times.

pub mod schedule;
