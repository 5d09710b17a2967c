//! The validating webhooks' checks (OpenKruise's ImagePullJob, ImageListPullJob and NodeImage
//! handlers, reference §7.h) on the `v1beta1` form, as Kubernetes-style field errors with
//! OpenKruise's wording. The controllers run the same checks before acting.
//!
//! Where OpenKruise stops at the first error, these report every one, each at its field's
//! path. An unset `completionPolicy.type` passes (the mutating webhook sets `Always` first).

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use kruise_compat::field::{FieldError, Path};
use kruise_core::pods::selector::selector_matches;

pub use kruise_compat::field::ErrorList;

use super::image::ImageRef;
use super::v1beta1::{ImageListPullJob, ImagePullJob, NodeImage};
use super::{
    CompletionPolicyType, ImagePullJobTemplate, ImagePullPolicy, MAX_IMAGELIST_IMAGES,
    MAX_NODEIMAGE_IMAGES,
};

/// An ImagePullJob.
pub fn validate_imagepulljob(job: &ImagePullJob) -> ErrorList {
    let spec = Path::new("spec");
    let mut errors = validate_image(&job.spec.image, &spec.child("image"));
    errors.extend(validate_template(&job.spec.template, &spec));
    errors
}

/// An update of an ImagePullJob: the new object's checks, and `pullSecrets` unchanged.
pub fn validate_imagepulljob_update(job: &ImagePullJob, old: &ImagePullJob) -> ErrorList {
    let mut errors = validate_imagepulljob(job);
    if job.spec.template.pull_secrets != old.spec.template.pull_secrets {
        errors.push(FieldError::forbidden(
            "spec.pullSecrets",
            "spec.pullSecrets is immutable",
        ));
    }
    errors
}

/// An ImageListPullJob: images present, unique, at most 255, each valid; the template as an
/// ImagePullJob's.
pub fn validate_imagelistpulljob(job: &ImageListPullJob) -> ErrorList {
    let spec = Path::new("spec");
    let images = spec.child("images");
    let mut errors = Vec::new();
    if job.spec.images.is_empty() {
        errors.push(FieldError::required(
            images.clone(),
            "image can not be empty",
        ));
    }
    if job.spec.images.len() > MAX_IMAGELIST_IMAGES {
        errors.push(FieldError::invalid(
            images.clone(),
            job.spec.images.len(),
            format!("the maximum number of images cannot > {MAX_IMAGELIST_IMAGES}"),
        ));
    }
    for (i, image) in job.spec.images.iter().enumerate() {
        if job.spec.images[..i].contains(image) {
            errors.push(FieldError::duplicate(images.index(i), image.as_str()));
        }
        errors.extend(validate_image(image, &images.index(i)));
    }
    errors.extend(validate_template(&job.spec.template, &spec));
    errors
}

/// A NodeImage: at most 256 images; per tag a name, no duplicates, `createdAt`, a version
/// ≥ 0 and a pull policy with `ttlSecondsAfterFinished`.
pub fn validate_nodeimage(node_image: &NodeImage) -> ErrorList {
    let images = Path::new("spec").child("images");
    let mut errors = Vec::new();
    if node_image.spec.images.len() > MAX_NODEIMAGE_IMAGES {
        errors.push(FieldError::invalid(
            images.clone(),
            node_image.spec.images.len(),
            format!(
                "spec images length {} can not be more than {MAX_NODEIMAGE_IMAGES}",
                node_image.spec.images.len()
            ),
        ));
    }
    for (name, image) in &node_image.spec.images {
        let image_path = images.key(name);
        if name.is_empty() {
            errors.push(FieldError::required(
                image_path.clone(),
                "image name can not be empty",
            ));
        }
        for (i, tag) in image.tags.iter().enumerate() {
            let path = image_path.child("tags").index(i);
            let full = format!("{name}/{}", tag.tag);
            if tag.tag.is_empty() {
                errors.push(FieldError::required(
                    path.child("tag"),
                    format!("tag for image {name} can not be empty"),
                ));
            } else if image.tags[..i].iter().any(|t| t.tag == tag.tag) {
                errors.push(FieldError::duplicate(path.child("tag"), tag.tag.as_str()));
            }
            if tag.created_at.is_none() {
                errors.push(FieldError::required(
                    path.child("createdAt"),
                    format!("createAt field for {full} can not be empty"),
                ));
            }
            if tag.version < 0 {
                errors.push(FieldError::invalid(
                    path.child("version"),
                    tag.version,
                    format!("version for {full} can not be less than 0"),
                ));
            }
            match &tag.pull_policy {
                None => errors.push(FieldError::required(
                    path.child("pullPolicy"),
                    format!("pullPolicy field for {full} must set"),
                )),
                Some(policy) if policy.ttl_seconds_after_finished.is_none() => {
                    errors.push(FieldError::required(
                        path.child("pullPolicy").child("ttlSecondsAfterFinished"),
                        format!("pullPolicy.ttlSecondsAfterFinished for {full} must set"),
                    ));
                }
                Some(_) => {}
            }
        }
    }
    errors
}

