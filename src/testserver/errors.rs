//! `Status` answers, worded as the real API server words them.

use crate::api::{Status, StatusCause, StatusDetails};

use super::kinds::Kind;

/// An error answer: HTTP code plus its Status body.
#[derive(Debug, Clone)]
pub(crate) struct ApiErr {
    pub(crate) status: Box<Status>,
    /// `Retry-After` seconds for 429/5xx answers.
    pub(crate) retry_after: Option<u32>,
}

impl ApiErr {
    /// The HTTP code.
    pub(crate) fn code(&self) -> u16 {
        self.status.code.unwrap_or(500)
    }
}

fn with_details(mut s: Status, name: &str, group: &str, kind: &str) -> Status {
    s.details = Some(StatusDetails {
        name: (!name.is_empty()).then(|| name.to_string()),
        group: (!group.is_empty()).then(|| group.to_string()),
        kind: (!kind.is_empty()).then(|| kind.to_string()),
        ..Default::default()
    });
    s.extra.insert("metadata".into(), serde_json::json!({}));
    s
}

fn plain(code: u16, reason: &str, message: impl Into<String>) -> ApiErr {
    let mut status = Status::failure(code, reason, message);
    status
        .extra
        .insert("metadata".into(), serde_json::json!({}));
    ApiErr {
        status: Box::new(status),
        retry_after: None,
    }
}

/// `apiservices.apiregistration.k8s.io`, the qualified resource used in messages.
fn qualified(kind: &Kind) -> String {
    if kind.group.is_empty() {
        kind.plural.to_string()
    } else {
        format!("{}.{}", kind.plural, kind.group)
    }
}

/// 404 NotFound for `name`.
pub(crate) fn not_found(kind: &Kind, name: &str) -> ApiErr {
    let s = Status::failure(
        404,
        "NotFound",
        format!("{} \"{name}\" not found", qualified(kind)),
    );
    ApiErr {
        status: Box::new(with_details(s, name, kind.group, kind.plural)),
        retry_after: None,
    }
}

/// 409 AlreadyExists for `name`.
pub(crate) fn already_exists(kind: &Kind, name: &str) -> ApiErr {
    let s = Status::failure(
        409,
        "AlreadyExists",
        format!("{} \"{name}\" already exists", qualified(kind)),
    );
    ApiErr {
        status: Box::new(with_details(s, name, kind.group, kind.plural)),
        retry_after: None,
    }
}

/// 409 Conflict: `detail` says why (stale resourceVersion, failed precondition).
pub(crate) fn conflict(kind: &Kind, name: &str, detail: &str) -> ApiErr {
    let s = Status::failure(
        409,
        "Conflict",
        format!(
            "Operation cannot be fulfilled on {} \"{name}\": {detail}",
            qualified(kind)
        ),
    );
    ApiErr {
        status: Box::new(with_details(s, name, kind.group, kind.plural)),
        retry_after: None,
    }
}

/// The Conflict detail of an update with a stale resourceVersion.
pub(crate) const MODIFIED: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// One field error, as `field.Error` in apimachinery.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldError {
    /// `FieldValueRequired`, `FieldValueInvalid`, …
    pub(crate) reason: &'static str,
    /// JSON path, e.g. `spec.group`.
    pub(crate) field: String,
    /// Text after the field, e.g. `Invalid value: "x": must be ...`.
    pub(crate) message: String,
}

impl FieldError {
    /// `field.Required`.
    pub(crate) fn required(field: &str, detail: &str) -> Self {
        let message = if detail.is_empty() {
            "Required value".to_string()
        } else {
            format!("Required value: {detail}")
        };
        FieldError {
            reason: "FieldValueRequired",
            field: field.to_string(),
            message,
        }
    }

    /// `field.Forbidden`.
    pub(crate) fn forbidden(field: &str, detail: &str) -> Self {
        FieldError {
            reason: "FieldValueForbidden",
            field: field.to_string(),
            message: format!("Forbidden: {detail}"),
        }
    }

