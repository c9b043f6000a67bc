//! The chain kube-aggregator walks, as a pure function over what was read: the first
//! broken link is the cause; with it come the evidence, the fix and what else breaks.

use crate::api::{APIService, Pod, Service};
use crate::controller::availability::Observed;
use crate::controller::ca::CaBundle;
use crate::controller::manifests::suggest::closest;
use crate::text;

use super::facts::{Facts, Read};
use super::{tls, Cause};

/// Served, not served, or served by kube-apiserver itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A backend serves it.
    Served,
    /// It is not served.
    NotServed,
    /// kube-apiserver serves it (`spec.service` is null).
    Local,
}

impl Verdict {
    /// `served`, `not served`, `local`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Served => "served",
            Verdict::NotServed => "not served",
            Verdict::Local => "local",
        }
    }
}

/// Why an APIService is or is not served.
#[derive(Clone, Debug, PartialEq)]
pub struct Diagnosis {
    /// The APIService's name.
    pub name: String,
    /// Served or not.
    pub verdict: Verdict,
    /// The first broken link (or `Served`/`Local`).
    pub cause: Cause,
    /// The cause in one line.
    pub summary: String,
    /// What was read that shows it: objects and fields, with names.
    pub evidence: Vec<String>,
    /// What to do, in a line or two (empty when served).
    pub fix: String,
    /// What else breaks while it is not served.
    pub consequences: Vec<String>,
    /// Links that could not be checked, and why (a permission the user lacks, ...).
    pub unchecked: Vec<String>,
}

/// Walks the chain over `f` and stops at the first broken link.
pub fn diagnose(f: &Facts) -> Diagnosis {
    let o = &f.api_service;
    let mut d = Diagnosis {
        name: o.metadata.name.as_deref().unwrap_or_default().to_string(),
        verdict: Verdict::NotServed,
        cause: Cause::NotChecked,
        summary: String::new(),
        evidence: Vec::new(),
        fix: String::new(),
        consequences: Vec::new(),
        unchecked: Vec::new(),
    };
    let (status, reason, message) = condition(o);
    d.evidence.push(format!(
        "apiservice/{}: Available={status}{}{}",
        d.name,
        if reason.is_empty() {
            String::new()
        } else {
            format!(" ({reason})")
        },
        if message.is_empty() {
            String::new()
        } else {
            format!(": {message}")
        },
    ));
    let from_condition = Cause::from_condition(&status, &reason, &message);
    let Some(svc) = o.spec.service.as_ref() else {
        local(f, &mut d, from_condition);
        return d;
    };
    let (ns, name) = (svc.namespace.to_string(), svc.name.to_string());
    let port = svc.port.unwrap_or(443);
    let host = format!("{name}.{ns}.svc");
    if walk(f, &mut d, &ns, &name, port, &host, from_condition).is_none() {
        // Every link we could read is intact: the aggregator's own verdict stands.
        if from_condition.is_served() {
            d.verdict = Verdict::Served;
            d.cause = Cause::Served;
            d.summary = format!("served by service/{name} in {ns} on port {port}");
        } else {
            set(
                &mut d,
                from_condition,
                reported(from_condition, &message),
                fix_for(from_condition, &ns, &name, &host),
            );
        }
    }
    if d.verdict == Verdict::NotServed {
        d.consequences = consequences(o);
    }
    d
}

/// The `Available` condition's status, reason and message (`Unknown` when none).
fn condition(o: &APIService) -> (String, String, String) {
    match Observed::of(o) {
        Observed::Available { reason } => ("True".into(), reason, String::new()),
        Observed::Unavailable { reason, message } => ("False".into(), reason, message),
        Observed::Unknown => ("Unknown".into(), String::new(), String::new()),
    }
}

fn set(d: &mut Diagnosis, cause: Cause, summary: String, fix: String) {
    d.cause = cause;
    d.summary = summary;
    d.fix = fix;
}

