//! The set of resources the server serves: built-in kinds plus CRDs registered at runtime.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Value, json};

use crate::meta::NameRule;

/// Storage identity of a resource: group + plural. All served versions share it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupResource {
    pub group: String,
    pub resource: String,
}

impl GroupResource {
    pub fn new(group: &str, resource: &str) -> Self {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

/// A CRD additionalPrinterColumn (built-in tables have their own columns in `table.rs`).
#[derive(Debug, Clone, PartialEq)]
pub struct PrinterColumn {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i64,
    pub json_path: String,
}

/// Where the scale subresource reads and writes replicas.
#[derive(Debug, Clone, PartialEq)]
pub struct ScaleSpec {
    pub spec_replicas_path: String,
    pub status_replicas_path: String,
    pub label_selector_path: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct VersionDef {
    pub name: String,
    pub served: bool,
    pub storage: bool,
    pub status: bool,
    pub scale: Option<ScaleSpec>,
    pub printer_columns: Vec<PrinterColumn>,
    pub schema: Option<Value>,
    pub selectable_fields: Vec<String>,
}

/// Everything the server knows about one resource.
#[derive(Debug, Clone, PartialEq)]
pub struct ResourceDef {
    pub group: String,
    pub plural: String,
    pub singular: String,
    pub kind: String,
    pub list_kind: String,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub versions: Vec<VersionDef>,
    /// Built-in kinds accept strategic merge patch; custom resources do not.
    pub builtin: bool,
    /// Extra subresources beyond status/scale (`binding`, `eviction`, `finalize`).
    pub extra_subresources: Vec<&'static str>,
    /// Verbs the resource supports (discovery and 405 checks).
    pub verbs: Vec<&'static str>,
    pub name_rule: NameRule,
    /// Field selectors (beyond metadata.name / metadata.namespace) the server accepts.
    pub field_selectors: Vec<String>,
    /// Updates without metadata.resourceVersion are allowed (most built-ins) or rejected (CRs).
    pub allow_unconditional_update: bool,
    /// Whether objects carry metadata.generation.
    pub has_generation: bool,
    /// Set when another resource's storage is shared (events.k8s.io/v1 events are
    /// stored as core/v1 events).
    pub storage_gr: Option<GroupResource>,
    /// A CRD's `spec.conversion.webhook` when `strategy: Webhook`: objects are converted
    /// through it between served versions (`None`: only apiVersion is rewritten).
    pub conversion_webhook: Option<Value>,
}

impl ResourceDef {
    /// Where objects are stored (and what watch events carry).
    pub fn gr(&self) -> GroupResource {
        self.storage_gr
            .clone()
            .unwrap_or_else(|| GroupResource::new(&self.group, &self.plural))
    }

    /// How the resource is served (registry key).
    pub fn key(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    /// Whether this is the events.k8s.io view of core events.
    pub fn is_events_v1(&self) -> bool {
        self.group == "events.k8s.io" && self.plural == "events"
    }

    pub fn version(&self, v: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|x| x.name == v && x.served)
    }

    pub fn storage_version(&self) -> &str {
        self.versions
            .iter()
            .find(|v| v.storage)
            .or_else(|| self.versions.first())
            .map(|v| v.name.as_str())
            .unwrap_or("v1")
    }

    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{}", self.group, version)
        }
    }

    pub fn has_status(&self, version: &str) -> bool {
        self.versions
            .iter()
            .find(|v| v.name == version)
            .is_some_and(|v| v.status)
    }

    pub fn scale(&self, version: &str) -> Option<&ScaleSpec> {
        self.versions
            .iter()
            .find(|v| v.name == version)
            .and_then(|v| v.scale.as_ref())
    }

    pub fn supports_field_selector(&self, version: &str, field: &str) -> bool {
        field == "metadata.name"
            || (field == "metadata.namespace")
            || self.field_selectors.iter().any(|f| f == field)
            || self
                .versions
                .iter()
                .find(|v| v.name == version)
                .is_some_and(|v| {
                    v.selectable_fields
                        .iter()
                        .any(|f| f.trim_start_matches('.') == field)
                })
    }
}

const ALL_VERBS: &[&str] = &[
    "create",
    "delete",
    "deletecollection",
    "get",
    "list",
    "patch",
    "update",
    "watch",
];

struct Builtin {
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
    short_names: &'static [&'static str],
    categories: &'static [&'static str],
    status: bool,
    scale: bool,
    extra: &'static [&'static str],
    fields: &'static [&'static str],
    name_rule: NameRule,
    generation: bool,
}

