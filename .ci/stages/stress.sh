#!/usr/bin/env bash
# Safety invariants under CPU contention (testkit/safety-stress.sh, docs/e2e.md): every
# family's tests that guard maxUnavailable, maxSurge, partitions, PodUnavailableBudgets,
# ordered creation and parallelism, three copies at once beside a busy loop per core, so a
# race that hides on an idle machine shows up: every one once (~2 min, the two budget
# rollouts most of it), the quick ones four times more. The binaries are the tests stage's.
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
PARALLEL=3 HOG="$(nproc)" bash "$root/testkit/safety-stress.sh" 1
ONLY='^kruise-(cloneset|statefulset|daemonset|broadcastjob|runtime) |eviction_sim|pod_admission_sim|upgrade_sim sidecar' \
  PARALLEL=3 HOG="$(nproc)" bash "$root/testkit/safety-stress.sh" 4
