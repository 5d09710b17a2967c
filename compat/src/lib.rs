//! kruise-compat: how Go and kube-apiserver behave, emulated so kruise-rs agrees with
//! OpenKruise byte for byte: Go's `encoding/json` ([`gojson`]) and its `omitempty` zero
//! values, Go's and the kubelet's hashes ([`gohash`]), Kubernetes' resource quantities ([`quantity`]), field errors printed as
//! kube-apiserver prints them ([`field`]), pod-template validation ([`podtemplate`]) and the
//! `SetDefaults_*` defaults OpenKruise's workload webhooks inject ([`pod_defaults`]).
//! Pure: no client, no HTTP stack.

pub mod field;
pub mod gohash;
pub mod gojson;
pub mod pod_defaults;
pub mod podtemplate;
pub mod quantity;
pub mod secret;
