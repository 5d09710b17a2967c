//! The executor half of the planner/executor contract every workload family follows.
//!
//! A family's planner is a pure function `plan(&Input) -> Plan { actions, status, events,
//! requeue_after }`: time comes in as part of the input, and every write it decides on is
//! an action. The controller then runs the actions here, without deciding anything:
//!
//! 1. **Slow start.** Actions in the [`Lane::SlowStart`] lane (pod creations) go out in
//!    batches of 1, 2, 4, … and stop after the first batch with a failure, as OpenKruise's
//!    `SlowStartBatch` does, so a quota or webhook error costs one request, not hundreds.
//! 2. **Per-object write groups.** The other actions are grouped by their lane's key (a
//!    pod's name): one group's actions run in plan order and stop at its first failure;
//!    different groups run concurrently.
//! 3. **Bounded concurrency.** At most `concurrency` writes are in flight at once, whatever
//!    the batch or the number of groups: each in-flight request holds a connection.
//! 4. **First-error stop.** After any failure no further group starts; those in flight
//!    finish. The outcomes come back in the order they ran, for the events, and the caller
//!    returns the first error.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use futures::StreamExt as _;

/// Pod writes in flight at once when a plan touches many (creations within a slow-start
/// batch, in-place updates, deletes, labels): each write waits on a round trip, so a plan of
/// N writes would otherwise take N of them, and each in-flight write holds a connection.
pub const WRITE_CONCURRENCY: usize = 32;

pub use kruise_core::plan::{Lane, Scheduled};

/// What each action that ran returned, in the order they ran.
pub type Outcomes<'a, A, E> = Vec<(&'a A, Result<(), E>)>;

/// Runs `actions` with `perform` as described in the module docs.
pub async fn execute<'a, A, E, F, Fut>(
    actions: &'a [A],
    concurrency: usize,
    perform: F,
) -> Outcomes<'a, A, E>
where
    A: Scheduled,
    F: Fn(&'a A) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let concurrency = concurrency.max(1);
    let mut outcomes = Vec::new();
    let mut failed = false;

    let slow_start: Vec<&A> = actions
        .iter()
        .filter(|a| a.lane() == Lane::SlowStart)
        .collect();
    let mut start = 0;
    let mut batch = 1usize;
    while start < slow_start.len() && !failed {
        let end = start.saturating_add(batch).min(slow_start.len());
        let mut writes = Vec::with_capacity(end - start);
        for action in &slow_start[start..end] {
            writes.push(perform(action));
        }
        let results: Vec<Result<(), E>> = futures::stream::iter(writes)
            .buffered(concurrency)
            .collect()
            .await;
        for (action, result) in slow_start[start..end].iter().zip(results) {
            failed |= result.is_err();
            outcomes.push((*action, result));
        }
        start = end;
        batch = batch.saturating_mul(2);
    }

    let mut groups: Vec<Vec<&A>> = Vec::new();
    let mut group_of: HashMap<&str, usize> = HashMap::new();
    for action in actions {
        match action.lane() {
            Lane::SlowStart => {}
            Lane::Group(key) => match group_of.get(key) {
                Some(&i) => groups[i].push(action),
                None => {
                    group_of.insert(key, groups.len());
                    groups.push(vec![action]);
                }
            },
            Lane::Alone => groups.push(vec![action]),
        }
    }
    let failed = AtomicBool::new(failed);
    // A group's future is made when it starts: made up front, 10,000 of them held ~20 MB.
    let mut waiting = groups.into_iter();
    let mut in_flight = futures::stream::FuturesOrdered::new();
    loop {
        while in_flight.len() < concurrency {
            let Some(group) = waiting.next() else { break };
            in_flight.push_back(run_group(&perform, &failed, group));
        }
        match in_flight.next().await {
            Some(ran) => outcomes.extend(ran),
            None => break,
        }
    }
    outcomes
}

/// Runs one group's actions in order, stopping at its first failure; nothing when another
/// group already failed.
async fn run_group<'a, A, E, F, Fut>(
    perform: &F,
    failed: &AtomicBool,
    group: Vec<&'a A>,
) -> Outcomes<'a, A, E>
where
    F: Fn(&'a A) -> Fut,
    Fut: Future<Output = Result<(), E>>,
{
    let mut out = Vec::new();
    if failed.load(Ordering::SeqCst) {
        return out;
    }
    for action in group {
        let result = perform(action).await;
        let stop = result.is_err();
        out.push((action, result));
        if stop {
            failed.store(true, Ordering::SeqCst);
            break;
        }
    }
    out
}

/// The first error among `outcomes`, consuming them.
pub fn first_error<A, E>(outcomes: Outcomes<'_, A, E>) -> Result<(), E> {
    outcomes
        .into_iter()
        .find_map(|(_, r)| r.err())
        .map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    #[derive(Debug, PartialEq)]
    enum Step {
        Create(u32),
        Write(&'static str, u32),
    }

    impl Scheduled for Step {
        fn lane(&self) -> Lane<'_> {
            match self {
                Step::Create(_) => Lane::SlowStart,
                Step::Write(pod, _) => Lane::Group(pod),
            }
        }
    }

    fn run(actions: &[Step], fail: &[&Step], concurrency: usize) -> (Vec<String>, usize) {
        let log = Mutex::new(Vec::new());
        let outcomes = futures::executor::block_on(execute(actions, concurrency, |a| {
            log.lock().unwrap().push(format!("{a:?}"));
            let result = if fail.contains(&a) { Err(()) } else { Ok(()) };
            async move { result }
        }));
        let ran = outcomes.len();
        (log.into_inner().unwrap(), ran)
    }

    #[test]
    fn creations_go_out_in_doubling_batches_and_stop_after_a_failed_batch() {
        let actions: Vec<Step> = (0..20).map(Step::Create).collect();
        let (log, _) = run(&actions, &[&Step::Create(4)], 8);
        // Batches 1, 2, 4: the batch holding the failure (3..7) completes, nothing after.
        assert_eq!(log.len(), 7);
        let (log, _) = run(&actions, &[], 8);
        assert_eq!(log.len(), 20);
    }

    #[test]
    fn a_group_runs_in_order_and_stops_at_its_first_failure_and_no_group_starts_after() {
        let actions = vec![
            Step::Create(0),
            Step::Write("a", 1),
            Step::Write("b", 1),
            Step::Write("a", 2),
            Step::Write("c", 1),
        ];
        let (log, _) = run(&actions, &[], 1);
        assert_eq!(
            log,
            vec![
                "Create(0)",
                "Write(\"a\", 1)",
                "Write(\"a\", 2)",
                "Write(\"b\", 1)",
                "Write(\"c\", 1)"
            ]
        );
        let fail = Step::Write("a", 1);
        let (log, ran) = run(&actions, &[&fail], 1);
        assert_eq!(log, vec!["Create(0)", "Write(\"a\", 1)"]);
        assert_eq!(ran, 2);
    }

    #[test]
    fn a_failed_creation_stops_every_other_write() {
        let actions = vec![Step::Create(0), Step::Write("a", 1)];
        let (log, _) = run(&actions, &[&Step::Create(0)], 4);
        assert_eq!(log, vec!["Create(0)"]);
    }
}
