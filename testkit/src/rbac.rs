//! The chart's RBAC enforced under the integration tests (`KRUISE_TEST_AUTHORIZE=1`).
//!
//! With the switch on, every simulator the testkit starts runs with kruise-sim's
//! `authorize` mode and holds the roles and bindings each family's subchart installs (from
//! `charts/kruise-rs/charts/<family>/files/rbac.yaml`, bound as the chart binds them: a
//! ClusterRole everywhere, a Role in the release namespace [`NAMESPACE`], the node agent's
//! ClusterRole). The controller under test gets [`controller_client`]: a client whose
//! requests carry the token of the family's ServiceAccount, so a request its role lacks is
//! answered 403 and the test fails. The test's own client carries no token and stays
//! admin. With the switch off, [`controller_client`] is the admin client itself.
//!
//! On a real API server (`KRUISE_TEST_KUBECONFIG`, [`crate::cluster`]) the same roles and
//! bindings are applied there, with the ServiceAccounts they bind; the controller's client
//! carries a token the API server issued for its ServiceAccount (TokenRequest) and no client
//! certificate, so kube-apiserver's own RBAC authorizer holds it to the chart's roles.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use kruise_sim::{Counters, SimConfig};
use kube::api::{Api, ApiResource, DynamicObject, Patch, PatchParams, PostParams};
use kube::client::ClientBuilder;
use kube::{Client, Config};
use serde_json::{Value, json};

/// The environment variable that switches enforcement on (`1` or `true`).
pub const ENV: &str = "KRUISE_TEST_AUTHORIZE";

/// The release namespace the chart's ServiceAccounts and Roles live in during the tests.
pub const NAMESPACE: &str = "kruise-rs";

/// Whether the chart's RBAC is enforced on the controllers under test.
pub fn enforced() -> bool {
    std::env::var(ENV).is_ok_and(|v| v == "1" || v == "true")
}

/// `config`, with the simulator's authorization switched on when [`enforced`].
pub fn sim_config(config: SimConfig) -> SimConfig {
    SimConfig {
        authorize: config.authorize || enforced(),
        ..config
    }
}

/// The families whose subchart has a `files/rbac.yaml`, with the file's path.
pub fn chart_rbac_files() -> Vec<(String, PathBuf)> {
    let charts = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../charts/kruise-rs/charts");
    let mut files: Vec<(String, PathBuf)> = std::fs::read_dir(&charts)
        .unwrap_or_else(|e| panic!("reading {}: {e}", charts.display()))
        .filter_map(Result::ok)
        .map(|entry| {
            let family = entry.file_name().to_string_lossy().into_owned();
            (family, entry.path().join("files/rbac.yaml"))
        })
        .filter(|(_, path)| path.is_file())
        .collect();
    files.sort();
    files
}

