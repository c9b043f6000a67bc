//! The cause codes: why an aggregated API is (not) served, one vocabulary for `explain`,
//! `plan`, Events, logs and alerts.

use std::fmt;

/// Why an APIService is served or not: the first broken link of the chain kube-aggregator
/// walks (Service → port → endpoints → TLS → discovery GET), or what it depends on beyond
/// that (pods, the serving certificate, the backend's permissions).
#[non_exhaustive]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Cause {
    /// Served: kube-aggregator's discovery check passed.
    Served,
    /// `spec.service` is null and kube-apiserver serves it itself.
    Local,
    /// `spec.service` is null but no CustomResourceDefinition serves the group/version.
    LocalNotServed,
    /// kube-aggregator has not checked it yet (no `Available` condition, or `Unknown`).
    NotChecked,
    /// The Service's namespace does not exist.
    NamespaceNotFound,
    /// The Service does not exist.
    ServiceNotFound,
    /// The Service is of type `ExternalName`: traffic leaves the cluster's endpoints.
    ServiceExternalName,
    /// `spec.service.port` is not a port of the Service.
    ServicePortMismatch,
    /// No EndpointSlice (before v1.34: no Endpoints) for the Service.
    EndpointsNotFound,
    /// The Service selects no pod.
    SelectorMatchesNoPod,
    /// The selected pods are not Ready.
    PodsNotReady,
    /// The Service's `targetPort` names a port no selected container declares.
    TargetPortMismatch,
    /// Endpoints exist but none is ready for the port.
    NoReadyEndpoints,
    /// `caBundle` is empty and `insecureSkipTLSVerify` is not set.
    CABundleMissing,
    /// `caBundle` is not PEM certificates.
    CABundleInvalid,
    /// Every CA in `caBundle` has expired.
    CAExpired,
    /// The serving certificate is not signed by a CA of `caBundle`.
    CertNotSignedByCA,
    /// The serving certificate is not valid for `SERVICE.NAMESPACE.svc`.
    CertWrongName,
    /// The serving certificate has expired.
    CertExpired,
    /// The serving certificate is not valid yet.
    CertNotYetValid,
    /// The backend answers the aggregator 401 or 403.
    BackendForbidden,
    /// The backend answers 404 for `/apis/GROUP/VERSION`: it does not serve that version.
    GroupVersionNotServed,
    /// The backend cannot be reached from kube-apiserver (refused, timeout, no route).
    BackendUnreachable,
    /// The backend answers with another error.
    BackendError,
    /// kube-aggregator could not read the Service or its endpoints.
    AggregatorAccessError,
    /// A failure kube-aggregator reported that none of the above explains.
    DiscoveryFailed,
}

impl Cause {
    /// The code, as `explain -o json`, Events and metrics labels spell it.
    pub fn code(self) -> &'static str {
        match self {
            Cause::Served => "Served",
            Cause::Local => "Local",
            Cause::LocalNotServed => "LocalNotServed",
            Cause::NotChecked => "NotChecked",
            Cause::NamespaceNotFound => "NamespaceNotFound",
            Cause::ServiceNotFound => "ServiceNotFound",
            Cause::ServiceExternalName => "ServiceExternalName",
            Cause::ServicePortMismatch => "ServicePortMismatch",
            Cause::EndpointsNotFound => "EndpointsNotFound",
            Cause::SelectorMatchesNoPod => "SelectorMatchesNoPod",
            Cause::PodsNotReady => "PodsNotReady",
            Cause::TargetPortMismatch => "TargetPortMismatch",
            Cause::NoReadyEndpoints => "NoReadyEndpoints",
            Cause::CABundleMissing => "CABundleMissing",
            Cause::CABundleInvalid => "CABundleInvalid",
            Cause::CAExpired => "CAExpired",
            Cause::CertNotSignedByCA => "CertNotSignedByCA",
            Cause::CertWrongName => "CertWrongName",
            Cause::CertExpired => "CertExpired",
            Cause::CertNotYetValid => "CertNotYetValid",
            Cause::BackendForbidden => "BackendForbidden",
            Cause::GroupVersionNotServed => "GroupVersionNotServed",
            Cause::BackendUnreachable => "BackendUnreachable",
            Cause::BackendError => "BackendError",
            Cause::AggregatorAccessError => "AggregatorAccessError",
            Cause::DiscoveryFailed => "DiscoveryFailed",
        }
    }

    /// Whether the API is served (by a backend or by kube-apiserver itself).
    pub fn is_served(self) -> bool {
        matches!(self, Cause::Served | Cause::Local)
    }

    /// The cause kube-aggregator's `Available` condition alone shows: its reason, and for
    /// `FailedDiscoveryCheck` the Go error in its message
    /// (`k8s.io/kube-aggregator/pkg/controllers/status/remote`). `explain` refines it with
    /// what else it reads; the controller's Events and logs, which read nothing else, use
    /// it as it is.
    pub fn from_condition(status: &str, reason: &str, message: &str) -> Cause {
        match (status, reason) {
            ("True", "Local") => return Cause::Local,
            ("True", _) => return Cause::Served,
            (_, "ServiceNotFound") => return Cause::ServiceNotFound,
            (_, "ServicePortError") => return Cause::ServicePortMismatch,
            (_, "EndpointsNotFound") => return Cause::EndpointsNotFound,
            (_, "MissingEndpoints") => return Cause::NoReadyEndpoints,
            (_, "ServiceAccessError" | "EndpointsAccessError") => {
                return Cause::AggregatorAccessError
            }
            ("False", "FailedDiscoveryCheck") => {}
            ("False", _) => return Cause::DiscoveryFailed,
            _ => return Cause::NotChecked,
        }
        let m = message.to_ascii_lowercase();
        let has = |needles: &[&str]| needles.iter().any(|n| m.contains(n));
        if let Some(code) = bad_status(&m) {
            return match code {
                401 | 403 => Cause::BackendForbidden,
                404 => Cause::GroupVersionNotServed,
                _ => Cause::BackendError,
            };
        }
        if has(&[
            "unknown authority",
            "certificate signed by unknown",
            "unknownissuer",
        ]) {
            Cause::CertNotSignedByCA
        } else if has(&[
            "is valid for",
            "not valid for",
            "doesn't contain any ip sans",
        ]) {
            Cause::CertWrongName
        } else if has(&["has expired", "expired or is not yet valid"]) {
            Cause::CertExpired
        } else if has(&["not yet valid"]) {
            Cause::CertNotYetValid
        } else if has(&["no endpoints available", "no endpoints"]) {
            Cause::NoReadyEndpoints
        } else if has(&[
            "connection refused",
            "no route to host",
            "i/o timeout",
            "timed out",
            "timeout awaiting",
            "client.timeout",
            "network is unreachable",
            "connection reset",
        ]) {
            Cause::BackendUnreachable
        } else {
            Cause::DiscoveryFailed
        }
    }
}

