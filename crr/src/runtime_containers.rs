//! A pod's containers as the container runtime reports them (CRI `ListContainers` and
//! `ContainerStatus`), for both node-agent loops: the recreate requests' and the
//! `runtime-containers-meta` writer's.

use std::collections::HashMap;

use jiff::Timestamp;
use kruise_cri::RuntimeServiceClient;
use kruise_cri::v1 as cri;
use tonic::transport::Channel;

use crate::plan::agent::{RunState, RuntimeContainer};

/// The kubelet's container annotation holding the restart count.
pub const RESTART_COUNT_ANNOTATION: &str = "io.kubernetes.container.restartCount";
/// The kubelet's container annotation holding its hash of the container spec (hexadecimal).
pub const CONTAINER_HASH_ANNOTATION: &str = "io.kubernetes.container.hash";

/// The newest attempt of each of the pod's containers, as the runtime reports it.
pub async fn pod_containers(
    cri: &mut RuntimeServiceClient<Channel>,
    pod_uid: &str,
    runtime_name: &str,
) -> Result<Vec<RuntimeContainer>, tonic::Status> {
    let listed = cri
        .list_containers(cri::ListContainersRequest {
            filter: Some(cri::ContainerFilter {
                label_selector: HashMap::from([(
                    kruise_cri::LABEL_POD_UID.to_string(),
                    pod_uid.to_string(),
                )]),
                ..Default::default()
            }),
        })
        .await?
        .into_inner()
        .containers;
    let mut newest: HashMap<String, cri::Container> = HashMap::new();
    for c in listed {
        let name = c
            .metadata
            .as_ref()
            .map(|m| m.name.clone())
            .unwrap_or_default();
        match newest.get(&name) {
            Some(seen) if seen.created_at >= c.created_at => {}
            _ => {
                newest.insert(name, c);
            }
        }
    }
    let mut out = Vec::with_capacity(newest.len());
    for (name, c) in newest {
        let status = cri
            .container_status(cri::ContainerStatusRequest {
                container_id: c.id.clone(),
                verbose: false,
            })
            .await?
            .into_inner()
            .status
            .unwrap_or_default();
        let restart_count = c
            .annotations
            .get(RESTART_COUNT_ANNOTATION)
            .and_then(|n| n.parse().ok())
            .or_else(|| {
                c.metadata
                    .as_ref()
                    .and_then(|m| i32::try_from(m.attempt).ok())
            })
            .unwrap_or_default();
        out.push(RuntimeContainer {
            name,
            id: format!("{runtime_name}://{}", c.id),
            runtime_id: c.id,
            state: run_state(status.state),
            started_at: (status.started_at > 0)
                .then(|| Timestamp::from_nanosecond(i128::from(status.started_at)).ok())
                .flatten(),
            restart_count,
            kubelet_hash: c
                .annotations
                .get(CONTAINER_HASH_ANNOTATION)
                .and_then(|h| u64::from_str_radix(h, 16).ok()),
        });
    }
    Ok(out)
}

fn run_state(state: i32) -> RunState {
    match cri::ContainerState::try_from(state) {
        Ok(cri::ContainerState::ContainerCreated) => RunState::Created,
        Ok(cri::ContainerState::ContainerRunning) => RunState::Running,
        Ok(cri::ContainerState::ContainerExited) => RunState::Exited,
        _ => RunState::Unknown,
    }
}
