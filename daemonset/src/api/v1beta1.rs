//! `apps.kruise.io/v1beta1` DaemonSet: the storage version, the one a controller reconciles.

super::daemonset_kind!("v1beta1", true, {
    /// How pods are created on new nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scale_strategy: Option<DaemonSetScaleStrategy>,
});

super::daemonset_status!(
    /// The revision hash pods are updated to.
    update_revision
);

impl DaemonSetSpec {
    /// Whether the update strategy is `OnDelete`.
    pub fn is_on_delete(&self) -> bool {
        self.update_strategy.type_ == Some(UpdateStrategyType::OnDelete)
    }

    /// Whether creation on new nodes is held back by the partition.
    pub fn partitioned_scaling(&self) -> bool {
        self.scale_strategy
            .as_ref()
            .is_some_and(|s| s.partitioned_scaling)
    }
}