/// The RBAC objects a family's subchart renders from its `rbac.yaml` (`cluster:`,
/// `namespaced:` and `agent:` rule lists), for the ServiceAccounts `kruise-<family>` and
/// `kruise-<family>-agent` in [`NAMESPACE`].
pub fn chart_objects(family: &str, rbac_yaml: &str) -> Vec<Value> {
    let rules: Value = serde_saphyr::from_str(rbac_yaml)
        .unwrap_or_else(|e| panic!("parsing {family}'s rbac.yaml: {e}"));
    let binary = format!("kruise-{family}");
    let agent = format!("{binary}-agent");
    let mut objects = Vec::new();
    let mut bound = |kind: &str, name: &str, namespace: Option<&str>, rules: &Value| {
        let mut metadata = json!({"name": name});
        if let Some(ns) = namespace {
            metadata["namespace"] = json!(ns);
        }
        objects.push(
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": kind,
            "metadata": metadata, "rules": rules}),
        );
        objects.push(json!({"apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": format!("{kind}Binding"), "metadata": metadata,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": NAMESPACE}]}));
    };
    if let Some(cluster) = rules.get("cluster").filter(|r| !r.is_null()) {
        bound("ClusterRole", &binary, None, cluster);
    }
    if let Some(namespaced) = rules.get("namespaced").filter(|r| !r.is_null()) {
        bound("Role", &binary, Some(NAMESPACE), namespaced);
    }
    if let Some(agent_rules) = rules.get("agent").filter(|r| !r.is_null()) {
        bound("ClusterRole", &agent, None, agent_rules);
    }
    objects
}

/// Creates [`NAMESPACE`] and every family's chart roles and bindings through `admin`.
pub async fn install_chart_roles(admin: &Client) {
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    let namespace = serde_json::from_value(json!({"metadata": {"name": NAMESPACE}})).unwrap();
    namespaces
        .create(&PostParams::default(), &namespace)
        .await
        .unwrap_or_else(|e| panic!("creating namespace {NAMESPACE}: {e}"));
    for (family, path) in chart_rbac_files() {
        let yaml = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for object in chart_objects(&family, &yaml) {
            let kind = object["kind"].as_str().unwrap_or_default();
            let resource = rbac_resource(kind);
            let api: Api<DynamicObject> = match object.pointer("/metadata/namespace") {
                Some(_) => Api::namespaced_with(admin.clone(), NAMESPACE, &resource),
                None => Api::all_with(admin.clone(), &resource),
            };
            let dynamic: DynamicObject = serde_json::from_value(object.clone()).unwrap();
            api.create(&PostParams::default(), &dynamic)
                .await
                .unwrap_or_else(|e| panic!("creating {family}'s {kind}: {e}"));
        }
    }
}

/// How the controllers of the test running on a real API server reach it as their
/// ServiceAccounts; set by [`crate::cluster`] while such a test runs (one at a time).
static REAL_SERVER: Mutex<Option<RealServer>> = Mutex::new(None);

/// The tokens issued for the chart's ServiceAccounts by the real API server, by name; kept
/// for the process (they last an hour).
static REAL_TOKENS: Mutex<Option<BTreeMap<String, String>>> = Mutex::new(None);

struct RealServer {
    /// The admin's connection settings without its credentials.
    config: Config,
    counters: Arc<Counters>,
    tokens: BTreeMap<String, String>,
}

/// The rules resource of an RBAC kind (`ClusterRole` -> `clusterroles`).
fn rbac_resource(kind: &str) -> ApiResource {
    ApiResource {
        group: "rbac.authorization.k8s.io".into(),
        version: "v1".into(),
        api_version: "rbac.authorization.k8s.io/v1".into(),
        kind: kind.into(),
        plural: format!("{}s", kind.to_lowercase()),
    }
}

/// On a real API server, when [`enforced`]: applies [`NAMESPACE`], every family's chart
/// roles and bindings and the ServiceAccounts they bind (server-side, so a later test or run
/// finds them in place), gets a token for each ServiceAccount (once per process), and
/// makes [`as_service_account`] connect with them, counted into `counters`.
pub(crate) async fn use_real_server(admin: &Client, config: &Config, counters: Arc<Counters>) {
    let known = REAL_TOKENS.lock().unwrap().clone();
    let tokens = match known {
        Some(tokens) => tokens,
        None => {
            let tokens = apply_chart_roles_and_tokens(admin).await;
            *REAL_TOKENS.lock().unwrap() = Some(tokens.clone());
            tokens
        }
    };
    let mut config = config.clone();
    config.auth_info = kube::config::AuthInfo::default();
    *REAL_SERVER.lock().unwrap() = Some(RealServer {
        config,
        counters,
        tokens,
    });
}

/// Ends what [`use_real_server`] started (the test's cluster is shut down).
pub(crate) fn forget_real_server() {
    *REAL_SERVER.lock().unwrap() = None;
}

async fn apply_chart_roles_and_tokens(admin: &Client) -> BTreeMap<String, String> {
    let params = PatchParams::apply("kruise-testkit").force();
    let namespace =
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}});
    Api::<Namespace>::all(admin.clone())
        .patch(NAMESPACE, &params, &Patch::Apply(&namespace))
        .await
        .unwrap_or_else(|e| panic!("applying namespace {NAMESPACE}: {e}"));
    let mut accounts = Vec::new();
    for (family, path) in chart_rbac_files() {
        let yaml = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        for object in chart_objects(&family, &yaml) {
            let kind = object["kind"].as_str().unwrap_or_default();
            let name = object["metadata"]["name"].as_str().unwrap_or_default();
            let resource = rbac_resource(kind);
            let api: Api<DynamicObject> = match object.pointer("/metadata/namespace") {
                Some(_) => Api::namespaced_with(admin.clone(), NAMESPACE, &resource),
                None => Api::all_with(admin.clone(), &resource),
            };
            api.patch(name, &params, &Patch::Apply(&object))
                .await
                .unwrap_or_else(|e| panic!("applying {family}'s {kind} {name}: {e}"));
            for subject in object["subjects"].as_array().into_iter().flatten() {
                if let Some(account) = subject["name"].as_str()
                    && !accounts.iter().any(|a| a == account)
                {
                    accounts.push(account.to_string());
                }
            }
        }
    }
    let service_accounts: Api<ServiceAccount> = Api::namespaced(admin.clone(), NAMESPACE);
    let mut tokens = BTreeMap::new();
    for account in accounts {
        let body = json!({"apiVersion": "v1", "kind": "ServiceAccount",
            "metadata": {"name": account, "namespace": NAMESPACE}});
        service_accounts
            .patch(&account, &params, &Patch::Apply(&body))
            .await
            .unwrap_or_else(|e| panic!("applying ServiceAccount {account}: {e}"));
        let request = http::Request::post(format!(
            "/api/v1/namespaces/{NAMESPACE}/serviceaccounts/{account}/token"
        ))
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(
            serde_json::to_vec(&json!({"apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest", "spec": {"expirationSeconds": 3600}}))
            .unwrap(),
        )
        .unwrap();
        let answer: Value = admin
            .request(request)
            .await
            .unwrap_or_else(|e| panic!("requesting a token for {account}: {e}"));
        let token = answer["status"]["token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token for {account} in {answer}"))
            .to_string();
        tokens.insert(account, token);
    }
    tokens
}

