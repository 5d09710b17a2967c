//! Feature gates: `--feature-gates=Name=true,Other=false` with OpenKruise's gate names,
//! defaults, stages and derivation rules, so a kruise-manager flag line works unchanged.

use std::collections::BTreeMap;
use std::fmt;

use kruise_compat::pod_defaults::{PodDefaultsOptions, TemplateDefaults};

/// Maturity of a gate; `AllAlpha=` / `AllBeta=` flip every gate of one stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// Off by default unless stated otherwise; may change or go away.
    Alpha,
    /// On by default unless stated otherwise.
    Beta,
}

/// One known gate: its name as OpenKruise spells it, its default and its stage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateSpec {
    /// The gate name, e.g. `CloneSetShortHash`.
    pub name: &'static str,
    /// Value when neither the flag nor `AllAlpha`/`AllBeta` mention it.
    pub default: bool,
    /// Alpha or beta.
    pub stage: Stage,
}

const fn alpha(name: &'static str, default: bool) -> GateSpec {
    GateSpec {
        name,
        default,
        stage: Stage::Alpha,
    }
}

const fn beta(name: &'static str, default: bool) -> GateSpec {
    GateSpec {
        name,
        default,
        stage: Stage::Beta,
    }
}

/// Every gate OpenKruise defines (pkg/features), with its default and stage.
pub const KNOWN_GATES: &[GateSpec] = &[
    beta("KruiseDaemon", true),
    beta("PodWebhook", true),
    beta("DaemonWatchingPod", true),
    alpha("CloneSetShortHash", false),
    alpha("KruisePodReadinessGate", false),
    alpha("PreDownloadImageForInPlaceUpdate", false),
    alpha("CloneSetPartitionRollback", false),
    beta("ResourcesDeletionProtection", false),
    beta("PodUnavailableBudgetDeleteGate", true),
    alpha("PodUnavailableBudgetUpdateGate", false),
    beta("WorkloadSpread", true),
    alpha("TemplateNoDefaults", false),
    beta("InPlaceUpdateEnvFromMetadata", true),
    beta("StatefulSetAutoDeletePVC", true),
    alpha("SidecarSetPatchPodMetadataDefaultsAllowed", false),
    alpha("SidecarTerminator", false),
    beta("PodProbeMarkerGate", true),
    alpha("PreDownloadImageForDaemonSetUpdate", false),
    alpha("CloneSetEventHandlerOptimization", false),
    alpha("PreparingUpdateAsUpdate", false),
    alpha("ImagePullJobGate", false),
    beta("ResourceDistributionGate", false),
    alpha("DeletionProtectionForCRDCascadingGate", false),
    alpha("EnhancedLivenessProbe", false),
    alpha("RecreatePodWhenChangeVCTInCloneSetGate", false),
    alpha("StatefulSetStartOrdinal", false),
    beta("PodIndexLabel", true),
    alpha("EnableExternalCerts", false),
    alpha("StatefulSetAutoResizePVCGate", false),
    alpha("ForceDeleteTimeoutExpectationGate", false),
    alpha("InPlaceWorkloadVerticalScaling", false),
    alpha("EnablePodProbeMarkerOnServerless", false),
    alpha("EnableSortSidecarContainerByName", false),
    alpha("InPlacePodVerticalScaling", false),
    alpha("DefaultHostNetworkHostPortsInPodTemplates", false),
    alpha("DaemonSetPruneIneligibleNodes", false),
];

/// Why a `--feature-gates` value was refused. Each message names the offending gate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FeatureGateError {
    /// The name is not one of [`KNOWN_GATES`] (nor `AllAlpha`/`AllBeta`).
    #[error("unknown feature gate {0:?}")]
    Unknown(String),
    /// The value is neither `true` nor `false`.
    #[error("invalid value {value:?} for feature gate {gate:?}: want true or false")]
    BadValue {
        /// The gate the value was given for.
        gate: String,
        /// What was given.
        value: String,
    },
    /// An entry without `=`.
    #[error("malformed feature gate entry {0:?}: want Name=true or Name=false")]
    Malformed(String),
}

/// The resolved gates of one process. Cheap to clone and query.
#[derive(Clone, PartialEq, Eq)]
pub struct FeatureGates {
    values: BTreeMap<&'static str, bool>,
}

