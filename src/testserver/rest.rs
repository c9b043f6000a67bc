//! The REST verbs on stored kinds: get, list, create, update, patch, delete.

use std::sync::Arc;

use serde_json::{json, Value};

use super::errors::{self, ApiErr};
use super::http::{Request, Response};
use super::kinds::Kind;
use super::patch::merge_patch;
use super::selector::Selector;
use super::store::{ListRequest, Preconditions, Store};

/// An object answer.
pub(crate) fn object(code: u16, obj: &Value) -> Response {
    Response::json(code, serde_json::to_vec(obj).unwrap_or_default())
}

fn parse_body(req: &Request) -> Result<Value, ApiErr> {
    if req.body.is_empty() {
        return Err(errors::bad_request("the request body is empty"));
    }
    let ct = req.header("content-type").unwrap_or("application/json");
    if ct.contains("yaml") && !ct.contains("apply-patch") {
        return serde_yaml_ng::from_slice(&req.body)
            .map_err(|e| errors::bad_request(format!("cannot decode YAML body: {e}")));
    }
    serde_json::from_slice(&req.body)
        .map_err(|e| errors::bad_request(format!("cannot decode JSON body: {e}")))
}

/// With `fieldValidation=Strict`, a body with undeclared fields is a 400, as the real server
/// answers a create or update. Fields unknown in `before` (already stored) are not held
/// against the request.
fn strict_check(kind: &Kind, req: &Request, body: &Value, before: &Value) -> Result<(), ApiErr> {
    match strict_errors(req, kind, body, before) {
        None => Ok(()),
        // Worded as a create's or update's decode failure (`transformDecodeError` in
        // apiserver's handlers/rest.go).
        Some(errs) => Err(errors::bad_request(format!(
            "{kind} in version {version:?} cannot be handled as a {kind}: {errs}",
            kind = kind.kind,
            version = kind.version,
        ))),
    }
}

/// A patch's [`strict_check`]: kube-apiserver decodes the patched object strictly and
/// answers 422 on the field `patch`, the patched object as the value, with no kind or name
/// (`applyPatch` in apiserver's handlers/patch.go: `NewInvalid(schema.GroupKind{}, "", …)`).
fn strict_check_patched(
    kind: &Kind,
    req: &Request,
    patched: &Value,
    before: &Value,
) -> Result<(), ApiErr> {
    match strict_errors(req, kind, patched, before) {
        None => Ok(()),
        Some(errs) => Err(errors::invalid_untyped(&[errors::FieldError::invalid(
            "patch",
            &Value::String(patched.to_string()),
            &errs,
        )])),
    }
}

/// `strict decoding error: unknown field "a.b", …` for the fields of `body` that `kind` does
/// not declare and `before` did not hold already; None when there are none or the request
/// did not ask for `fieldValidation=Strict`.
fn strict_errors(req: &Request, kind: &Kind, body: &Value, before: &Value) -> Option<String> {
    if req.query("fieldValidation") != Some("Strict") {
        return None;
    }
    let known_before = (kind.unknown_fields)(before);
    let mut unknown = (kind.unknown_fields)(body);
    unknown.retain(|f| !known_before.contains(f));
    if unknown.is_empty() {
        return None;
    }
    let list: Vec<String> = unknown
        .iter()
        .map(|f| format!("unknown field \"{f}\""))
        .collect();
    Some(format!("strict decoding error: {}", list.join(", ")))
}

/// `dryRun=All` in the query, where kube-apiserver reads a create's, update's and patch's
/// options (`handlers/create.go`, `update.go`, `patch.go`): validate and admit, store
/// nothing. Any other value fails the options' validation (`ValidateCreateOptions` and its
/// siblings): 422 on `options` (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
fn dry_run(req: &Request, options: &'static str) -> Result<bool, ApiErr> {
    match req.query("dryRun") {
        None => Ok(false),
        Some("All") => Ok(true),
        Some(other) => Err(errors::invalid_options(
            options,
            &[errors::FieldError::not_supported(
                "dryRun",
                &json!([other]),
                &["All"],
            )],
        )),
    }
}

/// `GET .../<plural>/<name>`.
pub(crate) fn get(store: &Store, kind: &Kind, ns: &str, name: &str) -> Result<Response, ApiErr> {
    let obj = store.get(kind, ns, name)?;
    Ok(object(200, &obj))
}

