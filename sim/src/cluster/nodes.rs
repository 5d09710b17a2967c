//! Simulated nodes `sim-node-0..N-1`, created at start the way a kubelet registers
//! itself: the Node object first, then its status (capacity, Ready, addresses).

use std::sync::Arc;

use anyhow::Context;
use serde_json::{Value, json};

use crate::SimShared;
use crate::ops::{Subresource, WriteOptions};

/// Zones the nodes are spread over (round robin), so topology spread and zone-aware
/// controllers have something to spread across.
pub const ZONES: [&str; 3] = ["sim-zone-a", "sim-zone-b", "sim-zone-c"];

pub fn node_name(i: usize) -> String {
    format!("sim-node-{i}")
}

/// The node's InternalIP: 172.18.0.(i+2), like kind's node addresses.
pub fn node_ip(i: usize) -> String {
    let n = i as u32 + 2;
    format!("172.18.{}.{}", n / 256, n % 256)
}

pub(crate) fn kubelet_opts(node: &str) -> WriteOptions {
    WriteOptions {
        user_agent: format!("kubelet/v1.33.0 (linux/amd64) kubernetes/{node}"),
        ..Default::default()
    }
}

/// What each simulated node offers unless told otherwise.
pub fn default_capacity() -> Value {
    json!({"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"})
}

/// The Node a kubelet registers for node `name`, the `i`th simulated node.
pub(crate) fn node_object(name: &str, i: usize) -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "topology.kubernetes.io/zone": ZONES[i % ZONES.len()],
            },
            "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
        },
        "spec": {"podCIDR": format!("10.244.{i}.0/24"), "podCIDRs": [format!("10.244.{i}.0/24")]},
    })
}

/// The status the kubelet of node `name` (the `i`th) posts: Ready, capacity and
/// allocatable `resources`, addresses, node info.
pub(crate) fn node_status(name: &str, i: usize, resources: &Value) -> Value {
    let now = crate::meta::now_rfc3339();
    json!({
        "capacity": resources,
        "allocatable": resources,
        "conditions": [
            {"type": "MemoryPressure", "status": "False", "reason": "KubeletHasSufficientMemory",
             "message": "kubelet has sufficient memory available", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "DiskPressure", "status": "False", "reason": "KubeletHasNoDiskPressure",
             "message": "kubelet has no disk pressure", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "PIDPressure", "status": "False", "reason": "KubeletHasSufficientPID",
             "message": "kubelet has sufficient PID available", "lastHeartbeatTime": now, "lastTransitionTime": now},
            {"type": "Ready", "status": "True", "reason": "KubeletReady",
             "message": "kubelet is posting ready status", "lastHeartbeatTime": now, "lastTransitionTime": now},
        ],
        "addresses": [
            {"type": "InternalIP", "address": node_ip(i)},
            {"type": "Hostname", "address": name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        "nodeInfo": {
            "architecture": "amd64",
            "operatingSystem": "linux",
            "osImage": "kruise-sim",
            "kernelVersion": "6.1.0",
            "containerRuntimeVersion": "containerd://1.7.0",
            "kubeletVersion": "v1.33.0",
            "kubeProxyVersion": "v1.33.0",
            "machineID": format!("{:032x}", i + 1),
            "systemUUID": format!("00000000-0000-0000-0000-{:012x}", i + 1),
            "bootID": format!("00000000-0000-0000-0001-{:012x}", i + 1),
        },
        "phase": "Running",
    })
}

/// Creates (or re-uses) the configured nodes and posts their Ready status.
pub async fn register(sh: &Arc<SimShared>, count: usize) -> anyhow::Result<()> {
    let def = sh
        .resolve("", "v1", "nodes")
        .context("nodes resource missing from the registry")?;
    for i in 0..count {
        let name = node_name(i);
        let opts = kubelet_opts(&name);
        let body = node_object(&name, i);
        match sh.create(&def, "v1", "", body, &opts).await {
            Ok(_) => {}
            Err(e) if e.code == 409 => {}
            Err(e) => anyhow::bail!("creating node {name}: {e}"),
        }
        // A kubelet registers the Node, then reports its status separately.
        sh.update_with(&def, "v1", "", &name, Subresource::Status, &opts, |cur| {
            let mut next = cur.clone();
            if let Some(m) = next.as_object_mut() {
                m.insert("status".into(), node_status(&name, i, &default_capacity()));
            }
            Ok(next)
        })
        .await
        .map_err(|e| anyhow::anyhow!("posting status of node {name}: {e}"))?;
    }
    Ok(())
}