/// On a real API server: a client with the token of the ServiceAccount `name` and no other
/// credentials, counted with the test's requests.
fn real_server_client(name: &str) -> Option<Client> {
    let guard = REAL_SERVER.lock().unwrap();
    let server = guard.as_ref()?;
    let token = server
        .tokens
        .get(name)
        .unwrap_or_else(|| panic!("no ServiceAccount {name} in the chart's bindings"));
    let mut config = server.config.clone();
    config.auth_info = serde_json::from_value(json!({"token": token})).unwrap();
    Some(
        ClientBuilder::try_from(config)
            .unwrap()
            .with_layer(&crate::counting::CountingLayer(server.counters.clone()))
            .build(),
    )
}

/// The client the controller of `family` (`cloneset`, `crr`, …) runs with: when
/// [`enforced`], `admin`'s connection with the token of the ServiceAccount
/// `kruise-<family>`, and a request the chart's role forbids ends the test binary (see
/// [`Forbidden::Exit`]); otherwise `admin` itself.
pub fn controller_client(admin: &Client, family: &str) -> Client {
    if enforced() {
        as_service_account(admin, &format!("kruise-{family}"), Forbidden::Exit)
    } else {
        admin.clone()
    }
}

/// The client the node agent of `family` runs with, as [`controller_client`] for the
/// ServiceAccount `kruise-<family>-agent`.
pub fn agent_client(admin: &Client, family: &str) -> Client {
    if enforced() {
        as_service_account(admin, &format!("kruise-{family}-agent"), Forbidden::Exit)
    } else {
        admin.clone()
    }
}

