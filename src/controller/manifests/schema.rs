//! Strict decoding: the fields and types an `apiregistration.k8s.io/v1` APIService (and a
//! List of them) may have, as kube-apiserver's `fieldValidation=Strict` and
//! `kubectl --validate=strict` judge them. Checked on the parsed value (cheap, every
//! document); the problem's place in the text is found only when there is one (see `locate`).

use std::fmt;

use serde_json::Value;

/// A field's type, in the OpenAPI terms Kubernetes uses.
pub(super) enum Type {
    /// `string`.
    String,
    /// `integer` of format int32.
    Int32,
    /// `integer` of format int64.
    Int64,
    /// `boolean`.
    Boolean,
    /// `object` with these fields, and no other.
    Object(&'static [(&'static str, Type)]),
    /// `object` of string values (labels, annotations).
    StringMap,
    /// `array` of one type.
    Array(&'static Type),
    /// `object` with any content (`managedFields` entries, whose `fieldsV1` is free-form).
    AnyObject,
}

impl Type {
    /// The Kubernetes name of the type.
    fn name(&self) -> &'static str {
        match self {
            Type::String => "string",
            Type::Int32 | Type::Int64 => "integer",
            Type::Boolean => "boolean",
            Type::Object(_) | Type::StringMap | Type::AnyObject => "object",
            Type::Array(_) => "array",
        }
    }
}

const SERVICE: &[(&str, Type)] = &[
    ("namespace", Type::String),
    ("name", Type::String),
    ("port", Type::Int32),
];

const SPEC: &[(&str, Type)] = &[
    ("service", Type::Object(SERVICE)),
    ("group", Type::String),
    ("version", Type::String),
    ("insecureSkipTLSVerify", Type::Boolean),
    ("caBundle", Type::String),
    ("groupPriorityMinimum", Type::Int32),
    ("versionPriority", Type::Int32),
];

const OWNER_REFERENCE: &[(&str, Type)] = &[
    ("apiVersion", Type::String),
    ("kind", Type::String),
    ("name", Type::String),
    ("uid", Type::String),
    ("controller", Type::Boolean),
    ("blockOwnerDeletion", Type::Boolean),
];

/// `ObjectMeta`: every field kubectl accepts (server-set ones too: a manifest copied from
/// `kubectl get -o yaml` carries them, and the loader drops them).
const OBJECT_META: &[(&str, Type)] = &[
    ("name", Type::String),
    ("generateName", Type::String),
    ("namespace", Type::String),
    ("selfLink", Type::String),
    ("uid", Type::String),
    ("resourceVersion", Type::String),
    ("generation", Type::Int64),
    ("creationTimestamp", Type::String),
    ("deletionTimestamp", Type::String),
    ("deletionGracePeriodSeconds", Type::Int64),
    ("labels", Type::StringMap),
    ("annotations", Type::StringMap),
    (
        "ownerReferences",
        Type::Array(&Type::Object(OWNER_REFERENCE)),
    ),
    ("finalizers", Type::Array(&Type::String)),
    ("managedFields", Type::Array(&Type::AnyObject)),
];

const CONDITION: &[(&str, Type)] = &[
    ("type", Type::String),
    ("status", Type::String),
    ("lastTransitionTime", Type::String),
    ("reason", Type::String),
    ("message", Type::String),
];

const STATUS: &[(&str, Type)] = &[("conditions", Type::Array(&Type::Object(CONDITION)))];

/// An `apiregistration.k8s.io/v1` APIService.
pub(super) const APISERVICE: Type = Type::Object(&[
    ("apiVersion", Type::String),
    ("kind", Type::String),
    ("metadata", Type::Object(OBJECT_META)),
    ("spec", Type::Object(SPEC)),
    ("status", Type::Object(STATUS)),
]);

const LIST_META: &[(&str, Type)] = &[
    ("resourceVersion", Type::String),
    ("continue", Type::String),
    ("remainingItemCount", Type::Int64),
    ("selfLink", Type::String),
];

/// A `List`/`APIServiceList` around the items (each checked as an APIService by itself).
pub(super) const LIST: Type = Type::Object(&[
    ("apiVersion", Type::String),
    ("kind", Type::String),
    ("metadata", Type::Object(LIST_META)),
    ("items", Type::Array(&Type::AnyObject)),
]);

/// One step of a field path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Seg {
    /// A mapping key.
    Key(String),
    /// A sequence index.
    Index(usize),
}

/// A field path, printed as kubectl prints one: `spec.service.port`, `items[2].spec`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(super) struct FieldPath(pub(super) Vec<Seg>);