/// `spec.service` is null: kube-apiserver serves the group itself (built in, or a CRD).
fn local(f: &Facts, d: &mut Diagnosis, from_condition: Cause) {
    let o = &f.api_service;
    let (group, version) = (&o.spec.group, &o.spec.version);
    if from_condition == Cause::Local || from_condition == Cause::Served {
        d.verdict = Verdict::Local;
        d.cause = Cause::Local;
        d.summary = "served by kube-apiserver itself (spec.service is null)".into();
        return;
    }
    match &f.crds {
        Read::Got(crds) => {
            for c in crds {
                d.evidence.push(format!(
                    "customresourcedefinition/{}: Established={}, served versions: {}",
                    c.name,
                    if c.established { "True" } else { "False" },
                    if c.served.is_empty() {
                        "none".to_string()
                    } else {
                        c.served.join(", ")
                    }
                ));
            }
            let serving = crds
                .iter()
                .any(|c| c.established && c.served.iter().any(|v| **v == **version));
            if !serving {
                set(
                    d,
                    Cause::LocalNotServed,
                    if crds.is_empty() {
                        format!("spec.service is null but no CustomResourceDefinition of group {group} exists")
                    } else {
                        format!("spec.service is null but no established CustomResourceDefinition of group {group} serves {version}")
                    },
                    format!("create (or fix) the CustomResourceDefinition for {group}/{version}, or point spec.service at the aggregated server that serves it"),
                );
                d.consequences = consequences(o);
                return;
            }
        }
        other => d.unchecked.extend(
            other
                .unread()
                .map(|w| format!("CustomResourceDefinitions: {w}")),
        ),
    }
    set(
        d,
        from_condition,
        "kube-apiserver serves it itself but reports it unavailable".into(),
        "read kube-apiserver's log for the group".into(),
    );
    d.consequences = consequences(o);
}

