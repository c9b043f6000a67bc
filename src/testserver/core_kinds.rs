//! Validation of the core `v1` kinds served for CA injection: Secrets and ConfigMaps.

use base64::Engine;
use serde_json::{json, Value};

use super::errors::FieldError;
use super::validation::dns1123_subdomain;

/// The name rules every namespaced core object follows.
fn name_errors(obj: &Value) -> Vec<FieldError> {
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or("");
    if name.is_empty() {
        return vec![FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )];
    }
    dns1123_subdomain(name)
        .into_iter()
        .map(|m| FieldError::invalid("metadata.name", &json!(name), &m))
        .collect()
}

/// A map field of string values (`data`, `binaryData`); `base64`: each value must decode.
fn string_map(obj: &Value, field: &str, base64: bool) -> Result<Vec<FieldError>, String> {
    let mut errs = Vec::new();
    match obj.get(field) {
        None | Some(Value::Null) => {}
        Some(Value::Object(m)) => {
            for (k, v) in m {
                let Some(s) = v.as_str() else {
                    return Err(format!("{field}.{k}: expected a string"));
                };
                if base64 && base64::engine::general_purpose::STANDARD.decode(s).is_err() {
                    return Err(format!("{field}.{k}: illegal base64 data"));
                }
            }
        }
        Some(_) => return Err(format!("{field}: expected an object")),
    }
    if field == "data" {
        // Keys are what a file name in a volume may be.
        if let Some(Value::Object(m)) = obj.get(field) {
            for k in m.keys() {
                let ok = !k.is_empty()
                    && k.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'));
                if !ok {
                    errs.push(FieldError::invalid(
                        &format!("{field}[{k}]"),
                        &json!(k),
                        "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                    ));
                }
            }
        }
    }
    Ok(errs)
}

/// `v1` Secret: a valid name, `data` values base64.
pub(crate) fn validate_secret(obj: &Value) -> Result<Vec<FieldError>, String> {
    let mut errs = name_errors(obj);
    errs.extend(string_map(obj, "data", true)?);
    Ok(errs)
}

/// `v1` ConfigMap: a valid name, `data` strings, `binaryData` base64.
pub(crate) fn validate_configmap(obj: &Value) -> Result<Vec<FieldError>, String> {
    let mut errs = name_errors(obj);
    errs.extend(string_map(obj, "data", false)?);
    errs.extend(string_map(obj, "binaryData", true)?);
    Ok(errs)
}

/// `stringData` of a Secret is write-only: merged into `data` (base64), never stored.
pub(crate) fn default_secret(obj: &mut Value) {
    if !obj.is_object() {
        return;
    }
    if obj.get("type").is_none() {
        obj["type"] = json!("Opaque");
    }
    let Some(Value::Object(strings)) = obj.as_object_mut().and_then(|o| o.remove("stringData"))
    else {
        return;
    };
    if !obj.get("data").is_some_and(Value::is_object) {
        obj["data"] = json!({});
    }
    for (k, v) in strings {
        if let Some(s) = v.as_str() {
            obj["data"][k] = json!(base64::engine::general_purpose::STANDARD.encode(s));
        }
    }
}

/// The Service range the test server allocates ClusterIPs from, inside loopback (as the
/// real-server harness's `--service-cluster-ip-range`): a backend listening on its Service's
/// ClusterIP and port is what the availability controller dials, without leaving the machine.
pub const SERVICE_RANGE: &str = "127.1.0.0/24";

/// The next ClusterIP, `127.1.0.2` to `127.1.0.254` in turn (`.1` is kube-apiserver's own
/// `kubernetes` Service on a real cluster). One sequence per process, so servers running
/// side by side in a test binary hand out different addresses; unique for the first 253
/// allocations (a real server refuses the 254th Service of a full /24 instead).
fn allocate_cluster_ip() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let n = NEXT.fetch_add(1, Ordering::Relaxed) % 253;
    format!("127.1.0.{}", n + 2)
}

/// kube-apiserver's Service defaults: type `ClusterIP`, a ClusterIP allocated (unless
/// headless, `None`, or `ExternalName`), `clusterIPs` beside it, `sessionAffinity` `None`,
/// each port's protocol `TCP` and `targetPort` its port.
pub(crate) fn default_service(obj: &mut Value) {
    let Some(spec) = obj.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let type_ = spec
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("ClusterIP")
        .to_string();
    spec.insert("type".into(), json!(type_));
    if type_ != "ExternalName" {
        let given = spec
            .get("clusterIP")
            .and_then(Value::as_str)
            .filter(|ip| !ip.is_empty())
            .or_else(|| {
                spec.get("clusterIPs")
                    .and_then(|ips| ips.get(0))
                    .and_then(Value::as_str)
            })
            .map(str::to_string);
        let ip = given.unwrap_or_else(allocate_cluster_ip);
        spec.insert("clusterIP".into(), json!(ip));
        spec.insert("clusterIPs".into(), json!([ip]));
    }
    if !spec.contains_key("sessionAffinity") {
        spec.insert("sessionAffinity".into(), json!("None"));
    }
    if let Some(ports) = spec.get_mut("ports").and_then(Value::as_array_mut) {
        for p in ports.iter_mut().filter_map(Value::as_object_mut) {
            if !p.contains_key("protocol") {
                p.insert("protocol".into(), json!("TCP"));
            }
            if let (false, Some(port)) = (p.contains_key("targetPort"), p.get("port").cloned()) {
                p.insert("targetPort".into(), port);
            }
        }
    }
}

/// What an update keeps from the stored object when the body leaves it out, before
/// defaulting: a Service's allocated ClusterIPs, as kube-apiserver's `patchAllocatedValues`.
pub(crate) fn carry_allocated(plural: &str, cur: &Value, new: &mut Value) {
    if plural != "services" {
        return;
    }
    let (Some(old), Some(spec)) = (
        cur.get("spec"),
        new.get_mut("spec").and_then(Value::as_object_mut),
    ) else {
        return;
    };
    let unset = |k: &str| spec.get(k).is_none_or(|v| v.is_null() || v == "");
    if unset("clusterIP") && unset("clusterIPs") {
        for k in ["clusterIP", "clusterIPs"] {
            if let Some(v) = old.get(k) {
                spec.insert(k.into(), v.clone());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_service_gets_a_loopback_cluster_ip_that_an_update_keeps() {
        let mut svc = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 443}]}});
        default_service(&mut svc);
        let ip = svc["spec"]["clusterIP"].as_str().unwrap().to_string();
        assert!(ip.starts_with("127.1.0."), "{svc}");
        assert_eq!(svc["spec"]["clusterIPs"], json!([ip]));
        assert_eq!(svc["spec"]["type"], "ClusterIP");
        assert_eq!(
            svc["spec"]["ports"][0],
            json!({"port": 443, "protocol": "TCP", "targetPort": 443})
        );
        // An update without the address keeps it; defaulting then allocates nothing new.
        let mut put = json!({"metadata": {"name": "s"}, "spec": {"ports": [{"port": 8443}]}});
        carry_allocated("services", &svc, &mut put);
        default_service(&mut put);
        assert_eq!(put["spec"]["clusterIP"], json!(ip));
        // Given, headless or ExternalName: nothing allocated.
        for (spec, want) in [
            (json!({"clusterIP": "127.1.0.254"}), json!("127.1.0.254")),
            (json!({"clusterIP": "None"}), json!("None")),
            (
                json!({"type": "ExternalName", "externalName": "x.example.com"}),
                Value::Null,
            ),
        ] {
            let mut svc = json!({"metadata": {"name": "s"}, "spec": spec});
            default_service(&mut svc);
            assert_eq!(svc["spec"]["clusterIP"], want, "{svc}");
        }
    }
}
