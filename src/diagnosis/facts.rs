//! What `explain` read about one APIService: each link's answer, or why it could not be
//! read. The chain ([`diagnose`](super::diagnose)) decides from these alone.

use std::time::SystemTime;

use crate::api::{APIService, Pod, Service};
use crate::controller::ca::CaBundle;

/// One read: what came back, or why nothing did.
#[derive(Clone, Debug, PartialEq)]
pub enum Read<T> {
    /// The answer.
    Got(T),
    /// The server says it does not exist (404).
    Absent,
    /// The user may not read it: which verb on which resource is missing.
    Denied(String),
    /// Another error (the message).
    Failed(String),
    /// Not read: an earlier link made it moot, or nothing tells where it is (the reason).
    Skipped(String),
}

impl<T> Read<T> {
    /// The answer, if there is one.
    pub fn got(&self) -> Option<&T> {
        match self {
            Read::Got(t) => Some(t),
            _ => None,
        }
    }

    /// Why there is no answer, for a "not checked" line; `None` for an answer or a 404.
    pub fn unread(&self) -> Option<String> {
        match self {
            Read::Denied(what) => Some(format!("not permitted to {what}")),
            Read::Failed(why) => Some(format!("could not be read: {why}")),
            Read::Skipped(why) => Some(why.clone()),
            Read::Got(_) | Read::Absent => None,
        }
    }
}

/// The Service's endpoints as the server's kube-aggregator reads them: EndpointSlices
/// (v1.34 and later) or the Endpoints object (before).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Backends {
    /// `EndpointSlice` or `Endpoints`.
    pub source: &'static str,
    /// How many objects of that kind belong to the Service.
    pub objects: usize,
    /// Endpoints ready on the Service port's name (what the aggregator needs).
    pub ready: usize,
    /// Endpoints not ready.
    pub not_ready: usize,
    /// Endpoints terminating.
    pub terminating: usize,
}

/// A CustomResourceDefinition of the APIService's group.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Crd {
    /// Its name, `PLURAL.GROUP`.
    pub name: String,
    /// Whether its `Established` condition is `True`.
    pub established: bool,
    /// Versions it serves.
    pub served: Vec<String>,
}

/// The certificate a backend serves with, from the Secret its pods mount.
#[derive(Clone, Debug, PartialEq)]
pub struct ServingCert {
    /// Where it was read: `NAMESPACE/SECRET` key `tls.crt`.
    pub from: String,
    /// The certificate first, then any intermediates.
    pub chain: CaBundle,
}

/// One permission the backend's ServiceAccount needs, and the server's answer.
#[derive(Clone, Debug, PartialEq)]
pub struct Permission {
    /// e.g. `get configmaps/extension-apiserver-authentication in kube-system`.
    pub what: String,
    /// The SubjectAccessReview's answer.
    pub allowed: bool,
}

/// What the backend answered through kube-apiserver's Service proxy.
#[derive(Clone, Debug, PartialEq)]
pub struct Probe {
    /// The path asked, e.g. `/apis/metrics.k8s.io/v1beta1`.
    pub path: String,
    /// The HTTP status, when one came back.
    pub code: Option<u16>,
    /// The answer's message (or the error).
    pub message: String,
}

/// Why a link of [`Facts::only`] has no answer.
const NOT_READ: &str = "not read";

/// Everything read about one APIService.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The APIService itself.
    pub api_service: APIService,
    /// When it was read (for validity periods).
    pub now: SystemTime,
    /// For a local one: the CRDs of its group.
    pub crds: Read<Vec<Crd>>,
    /// The Service's namespace (`Absent`: it does not exist).
    pub namespace: Read<()>,
    /// The Service.
    pub service: Read<Service>,
    /// The other Services in that namespace (for "did you mean").
    pub services_nearby: Vec<String>,
    /// Its endpoints.
    pub backends: Read<Backends>,
    /// The pods its selector matches.
    pub pods: Read<Vec<Pod>>,
    /// The backend's serving certificate.
    pub serving_cert: Read<ServingCert>,
    /// The backend ServiceAccount's permissions an aggregated server needs.
    pub permissions: Read<Vec<Permission>>,
    /// Whether kube-apiserver runs with the front-proxy flags (the `requestheader-*` keys
    /// of `kube-system/extension-apiserver-authentication`).
    pub front_proxy: Read<bool>,
    /// The discovery GET through the Service proxy.
    pub probe: Read<Probe>,
    /// The group/versions the backend serves (`/apis/GROUP` through the Service proxy).
    pub backend_versions: Read<Vec<String>>,
}

impl Facts {
    /// Facts with nothing read but the APIService: every other link skipped.
    pub fn only(api_service: APIService, now: SystemTime) -> Facts {
        Facts {
            api_service,
            now,
            crds: Read::Skipped(NOT_READ.into()),
            namespace: Read::Skipped(NOT_READ.into()),
            service: Read::Skipped(NOT_READ.into()),
            services_nearby: Vec::new(),
            backends: Read::Skipped(NOT_READ.into()),
            pods: Read::Skipped(NOT_READ.into()),
            serving_cert: Read::Skipped(NOT_READ.into()),
            permissions: Read::Skipped(NOT_READ.into()),
            front_proxy: Read::Skipped(NOT_READ.into()),
            probe: Read::Skipped(NOT_READ.into()),
            backend_versions: Read::Skipped(NOT_READ.into()),
        }
    }
}