/// `GET .../<plural>`: one page of the list.
pub(crate) fn list(
    store: &Store,
    kind: &Kind,
    ns: Option<&str>,
    req: &Request,
) -> Result<Response, ApiErr> {
    let selector = Selector::parse_with(
        req.query("labelSelector"),
        req.query("fieldSelector"),
        kind.fields,
    )
    .map_err(errors::bad_request)?;
    let limit = match req.query("limit") {
        Some(l) if !l.is_empty() => Some(
            l.parse::<usize>()
                .map_err(|_| errors::bad_request(format!("invalid limit {l:?}")))?,
        ),
        _ => None,
    };
    let page = store.list(
        kind,
        &ListRequest {
            namespace: ns,
            selector: &selector,
            limit,
            continue_token: req.query("continue"),
            resource_version: req.query("resourceVersion"),
        },
    )?;
    let mut meta = json!({"resourceVersion": page.rv.to_string()});
    if let Some(c) = &page.continue_token {
        meta["continue"] = json!(c);
    }
    if let Some(r) = page.remaining {
        meta["remainingItemCount"] = json!(r);
    }
    // Written by hand so the stored objects are serialized in place, not cloned.
    let mut out = Vec::with_capacity(256 + page.items.len() * 512);
    out.extend_from_slice(b"{\"apiVersion\":");
    out.extend_from_slice(json!(kind.api_version()).to_string().as_bytes());
    out.extend_from_slice(b",\"kind\":");
    out.extend_from_slice(json!(kind.list_kind()).to_string().as_bytes());
    out.extend_from_slice(b",\"metadata\":");
    out.extend_from_slice(meta.to_string().as_bytes());
    out.extend_from_slice(b",\"items\":[");
    for (i, item) in page.items.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        serde_json::to_writer(&mut out, item.as_ref())
            .map_err(|e| errors::internal(e.to_string()))?;
    }
    out.extend_from_slice(b"]}");
    Ok(Response::json(200, out))
}

/// `POST .../<plural>`.
pub(crate) fn create(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    req: &Request,
    manager: &str,
) -> Result<(Response, Arc<Value>), ApiErr> {
    let body = parse_body(req)?;
    strict_check(kind, req, &body, &Value::Null)?;
    let obj = store.create(kind, ns, body, manager, dry_run(req, "CreateOptions")?)?;
    Ok((object(201, &obj), obj))
}

/// `PUT .../<plural>/<name>[/status]`.
pub(crate) fn update(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    name: &str,
    status_only: bool,
    req: &Request,
    manager: &str,
) -> Result<Response, ApiErr> {
    let body = parse_body(req)?;
    let dry = dry_run(req, "UpdateOptions")?;
    let obj = store.update(kind, ns, name, status_only, manager, dry, |cur| {
        strict_check(kind, req, &body, cur)?;
        Ok(body)
    })?;
    Ok(object(200, &obj))
}

/// The patch types a built-in resource takes (`installer.go`).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum PatchType {
    /// `application/json-patch+json` (RFC 6902).
    Json,
    /// `application/merge-patch+json` (RFC 7386), or strategic merge patch, the same for
    /// these kinds (no lists with merge keys).
    Merge,
    /// `application/apply-patch+yaml`: server-side apply.
    Apply,
}

impl PatchType {
    /// The type a `Content-Type` names (parameters after `;` ignored, as
    /// `handlers/patch.go` cuts them); `None`: 415.
    pub(crate) fn of(req: &Request) -> Option<PatchType> {
        let ct = req.header("content-type").unwrap_or("");
        match ct.split(';').next().unwrap_or("").trim() {
            "application/json-patch+json" => Some(PatchType::Json),
            "application/merge-patch+json" | "application/strategic-merge-patch+json" => {
                Some(PatchType::Merge)
            }
            "application/apply-patch+yaml" => Some(PatchType::Apply),
            _ => None,
        }
    }
}

/// A patch's options, checked as `ValidatePatchOptions` checks them
/// (`apimachinery/pkg/apis/meta/v1/validation`), after the media type: an apply needs a
/// `fieldManager`, and only an apply may `force`. 422 on `PatchOptions`.
pub(crate) fn check_patch_options(req: &Request, patch: PatchType) -> Result<(), ApiErr> {
    let mut errs = Vec::new();
    match patch {
        PatchType::Apply => {
            if req.query("fieldManager").is_none_or(str::is_empty) {
                errs.push(errors::FieldError::required(
                    "fieldManager",
                    "is required for apply patch",
                ));
            }
        }
        _ => {
            if req.query("force").is_some() {
                errs.push(errors::FieldError::forbidden(
                    "force",
                    "may not be specified for non-apply patch",
                ));
            }
        }
    }
    if errs.is_empty() {
        Ok(())
    } else {
        Err(errors::invalid_options("PatchOptions", &errs))
    }
}