/// What a ServiceAccount client does with a 403 Forbidden answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Forbidden {
    /// Hands it to the caller, as any API error.
    Return,
    /// Prints the request and exits the test binary with a failure: a controller may log
    /// a failed request and carry on (an event it could not record, a retried write), and
    /// the test around it would still pass.
    Exit,
}

/// `admin`'s connection, every request sent with the bearer token that names the
/// ServiceAccount `name` in [`NAMESPACE`] (kruise-sim's authorizer reads the user from it);
/// on a real API server (once the harness has set it up) a connection of its own with the token
/// that server issued, and no client certificate (which would authenticate it as the admin).
pub fn as_service_account(admin: &Client, name: &str, on_forbidden: Forbidden) -> Client {
    let user = service_account_user(name);
    let (inner, token) = match real_server_client(name) {
        Some(client) => (client, None),
        None => {
            let token = http::HeaderValue::from_str(&format!("Bearer {user}"))
                .unwrap_or_else(|e| panic!("a bearer token for {name}: {e}"));
            (admin.clone(), Some(token))
        }
    };
    let service = tower::service_fn(move |mut request: http::Request<kube::client::Body>| {
        let (inner, user) = (inner.clone(), user.clone());
        if let Some(token) = &token {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, token.clone());
        }
        let (method, uri) = (request.method().clone(), request.uri().clone());
        async move {
            let response = inner.send(request).await?;
            if response.status() != http::StatusCode::FORBIDDEN || on_forbidden == Forbidden::Return
            {
                return Ok::<_, kube::Error>(response);
            }
            // Not every 403 is the authorizer's: kube-apiserver's NamespaceLifecycle
            // admission refuses content in a namespace being deleted with 403 too (an event
            // a controller records while the test's namespace goes).
            let (parts, body) = response.into_parts();
            let body = body.collect_bytes().await?;
            if is_rbac_denial(&body) {
                exit_forbidden(&user, &method, &uri);
            }
            Ok(http::Response::from_parts(
                parts,
                kube::client::Body::from(body.to_vec()),
            ))
        }
    });
    Client::new(service, admin.default_namespace())
}

/// Whether a 403 answer's Status is the RBAC authorizer's (`User "…" cannot <verb> resource
/// …`), not an admission plugin's.
fn is_rbac_denial(body: &[u8]) -> bool {
    let message = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|status| status["message"].as_str().map(str::to_string))
        .unwrap_or_default();
    message.contains("User \"") && message.contains(" cannot ")
}

fn exit_forbidden(user: &str, method: &http::Method, uri: &http::Uri) -> ! {
    use std::io::Write as _;
    // Straight to stderr: the test harness's capture would drop a message printed by a test
    // thread that never returns.
    let _ = writeln!(
        std::io::stderr(),
        "\n{ENV}: {method} {uri} as {user} was forbidden by the chart's RBAC \
         (charts/kruise-rs/charts/<family>/files/rbac.yaml lacks a rule for it)"
    );
    std::process::exit(101)
}

