//! kruise-resourcedistribution: OpenKruise's ResourceDistribution (`apps.kruise.io/v1alpha1`,
//! cluster-scoped). A distribution holds one whole Secret or ConfigMap and the namespaces it
//! belongs in; its controller keeps a copy in each of them, follows namespaces as they come,
//! go and change labels, never touches a same-named object it does not own, and deletes its
//! copies where they no longer belong.
//!
//! * [`api`]: the kind, field for field, its CRD and its validation;
//! * [`plan`]: every decision, pure (which namespaces, what each copy needs, the status);
//! * [`controller`]: the shell (watches, the reads and writes, the status write);
//! * [`admission`]: the validating webhook;
//! * [`binary`]: the family's registration.

pub mod admission;
pub mod api;
pub mod binary;
pub mod controller;
pub mod plan;