/// `PATCH .../<plural>/<name>[/status]`: JSON merge patch, or strategic merge patch
/// (identical for these kinds: no lists with merge keys), or JSON patch (RFC 6902), or a
/// server-side apply (see [`apply`]).
pub(crate) fn patch(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    name: &str,
    status_only: bool,
    req: &Request,
    manager: &str,
) -> Result<Response, ApiErr> {
    let patch = PatchType::of(req).ok_or_else(errors::unsupported_media_type)?;
    check_patch_options(req, patch)?;
    if patch == PatchType::Apply {
        return apply(store, kind, ns, name, status_only, req, manager);
    }
    let json_patch = patch == PatchType::Json;
    let body: Value = serde_json::from_slice(&req.body)
        .map_err(|e| errors::bad_request(format!("cannot decode patch: {e}")))?;
    let dry = dry_run(req, "PatchOptions")?;
    let obj = store.update(kind, ns, name, status_only, manager, dry, |cur| {
        let mut new = cur.clone();
        if json_patch {
            super::patch::json_patch(&mut new, &body).map_err(errors::bad_request)?;
        } else {
            if !body.is_object() {
                return Err(errors::bad_request("a merge patch must be a JSON object"));
            }
            merge_patch(&mut new, &body);
            // A patch that does not name a resourceVersion is unconditional.
            if body.pointer("/metadata/resourceVersion").is_none() {
                if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
                    m.remove("resourceVersion");
                }
            }
        }
        // Strict validation looks at the patched object, minus what was already stored.
        strict_check_patched(kind, req, &new, cur)?;
        Ok(new)
    })?;
    Ok(object(200, &obj))
}

/// `PATCH` with `application/apply-patch+yaml`: server-side apply of the body (YAML, so
/// JSON too) as `manager`, `force=true` taking fields other managers own (see
/// `apply.rs`). An absent object is created (201), as the apply patcher's
/// `createNewObject` does with `forceAllowCreate` (`handlers/patch.go`).
fn apply(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    name: &str,
    status_only: bool,
    req: &Request,
    manager: &str,
) -> Result<Response, ApiErr> {
    let config: Value = serde_yaml_ng::from_slice(&req.body)
        .map_err(|e| errors::bad_request(format!("error decoding YAML: {e}")))?;
    let force = match req.query("force") {
        None => false,
        Some(v) => v.parse::<bool>().map_err(|_| {
            errors::bad_request(format!(
                "force: invalid value {v:?}: expected true or false"
            ))
        })?,
    };
    check_applied(kind, name, &config)?;
    let dry = dry_run(req, "PatchOptions")?;
    let sub = status_only.then_some("status");
    // Absent, then created meanwhile by someone else: apply to that one (the real server's
    // GuaranteedUpdate retries on the fresh object the same way).
    for _ in 0..2 {
        let applied = store.update_settled(kind, ns, name, status_only, dry, |cur| {
            super::apply::apply(kind, Some(cur), &config, manager, force, sub)
        });
        match applied {
            Ok(obj) => return Ok(object(200, &obj)),
            Err(e) if e.code() == 404 && !status_only => {}
            Err(e) => return Err(e),
        }
        if let Some(uid) = config.pointer("/metadata/uid").and_then(Value::as_str) {
            return Err(errors::conflict(
                kind,
                name,
                &format!(
                    "uid mismatch: the provided object specified uid {uid}, and no existing \
                     object was found"
                ),
            ));
        }
        let new = super::apply::apply(kind, None, &config, manager, force, sub)?;
        let body_name = new.pointer("/metadata/name").and_then(Value::as_str);
        if body_name != Some(name) {
            return Err(errors::bad_request(format!(
                "the name of the object ({}) does not match the name on the URL ({name})",
                body_name.unwrap_or("")
            )));
        }
        match store.create_settled(kind, ns, new, dry) {
            Ok(obj) => return Ok(object(201, &obj)),
            Err(e) if e.status.reason.as_deref() == Some("AlreadyExists") => continue,
            Err(e) => return Err(e),
        }
    }
    Err(errors::conflict(kind, name, errors::MODIFIED))
}

