//! The controllers of `kruise-imagepull`, each a shell around its planner: **observe** (the
//! caches) -> **validate** -> **plan** (time an input, read from [`Settings::clock`]) ->
//! **execute** -> **status**.
//!
//! * [`nodeimage`]: one NodeImage per Ready node, kept in step with the node and the
//!   ImagePullJobs that own its tags;
//! * [`imagepulljob`]: hands each job's tag to its NodeImages, `parallelism` at a time,
//!   syncs its pull secrets, and writes its status;
//! * [`imagelistpulljob`]: one child ImagePullJob per image of a list.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher as _;
use std::sync::Arc;
use std::time::Duration;

use jiff::Timestamp;

use crate::plan::imagepulljob::{DEFAULT_TTL_FOR_ALWAYS_SECONDS, TagSettings};

pub mod imagelistpulljob;
pub mod imagepulljob;
pub mod nodeimage;

/// The reconciles' errors: each of their steps (reading, creating, updating and deleting
/// NodeImages, secret copies and jobs; status) is one the kit's shells share.
pub use kruise_runtime::errors::ShellError as Error;

/// The NodeImage controller's name (metrics, readiness `controller/nodeimage`).
pub const NODEIMAGE_CONTROLLER: &str = "nodeimage";
/// The ImagePullJob controller's name.
pub const IMAGEPULLJOB_CONTROLLER: &str = "imagepulljob";
/// The ImageListPullJob controller's name.
pub const IMAGELISTPULLJOB_CONTROLLER: &str = "imagelistpulljob";
/// Reason of the Warning event on an object the validating webhook would have refused.
pub const REASON_INVALID_SPEC: &str = "InvalidSpec";
/// The agent's namespace, where pull secrets are copied (OpenKruise's default).
pub const DEFAULT_AGENT_NAMESPACE: &str = "kruise-daemon-config";

/// Whether `store` has its first full list, waiting up to `wait`. (kube-runtime's ready
/// signal wakes only the task that polled it last, so every waiter polls with a timeout.)
async fn cache_ready<K>(store: &kube::runtime::reflector::Store<K>, wait: Duration) -> bool
where
    K: kube::Resource + Clone + 'static,
    K::DynamicType: Eq + std::hash::Hash + Clone,
{
    matches!(
        tokio::time::timeout(wait, store.wait_until_ready()).await,
        Ok(Ok(()))
    )
}

/// The controllers' clock: every reconcile reads the time once, from here.
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// Settings of both controllers.
#[derive(Clone)]
pub struct Settings {
    /// Watch only this namespace's ImagePullJobs (all when `None`).
    pub namespace: Option<String>,
    /// Where pull secrets are copied for the agent.
    pub agent_namespace: String,
    /// `--nodeimage-creation-delay`.
    pub creation_delay: Duration,
    /// `--default-ttlseconds-for-always-nodeimage`.
    pub default_ttl_for_always: i32,
    /// The time (tests set their own).
    pub clock: Clock,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            namespace: None,
            agent_namespace: DEFAULT_AGENT_NAMESPACE.into(),
            creation_delay: crate::plan::nodeimage::DEFAULT_CREATION_DELAY,
            default_ttl_for_always: DEFAULT_TTL_FOR_ALWAYS_SECONDS,
            clock: Arc::new(Timestamp::now),
        }
    }
}

impl std::fmt::Debug for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Settings")
            .field("namespace", &self.namespace)
            .field("agent_namespace", &self.agent_namespace)
            .field("creation_delay", &self.creation_delay)
            .field("default_ttl_for_always", &self.default_ttl_for_always)
            .finish_non_exhaustive()
    }
}

impl Settings {
    /// Tag lifetimes with fresh jitter (the planner is pure: the shell draws it), spread
    /// as OpenKruise spreads them so tags of one job do not all expire at once.
    fn tag_settings(&self) -> TagSettings {
        let random = RandomState::new().hash_one(0u8);
        TagSettings {
            default_ttl_for_always: self.default_ttl_for_always,
            always_jitter_seconds: i32::try_from(random % 300).unwrap_or(0),
            never_jitter_seconds: i32::try_from((random >> 16) % 1200).unwrap_or(0) - 600,
        }
    }
}
