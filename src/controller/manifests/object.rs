//! From one parsed document to the APIServices it declares.

use serde_json::Value;

use super::schema::{self, FieldPath, Problem, Seg};
use crate::api::{validation, APIService};

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

/// What is wrong with one declared object: each problem with its field.
pub(super) type Problems = Vec<Problem>;

/// The APIServices of one document (several for a List), each or its problems;
/// an empty document declares none.
pub(super) fn expand(doc: Value) -> Vec<Result<APIService, Problems>> {
    match &doc {
        Value::Null => Vec::new(),
        Value::Object(map) => match str_field(map, "kind") {
            Some("List") | Some("APIServiceList") => expand_list(doc),
            _ => vec![apiservice(doc)],
        },
        other => vec![Err(vec![Problem::whole(format!(
            "expected an object, found {}",
            type_name(other)
        ))])],
    }
}

fn expand_list(list: Value) -> Vec<Result<APIService, Problems>> {
    let (api_version, kind) = type_of(&list);
    let (api_version, kind) = (api_version.to_string(), kind.to_string());
    let expected = if kind == "List" {
        "v1"
    } else {
        "apiregistration.k8s.io/v1"
    };
    if api_version != expected {
        return vec![Err(vec![Problem::whole(format!(
            "{kind} must have apiVersion {expected}, not {api_version:?}"
        ))])];
    }
    let problems = schema::check(&list, &schema::LIST);
    if !problems.is_empty() {
        return vec![Err(problems)];
    }
    let items = match list {
        Value::Object(mut map) => map.remove("items").unwrap_or(Value::Null),
        _ => Value::Null,
    };
    let Value::Array(items) = items else {
        return Vec::new();
    };
    items
        .into_iter()
        .enumerate()
        .map(|(i, item)| {
            let is_list = matches!(type_of(&item).1, "List" | "APIServiceList");
            let res = if is_list {
                Err(vec![Problem::whole(
                    "a List inside a List is not supported",
                )])
            } else {
                apiservice(item)
            };
            let item_path = FieldPath(vec![Seg::Key("items".into()), Seg::Index(i)]);
            res.map_err(|problems| problems.into_iter().map(|p| p.within(&item_path)).collect())
        })
        .collect()
}