/// The user name kube-apiserver gives the ServiceAccount `name` in [`NAMESPACE`].
pub fn service_account_user(name: &str) -> String {
    format!("system:serviceaccount:{NAMESPACE}:{name}")
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{Pod, Secret};
    use kube::api::ListParams;

    #[tokio::test]
    async fn a_service_account_may_do_what_its_chart_role_allows_and_nothing_else() {
        let sim = kruise_sim::Sim::start(SimConfig {
            authorize: true,
            ..SimConfig::default()
        })
        .await
        .unwrap();
        let admin = sim.client().unwrap();
        install_chart_roles(&admin).await;
        let cloneset = as_service_account(&admin, "kruise-cloneset", Forbidden::Return);

        let pods: Api<Pod> = Api::namespaced(cloneset.clone(), "default");
        assert!(pods.list(&ListParams::default()).await.is_ok());
        // Secrets only in the release namespace (its Role), not in the workloads'.
        let own: Api<Secret> = Api::namespaced(cloneset.clone(), NAMESPACE);
        assert!(own.list(&ListParams::default()).await.is_ok());
        let workloads: Api<Secret> = Api::namespaced(cloneset, "default");
        match workloads.list(&ListParams::default()).await {
            Err(kube::Error::Api(status)) => assert_eq!(status.code, 403, "{status:?}"),
            other => panic!("listing secrets in default as kruise-cloneset: {other:?}"),
        }
        // The admin client carries no token and is never refused.
        let admin_secrets: Api<Secret> = Api::namespaced(admin, "default");
        assert!(admin_secrets.list(&ListParams::default()).await.is_ok());
        sim.shutdown().await;
    }

    #[test]
    fn a_family_gets_its_cluster_role_role_and_agent_role_bound_to_its_service_accounts() {
        let yaml = "cluster:\n  - apiGroups: [\"\"]\n    resources: [pods]\n    verbs: [get]\n\
                    namespaced:\n  - apiGroups: [coordination.k8s.io]\n    resources: [leases]\n    verbs: [get]\n\
                    agent:\n  - apiGroups: [\"\"]\n    resources: [nodes]\n    verbs: [get]\n";
        let objects = chart_objects("crr", yaml);
        let summary: Vec<(String, String, String)> = objects
            .iter()
            .map(|o| {
                (
                    o["kind"].as_str().unwrap().to_string(),
                    o["metadata"]["name"].as_str().unwrap().to_string(),
                    o["metadata"]["namespace"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                )
            })
            .collect();
        let expected = [
            ("ClusterRole", "kruise-crr", ""),
            ("ClusterRoleBinding", "kruise-crr", ""),
            ("Role", "kruise-crr", "kruise-rs"),
            ("RoleBinding", "kruise-crr", "kruise-rs"),
            ("ClusterRole", "kruise-crr-agent", ""),
            ("ClusterRoleBinding", "kruise-crr-agent", ""),
        ]
        .map(|(k, n, ns)| (k.to_string(), n.to_string(), ns.to_string()));
        assert_eq!(summary, expected);
        assert_eq!(objects[0]["rules"][0]["resources"][0], "pods");
        assert_eq!(
            objects[5]["subjects"][0],
            json!({"kind": "ServiceAccount", "name": "kruise-crr-agent", "namespace": "kruise-rs"})
        );
    }

    #[test]
    fn only_the_authorizers_403_is_an_rbac_denial() {
        let status = |message: &str| {
            serde_json::to_vec(
                &json!({"kind": "Status", "code": 403, "reason": "Forbidden",
                "message": message}),
            )
            .unwrap()
        };
        assert!(is_rbac_denial(&status(
            "secrets is forbidden: User \"system:serviceaccount:kruise-rs:kruise-cloneset\" \
             cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
        )));
        assert!(!is_rbac_denial(&status(
            "events.events.k8s.io \"web.1\" is forbidden: unable to create new content in \
             namespace kt-a because it is being terminated"
        )));
        assert!(!is_rbac_denial(b"not json"));
    }

    #[test]
    fn every_family_in_the_chart_has_roles() {
        let families: Vec<String> = chart_rbac_files().into_iter().map(|(f, _)| f).collect();
        for family in ["cloneset", "sidecarset", "webhook", "crr", "imagepull"] {
            assert!(
                families.iter().any(|f| f == family),
                "{family} in {families:?}"
            );
        }
        for (family, path) in chart_rbac_files() {
            let objects = chart_objects(&family, &std::fs::read_to_string(path).unwrap());
            assert!(
                objects.iter().any(|o| o["kind"] == "ClusterRoleBinding"),
                "{family} binds a ClusterRole"
            );
        }
    }
}
