//! Writes whose response a controller reads only for the written object's identity.
//!
//! kube's `Api<K>` decodes every response into a whole `K`. A controller that writes
//! thousands of pods and caches them from its watch needs nothing of the response but
//! the name (a generated one), uid and resourceVersion (for its expectations), so
//! [`Writer`] sends the same requests and reads only those fields; the rest of the body
//! is skipped unparsed into values. Errors are kube's, as from `Api<K>`.

use std::marker::PhantomData;

use k8s_openapi::api::core::v1::{Pod, PodStatus};
use kruise_core::pods::PodView;
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::core::{NamespaceResourceScope, Request};
use kube::{Client, Resource};
use serde::{Deserialize, Serialize};

use crate::errors::ShellError;

/// The identity of the object a write left behind.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct Written {
    #[serde(default)]
    metadata: WrittenMeta,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
struct WrittenMeta {
    name: Option<String>,
    uid: Option<String>,
    #[serde(rename = "resourceVersion")]
    resource_version: Option<String>,
}

impl Written {
    /// The object's name: the one the server generated when the write asked for one.
    pub fn name(&self) -> Option<&str> {
        self.metadata.name.as_deref()
    }

    pub fn uid(&self) -> Option<&str> {
        self.metadata.uid.as_deref()
    }

    pub fn resource_version(&self) -> Option<&str> {
        self.metadata.resource_version.as_deref()
    }
}

/// Create, patch and delete for one namespaced kind, like `Api<K>` but reading back only
/// a [`Written`].
pub struct Writer<K> {
    client: Client,
    request: Request,
    kind: PhantomData<fn() -> K>,
}

impl<K> Writer<K>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope> + Serialize,
{
    pub fn namespaced(client: Client, namespace: &str) -> Self {
        Writer {
            client,
            request: Request::new(K::url_path(&(), Some(namespace))),
            kind: PhantomData,
        }
    }

    pub async fn create(&self, pp: &PostParams, object: &K) -> kube::Result<Written> {
        let body = serde_json::to_vec(object).map_err(kube::Error::SerdeError)?;
        self.send(self.request.create(pp, body), "create").await
    }

    /// Creates `object` unless one of its name exists (kept as it is): true when created.
    pub async fn create_if_absent(&self, object: &K) -> kube::Result<bool> {
        match self.create(&PostParams::default(), object).await {
            Ok(_) => Ok(true),
            Err(e) if crate::errors::is_already_exists(&e) => Ok(false),
            Err(e) => Err(e),
        }
    }

    pub async fn patch<P: Serialize>(
        &self,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<Written> {
        self.send(self.request.patch(name, pp, patch), "patch")
            .await
    }

    /// A patch of a subresource (`status`, `resize`, …).
    pub async fn patch_subresource<P: Serialize>(
        &self,
        subresource: &str,
        name: &str,
        pp: &PatchParams,
        patch: &Patch<P>,
    ) -> kube::Result<Written> {
        let req = self.request.patch_subresource(subresource, name, pp, patch);
        self.send(req, "patch_subresource").await
    }

    /// A strategic-merge patch of the object.
    pub async fn patch_strategic<P: Serialize>(
        &self,
        name: &str,
        patch: &P,
    ) -> kube::Result<Written> {
        self.patch(name, &PatchParams::default(), &Patch::Strategic(patch))
            .await
    }

    /// A strategic-merge patch of a subresource (`status`, `resize`).
    pub async fn patch_subresource_strategic<P: Serialize>(
        &self,
        subresource: &str,
        name: &str,
        patch: &P,
    ) -> kube::Result<Written> {
        self.patch_subresource(
            subresource,
            name,
            &PatchParams::default(),
            &Patch::Strategic(patch),
        )
        .await
    }

    /// Sends a request built by kube (tagged with its verb, as `Api` does).
    async fn send<T: serde::de::DeserializeOwned>(
        &self,
        request: Result<http::Request<Vec<u8>>, kube::core::request::Error>,
        verb: &'static str,
    ) -> kube::Result<T> {
        let mut req = request.map_err(kube::Error::BuildRequest)?;
        req.extensions_mut().insert(verb);
        self.client.request(req).await
    }

    /// Deletes; the response (the object while finalizers or grace hold it, otherwise a
    /// Status) is not read.
    pub async fn delete(&self, name: &str, dp: &DeleteParams) -> kube::Result<()> {
        self.send::<serde::de::IgnoredAny>(self.request.delete(name, dp), "delete")
            .await
            .map(|_| ())
    }
}

impl Writer<Pod> {
    /// The workload shells' pod-status write: the conditions `status` changes on `cached`,
    /// with `meta_patch`'s labels and annotations, as one strategic-merge patch of
    /// `pods/status` ([`kruise_core::pods::status_patch`]); `None` when nothing changes.
    /// A pod the cache does not hold is the shell's `UpdatePod` failure (not found).
    pub async fn patch_pod_status<P: PodView + ?Sized>(
        &self,
        name: &str,
        cached: Option<&P>,
        status: &PodStatus,
        meta_patch: &serde_json::Value,
    ) -> Result<Option<Written>, ShellError> {
        let Some(cached) = cached else {
            return Err(ShellError::update_pod(
                name,
                crate::errors::not_found(&format!("pod {name}")),
            ));
        };
        let body =
            kruise_core::pods::status_patch(cached, status, meta_patch).map_err(|source| {
                ShellError::EncodePodStatus {
                    name: name.to_string(),
                    source,
                }
            })?;
        let Some(body) = body else {
            return Ok(None);
        };
        self.patch_subresource_strategic("status", name, &body)
            .await
            .map(Some)
            .map_err(|e| ShellError::update_pod(name, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_only_uid_and_resource_version() {
        let pod = serde_json::json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "p", "uid": "u-1", "resourceVersion": "42",
                         "labels": {"a": "b"}, "managedFields": [{"manager": "m"}]},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
            "status": {"phase": "Running"},
        });
        let written: Written = serde_json::from_value(pod).unwrap();
        assert_eq!(written.name(), Some("p"));
        assert_eq!(written.uid(), Some("u-1"));
        assert_eq!(written.resource_version(), Some("42"));
        let bare: Written = serde_json::from_str("{}").unwrap();
        assert_eq!(bare, Written::default());
    }
}