    /// `field.Invalid`; `value` is rendered as Go's `%#v` would for strings, numbers and bools.
    pub(crate) fn invalid(field: &str, value: &serde_json::Value, detail: &str) -> Self {
        let shown = match value {
            serde_json::Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        FieldError {
            reason: "FieldValueInvalid",
            field: field.to_string(),
            message: format!("Invalid value: {shown}: {detail}"),
        }
    }

    /// `field.NotSupported`; a list of strings is shown as Go shows a `[]string`.
    pub(crate) fn not_supported(
        field: &str,
        value: &serde_json::Value,
        supported: &[&str],
    ) -> Self {
        let quote = |v: &serde_json::Value| match v {
            serde_json::Value::String(s) => format!("{s:?}"),
            other => other.to_string(),
        };
        let shown = match value {
            serde_json::Value::Array(items) => format!(
                "[]string{{{}}}",
                items.iter().map(quote).collect::<Vec<_>>().join(", ")
            ),
            other => quote(other),
        };
        let supported: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            reason: "FieldValueNotSupported",
            field: field.to_string(),
            message: format!(
                "Unsupported value: {shown}: supported values: {}",
                supported.join(", ")
            ),
        }
    }
}

/// 422 Invalid on a request's options (`DeleteOptions`, …), as kube-apiserver answers
/// options that fail validation: group `meta.k8s.io`, no name.
pub(crate) fn invalid_options(kind: &'static str, errs: &[FieldError]) -> ApiErr {
    invalid_named("meta.k8s.io", kind, "", errs)
}

/// 422 Invalid with one cause per field error.
pub(crate) fn invalid(kind: &Kind, name: &str, errs: &[FieldError]) -> ApiErr {
    invalid_named(kind.group, kind.kind, name, errs)
}

/// 422 Invalid naming no kind and no object, as kube-apiserver refuses a patched object
/// that does not decode (its message starts ` "" is invalid:`).
pub(crate) fn invalid_untyped(errs: &[FieldError]) -> ApiErr {
    invalid_named("", "", "", errs)
}

fn invalid_named(group: &str, kind: &str, name: &str, errs: &[FieldError]) -> ApiErr {
    // The message lists each error once (an aggregate's `Error()` drops repeats); the
    // causes keep every one (`NewInvalid`).
    let mut parts: Vec<String> = Vec::new();
    for e in errs {
        let part = format!("{}: {}", e.field, e.message);
        if !parts.contains(&part) {
            parts.push(part);
        }
    }
    let list = if parts.len() == 1 {
        parts[0].clone()
    } else {
        format!("[{}]", parts.join(", "))
    };
    let qualified_kind = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let mut s = Status::failure(
        422,
        "Invalid",
        format!("{qualified_kind} \"{name}\" is invalid: {list}"),
    );
    s = with_details(s, name, group, kind);
    if let Some(d) = s.details.as_mut() {
        d.causes = errs
            .iter()
            .map(|e| StatusCause {
                reason: Some(e.reason.to_string()),
                message: Some(e.message.clone()),
                field: Some(e.field.clone()),
            })
            .collect();
    }
    ApiErr {
        status: Box::new(s),
        retry_after: None,
    }
}

/// 422 Invalid from an admission policy, worded as kube-apiserver words a
/// ValidatingAdmissionPolicy's denial.
pub(crate) fn denied(kind: &Kind, name: &str, why: &str) -> ApiErr {
    let mut s = Status::failure(
        422,
        "Invalid",
        format!(
            "{} \"{name}\" is forbidden: ValidatingAdmissionPolicy 'testserver-policy' with binding \
             'testserver-policy' denied request: {why}",
            qualified(kind)
        ),
    );
    s = with_details(s, name, kind.group, kind.kind);
    ApiErr {
        status: Box::new(s),
        retry_after: None,
    }
}

/// 400 BadRequest.
pub(crate) fn bad_request(message: impl Into<String>) -> ApiErr {
    plain(400, "BadRequest", message)
}