/// Walks Service → port → endpoints → pods → TLS → discovery; `Some(())` when it set a
/// cause.
fn walk(
    f: &Facts,
    d: &mut Diagnosis,
    ns: &str,
    name: &str,
    port: i32,
    host: &str,
    from_condition: Cause,
) -> Option<()> {
    // 1. The Service.
    let service = match &f.service {
        Read::Got(s) => s,
        Read::Absent => {
            if f.namespace == Read::Absent {
                d.evidence.push(format!("namespace/{ns}: not found"));
                set(
                    d,
                    Cause::NamespaceNotFound,
                    format!("namespace {ns} of service/{name} does not exist"),
                    format!("create namespace {ns} and the backend in it, or fix spec.service.namespace"),
                );
            } else {
                d.evidence
                    .push(format!("service/{name} in {ns}: not found"));
                let near = closest(name, f.services_nearby.iter().map(String::as_str));
                let mut listed: Vec<&str> = f
                    .services_nearby
                    .iter()
                    .map(String::as_str)
                    .take(10)
                    .collect();
                if f.services_nearby.len() > listed.len() {
                    listed.push("...");
                }
                d.evidence.push(format!(
                    "services in {ns}: {}",
                    if listed.is_empty() {
                        "none".to_string()
                    } else {
                        listed.join(", ")
                    }
                ));
                set(
                    d,
                    Cause::ServiceNotFound,
                    format!("service/{name} in {ns} does not exist"),
                    match near {
                        Some(n) => format!("fix spec.service.name (did you mean {n}?), or create service/{name} in {ns}"),
                        None => format!("deploy the backend's Service {ns}/{name}, or fix spec.service.name"),
                    },
                );
            }
            return Some(());
        }
        other => {
            d.unchecked.extend(
                other
                    .unread()
                    .map(|w| format!("service/{name} in {ns}: {w}")),
            );
            return None;
        }
    };
    if service.spec.type_.as_deref() == Some("ExternalName") {
        d.evidence.push(format!(
            "service/{name} in {ns}: type ExternalName ({})",
            service
                .spec
                .external_name
                .as_deref()
                .unwrap_or("no externalName")
        ));
        if !from_condition.is_served() {
            set(
                d,
                Cause::ServiceExternalName,
                format!("service/{name} in {ns} is an ExternalName Service: kube-apiserver dials a name outside the cluster's endpoints"),
                "point spec.service at a ClusterIP Service that selects the backend's pods".into(),
            );
            return Some(());
        }
        return None;
    }
    // 2. The port (the aggregator checks it for ClusterIP Services).
    let ports: Vec<String> = service
        .spec
        .ports
        .iter()
        .map(|p| match &p.name {
            Some(n) if !n.is_empty() => format!("{} ({n})", p.port),
            _ => p.port.to_string(),
        })
        .collect();
    let Some(port_name) = service.port_name(port) else {
        d.evidence.push(format!(
            "service/{name} in {ns}: ports {}",
            if ports.is_empty() {
                "none".into()
            } else {
                ports.join(", ")
            }
        ));
        set(
            d,
            Cause::ServicePortMismatch,
            format!("spec.service.port {port} is not a port of service/{name} in {ns}"),
            format!("set spec.service.port to one of the Service's ports ({}), or add port {port} to the Service", ports.join(", ")),
        );
        return Some(());
    };
    let port_def = service.spec.ports.iter().find(|p| p.port == port);
    d.evidence.push(format!(
        "service/{name} in {ns}: port {port} ({}) found",
        if port_name.is_empty() {
            "unnamed"
        } else {
            port_name
        }
    ));
    // 3. Endpoints, then why none is ready (pods, selector, targetPort).
    match &f.backends {
        Read::Got(b) if b.objects == 0 => {
            d.evidence.push(format!(
                "{} of service/{name} in {ns}: none",
                plural(b.source)
            ));
            if pods_cause(f, d, service, port_def.and_then(|p| p.target_port.as_ref())) {
                return Some(());
            }
            set(
                d,
                Cause::EndpointsNotFound,
                format!("service/{name} in {ns} has no {}", b.source),
                if service.spec.selector.is_none() {
                    format!(
                        "the Service has no selector: write its {} by hand, or give it a selector",
                        b.source
                    )
                } else {
                    "check that kube-controller-manager runs (it writes endpoints for selected pods)".into()
                },
            );
            return Some(());
        }
        Read::Got(b) if b.ready == 0 => {
            d.evidence.push(format!(
                "{} of service/{name} in {ns}: {} object(s), 0 ready endpoints on port {:?}, {} not ready, {} terminating",
                plural(b.source), b.objects, port_name, b.not_ready, b.terminating
            ));
            if pods_cause(f, d, service, port_def.and_then(|p| p.target_port.as_ref())) {
                return Some(());
            }
            set(
                d,
                Cause::NoReadyEndpoints,
                format!("service/{name} in {ns} has no ready endpoint on port {port}"),
                "make the backend's pods Ready (see their readiness probes and logs)".into(),
            );
            return Some(());
        }
        Read::Got(b) => d.evidence.push(format!(
            "{} of service/{name} in {ns}: {} ready endpoint(s) on port {:?}",
            plural(b.source),
            b.ready,
            port_name
        )),
        other => d.unchecked.extend(
            other
                .unread()
                .map(|w| format!("endpoints of service/{name}: {w}")),
        ),
    }
    // 4. TLS: the bundle, then the serving certificate against it.
    let spec = &f.api_service.spec;
    if !spec.insecure_skip_tls_verify {
        let bundle = match spec.ca_bundle.as_deref() {
            None | Some([]) => {
                d.evidence
                    .push("spec.caBundle: empty, spec.insecureSkipTLSVerify: false".into());
                set(
                    d,
                    Cause::CABundleMissing,
                    "spec.caBundle is empty: kube-apiserver cannot verify the backend's certificate".into(),
                    "set spec.caBundle to the CA that signs the serving certificate (or a CA source annotation)".into(),
                );
                return Some(());
            }
            Some(pem) => match CaBundle::from_pem(pem) {
                Ok(b) => b,
                Err(e) => {
                    d.evidence.push(format!("spec.caBundle: {e}"));
                    set(
                        d,
                        Cause::CABundleInvalid,
                        format!("spec.caBundle is not PEM certificates: {e}"),
                        "set spec.caBundle to the base64 of the CA certificate's PEM".into(),
                    );
                    return Some(());
                }
            },
        };
        for c in &bundle.certs {
            d.evidence.push(format!(
                "spec.caBundle: {} (sha256 {}, valid until {})",
                c.subject,
                c.sha256,
                crate::api::time::format_rfc3339(c.not_after)
            ));
        }
        if bundle.certs.iter().all(|c| c.not_after < f.now) {
            set(
                d,
                Cause::CAExpired,
                "every CA certificate in spec.caBundle has expired".into(),
                "renew the CA, re-issue the serving certificate from it, and update spec.caBundle"
                    .into(),
            );
            return Some(());
        }
        match &f.serving_cert {
            Read::Got(cert) => {
                if let Some(leaf) = cert.chain.certs.first() {
                    d.evidence.push(format!(
                        "serving certificate ({}): subject {}, issuer {}, names {}, valid {} to {}, sha256 {}",
                        cert.from,
                        leaf.subject,
                        leaf.issuer,
                        if leaf.sans.is_empty() { "none".into() } else { leaf.sans.join(", ") },
                        crate::api::time::format_rfc3339(leaf.not_before),
                        crate::api::time::format_rfc3339(leaf.not_after),
                        leaf.sha256
                    ));
                }
                if let Err((cause, why)) = tls::verify(&cert.chain, &bundle, host, f.now) {
                    let summary = match cause {
                        Cause::CertNotSignedByCA => format!("the serving certificate is not signed by a CA of spec.caBundle ({why})"),
                        Cause::CertWrongName => format!("the serving certificate is not valid for {host}"),
                        Cause::CertExpired => "the serving certificate has expired".to_string(),
                        Cause::CertNotYetValid => "the serving certificate is not valid yet".to_string(),
                        _ => format!("the serving certificate does not verify: {why}"),
                    };
                    let fix = match cause {
                        Cause::CertNotSignedByCA => "set spec.caBundle to the CA that issued the serving certificate, or re-issue the certificate from the bundle's CA".to_string(),
                        Cause::CertWrongName => format!("re-issue the serving certificate with {host} among its DNS names"),
                        Cause::CertExpired | Cause::CertNotYetValid => "re-issue the serving certificate (and restart the backend if it reads it only at start)".to_string(),
                        _ => "re-issue the serving certificate from the bundle's CA".to_string(),
                    };
                    set(d, cause, summary, fix);
                    return Some(());
                }
                d.evidence.push(format!(
                    "serving certificate verifies against spec.caBundle for {host}"
                ));
            }
            other => d
                .unchecked
                .extend(other.unread().map(|w| format!("serving certificate: {w}"))),
        }
    } else {
        d.evidence
            .push("spec.insecureSkipTLSVerify: true (the certificate is not checked)".into());
    }
    if from_condition.is_served() {
        return None;
    }
    // 5. The discovery GET: what the backend answers.
    let probe = f.probe.got();
    if let Some(p) = probe {
        d.evidence.push(format!(
            "GET {} through the Service proxy: {}{}",
            p.path,
            p.code
                .map(|c| c.to_string())
                .unwrap_or_else(|| "no answer".into()),
            if p.message.is_empty() {
                String::new()
            } else {
                format!(" ({})", p.message)
            }
        ));
    } else {
        d.unchecked.extend(
            f.probe
                .unread()
                .map(|w| format!("discovery through the Service proxy: {w}")),
        );
    }
    // The aggregator's own GET (with its front-proxy identity) decides; the Service proxy's
    // answer, made without that identity, is evidence only.
    let cause = match from_condition {
        Cause::NotChecked => return None,
        c => c,
    };
    match cause {
        Cause::BackendForbidden => {
            match &f.permissions {
                Read::Got(ps) => {
                    for p in ps {
                        d.evidence.push(format!("{}: {}", p.what, if p.allowed { "allowed" } else { "DENIED" }));
                    }
                }
                other => d.unchecked.extend(other.unread().map(|w| format!("the backend's permissions: {w}"))),
            }
            match &f.front_proxy {
                Read::Got(false) => d.evidence.push("configmap/extension-apiserver-authentication in kube-system: no requestheader-client-ca-file (kube-apiserver runs without the front-proxy flags)".into()),
                Read::Got(true) => d.evidence.push("configmap/extension-apiserver-authentication in kube-system: requestheader-client-ca-file set".into()),
                other => d.unchecked.extend(other.unread().map(|w| format!("front-proxy configuration: {w}"))),
            }
            let denied: Vec<&str> = f.permissions.got().map(|ps| ps.iter().filter(|p| !p.allowed).map(|p| p.what.as_str()).collect()).unwrap_or_default();
            let no_front_proxy = f.front_proxy == Read::Got(false);
            set(
                d,
                Cause::BackendForbidden,
                "the backend refuses kube-apiserver's requests (401/403)".into(),
                if !denied.is_empty() {
                    format!("grant the backend's ServiceAccount what it lacks: {} (the system:auth-delegator ClusterRole and the extension-apiserver-authentication-reader Role in kube-system)", denied.join("; "))
                } else if no_front_proxy {
                    "start kube-apiserver with --requestheader-client-ca-file, --proxy-client-cert-file and --proxy-client-key-file (the aggregation layer's front proxy)".into()
                } else {
                    "check the backend's authentication and authorization settings and its log".into()
                },
            );
        }
        Cause::GroupVersionNotServed => {
            let group = &f.api_service.spec.group;
            let version = &f.api_service.spec.version;
            match &f.backend_versions {
                Read::Got(vs) => d.evidence.push(format!(
                    "the backend serves for group {group}: {}",
                    if vs.is_empty() { "nothing".into() } else { vs.join(", ") }
                )),
                other => d.unchecked.extend(other.unread().map(|w| format!("the backend's discovery of {group}: {w}"))),
            }
            set(
                d,
                Cause::GroupVersionNotServed,
                format!("the backend answers 404 for /apis/{group}/{version}: it does not serve that version"),
                format!("register the version the backend serves, or run a backend that serves {group}/{version}"),
            );
        }
        Cause::BackendUnreachable => set(
            d,
            Cause::BackendUnreachable,
            "kube-apiserver cannot reach the backend's pods (refused, timed out or no route)".into(),
            "check that the pods listen on the target port, that the control plane can reach the pod network (firewall, CNI); on managed control planes use hostNetwork or --enable-aggregator-routing".into(),
        ),
        other => return if other.is_served() { None } else {
            let (_, _, message) = condition(&f.api_service);
            set(d, other, reported(other, &message), fix_for(other, ns, name, host));
            Some(())
        },
    }
    Some(())
}