const fn b(
    group: &'static str,
    version: &'static str,
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Builtin {
    Builtin {
        group,
        version,
        plural,
        singular,
        kind,
        namespaced,
        short_names: &[],
        categories: &[],
        status: false,
        scale: false,
        extra: &[],
        fields: &[],
        name_rule: NameRule::Dns1123Subdomain,
        generation: false,
    }
}

/// An `rbac.authorization.k8s.io/v1` kind; kube-apiserver checks RBAC object names as path
/// segments (`ValidateRBACName`).
const fn rbac(
    plural: &'static str,
    singular: &'static str,
    kind: &'static str,
    namespaced: bool,
) -> Builtin {
    Builtin {
        name_rule: NameRule::PathSegment,
        ..b(
            "rbac.authorization.k8s.io",
            "v1",
            plural,
            singular,
            kind,
            namespaced,
        )
    }
}

fn builtin_table() -> Vec<Builtin> {
    let workload_cats: &'static [&'static str] = &["all"];
    vec![
        Builtin {
            short_names: &["ns"],
            status: true,
            extra: &["finalize"],
            fields: &["status.phase"],
            name_rule: NameRule::Dns1123Label,
            ..b("", "v1", "namespaces", "namespace", "Namespace", false)
        },
        Builtin {
            short_names: &["no"],
            status: true,
            fields: &["spec.unschedulable"],
            ..b("", "v1", "nodes", "node", "Node", false)
        },
        Builtin {
            short_names: &["po"],
            categories: workload_cats,
            status: true,
            extra: &["binding", "eviction", "resize"],
            fields: &[
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.nominatedNodeName",
            ],
            generation: true,
            ..b("", "v1", "pods", "pod", "Pod", true)
        },
        Builtin {
            short_names: &["cm"],
            ..b("", "v1", "configmaps", "configmap", "ConfigMap", true)
        },
        Builtin {
            fields: &["type"],
            ..b("", "v1", "secrets", "secret", "Secret", true)
        },
        Builtin {
            short_names: &["ev"],
            fields: &[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
            ],
            name_rule: NameRule::PathSegment,
            ..b("", "v1", "events", "event", "Event", true)
        },
        Builtin {
            short_names: &["svc"],
            categories: workload_cats,
            status: true,
            name_rule: NameRule::Dns1035Label,
            ..b("", "v1", "services", "service", "Service", true)
        },
        Builtin {
            short_names: &["ep"],
            ..b("", "v1", "endpoints", "endpoints", "Endpoints", true)
        },
        Builtin {
            short_names: &["sa"],
            ..b(
                "",
                "v1",
                "serviceaccounts",
                "serviceaccount",
                "ServiceAccount",
                true,
            )
        },
        Builtin {
            short_names: &["pvc"],
            status: true,
            ..b(
                "",
                "v1",
                "persistentvolumeclaims",
                "persistentvolumeclaim",
                "PersistentVolumeClaim",
                true,
            )
        },
        Builtin {
            short_names: &["pv"],
            status: true,
            ..b(
                "",
                "v1",
                "persistentvolumes",
                "persistentvolume",
                "PersistentVolume",
                false,
            )
        },
        b(
            "apps",
            "v1",
            "controllerrevisions",
            "controllerrevision",
            "ControllerRevision",
            true,
        ),
        Builtin {
            short_names: &["deploy"],
            categories: workload_cats,
            status: true,
            scale: true,
            generation: true,
            ..b(
                "apps",
                "v1",
                "deployments",
                "deployment",
                "Deployment",
                true,
            )
        },
        Builtin {
            short_names: &["rs"],
            categories: workload_cats,
            status: true,
            scale: true,
            generation: true,
            fields: &["status.replicas"],
            ..b(
                "apps",
                "v1",
                "replicasets",
                "replicaset",
                "ReplicaSet",
                true,
            )
        },
        Builtin {
            short_names: &["sts"],
            categories: workload_cats,
            status: true,
            scale: true,
            generation: true,
            ..b(
                "apps",
                "v1",
                "statefulsets",
                "statefulset",
                "StatefulSet",
                true,
            )
        },
        Builtin {
            short_names: &["ds"],
            categories: workload_cats,
            status: true,
            generation: true,
            ..b("apps", "v1", "daemonsets", "daemonset", "DaemonSet", true)
        },
        Builtin {
            categories: workload_cats,
            status: true,
            generation: true,
            fields: &["status.successful"],
            ..b("batch", "v1", "jobs", "job", "Job", true)
        },
        Builtin {
            short_names: &["cj"],
            categories: workload_cats,
            status: true,
            generation: true,
            ..b("batch", "v1", "cronjobs", "cronjob", "CronJob", true)
        },
        b(
            "coordination.k8s.io",
            "v1",
            "leases",
            "lease",
            "Lease",
            true,
        ),
        Builtin {
            short_names: &["ev"],
            fields: &[
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
                "reason",
                "reportingController",
                "type",
            ],
            name_rule: NameRule::PathSegment,
            ..b("events.k8s.io", "v1", "events", "event", "Event", true)
        },
        Builtin {
            short_names: &["pdb"],
            status: true,
            generation: true,
            ..b(
                "policy",
                "v1",
                "poddisruptionbudgets",
                "poddisruptionbudget",
                "PodDisruptionBudget",
                true,
            )
        },
        Builtin {
            short_names: &["crd", "crds"],
            categories: &["api-extensions"],
            status: true,
            generation: true,
            ..b(
                "apiextensions.k8s.io",
                "v1",
                "customresourcedefinitions",
                "customresourcedefinition",
                "CustomResourceDefinition",
                false,
            )
        },
        Builtin {
            categories: &["api-extensions"],
            generation: true,
            ..b(
                "admissionregistration.k8s.io",
                "v1",
                "mutatingwebhookconfigurations",
                "mutatingwebhookconfiguration",
                "MutatingWebhookConfiguration",
                false,
            )
        },
        Builtin {
            categories: &["api-extensions"],
            generation: true,
            ..b(
                "admissionregistration.k8s.io",
                "v1",
                "validatingwebhookconfigurations",
                "validatingwebhookconfiguration",
                "ValidatingWebhookConfiguration",
                false,
            )
        },
        // What a chart installs besides the families' own kinds.
        rbac("roles", "role", "Role", true),
        rbac("rolebindings", "rolebinding", "RoleBinding", true),
        rbac("clusterroles", "clusterrole", "ClusterRole", false),
        rbac(
            "clusterrolebindings",
            "clusterrolebinding",
            "ClusterRoleBinding",
            false,
        ),
        Builtin {
            short_names: &["pc"],
            ..b(
                "scheduling.k8s.io",
                "v1",
                "priorityclasses",
                "priorityclass",
                "PriorityClass",
                false,
            )
        },
        Builtin {
            short_names: &["sc"],
            ..b(
                "storage.k8s.io",
                "v1",
                "storageclasses",
                "storageclass",
                "StorageClass",
                false,
            )
        },
        // Served so that Ingress deletion protection can be tested end to end; nothing
        // routes traffic.
        Builtin {
            short_names: &["ing"],
            status: true,
            generation: true,
            ..b(
                "networking.k8s.io",
                "v1",
                "ingresses",
                "ingress",
                "Ingress",
                true,
            )
        },
        Builtin {
            generation: true,
            ..b(
                "networking.k8s.io",
                "v1",
                "ingressclasses",
                "ingressclass",
                "IngressClass",
                false,
            )
        },
    ]
}