impl fmt::Debug for FeatureGates {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.values.iter()).finish()
    }
}

impl Default for FeatureGates {
    fn default() -> Self {
        let mut gates = FeatureGates {
            values: KNOWN_GATES.iter().map(|g| (g.name, g.default)).collect(),
        };
        gates.derive();
        gates
    }
}

impl FeatureGates {
    /// Parses a `--feature-gates` value (`A=true,B=false`, spaces allowed around entries;
    /// empty means all defaults) and applies OpenKruise's derivation rules.
    /// `AllAlpha=`/`AllBeta=` apply first, explicit gates override them regardless of order.
    pub fn parse(flag: &str) -> Result<Self, FeatureGateError> {
        let mut all_stage: Vec<(Stage, bool)> = Vec::new();
        let mut explicit: Vec<(&'static str, bool)> = Vec::new();
        for entry in flag.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, value) = entry
                .split_once('=')
                .ok_or_else(|| FeatureGateError::Malformed(entry.to_string()))?;
            let (name, value) = (name.trim(), value.trim());
            let parsed = parse_bool(value).ok_or_else(|| FeatureGateError::BadValue {
                gate: name.to_string(),
                value: value.to_string(),
            })?;
            match name {
                "AllAlpha" => all_stage.push((Stage::Alpha, parsed)),
                "AllBeta" => all_stage.push((Stage::Beta, parsed)),
                _ => {
                    let spec = KNOWN_GATES
                        .iter()
                        .find(|g| g.name == name)
                        .ok_or_else(|| FeatureGateError::Unknown(name.to_string()))?;
                    explicit.push((spec.name, parsed));
                }
            }
        }
        let mut values: BTreeMap<&'static str, bool> =
            KNOWN_GATES.iter().map(|g| (g.name, g.default)).collect();
        for (stage, on) in all_stage {
            for g in KNOWN_GATES.iter().filter(|g| g.stage == stage) {
                values.insert(g.name, on);
            }
        }
        values.extend(explicit);
        let mut gates = FeatureGates { values };
        gates.derive();
        Ok(gates)
    }

    /// Whether `name` is on. Unknown names are off (callers use the constants in [`KNOWN_GATES`]).
    pub fn enabled(&self, name: &str) -> bool {
        self.values.get(name).copied().unwrap_or(false)
    }

    /// Whether and how a workload's defaulting webhook writes the pod defaults into its
    /// templates (`TemplateNoDefaults`, `DefaultHostNetworkHostPortsInPodTemplates`).
    pub fn template_defaults(&self) -> TemplateDefaults {
        TemplateDefaults {
            enabled: !self.enabled("TemplateNoDefaults"),
            pod: PodDefaultsOptions {
                host_network_host_ports: self.enabled("DefaultHostNetworkHostPortsInPodTemplates"),
            },
        }
    }

    /// The gates the in-place update engine reads (`InPlaceUpdateEnvFromMetadata`,
    /// `InPlaceWorkloadVerticalScaling`).
    pub fn in_place(&self) -> crate::inplace::InPlaceGates {
        crate::inplace::InPlaceGates {
            env_from_metadata: self.enabled("InPlaceUpdateEnvFromMetadata"),
            vertical_scaling: self.enabled("InPlaceWorkloadVerticalScaling"),
        }
    }

    /// All gates with their resolved values, sorted by name.
    pub fn iter(&self) -> impl Iterator<Item = (&'static str, bool)> + '_ {
        self.values.iter().map(|(k, v)| (*k, *v))
    }

    fn set(&mut self, name: &'static str, on: bool) {
        self.values.insert(name, on);
    }

    /// OpenKruise's `SetDefaultFeatureGates`: gates that cannot work without another are
    /// switched off, and pre-download implies ImagePullJob.
    fn derive(&mut self) {
        if !self.enabled("PodWebhook") {
            for g in [
                "KruisePodReadinessGate",
                "PodUnavailableBudgetDeleteGate",
                "PodUnavailableBudgetUpdateGate",
                "WorkloadSpread",
                "SidecarSetPatchPodMetadataDefaultsAllowed",
                "EnhancedLivenessProbe",
                "EnablePodProbeMarkerOnServerless",
            ] {
                self.set(g, false);
            }
        }
        if !self.enabled("KruiseDaemon") {
            for g in [
                "PreDownloadImageForInPlaceUpdate",
                "PreDownloadImageForDaemonSetUpdate",
                "DaemonWatchingPod",
                "InPlaceUpdateEnvFromMetadata",
                "PodProbeMarkerGate",
                "SidecarTerminator",
                "ImagePullJobGate",
                "EnhancedLivenessProbe",
            ] {
                self.set(g, false);
            }
        }
        if self.enabled("PreDownloadImageForInPlaceUpdate")
            || self.enabled("PreDownloadImageForDaemonSetUpdate")
        {
            self.set("ImagePullJobGate", true);
        }
        if !self.enabled("ResourcesDeletionProtection") {
            self.set("DeletionProtectionForCRDCascadingGate", false);
        }
    }
}