/// When endpoints are missing or not ready: the pods' side; whether it set a cause.
fn pods_cause(
    f: &Facts,
    d: &mut Diagnosis,
    service: &Service,
    target_port: Option<&serde_json::Value>,
) -> bool {
    let Some(selector) = service.spec.selector.as_ref() else {
        return false;
    };
    let sel: Vec<String> = selector.iter().map(|(k, v)| format!("{k}={v}")).collect();
    let pods = match &f.pods {
        Read::Got(p) => p,
        other => {
            d.unchecked.extend(
                other
                    .unread()
                    .map(|w| format!("pods selected by {}: {w}", sel.join(","))),
            );
            return false;
        }
    };
    if pods.is_empty() {
        d.evidence
            .push(format!("pods matching {}: none", sel.join(",")));
        set(
            d,
            Cause::SelectorMatchesNoPod,
            format!("the Service's selector {} matches no pod", sel.join(",")),
            "fix the Service's selector or the pods' labels, or deploy the backend".into(),
        );
        return true;
    }
    let not_ready: Vec<&Pod> = pods.iter().filter(|p| !p.is_ready()).collect();
    for p in pods {
        d.evidence.push(pod_line(p));
    }
    if !not_ready.is_empty() && not_ready.len() == pods.len() {
        set(
            d,
            Cause::PodsNotReady,
            format!(
                "{} selected by the Service, none Ready",
                text::count(pods.len(), "pod")
            ),
            "see why with kubectl describe pod and the pods' logs (readiness probe, crash loop)"
                .into(),
        );
        return true;
    }
    // A named targetPort no container declares leaves the endpoints without that port.
    if let Some(serde_json::Value::String(named)) = target_port {
        let declared = pods.iter().any(|p| {
            p.spec
                .containers
                .iter()
                .any(|c| c.ports.iter().any(|cp| cp.name.as_deref() == Some(named)))
        });
        if !declared {
            d.evidence.push(format!("targetPort {named:?}: no container of the selected pods declares a port of that name"));
            set(
                d,
                Cause::TargetPortMismatch,
                format!("the Service's targetPort {named:?} names no container port of its pods"),
                "set the Service's targetPort to a container port's name or number".into(),
            );
            return true;
        }
    }
    false
}