/// 413 RequestEntityTooLarge, as kube-apiserver answers a body over its limit.
pub(crate) fn too_large(message: impl Into<String>) -> ApiErr {
    plain(413, "RequestEntityTooLarge", message)
}

/// 403 Forbidden.
pub(crate) fn forbidden(message: impl Into<String>) -> ApiErr {
    plain(403, "Forbidden", message)
}

/// 401 Unauthorized.
pub(crate) fn unauthorized() -> ApiErr {
    plain(401, "Unauthorized", "Unauthorized")
}

/// 404 for a path that serves nothing.
pub(crate) fn path_not_found() -> ApiErr {
    plain(
        404,
        "NotFound",
        "the server could not find the requested resource",
    )
}

/// 405 MethodNotAllowed.
pub(crate) fn method_not_allowed(method: &str) -> ApiErr {
    plain(
        405,
        "MethodNotAllowed",
        format!("the server does not allow this method on the requested resource ({method})"),
    )
}

/// 415 UnsupportedMediaType of a patch whose `Content-Type` is none of the patch types a
/// built-in resource takes, worded as `negotiation.NewUnsupportedMediaTypeError` with the
/// list `installer.go` registers (apply as CBOR only behind an alpha feature gate).
pub(crate) fn unsupported_media_type() -> ApiErr {
    plain(
        415,
        "UnsupportedMediaType",
        "the body of the request was in an unknown format - accepted media types include: \
         application/json-patch+json, application/merge-patch+json, \
         application/strategic-merge-patch+json, application/apply-patch+yaml",
    )
}

/// 410 Expired: the resourceVersion is older than the history kept.
pub(crate) fn expired(message: impl Into<String>) -> ApiErr {
    plain(410, "Expired", message)
}

/// 504 "Too large resource version", as the watch cache answers a resourceVersion from the future.
pub(crate) fn too_large_rv(requested: u64, current: u64) -> ApiErr {
    let mut e = plain(
        504,
        "Timeout",
        format!("Too large resource version: {requested}, current: {current}"),
    );
    e.status.details = Some(StatusDetails {
        causes: vec![StatusCause {
            reason: Some("ResourceVersionTooLarge".into()),
            message: Some("Too large resource version".into()),
            field: None,
        }],
        retry_after_seconds: Some(1),
        ..Default::default()
    });
    e.retry_after = Some(1);
    e
}

/// 500 InternalError.
pub(crate) fn internal(message: impl Into<String>) -> ApiErr {
    let message = message.into();
    plain(
        500,
        "InternalError",
        format!("Internal error occurred: {message}"),
    )
}

/// 500 for an error that is no `Status`: kube-apiserver answers it with reason `""`
/// (`StatusReasonUnknown`) and the error's text (`responsewriters.ErrorToAPIStatus`).
pub(crate) fn internal_unwrapped(message: impl Into<String>) -> ApiErr {
    let mut e = plain(500, "", message);
    e.status.reason = None;
    e
}

/// An injected failure: 429 TooManyRequests with Retry-After, or 5xx.
pub(crate) fn injected(code: u16, retry_after: Option<u32>) -> ApiErr {
    let mut e = match code {
        429 => plain(
            429,
            "TooManyRequests",
            "Too many requests, please try again later.",
        ),
        503 => plain(
            503,
            "ServiceUnavailable",
            "the server is currently unable to handle the request (injected)",
        ),
        504 => plain(
            504,
            "Timeout",
            "the server was unable to return a response in the time allotted (injected)",
        ),
        c => plain(
            c,
            if c == 500 { "InternalError" } else { "Unknown" },
            "Internal error occurred: injected failure",
        ),
    };
    if let (429 | 503, Some(secs)) = (code, retry_after) {
        e.retry_after = Some(secs);
        e.status.details = Some(StatusDetails {
            retry_after_seconds: Some(secs),
            ..Default::default()
        });
    }
    e
}