/// One APIService, decoded strictly, checked as the server would check it, and cleaned
/// for creation.
fn apiservice(mut value: Value) -> Result<APIService, Problems> {
    let (api_version, kind) = type_of(&value);
    let whole = |m: String| Err(vec![Problem::whole(m)]);
    match (api_version, kind) {
        ("apiregistration.k8s.io/v1", "APIService") => {}
        ("", "") => return whole(format!("apiVersion and kind are missing: {ACCEPTED}")),
        (v, "APIService") => {
            return whole(format!("apiVersion {v:?} is not supported: {ACCEPTED}"))
        }
        (v, k) => {
            return whole(format!(
                "unsupported object (apiVersion {v:?}, kind {k:?}): {ACCEPTED}"
            ))
        }
    }
    let problems = schema::check(&value, &schema::APISERVICE);
    if !problems.is_empty() {
        return Err(problems);
    }
    let name = value
        .get("metadata")
        .and_then(|m| m.get("name"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    if name.is_empty() {
        return Err(vec![Problem::at(
            FieldPath::parse("metadata.name"),
            "Required value: a manifest must name its APIService",
        )]);
    }
    if let Some(Value::Object(meta)) = value.get_mut("metadata") {
        for key in SERVER_SET_METADATA {
            meta.remove(*key);
        }
    }
    // Straight from the tree, its strings moved, not written out as text and read back
    // (that was an eighth of reading 1,000 manifests).
    let mut obj: APIService = match serde_json::from_value(value) {
        Ok(obj) => obj,
        // The schema admits only what decodes; a field it lets through and the type
        // refuses (a caBundle that is not base64) is named by serde.
        Err(e) => {
            let e = e.to_string();
            let field = if e.contains("base64") {
                FieldPath::parse("spec.caBundle")
            } else {
                FieldPath::default()
            };
            return Err(vec![Problem::at(field, format!("invalid value: {e}"))]);
        }
    };
    obj.status = None;
    // A cluster-scoped object's namespace is cleared by the server, not stored.
    obj.metadata.namespace = None;
    // The server defaults the service port to 443; without doing the same, the
    // cached spec would never equal the desired one and every sync would update.
    if let Some(svc) = obj.spec.service.as_mut() {
        svc.port.get_or_insert(443);
    }
    if let Err(e) = crate::controller::ca::check_manifest(&obj) {
        let field = if e.starts_with("spec.caBundle") {
            "spec.caBundle"
        } else if e.starts_with("spec.insecureSkipTLSVerify") {
            "spec.insecureSkipTLSVerify"
        } else {
            "metadata.annotations"
        };
        return Err(vec![Problem::at(FieldPath::parse(field), e)]);
    }
    let issues: Vec<Problem> = validation::validate_apiservice(&obj)
        .into_iter()
        .chain(validation::validate_apiservice_references(&obj))
        .map(|issue| Problem::at(FieldPath::parse(&issue.field), issue.message()))
        .collect();
    if !issues.is_empty() {
        return Err(issues);
    }
    Ok(obj)
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
        all.remove(0).map_err(|ps| {
            ps.iter()
                .map(Problem::to_string)
                .collect::<Vec<_>>()
                .join("; ")
        })
    }

    /// A valid APIService named `version.group`.
    fn valid(name: &str) -> Value {
        let (version, group) = name.split_once('.').unwrap_or((name, ""));
        json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
               "metadata": {"name": name}, "spec": {"group": group, "version": version,
               "groupPriorityMinimum": 100, "versionPriority": 10}})
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
        let mut v = valid("v1.g");
        v["spec"]["servce"] = json!({});
        assert_eq!(
            one(v).unwrap_err(),
            "spec.servce: unknown field, did you mean spec.service?"
        );
    }

    #[test]
    fn name_is_required() {
        let mut v = valid("");
        assert!(one(v.clone())
            .unwrap_err()
            .contains("metadata.name: Required value"));
        v["metadata"] = json!({});
        assert!(one(v)
            .unwrap_err()
            .contains("metadata.name: Required value"));
    }

    #[test]
    fn a_name_that_is_not_a_string_says_so() {
        let mut v = valid("");
        v["metadata"]["name"] = json!(123);
        let e = one(v.clone()).unwrap_err();
        assert!(
            e.contains("metadata.name: invalid type: expected string, found integer 123"),
            "{e}"
        );
        assert!(e.contains("\"123\""), "{e}");
        v["metadata"]["name"] = json!(true);
        let e = one(v).unwrap_err();
        assert!(e.contains("expected string, found boolean true"), "{e}");
    }

    #[test]
    fn unquoted_label_value_gets_a_hint() {
        let mut v = valid("v1.g");
        v["metadata"]["labels"] = json!({"kube-aggregator.kubernetes.io/automanaged": true});
        let e = one(v).unwrap_err();
        assert!(e.contains("expected string, found boolean"), "{e}");
        assert!(e.contains("\"true\""), "{e}");
    }

    #[test]
    fn bad_field_type_names_the_field() {
        let mut v = valid("v1.g");
        v["spec"]["versionPriority"] = json!("high");
        let e = one(v).unwrap_err();
        assert_eq!(
            e,
            "spec.versionPriority: invalid type: expected integer, found string \"high\""
        );
    }

    #[test]
    fn a_ca_bundle_that_is_not_base64_is_named_without_a_position_in_a_text_never_seen() {
        let mut v = valid("v1.g");
        v["spec"]["caBundle"] = json!("not base64!");
        let e = one(v).unwrap_err();
        assert!(e.starts_with("spec.caBundle: invalid value: "), "{e}");
        assert!(e.contains("base64"), "{e}");
        assert!(!e.contains(" at line "), "{e}");
    }

    #[test]
    fn server_rules_are_checked_at_load() {
        let mut v = valid("v1.g");
        v["metadata"]["name"] = json!("x");
        assert_eq!(
            one(v).unwrap_err(),
            "metadata.name: Invalid value: \"x\": must be `spec.version+\".\"+spec.group`: \"v1.g\""
        );
        let mut v = valid("v1.g");
        v["spec"]["caBundle"] = json!("QUFBQQ==");
        v["spec"]["service"] = json!({"namespace": "n", "name": "s"});
        assert!(one(v)
            .unwrap_err()
            .starts_with("spec.caBundle: Invalid value: \"4 bytes\": must be PEM"));
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
        let e = got[1].as_ref().unwrap_err()[0].to_string();
        assert!(e.starts_with("items[1]: unsupported object"), "{e}");
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
        let first = |v| expand(v).remove(0).unwrap_err()[0].to_string();
        assert!(first(bad_version).contains("List must have apiVersion v1"));
        let nested = json!({"apiVersion": "v1", "kind": "List",
            "items": [{"apiVersion": "v1", "kind": "List", "items": []}]});
        assert!(first(nested).contains("List inside a List"));
        let not_array = json!({"apiVersion": "v1", "kind": "List", "items": {}});
        assert_eq!(
            first(not_array),
            "items: invalid type: expected array, found object"
        );
    }
}
