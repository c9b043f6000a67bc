//! The local APIServices kube-apiserver registers for its own groups, as a 1.34+ server
//! with default feature gates serves them (GA versions only; betas are off by default).
//!
//! Priorities from kube-apiserver's `apiVersionPriorities` (its own table merged over
//! `DefaultGenericAPIServicePriorities`): they order groups in discovery and kubectl output.

/// `(group, version, groupPriorityMinimum, versionPriority)`, sorted by group.
pub(crate) const BUILTIN_APISERVICES: &[(&str, &str, i32, i32)] = &[
    ("", "v1", 18000, 1),
    ("admissionregistration.k8s.io", "v1", 16700, 15),
    ("apiextensions.k8s.io", "v1", 16700, 15),
    ("apps", "v1", 17800, 15),
    ("authentication.k8s.io", "v1", 17700, 15),
    ("authorization.k8s.io", "v1", 17600, 15),
    ("autoscaling", "v1", 17500, 15),
    ("autoscaling", "v2", 17500, 30),
    ("batch", "v1", 17400, 15),
    ("certificates.k8s.io", "v1", 17300, 15),
    ("coordination.k8s.io", "v1", 16500, 15),
    ("discovery.k8s.io", "v1", 16200, 15),
    ("events.k8s.io", "v1", 17750, 15),
    ("flowcontrol.apiserver.k8s.io", "v1", 16100, 21),
    ("networking.k8s.io", "v1", 17200, 15),
    ("node.k8s.io", "v1", 16300, 15),
    ("policy", "v1", 17100, 15),
    ("rbac.authorization.k8s.io", "v1", 17000, 15),
    // resource.k8s.io/v1 went GA in 1.34, above its betas (v1beta2 15, v1beta1 9).
    ("resource.k8s.io", "v1", 16200, 21),
    ("scheduling.k8s.io", "v1", 16600, 15),
    ("storage.k8s.io", "v1", 16800, 15),
];

/// What kube-apiserver's CRD registration controller declares for every CRD version:
/// CRD groups sort below built-in and aggregated ones.
pub(crate) const CRD_GROUP_PRIORITY_MINIMUM: i32 = 1000;
/// Version priority of a CRD group's APIService (kube-like version order breaks ties).
pub(crate) const CRD_VERSION_PRIORITY: i32 = 100;
