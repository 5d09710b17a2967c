//! `apps.kruise.io/v1alpha1` DaemonSet: served, converted to `v1beta1` for storage. No
//! `scaleStrategy` (the `daemonset.kruise.io/progressive-create-pod` annotation carries it)
//! and `status.daemonSetHash` for `v1beta1`'s `status.updateRevision`.

super::daemonset_kind!("v1alpha1", false, {});

super::daemonset_status!(
    /// The revision hash pods are updated to.
    daemon_set_hash
);
