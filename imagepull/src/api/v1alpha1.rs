//! `apps.kruise.io/v1alpha1` ImagePullJob, ImageListPullJob and NodeImage: served, not
//! stored, with the same fields as `v1beta1`. Only the CRD's schema is generated from these
//! types: the webhooks and the controllers work on `v1beta1`, which `/convert` turns a
//! `v1alpha1` object into.

super::kinds!("v1alpha1", false);
