//! The kinds the server stores, registered once: group, version, names, scope, validation.

use serde_json::Value;

use super::core_kinds;
use super::errors::FieldError;
use super::event_validation;
use super::selector::{metadata_fields, FieldPath};
use super::validation;

/// Validation hook: `Err` is a decode failure (400), `Ok(errors)` field errors (422 when any).
pub(crate) type Validate = fn(&Value) -> Result<Vec<FieldError>, String>;

/// Everything the server needs to serve one kind.
pub(crate) struct Kind {
    pub(crate) group: &'static str,
    pub(crate) version: &'static str,
    pub(crate) kind: &'static str,
    pub(crate) plural: &'static str,
    pub(crate) singular: &'static str,
    pub(crate) namespaced: bool,
    /// Status lives in a `/status` subresource: the main resource ignores status changes.
    pub(crate) status_subresource: bool,
    pub(crate) categories: &'static [&'static str],
    pub(crate) short_names: &'static [&'static str],
    /// Fills server-side defaults (e.g. service port 443) before validation.
    pub(crate) default: fn(&mut Value),
    pub(crate) validate: Validate,
    /// Undeclared fields of a body, for `fieldValidation=Strict`; unknown fields are otherwise
    /// stored and returned as given.
    pub(crate) unknown_fields: fn(&Value) -> Vec<String>,
    /// The field selector labels it supports, resolved into the stored object.
    pub(crate) fields: FieldPath,
}

impl Kind {
    /// `group/version` or `version` for the core group.
    pub(crate) fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.to_string()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    /// `<Kind>List`.
    pub(crate) fn list_kind(&self) -> String {
        format!("{}List", self.kind)
    }
}

/// Every kind served, in discovery order.
pub(crate) static KINDS: &[Kind] = &[
    Kind {
        group: "apiregistration.k8s.io",
        version: "v1",
        kind: "APIService",
        plural: "apiservices",
        singular: "apiservice",
        namespaced: false,
        status_subresource: true,
        categories: &["api-extensions"],
        short_names: &[],
        default: validation::default_apiservice,
        validate: validation::validate_apiservice,
        unknown_fields: validation::unknown_apiservice_fields,
        fields: metadata_fields,
    },
    // Sources of CA bundles (the controller reads one named object of each).
    Kind {
        group: "",
        version: "v1",
        kind: "Secret",
        plural: "secrets",
        singular: "secret",
        namespaced: true,
        status_subresource: false,
        categories: &[],
        short_names: &[],
        default: core_kinds::default_secret,
        validate: core_kinds::validate_secret,
        unknown_fields: |_| Vec::new(),
        fields: metadata_fields,
    },
    Kind {
        group: "",
        version: "v1",
        kind: "ConfigMap",
        plural: "configmaps",
        singular: "configmap",
        namespaced: true,
        status_subresource: false,
        categories: &[],
        short_names: &["cm"],
        default: |_| {},
        validate: core_kinds::validate_configmap,
        unknown_fields: |_| Vec::new(),
        fields: metadata_fields,
    },
    Kind {
        group: "coordination.k8s.io",
        version: "v1",
        kind: "Lease",
        plural: "leases",
        singular: "lease",
        namespaced: true,
        status_subresource: false,
        categories: &[],
        short_names: &[],
        default: |_| {},
        validate: validation::validate_lease,
        unknown_fields: |_| Vec::new(),
        fields: metadata_fields,
    },
    Kind {
        group: "events.k8s.io",
        version: "v1",
        kind: "Event",
        plural: "events",
        singular: "event",
        namespaced: true,
        status_subresource: false,
        categories: &[],
        short_names: &["ev"],
        default: |_| {},
        validate: event_validation::validate_event,
        unknown_fields: |_| Vec::new(),
        fields: super::core_events::event_fields,
    },
    // Read by kube-aggregator's availability check (kube-apiserver mode) and by the
    // controller's backend watch; defaulted (a ClusterIP on loopback), no validation.
    Kind {
        group: "",
        version: "v1",
        kind: "Service",
        plural: "services",
        singular: "service",
        namespaced: true,
        status_subresource: false,
        categories: &["all"],
        short_names: &["svc"],
        default: core_kinds::default_service,
        validate: |_| Ok(Vec::new()),
        unknown_fields: |_| Vec::new(),
        fields: metadata_fields,
    },
    Kind {
        group: "discovery.k8s.io",
        version: "v1",
        kind: "EndpointSlice",
        plural: "endpointslices",
        singular: "endpointslice",
        namespaced: true,
        status_subresource: false,
        categories: &[],
        short_names: &[],
        default: |_| {},
        validate: |_| Ok(Vec::new()),
        unknown_fields: |_| Vec::new(),
        fields: metadata_fields,
    },
];

/// The kind served at `/apis/<group>/<version>/<plural>`.
pub(crate) fn find(group: &str, version: &str, plural: &str) -> Option<&'static Kind> {
    KINDS
        .iter()
        .find(|k| k.group == group && k.version == version && k.plural == plural)
}

/// The kind with this plural name (seeding, admin endpoint).
pub(crate) fn by_plural(plural: &str) -> Option<&'static Kind> {
    KINDS.iter().find(|k| k.plural == plural)
}
