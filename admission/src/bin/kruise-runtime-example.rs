//! The smallest binary on `kruise_runtime`: a `Greeting` kind (example.kruise.io)
//! whose controller echoes `spec.message` into status, and whose validating webhook
//! rejects an empty message. It shows a family's `main.rs` shape, and it is what the
//! harness's process-level tests and size/RSS/start-up measurements run.

use kruise_admission::runner::ServesCrdWebhooks as _;
use std::sync::Arc;

use futures::future::BoxFuture;
use kruise_admission::runner::{AdmissionFlags, CrdWebhooks};
use kruise_admission::{AdmissionHandler, AdmissionRoutes, HandlerError, WebhookKind, WebhookSpec};
use kruise_runtime::errors::ShellError;
use kruise_runtime::status::write_status_if_changed;
use kruise_runtime::watch::{DecodeGuard, Watch};
use kruise_runtime::{Binary, Context, run_controller, warm_until_leading};
use kube::api::Api;
use kube::core::DynamicObject;
use kube::core::admission::{AdmissionRequest, AdmissionResponse};
use kube::runtime::controller::{Action, Controller};
use kube::{CustomResource, CustomResourceExt, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

#[global_allocator]
static ALLOCATOR: kruise_runtime::Allocator = kruise_runtime::Allocator;

/// A message to echo.
#[derive(CustomResource, Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[kube(
    group = "example.kruise.io",
    version = "v1alpha1",
    kind = "Greeting",
    namespaced,
    status = "GreetingStatus",
    printcolumn = r#"{"name":"ECHOED","type":"string","jsonPath":".status.echoed"}"#
)]
pub struct GreetingSpec {
    /// What to echo; must not be empty.
    pub message: String,
}

/// What the controller saw.
#[derive(Clone, Debug, Default, Deserialize, Serialize, JsonSchema, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct GreetingStatus {
    /// The message last echoed.
    pub echoed: Option<String>,
    /// The generation it was echoed from.
    pub observed_generation: Option<i64>,
}

async fn reconcile(g: Arc<Greeting>, client: Arc<kube::Client>) -> Result<Action, ShellError> {
    let want = GreetingStatus {
        echoed: Some(g.spec.message.clone()),
        observed_generation: g.metadata.generation,
    };
    let api = Api::namespaced((*client).clone(), &g.namespace().unwrap_or_default());
    write_status_if_changed(&api, &*g, &want).await?;
    Ok(Action::await_change())
}

struct ValidateGreeting;

impl AdmissionHandler for ValidateGreeting {
    fn path(&self) -> &str {
        "/validate-example-kruise-io-v1alpha1-greeting"
    }
    fn webhook(&self) -> WebhookSpec {
        WebhookSpec::crd(
            "vgreeting.example.kruise.io",
            WebhookKind::Validating,
            &["CREATE", "UPDATE"],
            "example.kruise.io",
            &["v1alpha1"],
            &["greetings"],
        )
    }
    fn handle<'a>(
        &'a self,
        req: &'a AdmissionRequest<DynamicObject>,
    ) -> BoxFuture<'a, Result<AdmissionResponse, HandlerError>> {
        Box::pin(async move {
            let Some(obj) = &req.object else {
                return Ok(AdmissionResponse::from(req));
            };
            let spec: GreetingSpec =
                serde_json::from_value(obj.data["spec"].clone()).map_err(|e| {
                    HandlerError::Decode {
                        kind: "Greeting".into(),
                        reason: e.to_string(),
                    }
                })?;
            if spec.message.trim().is_empty() {
                let message = "spec.message: Required value: must not be empty";
                return Ok(kruise_admission::denied(req, 422, message));
            }
            Ok(AdmissionResponse::from(req))
        })
    }
}

/// The validating webhook this binary registers for its kind (no mutating handler, and one
/// version, so nothing to convert).
const WEBHOOKS: CrdWebhooks = CrdWebhooks {
    mutating: "kruise-runtime-example-mutating",
    validating: "kruise-runtime-example-validating",
    crds: &[],
};

fn main() -> std::process::ExitCode {
    Binary::<AdmissionFlags>::new("kruise-runtime-example", env!("CARGO_PKG_VERSION"))
        .crds(vec![Greeting::crd()])
        .crd_webhooks(WEBHOOKS, |_| {
            AdmissionRoutes::new().handler(ValidateGreeting)
        })
        // On every replica: the cache is warm when a standby takes over; it reconciles
        // (writes) only once it leads.
        .controller(|ctx: Context<AdmissionFlags>| async move {
            let opts = ctx.controller_options("greeting");
            let (store, mut greetings) =
                Watch::<Greeting>::new(ctx.client.clone(), ctx.flags.namespace.as_deref())
                    .guarded(DecodeGuard::new(&ctx.metrics))
                    .reflect();
            if warm_until_leading(&opts, &mut [&mut greetings]).await {
                let controller = Controller::for_stream(greetings, store)
                    .reconcile_all_on(futures::stream::once(async {}));
                run_controller(controller, reconcile, Arc::new(ctx.client.clone()), opts).await;
            }
            Ok(())
        })
        .main()
}