impl FieldPath {
    /// `spec.service.port` → its segments.
    pub(super) fn parse(dotted: &str) -> FieldPath {
        FieldPath(dotted.split('.').map(|s| Seg::Key(s.to_string())).collect())
    }

    /// This path and one more step.
    pub(super) fn child(&self, seg: Seg) -> FieldPath {
        let mut p = self.clone();
        p.0.push(seg);
        p
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, seg) in self.0.iter().enumerate() {
            match seg {
                Seg::Index(n) => write!(f, "[{n}]")?,
                // Label and annotation keys hold dots and slashes: bracket them.
                Seg::Key(k) if k.contains(['.', '/']) => write!(f, "[{k:?}]")?,
                Seg::Key(k) if i == 0 => f.write_str(k)?,
                Seg::Key(k) => write!(f, ".{k}")?,
            }
        }
        Ok(())
    }
}

/// What is wrong with one field: where, whether the key or the value is to blame, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Problem {
    /// The field; empty for a problem with the whole document.
    pub(super) path: FieldPath,
    /// The key itself is wrong (an unknown field), not its value.
    pub(super) at_key: bool,
    /// Why, after the path.
    pub(super) message: String,
    /// For an unknown field: the one known field of the same object it is close to.
    pub(super) did_you_mean: Option<&'static str>,
}

impl Problem {
    /// A problem with the document as a whole (no field to point at).
    pub(super) fn whole(message: impl Into<String>) -> Problem {
        Problem {
            path: FieldPath::default(),
            at_key: false,
            message: message.into(),
            did_you_mean: None,
        }
    }

    /// A problem with the value at `path`.
    pub(super) fn at(path: FieldPath, message: impl Into<String>) -> Problem {
        Problem {
            path,
            at_key: false,
            message: message.into(),
            did_you_mean: None,
        }
    }

    /// `prefix` (e.g. `items[3]`) put before the path.
    pub(super) fn within(mut self, prefix: &FieldPath) -> Problem {
        let mut path = prefix.0.clone();
        path.append(&mut self.path.0);
        self.path = FieldPath(path);
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.path.0.is_empty() {
            f.write_str(&self.message)?;
        } else {
            write!(f, "{}: {}", self.path, self.message)?;
        }
        if let Some(meant) = self.did_you_mean {
            let mut path = self.path.clone();
            path.0.pop();
            write!(
                f,
                ", did you mean {}?",
                path.child(Seg::Key(meant.to_string()))
            )?;
        }
        Ok(())
    }
}

/// Every unknown field and wrongly typed value of `value` against `ty`, in document order.
pub(super) fn check(value: &Value, ty: &Type) -> Vec<Problem> {
    let mut out = Vec::new();
    walk(value, ty, None, &mut out);
    out
}

/// Where the walk is, as a chain of borrowed steps: a path is built only for a problem
/// (building one per field visited was most of the check's cost).
struct At<'a> {
    seg: Step<'a>,
    parent: Option<&'a At<'a>>,
}

#[derive(Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

fn path_of(at: Option<&At<'_>>) -> FieldPath {
    let mut segs = Vec::new();
    let mut cur = at;
    while let Some(a) = cur {
        segs.push(match a.seg {
            Step::Key(k) => Seg::Key(k.to_string()),
            Step::Index(i) => Seg::Index(i),
        });
        cur = a.parent;
    }
    segs.reverse();
    FieldPath(segs)
}

fn walk(value: &Value, ty: &Type, at: Option<&At<'_>>, out: &mut Vec<Problem>) {
    // `null` is "not set" for every field, as the server reads it.
    if value.is_null() {
        return;
    }
    match (ty, value) {
        (Type::String, Value::String(_)) | (Type::Boolean, Value::Bool(_)) => {}
        (Type::Int32, Value::Number(n)) if n.as_i64().is_some_and(|i| i32::try_from(i).is_ok()) => {
        }
        (Type::Int64, Value::Number(n)) if n.is_i64() => {}
        (Type::Int32 | Type::Int64, Value::Number(n)) if n.is_i64() || n.is_u64() => {
            out.push(Problem::at(
                path_of(at),
                format!(
                    "invalid value: {n} does not fit an integer of format {}",
                    if matches!(ty, Type::Int32) {
                        "int32"
                    } else {
                        "int64"
                    }
                ),
            ))
        }
        (Type::AnyObject, Value::Object(_)) => {}
        (Type::StringMap, Value::Object(map)) => {
            for (k, v) in map {
                let child = At {
                    seg: Step::Key(k),
                    parent: at,
                };
                walk(v, &Type::String, Some(&child), out);
            }
        }
        (Type::Array(item), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                let child = At {
                    seg: Step::Index(i),
                    parent: at,
                };
                walk(v, item, Some(&child), out);
            }
        }
        (Type::Object(fields), Value::Object(map)) => {
            for (k, v) in map {
                let child = At {
                    seg: Step::Key(k),
                    parent: at,
                };
                match fields.iter().find(|(name, _)| name == k) {
                    Some((_, t)) => walk(v, t, Some(&child), out),
                    None => out.push(Problem {
                        path: path_of(Some(&child)),
                        at_key: true,
                        message: "unknown field".into(),
                        did_you_mean: super::suggest::closest(
                            k,
                            fields.iter().map(|(name, _)| *name),
                        ),
                    }),
                }
            }
        }
        (ty, v) => {
            let mut message = format!("invalid type: expected {}, found {}", ty.name(), found(v));
            if matches!(ty, Type::String) && !v.is_object() && !v.is_array() {
                // `name: 123`, `value: true`: YAML read a scalar the user meant as text.
                message.push_str(&format!(" (quote it in YAML: \"{v}\")"));
            }
            out.push(Problem::at(path_of(at), message));
        }
    }
}

