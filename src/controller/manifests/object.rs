//! From one parsed document to the APIServices it declares.

use serde_json::Value;

use crate::api::APIService;

const ACCEPTED: &str = "only apiregistration.k8s.io/v1 APIService objects are accepted";

/// Metadata the server sets; a manifest copied from `kubectl get -o yaml` carries
/// them, and a create with e.g. a resourceVersion is refused.
const SERVER_SET_METADATA: &[&str] = &[
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "managedFields",
    "selfLink",
];

/// The APIServices of one document (several for a List), each or its error;
/// an empty document declares none.
pub(super) fn expand(doc: Value) -> Vec<Result<APIService, String>> {
    match &doc {
        Value::Null => Vec::new(),
        Value::Object(map) => match str_field(map, "kind") {
            Some("List") | Some("APIServiceList") => expand_list(doc),
            _ => vec![apiservice(doc)],
        },
        other => vec![Err(format!(
            "expected an object, found {}",
            type_name(other)
        ))],
    }
}

fn expand_list(list: Value) -> Vec<Result<APIService, String>> {
    let (api_version, kind) = type_of(&list);
    let (api_version, kind) = (api_version.to_string(), kind.to_string());
    let expected = if kind == "List" {
        "v1"
    } else {
        "apiregistration.k8s.io/v1"
    };
    if api_version != expected {
        return vec![Err(format!(
            "{kind} must have apiVersion {expected}, not {api_version:?}"
        ))];
    }
    let items = match list {
        Value::Object(mut map) => map.remove("items").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let items = match items {
        Value::Null => return Vec::new(),
        Value::Array(items) => items,
        other => {
            return vec![Err(format!(
                "{kind} items must be a list, found {}",
                type_name(&other)
            ))]
        }
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let is_list = matches!(type_of(&item).1, "List" | "APIServiceList");
            let res = if is_list {
                Err("a List inside a List is not supported".to_string())
            } else {
                apiservice(item)
            };
            res.map_err(|e| format!("items[{i}]: {e}"))
        })
        .collect()
}

/// One APIService, checked and cleaned for creation.
fn apiservice(mut value: Value) -> Result<APIService, String> {
    let (api_version, kind) = type_of(&value);
    match (api_version, kind) {
        ("apiregistration.k8s.io/v1", "APIService") => {}
        ("", "") => return Err(format!("apiVersion and kind are missing: {ACCEPTED}")),
        (v, "APIService") => return Err(format!("apiVersion {v:?} is not supported: {ACCEPTED}")),
        (v, k) => {
            return Err(format!(
                "unsupported object (apiVersion {v:?}, kind {k:?}): {ACCEPTED}"
            ))
        }
    }
    let name = match value.pointer("/metadata/name") {
        None | Some(Value::Null) => "",
        Some(Value::String(n)) => n.as_str(),
        // `name: 123` is a number in YAML: say so rather than "required".
        Some(other) => {
            return Err(format!(
                "metadata.name must be a string, found {} (quote it in YAML: \"{other}\")",
                type_name(other)
            ))
        }
    }
    .to_string();
    if name.is_empty() {
        return Err("metadata.name is required".to_string());
    }
    check_string_map(&value, "labels", &name)?;
    check_string_map(&value, "annotations", &name)?;
    if let Some(Value::Object(meta)) = value.get_mut("metadata") {
        for key in SERVER_SET_METADATA {
            meta.remove(*key);
        }
    }
    let mut obj: APIService =
        serde_json::from_value(value).map_err(|e| format!("APIService {name:?}: {e}"))?;
    obj.status = None;
    // The server defaults the service port to 443; without doing the same, the
    // cached spec would never equal the desired one and every sync would update.
    if let Some(svc) = obj.spec.service.as_mut() {
        svc.port.get_or_insert(443);
    }
    crate::controller::ca::check_manifest(&obj).map_err(|e| format!("APIService {name:?}: {e}"))?;
    Ok(obj)
}

/// Labels and annotations are strings; YAML reads `true` or `1` as something else.
fn check_string_map(value: &Value, field: &str, name: &str) -> Result<(), String> {
    let Some(Value::Object(map)) = value.pointer(&format!("/metadata/{field}")) else {
        return Ok(());
    };
    for (key, v) in map {
        if !v.is_string() {
            return Err(format!(
                "APIService {name:?}: metadata.{field}[{key:?}] must be a string, found {} (quote it in YAML: \"{v}\")",
                type_name(v)
            ));
        }
    }
    Ok(())
}

fn str_field<'a>(map: &'a serde_json::Map<String, Value>, key: &str) -> Option<&'a str> {
    map.get(key).and_then(Value::as_str)
}

/// `(apiVersion, kind)`, empty when absent.
fn type_of(value: &Value) -> (&str, &str) {
    let field = |k| value.get(k).and_then(Value::as_str).unwrap_or_default();
    (field("apiVersion"), field("kind"))
}