/// The resource name of an endpoints kind, as kubectl spells it: `endpointslices`,
/// `endpoints` (already plural).
fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with('s') {
        lower
    } else {
        format!("{lower}s")
    }
}

/// `pod/NAME: Ready=False (reason), restarts 3`.
fn pod_line(p: &Pod) -> String {
    let name = p.metadata.name.as_deref().unwrap_or("?");
    let ready = p.status.conditions.iter().find(|c| c.type_ == "Ready");
    let restarts: i64 = p
        .status
        .container_statuses
        .iter()
        .map(|c| c.restart_count)
        .sum();
    format!(
        "pod/{name}: phase {}, Ready={}{}, restarts {restarts}",
        p.status.phase.as_deref().unwrap_or("unknown"),
        ready.map_or("unknown", |c| c.status.as_str()),
        ready
            .and_then(|c| c.reason.as_deref().or(c.message.as_deref()))
            .map(|r| format!(" ({r})"))
            .unwrap_or_default(),
    )
}

/// The one-line summary of a cause read only from the aggregator's condition.
fn reported(cause: Cause, message: &str) -> String {
    let what = match cause {
        Cause::NotChecked => "kube-aggregator has not checked it yet",
        Cause::ServiceNotFound => "kube-aggregator reports the Service missing",
        Cause::ServicePortMismatch => {
            "kube-aggregator reports the Service not listening on the port"
        }
        Cause::EndpointsNotFound => "kube-aggregator finds no endpoints for the Service",
        Cause::NoReadyEndpoints => "kube-aggregator finds no ready endpoint for the Service",
        Cause::CertNotSignedByCA => {
            "the serving certificate is not signed by a CA of spec.caBundle"
        }
        Cause::CertWrongName => "the serving certificate is not valid for the Service's name",
        Cause::CertExpired => "the serving certificate has expired or is not yet valid",
        Cause::BackendForbidden => "the backend refuses kube-apiserver's requests (401/403)",
        Cause::GroupVersionNotServed => "the backend does not serve this group/version (404)",
        Cause::BackendUnreachable => "kube-apiserver cannot reach the backend",
        Cause::BackendError => "the backend answers the discovery check with an error",
        Cause::AggregatorAccessError => "kube-aggregator cannot read the Service or its endpoints",
        _ => "kube-aggregator's discovery check failed",
    };
    if message.is_empty() {
        what.to_string()
    } else {
        format!("{what}: {message}")
    }
}

