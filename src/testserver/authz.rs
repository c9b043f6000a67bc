//! Who a request acts as: the user its bearer token names, or the user it impersonates
//! (`Impersonate-*` headers) when that user may impersonate, as kube-apiserver decides it.
//!
//! The model is small but real: with authentication on (any token configured), every token
//! user may do everything (as if bound to cluster-admin); impersonating needs the
//! `impersonate` permission ([`Builder::impersonator`](super::Builder::impersonator)), and
//! the impersonated identity is then authorised instead: a known token user or a member
//! of `system:masters` may act, anyone else (e.g. `system:anonymous`) gets 403.

use super::errors::{self, ApiErr};
use super::http::Request;
use super::server::Shared;

/// The identity a request acts as.
#[derive(Debug, Default)]
pub(crate) struct Identity {
    /// The effective user (none: the server does not authenticate and nothing was impersonated).
    pub(crate) user: Option<String>,
    /// The impersonated groups.
    pub(crate) groups: Vec<String>,
    /// The authenticated user that impersonated `user`.
    pub(crate) impersonated_by: Option<String>,
}

/// The group whose members kube-apiserver's default RBAC lets do everything.
const MASTERS: &str = "system:masters";

/// Why a request was turned away.
#[derive(Debug)]
pub(crate) enum Denied {
    /// 401, 400, or 403 for impersonating without the permission: the answer itself.
    Answer(ApiErr),
    /// The impersonated user (named) may not act: a 403 whose message names what it asked.
    NoRights(String),
}

/// Authenticates and, for impersonation, authorises `req`: 401 for an unknown token, 403
/// for impersonation without the permission or as an identity with no rights, 400 for
/// groups, uid or extra without a user.
pub(crate) fn identify(shared: &Shared, req: &Request) -> Result<Identity, Denied> {
    let users = shared.users.read();
    let requester = req
        .header("authorization")
        .and_then(|h| h.strip_prefix("Bearer "))
        .and_then(|t| users.get(t.trim()))
        .cloned();
    if !users.is_empty() && requester.is_none() {
        return Err(Denied::Answer(errors::unauthorized()));
    }
    let user = req.header("impersonate-user").map(str::to_string);
    let groups: Vec<String> = req
        .headers_named("impersonate-group")
        .map(str::to_string)
        .collect();
    let others = req.header("impersonate-uid").is_some()
        || req.has_header_prefix("impersonate-extra-")
        || !groups.is_empty();
    let Some(user) = user else {
        if others {
            return Err(Denied::Answer(errors::bad_request(
                "requested impersonation of a uid, groups or extra without impersonating a user",
            )));
        }
        return Ok(Identity {
            user: requester,
            ..Identity::default()
        });
    };
    if users.is_empty() {
        // No authentication, no authorisation: the identity is taken as given.
        return Ok(Identity {
            user: Some(user),
            groups,
            impersonated_by: None,
        });
    }
    let requester = requester.unwrap_or_default();
    if !shared.impersonators.read().contains(&requester) {
        return Err(Denied::Answer(errors::forbidden(format!(
            "users {user:?} is forbidden: User {requester:?} cannot impersonate resource \
             \"users\" in API group \"\" at the cluster scope"
        ))));
    }
    let known = users.values().any(|u| *u == user) || groups.iter().any(|g| g == MASTERS);
    if !known {
        return Err(Denied::NoRights(user));
    }
    Ok(Identity {
        user: Some(user),
        groups,
        impersonated_by: Some(requester),
    })
}