/// What the apply patcher and the field manager refuse before merging: another kind or
/// version (`versioncheck.go`: 400 `invalid object type`), `metadata.managedFields` in the
/// configuration (`structuredmerge.go`: 400), and a field the type does not declare
/// (`ObjectToTyped` fails; the error is no Status, so kube-apiserver answers 500).
fn check_applied(kind: &Kind, name: &str, config: &Value) -> Result<(), ApiErr> {
    if !config.is_object() {
        return Err(errors::bad_request(
            "error decoding YAML: the applied configuration is not an object",
        ));
    }
    let av = config
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or("");
    let k = config.get("kind").and_then(Value::as_str).unwrap_or("");
    if av != kind.api_version() || k != kind.kind {
        let (group, version) = av.rsplit_once('/').unwrap_or(("", av));
        return Err(errors::bad_request(format!(
            "invalid object type: {group}/{version}, Kind={k}"
        )));
    }
    if config
        .pointer("/metadata/managedFields")
        .is_some_and(|m| !m.is_null())
    {
        return Err(errors::bad_request("metadata.managedFields must be nil"));
    }
    let unknown = (kind.unknown_fields)(config);
    if !unknown.is_empty() {
        let fields: Vec<String> = unknown
            .iter()
            .map(|f| format!(".{f}: field not declared in schema"))
            .collect();
        return Err(errors::internal_unwrapped(format!(
            "failed to create typed patch object (/{name}; {}, Kind={}): {}",
            kind.api_version(),
            kind.kind,
            fields.join("\n")
        )));
    }
    Ok(())
}

/// `DELETE .../<plural>/<name>`, honouring the request's `DeleteOptions`.
pub(crate) fn delete(
    store: &Store,
    kind: &'static Kind,
    ns: &str,
    name: &str,
    req: &Request,
) -> Result<Response, ApiErr> {
    let opts = delete_options(req)?;
    let obj = store.delete(kind, ns, name, &opts.preconditions, opts.dry_run)?;
    Ok(object(200, &obj))
}

/// What a delete's `DeleteOptions` ask for (the parts this server acts on or checks).
struct DeleteOpts {
    preconditions: Preconditions,
    dry_run: bool,
}

/// A delete's options, read where kube-apiserver reads them: from the body's
/// `DeleteOptions` when the body is non-empty, and from the query only when it is empty
/// (`k8s.io/apiserver/pkg/endpoints/handlers/delete.go`, `DeleteResource`). So a
/// `?dryRun=All` beside a body without `dryRun` is ignored and the delete is real.
/// The options are then checked as `ValidateDeleteOptions` checks them
/// (`k8s.io/apimachinery/pkg/apis/meta/v1/validation`): a 422 on `DeleteOptions`.
fn delete_options(req: &Request) -> Result<DeleteOpts, ApiErr> {
    let mut pre = Preconditions::default();
    let (dry, policy): (Vec<String>, Option<String>) = if req.body.is_empty() {
        let dry = req
            .query("dryRun")
            .map(str::to_string)
            .into_iter()
            .collect();
        (dry, req.query("propagationPolicy").map(str::to_string))
    } else {
        let opts: Value = serde_json::from_slice(&req.body)
            .map_err(|e| errors::bad_request(format!("cannot decode DeleteOptions: {e}")))?;
        // `null` decodes to empty options in Go, as it does here.
        if !opts.is_object() && !opts.is_null() {
            return Err(errors::bad_request(
                "decoded object cannot be converted to DeleteOptions",
            ));
        }
        let p = opts.get("preconditions");
        let s = |k: &str| {
            p.and_then(|p| p.get(k))
                .and_then(Value::as_str)
                .map(str::to_string)
        };
        pre.uid = s("uid");
        pre.resource_version = s("resourceVersion");
        let dry = match opts.get("dryRun") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(v)) => v
                .iter()
                .map(|d| d.as_str().map(str::to_string))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| errors::bad_request("DeleteOptions.dryRun: expected strings"))?,
            Some(_) => {
                return Err(errors::bad_request(
                    "DeleteOptions.dryRun: expected an array of strings",
                ))
            }
        };
        let policy = opts
            .get("propagationPolicy")
            .and_then(Value::as_str)
            .map(str::to_string);
        (dry, policy)
    };
    let mut errs = Vec::new();
    if let Some(p) =
        policy.filter(|p| !matches!(p.as_str(), "Foreground" | "Background" | "Orphan"))
    {
        errs.push(errors::FieldError::not_supported(
            "propagationPolicy",
            &json!(p),
            &["Foreground", "Background", "Orphan", "nil"],
        ));
    }
    if dry.iter().any(|d| d != "All") {
        errs.push(errors::FieldError::not_supported(
            "dryRun",
            &json!(dry),
            &["All"],
        ));
    }
    if !errs.is_empty() {
        return Err(errors::invalid_options("DeleteOptions", &errs));
    }
    Ok(DeleteOpts {
        preconditions: pre,
        dry_run: !dry.is_empty(),
    })
}