/// The code of `bad status from URL: CODE` in a discovery check's message.
fn bad_status(message: &str) -> Option<u16> {
    let rest = message.split("bad status from ").nth(1)?;
    let code = rest.rsplit(": ").next()?;
    code.trim().get(..3)?.parse().ok()
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_aggregators_reasons_and_messages_map_to_causes() {
        let c = |s, r, m| Cause::from_condition(s, r, m);
        assert_eq!(c("True", "Passed", "all checks passed"), Cause::Served);
        assert_eq!(
            c("True", "Local", "Local APIServices are always available"),
            Cause::Local
        );
        assert_eq!(c("False", "ServiceNotFound", ""), Cause::ServiceNotFound);
        assert_eq!(
            c("False", "ServicePortError", ""),
            Cause::ServicePortMismatch
        );
        assert_eq!(
            c("False", "EndpointsNotFound", ""),
            Cause::EndpointsNotFound
        );
        assert_eq!(c("False", "MissingEndpoints", ""), Cause::NoReadyEndpoints);
        assert_eq!(
            c("Unknown", "EndpointsAccessError", ""),
            Cause::AggregatorAccessError
        );
        assert_eq!(c("Unknown", "", ""), Cause::NotChecked);
        let failed = |m| c("False", "FailedDiscoveryCheck", m);
        assert_eq!(
            failed("failing or missing response from https://10.0.0.1:443/apis/g/v1: bad status from https://10.0.0.1:443/apis/g/v1: 403"),
            Cause::BackendForbidden
        );
        assert_eq!(
            failed("failing or missing response from https://a/apis/g/v1: bad status from https://a/apis/g/v1: 404"),
            Cause::GroupVersionNotServed
        );
        assert_eq!(
            failed("failing or missing response from https://a/apis/g/v1: bad status from https://a/apis/g/v1: 503"),
            Cause::BackendError
        );
        assert_eq!(
            failed("failing or missing response from https://a/apis/g/v1: Get \"https://a/apis/g/v1\": tls: failed to verify certificate: x509: certificate signed by unknown authority"),
            Cause::CertNotSignedByCA
        );
        assert_eq!(
            failed("... x509: certificate is valid for other.ns.svc, not api.ns.svc"),
            Cause::CertWrongName
        );
        assert_eq!(
            failed("... x509: certificate has expired or is not yet valid: current time 2026-01-01T00:00:00Z is after 2025-01-01T00:00:00Z"),
            Cause::CertExpired
        );
        assert_eq!(
            failed("failing or missing response from https://127.0.0.1:9/apis/g/v1: Get \"https://127.0.0.1:9/apis/g/v1\": dial tcp 127.0.0.1:9: connect: connection refused"),
            Cause::BackendUnreachable
        );
        assert_eq!(
            failed("timed out waiting for https://a/apis/g/v1"),
            Cause::BackendUnreachable
        );
        assert_eq!(failed("something new"), Cause::DiscoveryFailed);
    }
}