/// The type and value found, as a user reads it: `string "high"`, `integer 7`, `array`.
fn found(v: &Value) -> String {
    match v {
        Value::Null => "null".to_string(),
        Value::Bool(b) => format!("boolean {b}"),
        Value::Number(n) if n.is_f64() => format!("number {n}"),
        Value::Number(n) => format!("integer {n}"),
        Value::String(s) => format!("string {s:?}"),
        Value::Array(_) => "array".to_string(),
        Value::Object(_) => "object".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn messages(v: Value) -> Vec<String> {
        check(&v, &APISERVICE)
            .iter()
            .map(Problem::to_string)
            .collect()
    }

    #[test]
    fn unknown_fields_anywhere_are_named_with_a_suggestion() {
        let got = messages(json!({
            "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService", "sepc": {},
            "metadata": {"name": "v1.a", "lables": {}},
            "spec": {"servce": {}, "versionPriorty": 1, "service": {"prot": 1, "zzzzzz": 2}}}));
        assert_eq!(
            got,
            [
                "metadata.lables: unknown field, did you mean metadata.labels?",
                "sepc: unknown field, did you mean spec?",
                "spec.servce: unknown field, did you mean spec.service?",
                "spec.service.prot: unknown field, did you mean spec.service.port?",
                "spec.service.zzzzzz: unknown field",
                "spec.versionPriorty: unknown field, did you mean spec.versionPriority?",
            ]
        );
    }

    #[test]
    fn wrong_types_name_the_kubernetes_type() {
        let got = messages(json!({"metadata": {"name": 123, "labels": {"a.b/c": true}},
            "spec": {"groupPriorityMinimum": "high", "versionPriority": 1.5,
                     "insecureSkipTLSVerify": "yes", "service": [], "group": {}}}));
        assert_eq!(
            got,
            [
                "metadata.labels[\"a.b/c\"]: invalid type: expected string, found boolean true (quote it in YAML: \"true\")",
                "metadata.name: invalid type: expected string, found integer 123 (quote it in YAML: \"123\")",
                "spec.group: invalid type: expected string, found object",
                "spec.groupPriorityMinimum: invalid type: expected integer, found string \"high\"",
                "spec.insecureSkipTLSVerify: invalid type: expected boolean, found string \"yes\"",
                "spec.service: invalid type: expected object, found array",
                "spec.versionPriority: invalid type: expected integer, found number 1.5",
            ]
        );
    }

    #[test]
    fn int32_range_and_nulls() {
        assert_eq!(
            messages(json!({"spec": {"versionPriority": 3_000_000_000i64}})),
            ["spec.versionPriority: invalid value: 3000000000 does not fit an integer of format int32"]
        );
        assert!(messages(json!({"metadata": null, "spec": {"service": null}})).is_empty());
    }

    #[test]
    fn object_meta_takes_what_kubectl_takes() {
        assert!(messages(json!({"metadata": {"name": "v1.a", "generation": 3,
            "ownerReferences": [{"apiVersion": "v1", "kind": "K", "name": "n", "uid": "u", "controller": true}],
            "finalizers": ["f"], "managedFields": [{"manager": "m", "fieldsV1": {"f:spec": {}}}],
            "resourceVersion": "9", "creationTimestamp": "2020-01-01T00:00:00Z"},
            "status": {"conditions": [{"type": "Available", "status": "True"}]}}))
        .is_empty());
        assert_eq!(
            messages(json!({"metadata": {"ownerReferences": [{"nme": "x"}]}})),
            ["metadata.ownerReferences[0].nme: unknown field, did you mean metadata.ownerReferences[0].name?"]
        );
    }
}
