//! `apps.kruise.io/v1alpha1` StatefulSet: served, converted to `v1beta1` for storage. It
//! carries the `v1beta1`-only fields too (see [`super`]).

super::statefulset_spec!("v1alpha1", false);