pub fn builtin_defs() -> Vec<ResourceDef> {
    builtin_table()
        .into_iter()
        .map(|bi| {
            let scale = if bi.scale {
                Some(ScaleSpec {
                    spec_replicas_path: ".spec.replicas".into(),
                    status_replicas_path: ".status.replicas".into(),
                    label_selector_path: Some(".spec.selector".into()),
                })
            } else {
                None
            };
            let mut extra: Vec<&'static str> = bi.extra.to_vec();
            if bi.status {
                extra.push("status");
            }
            if bi.scale {
                extra.push("scale");
            }
            ResourceDef {
                group: bi.group.into(),
                plural: bi.plural.into(),
                singular: bi.singular.into(),
                kind: bi.kind.into(),
                list_kind: format!("{}List", bi.kind),
                namespaced: bi.namespaced,
                short_names: bi.short_names.iter().map(|s| s.to_string()).collect(),
                categories: bi.categories.iter().map(|s| s.to_string()).collect(),
                versions: vec![VersionDef {
                    name: bi.version.into(),
                    served: true,
                    storage: true,
                    status: bi.status,
                    scale,
                    // Built-in tables are rendered by `table.rs`.
                    printer_columns: Vec::new(),
                    schema: None,
                    selectable_fields: Vec::new(),
                }],
                builtin: true,
                extra_subresources: extra
                    .into_iter()
                    .filter(|s| *s != "status" && *s != "scale")
                    .collect(),
                verbs: ALL_VERBS.to_vec(),
                name_rule: bi.name_rule,
                field_selectors: bi.fields.iter().map(|s| s.to_string()).collect(),
                allow_unconditional_update: true,
                has_generation: bi.generation,
                storage_gr: (bi.group == "events.k8s.io").then(|| GroupResource::new("", "events")),
                conversion_webhook: None,
            }
        })
        .collect()
}