fn type_name(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one(v: Value) -> Result<APIService, String> {
        let mut all = expand(v);
        assert_eq!(all.len(), 1);
        all.remove(0)
    }

    fn valid(name: &str) -> Value {
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": name}, "spec": {"group": "g", "version": "v1"}})
    }

    #[test]
    fn empty_document_declares_nothing() {
        assert!(expand(Value::Null).is_empty());
    }

    #[test]
    fn wrong_types_are_named() {
        let e = one(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}));
        assert!(e
            .unwrap_err()
            .contains(r#"apiVersion "v1", kind "ConfigMap""#));
        let e = one(json!({"apiVersion": "apiregistration.k8s.io/v1beta1", "kind": "APIService"}));
        assert!(e
            .unwrap_err()
            .contains(r#"apiVersion "apiregistration.k8s.io/v1beta1" is not supported"#));
        assert!(one(json!({"metadata": {}}))
            .unwrap_err()
            .contains("missing"));
        assert!(one(json!([1])).unwrap_err().contains("found a list"));
    }

    #[test]
    fn name_is_required() {
        let mut v = valid("");
        assert!(one(v.clone())
            .unwrap_err()
            .contains("metadata.name is required"));
        v["metadata"] = json!({});
        assert!(one(v).unwrap_err().contains("metadata.name is required"));
    }

    #[test]
    fn a_name_that_is_not_a_string_says_so() {
        let mut v = valid("");
        v["metadata"]["name"] = json!(123);
        let e = one(v.clone()).unwrap_err();
        assert!(
            e.contains("metadata.name must be a string, found a number"),
            "{e}"
        );
        assert!(e.contains("\"123\""), "{e}");
        v["metadata"]["name"] = json!(true);
        let e = one(v).unwrap_err();
        assert!(e.contains("must be a string, found a boolean"), "{e}");
    }

    #[test]
    fn unquoted_label_value_gets_a_hint() {
        let mut v = valid("v1.g");
        v["metadata"]["labels"] = json!({"kube-aggregator.kubernetes.io/automanaged": true});
        let e = one(v).unwrap_err();
        assert!(e.contains("must be a string, found a boolean"), "{e}");
        assert!(e.contains("\"true\""), "{e}");
    }

    #[test]
    fn bad_field_type_names_the_object() {
        let mut v = valid("v1.g");
        v["spec"]["versionPriority"] = json!("high");
        let e = one(v).unwrap_err();
        assert!(e.starts_with("APIService \"v1.g\": invalid type"), "{e}");
    }

    #[test]
    fn server_set_fields_are_dropped_and_port_defaulted() {
        let mut v = valid("v1.g");
        v["metadata"]["resourceVersion"] = json!("7");
        v["metadata"]["uid"] = json!("u");
        v["metadata"]["managedFields"] = json!([]);
        v["metadata"]["finalizers"] = json!(["keep"]);
        v["status"] = json!({"conditions": []});
        v["spec"]["service"] = json!({"namespace": "n", "name": "s"});
        let o = one(v).unwrap();
        assert_eq!(o.metadata.resource_version, None);
        assert_eq!(o.metadata.uid, None);
        assert!(!o.metadata.extra.contains_key("managedFields"));
        assert_eq!(o.metadata.extra["finalizers"], json!(["keep"]));
        assert_eq!(o.status, None);
        assert_eq!(o.spec.service.unwrap().port, Some(443));
    }

    #[test]
    fn lists_expand_and_check_each_item() {
        let list = json!({"apiVersion": "v1", "kind": "List",
            "items": [valid("v1.a"), {"apiVersion": "v1", "kind": "Secret"}, valid("v1.b")]});
        let got = expand(list);
        assert_eq!(got.len(), 3);
        assert_eq!(
            got[0].as_ref().unwrap().metadata.name.as_deref(),
            Some("v1.a")
        );
        assert!(got[1]
            .as_ref()
            .unwrap_err()
            .starts_with("items[1]: unsupported object"));
        assert!(got[2].is_ok());
        let typed = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIServiceList",
            "items": [valid("v1.a")]});
        assert_eq!(expand(typed).len(), 1);
        let empty = json!({"apiVersion": "v1", "kind": "List", "items": null});
        assert!(expand(empty).is_empty());
    }

    #[test]
    fn list_errors() {
        let bad_version =
            json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "List", "items": []});
        assert!(expand(bad_version)[0]
            .as_ref()
            .unwrap_err()
            .contains("List must have apiVersion v1"));
        let nested = json!({"apiVersion": "v1", "kind": "List",
            "items": [{"apiVersion": "v1", "kind": "List", "items": []}]});
        assert!(expand(nested)[0]
            .as_ref()
            .unwrap_err()
            .contains("List inside a List"));
        let not_array = json!({"apiVersion": "v1", "kind": "List", "items": {}});
        assert!(expand(not_array)[0]
            .as_ref()
            .unwrap_err()
            .contains("items must be a list"));
    }
}
