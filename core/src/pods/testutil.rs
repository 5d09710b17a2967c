//! Test pod builder.

use std::collections::BTreeMap;

use jiff::Timestamp;
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition, PodSpec, PodStatus};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};

pub fn ts(s: i64) -> Timestamp {
    Timestamp::from_second(1_700_000_000 + s).unwrap()
}

#[derive(Clone)]
pub struct P(pub Pod);

pub fn pod(name: &str) -> P {
    P(Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            namespace: Some("ns".into()),
            ..Default::default()
        },
        spec: Some(PodSpec::default()),
        status: Some(PodStatus {
            phase: Some("Running".into()),
            ..Default::default()
        }),
    })
}

impl P {
    pub fn node(mut self, n: &str) -> Self {
        self.0.spec.get_or_insert_with(Default::default).node_name = Some(n.into());
        self
    }
    pub fn phase(mut self, p: &str) -> Self {
        self.0.status.get_or_insert_with(Default::default).phase = Some(p.into());
        self
    }
    pub fn cond(mut self, ty: &str, status: &str, at: Option<i64>) -> Self {
        let st = self.0.status.get_or_insert_with(Default::default);
        let conds = st.conditions.get_or_insert_with(Vec::new);
        conds.retain(|c| c.type_ != ty);
        conds.push(PodCondition {
            type_: ty.into(),
            status: status.into(),
            last_transition_time: at.map(|s| Time(ts(s))),
            ..Default::default()
        });
        self
    }
    pub fn ready_at(self, s: i64) -> Self {
        self.cond("Ready", "True", Some(s))
    }
    pub fn label(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .labels
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    pub fn annotation(mut self, k: &str, v: &str) -> Self {
        self.0
            .metadata
            .annotations
            .get_or_insert_with(BTreeMap::new)
            .insert(k.into(), v.into());
        self
    }
    pub fn created(mut self, s: i64) -> Self {
        self.0.metadata.creation_timestamp = Some(Time(ts(s)));
        self
    }
    pub fn restarts(mut self, n: i32) -> Self {
        let st = self.0.status.get_or_insert_with(Default::default);
        st.container_statuses = Some(vec![ContainerStatus {
            name: "main".into(),
            restart_count: n,
            ..Default::default()
        }]);
        self
    }
}