fn str_list(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|x| x.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

/// Builds the resource definition a CustomResourceDefinition object describes.
pub fn def_from_crd(crd: &Value) -> Result<ResourceDef, String> {
    let spec = crd.get("spec").ok_or("spec is required")?;
    let group = spec
        .get("group")
        .and_then(Value::as_str)
        .ok_or("spec.group is required")?;
    let names = spec.get("names").ok_or("spec.names is required")?;
    let plural = names
        .get("plural")
        .and_then(Value::as_str)
        .ok_or("spec.names.plural is required")?;
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .ok_or("spec.names.kind is required")?;
    let singular = names
        .get("singular")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| kind.to_lowercase());
    let list_kind = names
        .get("listKind")
        .and_then(Value::as_str)
        .map(str::to_string)
        .unwrap_or_else(|| format!("{kind}List"));
    let scope = spec
        .get("scope")
        .and_then(Value::as_str)
        .ok_or("spec.scope is required")?;
    let namespaced = match scope {
        "Namespaced" => true,
        "Cluster" => false,
        other => return Err(format!("spec.scope: Unsupported value: \"{other}\"")),
    };
    let versions_json = spec
        .get("versions")
        .and_then(Value::as_array)
        .ok_or("spec.versions is required")?;
    if versions_json.is_empty() {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    let mut versions = Vec::new();
    for v in versions_json {
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .ok_or("spec.versions[].name is required")?;
        let sub = v.get("subresources");
        let status = sub
            .and_then(|s| s.get("status"))
            .is_some_and(|s| !s.is_null());
        let scale = sub
            .and_then(|s| s.get("scale"))
            .filter(|s| !s.is_null())
            .map(|s| ScaleSpec {
                spec_replicas_path: s
                    .get("specReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".spec.replicas")
                    .to_string(),
                status_replicas_path: s
                    .get("statusReplicasPath")
                    .and_then(Value::as_str)
                    .unwrap_or(".status.replicas")
                    .to_string(),
                label_selector_path: s
                    .get("labelSelectorPath")
                    .and_then(Value::as_str)
                    .map(str::to_string),
            });
        let mut printer_columns: Vec<PrinterColumn> = v
            .get("additionalPrinterColumns")
            .and_then(Value::as_array)
            .map(|cols| {
                cols.iter()
                    .filter_map(|c| {
                        Some(PrinterColumn {
                            name: c.get("name")?.as_str()?.to_string(),
                            type_: c
                                .get("type")
                                .and_then(Value::as_str)
                                .unwrap_or("string")
                                .to_string(),
                            format: c
                                .get("format")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            description: c
                                .get("description")
                                .and_then(Value::as_str)
                                .unwrap_or("")
                                .to_string(),
                            priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                            json_path: c.get("jsonPath")?.as_str()?.to_string(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default();
        if printer_columns.is_empty() {
            // The API server's default for CRDs without columns: just Age.
            printer_columns.push(PrinterColumn {
                name: "Age".into(),
                type_: "date".into(),
                format: String::new(),
                description: "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata".into(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            });
        }
        versions.push(VersionDef {
            name: name.to_string(),
            served: v.get("served").and_then(Value::as_bool).unwrap_or(true),
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            status,
            scale,
            printer_columns,
            schema: v
                .get("schema")
                .and_then(|s| s.get("openAPIV3Schema"))
                .cloned(),
            selectable_fields: v
                .get("selectableFields")
                .and_then(Value::as_array)
                .map(|a| {
                    a.iter()
                        .filter_map(|f| f.get("jsonPath").and_then(Value::as_str))
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
        });
    }
    let storage_count = versions.iter().filter(|v| v.storage).count();
    if storage_count != 1 {
        return Err(
            "spec.versions: Invalid value: must have exactly one version marked as storage version"
                .into(),
        );
    }
    Ok(ResourceDef {
        group: group.into(),
        plural: plural.into(),
        singular,
        kind: kind.into(),
        list_kind,
        namespaced,
        short_names: str_list(names.get("shortNames")),
        categories: str_list(names.get("categories")),
        versions,
        builtin: false,
        extra_subresources: Vec::new(),
        verbs: ALL_VERBS.to_vec(),
        // Custom resource names are validated as DNS-1123 subdomains upstream.
        name_rule: NameRule::Dns1123Subdomain,
        field_selectors: Vec::new(),
        allow_unconditional_update: false,
        has_generation: true,
        storage_gr: None,
        conversion_webhook: spec
            .get("conversion")
            .filter(|c| c.get("strategy").and_then(Value::as_str) == Some("Webhook"))
            .and_then(|c| c.get("webhook"))
            .cloned(),
    })
}

/// Kubernetes version priority: GA > beta > alpha, higher numbers first, then
/// non-conforming names alphabetically (`version.CompareKubeAwareVersionStrings`).
pub fn version_priority_key(v: &str) -> (u8, i64, i64, String) {
    let parse = |s: &str| -> Option<(u8, i64, i64)> {
        let rest = s.strip_prefix('v')?;
        let digits: String = rest.chars().take_while(|c| c.is_ascii_digit()).collect();
        let major: i64 = digits.parse().ok()?;
        let tail = &rest[digits.len()..];
        if tail.is_empty() {
            return Some((0, -major, 0));
        }
        for (prefix, rank) in [("beta", 1u8), ("alpha", 2u8)] {
            if let Some(n) = tail.strip_prefix(prefix) {
                let minor: i64 = n.parse().ok()?;
                return Some((rank, -major, -minor));
            }
        }
        None
    };
    match parse(v) {
        Some((rank, major, minor)) => (rank, major, minor, String::new()),
        None => (3, 0, 0, v.to_string()),
    }
}

/// Registry of served resources. Cheap to clone entries (Arc).
#[derive(Debug, Default)]
pub struct Registry {
    pub by_gr: BTreeMap<GroupResource, Arc<ResourceDef>>,
    /// Order in which groups were first seen (discovery order: built-ins first).
    pub group_order: Vec<String>,
}

impl Registry {
    pub fn with_builtins() -> Self {
        let mut r = Registry::default();
        for def in builtin_defs() {
            r.insert(def);
        }
        r
    }

    pub fn insert(&mut self, def: ResourceDef) {
        if !self.group_order.contains(&def.group) {
            self.group_order.push(def.group.clone());
        }
        self.by_gr.insert(def.key(), Arc::new(def));
    }

    pub fn remove(&mut self, gr: &GroupResource) {
        self.by_gr.remove(gr);
        let group = gr.group.clone();
        if !self.by_gr.keys().any(|k| k.group == group) {
            self.group_order.retain(|g| *g != group);
        }
    }

    pub fn get(&self, group: &str, resource: &str) -> Option<Arc<ResourceDef>> {
        self.by_gr
            .get(&GroupResource::new(group, resource))
            .cloned()
    }

    /// Resource served at group/version with this plural.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        let def = self.get(group, plural)?;
        def.version(version)?;
        Some(def)
    }

    /// Served versions of a group, in priority order.
    pub fn group_versions(&self, group: &str) -> Vec<String> {
        let mut vs: Vec<String> = Vec::new();
        for def in self.by_gr.values().filter(|d| d.group == group) {
            for v in def.versions.iter().filter(|v| v.served) {
                if !vs.contains(&v.name) {
                    vs.push(v.name.clone());
                }
            }
        }
        vs.sort_by_key(|v| version_priority_key(v));
        vs
    }

    pub fn resources_in(&self, group: &str, version: &str) -> Vec<Arc<ResourceDef>> {
        self.by_gr
            .values()
            .filter(|d| d.group == group && d.version(version).is_some())
            .cloned()
            .collect()
    }
}

/// The status the CRD controllers (naming, establishing) would write.
pub fn crd_status(crd: &Value, def: &ResourceDef) -> Value {
    let now = crate::meta::now_rfc3339();
    let names = crd
        .get("spec")
        .and_then(|s| s.get("names"))
        .cloned()
        .unwrap_or(json!({}));
    let mut accepted = names;
    if let Some(m) = accepted.as_object_mut() {
        m.entry("singular")
            .or_insert_with(|| Value::String(def.singular.clone()));
        m.entry("listKind")
            .or_insert_with(|| Value::String(def.list_kind.clone()));
    }
    let mut stored: Vec<String> = crd
        .get("status")
        .and_then(|s| s.get("storedVersions"))
        .map(|v| str_list(Some(v)))
        .unwrap_or_default();
    let storage = def.storage_version().to_string();
    if !stored.contains(&storage) {
        stored.push(storage);
    }
    json!({
        "acceptedNames": accepted,
        "conditions": [
            {
                "type": "NamesAccepted",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "NoConflicts",
                "message": "no conflicts found"
            },
            {
                "type": "Established",
                "status": "True",
                "lastTransitionTime": now,
                "reason": "InitialNamesAccepted",
                "message": "the initial names have been accepted"
            }
        ],
        "storedVersions": stored
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_order() {
        let mut v = vec!["v1alpha1", "v1", "v1beta1", "v2", "foo"];
        v.sort_by_key(|x| version_priority_key(x));
        assert_eq!(v, vec!["v2", "v1", "v1beta1", "v1alpha1", "foo"]);
    }
}
