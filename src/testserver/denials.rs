//! RBAC denials: requests a test forbids answer 403 Forbidden, worded as kube-apiserver's
//! RBAC authorizer words them, so the program's reporting of a missing grant is tested.

use parking_lot::RwLock;

use crate::api::{Status, StatusDetails};

use super::errors::ApiErr;
use super::kinds::Kind;

/// One forbidden (verb, resource[, namespace][, name]).
#[derive(Clone, Debug)]
struct Rule {
    verb: String,
    resource: String,
    namespace: Option<String>,
    name: Option<String>,
}

/// The denials in force; empty: everything is allowed.
#[derive(Default)]
pub(crate) struct Denials {
    rules: RwLock<Vec<Rule>>,
}

/// What a request asks, as the authorizer sees it.
pub(crate) struct Attributes<'a> {
    pub(crate) verb: &'a str,
    pub(crate) kind: &'static Kind,
    pub(crate) namespace: Option<&'a str>,
    /// The object's name; for a list or watch, the name a `metadata.name=` field selector
    /// pins (as kube-apiserver's RequestInfo takes it, so `resourceNames` can allow it).
    pub(crate) name: Option<&'a str>,
    pub(crate) user: Option<&'a str>,
}

impl Denials {
    /// Forbids `verb` on `resource` (plural), in `namespace` and of `name` when given.
    pub(crate) fn deny(
        &self,
        verb: &str,
        resource: &str,
        namespace: Option<&str>,
        name: Option<&str>,
    ) {
        self.rules.write().push(Rule {
            verb: verb.to_string(),
            resource: resource.to_string(),
            namespace: namespace.map(str::to_string),
            name: name.map(str::to_string),
        });
    }

    /// Lifts every denial.
    pub(crate) fn allow_all(&self) {
        self.rules.write().clear();
    }

    /// `Err(403)` when a denial matches the request.
    pub(crate) fn check(&self, a: &Attributes<'_>) -> Result<(), ApiErr> {
        let rules = self.rules.read();
        let denied = rules.iter().any(|r| {
            r.verb == a.verb
                && r.resource == a.kind.plural
                && r.namespace
                    .as_deref()
                    .is_none_or(|n| Some(n) == a.namespace)
                && r.name.as_deref().is_none_or(|n| Some(n) == a.name)
        });
        if denied {
            Err(forbidden(a))
        } else {
            Ok(())
        }
    }
}

/// `secrets "ca" is forbidden: User "u" cannot watch resource "secrets" in API group "" in
/// the namespace "ns"`.
fn forbidden(a: &Attributes<'_>) -> ApiErr {
    let what = match a.name {
        Some(n) => format!("{} {n:?}", a.kind.plural),
        None => a.kind.plural.to_string(),
    };
    let scope = match a.namespace {
        Some(ns) => format!(" in the namespace {ns:?}"),
        None => " at the cluster scope".to_string(),
    };
    let message = format!(
        "{what} is forbidden: User {:?} cannot {} resource {:?} in API group {:?}{scope}",
        a.user.unwrap_or("system:anonymous"),
        a.verb,
        a.kind.plural,
        a.kind.group
    );
    let mut status = Status::failure(403, "Forbidden", message);
    status.details = Some(StatusDetails {
        name: a.name.map(str::to_string),
        group: Some(a.kind.group.to_string()).filter(|g| !g.is_empty()),
        kind: Some(a.kind.plural.to_string()),
        ..Default::default()
    });
    status
        .extra
        .insert("metadata".into(), serde_json::json!({}));
    ApiErr {
        status: Box::new(status),
        retry_after: None,
    }
}