/// The usual fix for a cause known only from the condition.
fn fix_for(cause: Cause, ns: &str, name: &str, host: &str) -> String {
    match cause {
        Cause::NotChecked => "wait a few seconds for kube-aggregator's check; if it stays, check kube-apiserver's log".into(),
        Cause::ServiceNotFound => format!("deploy the Service {ns}/{name}, or fix spec.service"),
        Cause::EndpointsNotFound | Cause::NoReadyEndpoints => "make the backend's pods Ready".into(),
        Cause::CertNotSignedByCA => "set spec.caBundle to the CA that issued the serving certificate".into(),
        Cause::CertWrongName => format!("re-issue the serving certificate with {host} among its names"),
        Cause::CertExpired | Cause::CertNotYetValid => "re-issue the serving certificate".into(),
        Cause::BackendUnreachable => "check the pods listen on the target port and the control plane can reach the pod network".into(),
        Cause::AggregatorAccessError => "check kube-apiserver's permissions and log".into(),
        _ => "read the backend's log and kube-apiserver's log around the check".into(),
    }
}

/// What else breaks while `o` is not served.
pub fn consequences(o: &APIService) -> Vec<String> {
    let group = &o.spec.group;
    let mut out = vec![
        format!("discovery fails for {group}/{}: kubectl api-resources and clients that discover all groups report errors", o.spec.version),
        format!("namespace deletion stalls while {group} has namespaced resources (the namespace controller cannot list them), and the garbage collector waits"),
    ];
    match &**group {
        "metrics.k8s.io" => out.push(
            "HorizontalPodAutoscalers on resource metrics stop scaling; kubectl top fails".into(),
        ),
        "custom.metrics.k8s.io" | "external.metrics.k8s.io" => {
            out.push("HorizontalPodAutoscalers on custom or external metrics stop scaling".into())
        }
        _ => {}
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIServiceSpec, ServiceReference};
    use crate::controller::availability::status::available_status;
    use crate::diagnosis::facts::{Backends, Crd};
    use std::time::SystemTime;

    fn api(service: bool, status: (&str, &str, &str)) -> APIService {
        let mut o = APIService::new(
            "v1.g.example.com",
            APIServiceSpec {
                group: "g.example.com".into(),
                version: "v1".into(),
                service: service.then(|| ServiceReference {
                    namespace: "ns".into(),
                    name: "api".into(),
                    port: Some(443),
                    extra: Default::default(),
                }),
                ..Default::default()
            },
        );
        o.status = Some(available_status(status.0, status.1, status.2));
        o
    }

    #[test]
    fn a_local_group_without_its_crd_is_local_not_served() {
        let mut f = Facts::only(api(false, ("False", "MissingCRD", "")), SystemTime::now());
        f.crds = Read::Got(vec![Crd {
            name: "things.g.example.com".into(),
            established: true,
            served: vec!["v2".into()],
        }]);
        let d = diagnose(&f);
        assert_eq!(
            (d.verdict, d.cause),
            (Verdict::NotServed, Cause::LocalNotServed)
        );
        assert!(
            d.evidence.iter().any(|e| e.contains("served versions: v2")),
            "{d:?}"
        );
        let f = Facts::only(api(false, ("True", "Local", "")), SystemTime::now());
        assert_eq!(diagnose(&f).verdict, Verdict::Local);
    }

    #[test]
    fn what_cannot_be_read_is_listed_and_the_condition_decides() {
        let mut f = Facts::only(
            api(
                true,
                (
                    "False",
                    "ServiceNotFound",
                    "service/api in \"ns\" is not present",
                ),
            ),
            SystemTime::now(),
        );
        f.service = Read::Denied("list services in ns".into());
        let d = diagnose(&f);
        assert_eq!(d.cause, Cause::ServiceNotFound);
        assert!(
            d.unchecked
                .iter()
                .any(|u| u.contains("not permitted to list services in ns")),
            "{d:?}"
        );
        assert!(!d.consequences.is_empty());
    }

    #[test]
    fn endpoints_without_a_ready_one_and_no_selector_are_no_ready_endpoints() {
        let mut f = Facts::only(
            api(true, ("False", "MissingEndpoints", "")),
            SystemTime::now(),
        );
        let mut svc = Service::default();
        svc.spec.ports = vec![crate::api::ServicePort {
            name: Some("https".into()),
            port: 443,
            target_port: None,
        }];
        f.service = Read::Got(svc);
        f.backends = Read::Got(Backends {
            source: "EndpointSlice",
            objects: 1,
            ready: 0,
            not_ready: 2,
            terminating: 1,
        });
        f.pods = Read::Skipped("the Service has no selector".into());
        let d = diagnose(&f);
        assert_eq!(d.cause, Cause::NoReadyEndpoints);
        assert!(
            d.evidence
                .iter()
                .any(|e| e
                    .contains("0 ready endpoints on port \"https\", 2 not ready, 1 terminating")),
            "{d:?}"
        );
    }

    #[test]
    fn the_metrics_group_names_autoscaling_among_the_consequences() {
        let mut o = api(true, ("False", "", ""));
        o.spec.group = "metrics.k8s.io".into();
        assert!(consequences(&o).iter().any(|c| c.contains("kubectl top")));
    }
}
