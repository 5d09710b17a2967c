//! kube-controller-manager's ServiceAccount controller, the part clients rely on: every
//! namespace has a `default` ServiceAccount, made when the namespace appears and made again
//! when it is deleted, but not in a namespace being deleted; and kube-apiserver's
//! ServiceAccount admission plugin, the part that needs it: a pod gets `default` when it
//! names no account, and a pod whose account does not exist is refused (the `default` one
//! looked up for a second, as it is being made). No token volume is mounted.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use crate::SimShared;
use crate::error::{ApiError, ApiResult};
use crate::meta;
use crate::ops::WriteOptions;
use crate::registry::{GroupResource, ResourceDef};

/// The ServiceAccount every namespace gets.
pub const DEFAULT_SERVICE_ACCOUNT: &str = "default";

/// The two resources the controller reads, built once (it sees every event of the store).
struct Resources {
    namespaces: GroupResource,
    service_accounts: GroupResource,
}

impl Resources {
    fn new() -> Self {
        Resources {
            namespaces: GroupResource::new("", "namespaces"),
            service_accounts: GroupResource::new("", "serviceaccounts"),
        }
    }
}

/// Creates `namespace`'s `default` ServiceAccount unless it has one or is going away.
async fn ensure_default(sh: &SimShared, gr: &Resources, namespace: &str) {
    let Some(ns) = sh.store.get(&gr.namespaces, "", namespace) else {
        return;
    };
    if meta::is_terminating(&ns)
        || sh
            .store
            .get(&gr.service_accounts, namespace, DEFAULT_SERVICE_ACCOUNT)
            .is_some()
    {
        return;
    }
    let Some(def) = sh.resolve("", "v1", "serviceaccounts") else {
        return;
    };
    let account = json!({"apiVersion": "v1", "kind": "ServiceAccount",
        "metadata": {"name": DEFAULT_SERVICE_ACCOUNT, "namespace": namespace}});
    match sh
        .create(
            &def,
            "v1",
            namespace,
            account,
            &super::workloads::controller_manager("serviceaccount-controller"),
        )
        .await
    {
        // 409: a client made it meanwhile.
        Ok(_) => {}
        Err(e) if e.code == 409 => {}
        Err(e) => tracing::debug!(error = %e, namespace, "creating the default ServiceAccount"),
    }
}

/// kube-apiserver's ServiceAccount admission on a pod create in `namespace` (only where this
/// controller runs, so that accounts exist): defaults `serviceAccountName` (and the
/// deprecated `serviceAccount` its v1 form mirrors) to `default`, and refuses the pod,
/// 403 with upstream's message, when the account does not exist.
pub(crate) async fn admit_pod(
    sh: &SimShared,
    def: &ResourceDef,
    namespace: &str,
    pod: &mut Value,
    opts: &WriteOptions,
) -> ApiResult<()> {
    let gr = Resources::new();
    if !(def.builtin && def.group.is_empty() && def.plural == "pods")
        || opts.internal
        || !sh.config.garbage_collector
    {
        return Ok(());
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return Ok(());
    };
    let named = |k: &str| {
        spec.get(k)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty())
    };
    let account = named("serviceAccountName")
        .or_else(|| named("serviceAccount"))
        .unwrap_or(DEFAULT_SERVICE_ACCOUNT)
        .to_string();
    spec.insert("serviceAccountName".into(), json!(account));
    spec.insert("serviceAccount".into(), json!(account));
    // The controller makes `default` right after the namespace: upstream retries it.
    let attempts = if account == DEFAULT_SERVICE_ACCOUNT {
        10
    } else {
        1
    };
    for attempt in 0..attempts {
        if attempt > 0 {
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
        if sh
            .store
            .get(&gr.service_accounts, namespace, &account)
            .is_some()
        {
            return Ok(());
        }
    }
    let name = match meta::meta_str(pod, "generateName") {
        "" => meta::name_of(pod),
        generate => generate,
    };
    Err(ApiError::forbidden(format!(
        "pods \"{name}\" is forbidden: error looking up service account {namespace}/{account}: serviceaccount \"{account}\" not found"
    )))
}

/// Runs the controller until the store's change stream closes.
pub(crate) async fn run(sh: Arc<SimShared>) {
    let mut rx = sh.store.subscribe();
    let gr = Resources::new();
    let all = |sh: &SimShared| -> HashSet<String> {
        sh.store
            .list(&gr.namespaces, None)
            .0
            .iter()
            .map(|ns| meta::name_of(ns).to_string())
            .collect()
    };
    let mut dirty = all(&sh);
    loop {
        for namespace in std::mem::take(&mut dirty) {
            ensure_default(&sh, &gr, &namespace).await;
        }
        match rx.recv().await {
            Ok(ev) if ev.gr == gr.namespaces => {
                dirty.insert(ev.name.clone());
            }
            Ok(ev) if ev.gr == gr.service_accounts && ev.name == DEFAULT_SERVICE_ACCOUNT => {
                dirty.insert(ev.namespace.clone());
            }
            Ok(_) => {}
            Err(RecvError::Lagged(_)) => dirty = all(&sh),
            Err(RecvError::Closed) => return,
        }
    }
}