fn validate_image(image: &str, path: &Path) -> ErrorList {
    if image.is_empty() {
        return vec![FieldError::required(path.clone(), "image can not be empty")];
    }
    match ImageRef::parse(image) {
        Ok(_) => Vec::new(),
        Err(e) => vec![FieldError::invalid(
            path.clone(),
            image,
            format!("invalid image {image}: {e}"),
        )],
    }
}

/// The fields an ImagePullJob and an ImageListPullJob share, under `spec`.
fn validate_template(template: &ImagePullJobTemplate, spec: &Path) -> ErrorList {
    let mut errors = Vec::new();
    if let Some(selector) = &template.selector {
        let path = spec.child("selector");
        if selector.has_labels() {
            if selector.names.is_some() {
                errors.push(FieldError::forbidden(
                    path.clone(),
                    "can not set both names and labelSelector in this spec.selector",
                ));
            }
            errors.extend(validate_selector(
                &selector.label_selector,
                &path,
                "selector",
            ));
        }
        for (i, name) in selector.names.iter().flatten().enumerate() {
            if selector.names.iter().flatten().take(i).any(|n| n == name) {
                errors.push(FieldError::duplicate(
                    path.child("names").index(i),
                    name.as_str(),
                ));
            }
        }
    }
    if let Some(pod_selector) = &template.pod_selector {
        let path = spec.child("podSelector");
        if template.selector.is_some() {
            errors.push(FieldError::forbidden(
                path.clone(),
                "can not set both selector and podSelector",
            ));
        }
        errors.extend(validate_selector(
            &pod_selector.label_selector,
            &path,
            "podSelector",
        ));
    }
    if let Some(parallelism) = &template.parallelism {
        let path = spec.child("parallelism");
        match parallelism {
            IntOrString::Int(n) if *n < 0 => errors.push(FieldError::invalid(
                path,
                *n,
                "parallelism must be non-negative",
            )),
            IntOrString::Int(_) => {}
            IntOrString::String(s) if s.ends_with('%') => errors.push(FieldError::invalid(
                path,
                s.as_str(),
                "parallelism does not support percentage value",
            )),
            IntOrString::String(s) => match s.parse::<i32>() {
                Ok(n) if n < 0 => errors.push(FieldError::invalid(
                    path,
                    s.as_str(),
                    "parallelism must be non-negative",
                )),
                Ok(_) => {}
                Err(e) => errors.push(FieldError::invalid(
                    path,
                    s.as_str(),
                    format!("parallelism must be a valid integer: {e}"),
                )),
            },
        }
    }
    let policy = spec.child("pullPolicy");
    if let Some(pull) = &template.pull_policy {
        if let Some(timeout) = pull.timeout_seconds.filter(|t| *t <= 0) {
            errors.push(FieldError::invalid(
                policy.child("timeoutSeconds"),
                timeout,
                "must be greater than 0",
            ));
        }
        if let Some(backoff) = pull.backoff_limit.filter(|b| *b < 0) {
            errors.push(FieldError::invalid(
                policy.child("backoffLimit"),
                backoff,
                "must be greater than or equal to 0",
            ));
        }
    }
    let completion = spec.child("completionPolicy");
    let deadline = template.completion_policy.active_deadline_seconds;
    match template.completion_policy.type_.as_ref() {
        None | Some(CompletionPolicyType::Always) => {
            if let Some(deadline) = deadline.filter(|d| i64::from(template.timeout_seconds()) > *d)
            {
                errors.push(FieldError::invalid(
                    completion.child("activeDeadlineSeconds"),
                    deadline,
                    "completionPolicy.activeDeadlineSeconds must be greater than pullPolicy.timeoutSeconds(default 600)",
                ));
            }
        }
        Some(CompletionPolicyType::Never) => {
            if deadline.is_some()
                || template
                    .completion_policy
                    .ttl_seconds_after_finished
                    .is_some()
            {
                errors.push(FieldError::forbidden(
                    completion.clone(),
                    "activeDeadlineSeconds and ttlSecondsAfterFinished can only work with Always CompletionPolicyType",
                ));
            }
        }
        Some(CompletionPolicyType::Unknown(other)) => errors.push(FieldError::not_supported(
            completion.child("type"),
            other.as_str(),
            &["Always", "Never"],
        )),
    }
    if let Some(ttl) = template
        .completion_policy
        .ttl_seconds_after_finished
        .filter(|t| *t < 0)
    {
        errors.push(FieldError::invalid(
            completion.child("ttlSecondsAfterFinished"),
            ttl,
            "must be greater than or equal to 0",
        ));
    }
    if let Some(ImagePullPolicy::Unknown(other)) = &template.image_pull_policy
        && !other.is_empty()
    {
        errors.push(FieldError::not_supported(
            spec.child("imagePullPolicy"),
            other.as_str(),
            &["Always", "IfNotPresent"],
        ));
    }
    errors
}

/// Operators and their values, as `metav1.LabelSelectorAsSelector` checks them.
fn validate_selector(selector: &LabelSelector, path: &Path, what: &str) -> ErrorList {
    match selector_matches(selector, &Default::default()) {
        Ok(_) => Vec::new(),
        Err(e) => vec![FieldError::invalid(
            path.clone(),
            kruise_compat::field::BadValue::json(selector),
            format!("invalid {what}: {e}"),
        )],
    }
}

#[cfg(test)]
mod tests;