fn parse_bool(v: &str) -> Option<bool> {
    // Go's strconv.ParseBool, which component-base uses for gate values.
    match v {
        "1" | "t" | "T" | "true" | "TRUE" | "True" => Some(true),
        "0" | "f" | "F" | "false" | "FALSE" | "False" => Some(false),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn template_defaults_follow_the_gates() {
        assert_eq!(
            FeatureGates::default().template_defaults(),
            TemplateDefaults::default()
        );
        let gates = FeatureGates::parse(
            "TemplateNoDefaults=true,DefaultHostNetworkHostPortsInPodTemplates=true",
        )
        .unwrap();
        let defaults = gates.template_defaults();
        assert!(!defaults.enabled);
        assert!(defaults.pod.host_network_host_ports);
    }

    #[test]
    fn defaults_match_openkruise() {
        let g = FeatureGates::default();
        assert!(g.enabled("PodWebhook"));
        assert!(g.enabled("KruiseDaemon"));
        assert!(!g.enabled("CloneSetShortHash"));
        assert!(g.enabled("InPlaceUpdateEnvFromMetadata"));
        assert!(!g.enabled("ResourcesDeletionProtection"));
        assert_eq!(FeatureGates::parse("").ok(), Some(g));
    }

    #[test]
    fn explicit_values_and_spaces() {
        let g = FeatureGates::parse(" CloneSetShortHash=true , PodWebhook=false").unwrap();
        assert!(g.enabled("CloneSetShortHash"));
        assert!(!g.enabled("PodWebhook"));
        // derived: PodWebhook off switches PUB delete off
        assert!(!g.enabled("PodUnavailableBudgetDeleteGate"));
    }

    #[test]
    fn all_alpha_then_explicit_override_in_any_order() {
        let g = FeatureGates::parse("CloneSetShortHash=false,AllAlpha=true").unwrap();
        assert!(!g.enabled("CloneSetShortHash"));
        assert!(g.enabled("CloneSetPartitionRollback"));
        assert!(g.enabled("PodWebhook"), "beta untouched by AllAlpha");
        let g = FeatureGates::parse("AllBeta=false").unwrap();
        assert!(!g.enabled("PodWebhook"));
        assert!(!g.enabled("KruiseDaemon"));
    }

    #[test]
    fn derivations() {
        let g = FeatureGates::parse("PreDownloadImageForInPlaceUpdate=true").unwrap();
        assert!(g.enabled("ImagePullJobGate"));
        let g = FeatureGates::parse("KruiseDaemon=false,PreDownloadImageForInPlaceUpdate=true")
            .unwrap();
        assert!(!g.enabled("PreDownloadImageForInPlaceUpdate"));
        assert!(!g.enabled("ImagePullJobGate"));
        assert!(!g.enabled("InPlaceUpdateEnvFromMetadata"));
        let g = FeatureGates::parse("DeletionProtectionForCRDCascadingGate=true").unwrap();
        assert!(!g.enabled("DeletionProtectionForCRDCascadingGate"));
    }

    #[test]
    fn errors_name_the_gate() {
        assert_eq!(
            FeatureGates::parse("NoSuchGate=true"),
            Err(FeatureGateError::Unknown("NoSuchGate".into()))
        );
        let err = FeatureGates::parse("CloneSetShortHash=yes").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value \"yes\" for feature gate \"CloneSetShortHash\": want true or false"
        );
        assert!(matches!(
            FeatureGates::parse("CloneSetShortHash"),
            Err(FeatureGateError::Malformed(_))
        ));
    }
}
