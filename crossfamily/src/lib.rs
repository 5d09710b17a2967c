//! End-to-end tests on kruise-sim that need more than one family, kept out of the families
//! so that none depends on another (see `tests/`): image pre-download before in-place
//! updates of CloneSet, Advanced StatefulSet and Advanced DaemonSet, and PodUnavailableBudgets
//! holding a CloneSet rollout and a SidecarSet sidecar upgrade. The budget tests use the
//! protection family's own fixtures (`protection/tests/support`).
