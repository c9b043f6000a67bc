//! Label and field selectors as list and watch take them.

use serde_json::Value;

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// Where a field selector's label points in the stored object (a JSON pointer); `None`
/// for a label the kind does not support (400, as the real server answers).
pub(crate) type FieldPath = fn(&str) -> Option<&'static str>;

/// The field labels every kind supports: `metadata.name` and `metadata.namespace`.
pub(crate) fn metadata_fields(label: &str) -> Option<&'static str> {
    match label {
        "metadata.name" => Some("/metadata/name"),
        "metadata.namespace" => Some("/metadata/namespace"),
        _ => None,
    }
}

/// A parsed label selector plus field selectors (each resolved to a JSON pointer).
#[derive(Debug, Clone, Default)]
pub(crate) struct Selector {
    labels: Vec<Req>,
    fields: Vec<(&'static str, String, bool)>,
}

impl Selector {
    /// Parses `labelSelector` and `fieldSelector`, resolving field labels with `path`; the
    /// message says what is wrong.
    pub(crate) fn parse_with(
        labels: Option<&str>,
        fields: Option<&str>,
        path: FieldPath,
    ) -> Result<Self, String> {
        let mut sel = Selector::default();
        if let Some(l) = labels {
            for part in split_top(l) {
                sel.labels.push(parse_req(part.trim())?);
            }
        }
        if let Some(f) = fields {
            for part in f.split(',').map(str::trim).filter(|p| !p.is_empty()) {
                let (key, value, eq) = if let Some((k, v)) = part.split_once("!=") {
                    (k, v, false)
                } else if let Some((k, v)) = part.split_once("==") {
                    (k, v, true)
                } else if let Some((k, v)) = part.split_once('=') {
                    (k, v, true)
                } else {
                    return Err(format!("invalid field selector {part:?}"));
                };
                let ptr = path(key.trim())
                    .ok_or_else(|| format!("field label not supported: {}", key.trim()))?;
                sel.fields.push((ptr, value.trim().to_string(), eq));
            }
        }
        Ok(sel)
    }

    /// Whether `obj` matches every requirement.
    pub(crate) fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        let label = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        let labels_ok = self.labels.iter().all(|r| match r {
            Req::Eq(k, v) => label(k) == Some(v.as_str()),
            Req::NotEq(k, v) => label(k) != Some(v.as_str()),
            Req::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::NotIn(k, vs) => !label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            Req::Exists(k) => label(k).is_some(),
            Req::NotExists(k) => label(k).is_none(),
        });
        labels_ok
            && self.fields.iter().all(|(ptr, v, eq)| {
                // An absent field selects as the empty string, as in the real server.
                let actual = obj.pointer(ptr).and_then(Value::as_str).unwrap_or("");
                (actual == v) == *eq
            })
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0i32, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts.into_iter().filter(|p| !p.trim().is_empty()).collect()
}

fn parse_req(p: &str) -> Result<Req, String> {
    let set = |rest: &str| -> Result<Vec<String>, String> {
        let inner = rest
            .trim()
            .strip_prefix('(')
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(|| format!("invalid label selector {p:?}: expected (values)"))?;
        Ok(inner.split(',').map(|v| v.trim().to_string()).collect())
    };
    if let Some(k) = p.strip_prefix('!') {
        return Ok(Req::NotExists(check_key(k.trim(), p)?));
    }
    if let Some((k, v)) = p.split_once("!=") {
        return Ok(Req::NotEq(check_key(k.trim(), p)?, v.trim().to_string()));
    }
    if let Some((k, v)) = p.split_once("==") {
        return Ok(Req::Eq(check_key(k.trim(), p)?, v.trim().to_string()));
    }
    if let Some((k, v)) = p.split_once('=') {
        return Ok(Req::Eq(check_key(k.trim(), p)?, v.trim().to_string()));
    }
    if let Some((k, rest)) = p.split_once(" notin ") {
        return Ok(Req::NotIn(check_key(k.trim(), p)?, set(rest)?));
    }
    if let Some((k, rest)) = p.split_once(" in ") {
        return Ok(Req::In(check_key(k.trim(), p)?, set(rest)?));
    }
    Ok(Req::Exists(check_key(p, p)?))
}

fn check_key(k: &str, whole: &str) -> Result<String, String> {
    let ok = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if ok {
        Ok(k.to_string())
    } else {
        Err(format!("unable to parse requirement: {whole:?}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn label_requirements() {
        let o = json!({"metadata": {"name": "a", "labels": {"x": "1", "y": "2"}}});
        let m = |l: &str| {
            Selector::parse_with(Some(l), None, metadata_fields)
                .unwrap()
                .matches(&o)
        };
        assert!(m("x=1"));
        assert!(m("x==1,y=2"));
        assert!(!m("x=2"));
        assert!(m("x!=2"));
        assert!(m("x"));
        assert!(!m("z"));
        assert!(m("!z"));
        assert!(m("x in (1,3)"));
        assert!(!m("x notin (1,3)"));
        assert!(Selector::parse_with(Some("a b"), None, metadata_fields).is_err());
    }

    #[test]
    fn field_name() {
        let o = json!({"metadata": {"name": "a"}});
        let s = Selector::parse_with(None, Some("metadata.name=a"), metadata_fields).unwrap();
        assert!(s.matches(&o));
        let s = Selector::parse_with(None, Some("metadata.name!=a"), metadata_fields).unwrap();
        assert!(!s.matches(&o));
        assert!(Selector::parse_with(None, Some("spec.x=1"), metadata_fields).is_err());
    }
}
