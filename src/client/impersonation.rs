//! Acting as another user: kubeconfig `as*` fields and `--as*` flags as `Impersonate-*` headers.

/// Whom to act as: kubeconfig `as`, `as-uid`, `as-groups`, `as-user-extra`, or `--as`,
/// `--as-uid`, `--as-group`. Empty: act as oneself.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impersonation {
    /// `Impersonate-User`.
    pub user: Option<String>,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
    /// One `Impersonate-Group` each.
    pub groups: Vec<String>,
    /// `Impersonate-Extra-KEY: VALUE` for each key and each of its values.
    pub extra: Vec<(String, Vec<String>)>,
}

impl Impersonation {
    /// Whether any header is to be sent.
    pub fn is_empty(&self) -> bool {
        self.user.is_none() && self.uid.is_none() && self.groups.is_empty() && self.extra.is_empty()
    }

    /// The headers, as client-go's impersonating round tripper writes them (extra keys
    /// percent-escaped where a header name cannot carry the character).
    pub fn headers(&self) -> Vec<(String, String)> {
        let mut h = Vec::new();
        if self.is_empty() {
            return h;
        }
        h.push((
            "Impersonate-User".to_string(),
            self.user.clone().unwrap_or_default(),
        ));
        if let Some(uid) = &self.uid {
            h.push(("Impersonate-Uid".to_string(), uid.clone()));
        }
        for g in &self.groups {
            h.push(("Impersonate-Group".to_string(), g.clone()));
        }
        for (k, values) in &self.extra {
            for v in values {
                h.push((
                    format!("Impersonate-Extra-{}", header_key_escape(k)),
                    v.clone(),
                ));
            }
        }
        h
    }
}

/// client-go's `headerKeyEscape`: bytes that are not HTTP token characters (and `%`) become `%XX`.
fn header_key_escape(key: &str) -> String {
    let mut out = String::new();
    for b in key.bytes() {
        let legal = b.is_ascii_alphanumeric() || b"!#$&'*+-.^_`|~".contains(&b);
        if legal {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impersonation_headers_as_client_go_writes_them() {
        let i = Impersonation {
            user: Some("jane".into()),
            uid: Some("42".into()),
            groups: vec!["a".into(), "b".into()],
            extra: vec![("reason/why it".into(), vec!["x".into(), "y".into()])],
        };
        let h: Vec<(String, String)> = i.headers();
        let pairs: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(
            pairs,
            [
                ("Impersonate-User", "jane"),
                ("Impersonate-Uid", "42"),
                ("Impersonate-Group", "a"),
                ("Impersonate-Group", "b"),
                ("Impersonate-Extra-reason%2Fwhy%20it", "x"),
                ("Impersonate-Extra-reason%2Fwhy%20it", "y"),
            ]
        );
        assert!(Impersonation::default().headers().is_empty());
    }
}
