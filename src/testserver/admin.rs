//! The admin endpoint under `/_testserver/`: faults, request log, seeding and restarts over HTTP,
//! for tests that run the server as a process.
//!
//! - `GET /_testserver/requests`, `DELETE /_testserver/requests`, `GET /_testserver/counts`
//! - `POST /_testserver/faults` with `{"latencyMs", "failNext": {"count", "code", "verb"},
//!   "failFraction": {"fraction", "code"}, "retryAfter", "closeWatchesAfterMs", "expireNextWatch",
//!   "cutNextResponse", "pause"}` (every key optional); `DELETE /_testserver/faults` clears them
//! - `POST /_testserver/pause`, `POST /_testserver/resume`
//! - `POST /_testserver/restart[?jumpRV=N|rewindRV=N][&empty=true]` (`empty`: the data is gone and older watch versions expire)
//! - `POST /_testserver/seed/<plural>[?namespace=NS]` with the object as body
//! - `GET /_testserver/rv`
//! - kube-apiserver mode: `GET /_testserver/kube-apiserver/writes`, and
//!   `POST|DELETE /_testserver/kube-apiserver/crd-groups` with `{"group", "version"}`

use std::time::Duration;

use serde_json::{json, Value};

use super::http::{Request, Response};
use super::kinds;
use super::rest::object;
use super::server::Shared;
use super::store::RvChange;

/// Path prefix of the admin endpoint.
pub(crate) const PREFIX: &str = "/_testserver/";

fn bad(msg: impl Into<String>) -> Response {
    object(400, &json!({"error": msg.into()}))
}

fn ok() -> Response {
    object(200, &json!({"ok": true}))
}

/// A restart: it drops every connection, so the caller runs it with the asking one left out.
pub(crate) type Restart<'a> = Box<dyn FnOnce() + 'a>;

/// Answers an admin request; a restart comes back to be run before the answer is written, so
/// a caller that has the answer finds the server restarted.
pub(crate) fn handle<'a>(shared: &'a Shared, req: &Request) -> (Response, Option<Restart<'a>>) {
    let path = req.path.trim_start_matches(PREFIX).trim_end_matches('/');
    let body: Value = serde_json::from_slice(&req.body).unwrap_or(Value::Null);
    let resp = match (req.method.as_str(), path) {
        ("GET", "requests") => object(
            200,
            &serde_json::to_value(shared.log.records()).unwrap_or(Value::Null),
        ),
        ("DELETE", "requests") => {
            shared.log.clear();
            ok()
        }
        ("GET", "counts") => object(
            200,
            &serde_json::to_value(shared.log.counts()).unwrap_or(Value::Null),
        ),
        ("GET", "rv") => object(
            200,
            &json!({"resourceVersion": shared.store.current_rv().to_string()}),
        ),
        ("POST", "faults") => match set_faults(shared, &body) {
            Ok(()) => ok(),
            Err(e) => bad(e),
        },
        ("DELETE", "faults") => {
            shared.faults.clear();
            ok()
        }
        ("POST", "pause") => {
            shared.faults.pause();
            ok()
        }
        ("POST", "resume") => {
            shared.faults.resume();
            ok()
        }
        ("POST", "restart") => {
            let num = |k: &str| req.query(k).and_then(|v| v.parse::<u64>().ok());
            let rv = match (num("jumpRV"), num("rewindRV")) {
                (Some(n), _) => RvChange::Jump(n),
                (None, Some(n)) => RvChange::Rewind(n),
                _ => RvChange::Keep,
            };
            if req.query("empty") == Some("true") {
                return (ok(), Some(Box::new(move || shared.restart_empty(rv))));
            }
            return (ok(), Some(Box::new(move || shared.restart(rv))));
        }
        ("GET", "kube-apiserver/writes") => match &shared.kas {
            Some(k) => object(
                200,
                &serde_json::to_value(k.writes()).unwrap_or(Value::Null),
            ),
            None => bad("not in kube-apiserver mode"),
        },
        (m @ ("POST" | "DELETE"), "kube-apiserver/crd-groups") => {
            let s = |k: &str| {
                body.get(k)
                    .and_then(Value::as_str)
                    .filter(|v| !v.is_empty())
            };
            match (&shared.kas, s("group"), s("version")) {
                (None, _, _) => bad("not in kube-apiserver mode"),
                (Some(k), Some(g), Some(v)) => {
                    k.set_crd_group(shared, g, v, m == "POST");
                    ok()
                }
                _ => bad("body needs \"group\" and \"version\""),
            }
        }
        ("POST", p) if p.starts_with("seed/") => {
            let plural = &p["seed/".len()..];
            match kinds::by_plural(plural) {
                None => bad(format!("unknown resource {plural:?}")),
                Some(kind) => {
                    let ns = req.query("namespace").unwrap_or("");
                    match shared.store.seed(kind, ns, body) {
                        Ok(obj) => object(201, &obj),
                        Err(e) => super::server::status_response(&e),
                    }
                }
            }
        }
        _ => object(
            404,
            &json!({"error": format!("no admin endpoint {} {}", req.method, req.path)}),
        ),
    };
    (resp, None)
}

fn set_faults(shared: &Shared, b: &Value) -> Result<(), String> {
    let f = &shared.faults;
    if !b.is_object() {
        return Err("body must be a JSON object".into());
    }
    let u = |v: &Value, k: &str| v.get(k).and_then(Value::as_u64);
    if let Some(ms) = u(b, "latencyMs") {
        f.set_latency(Duration::from_millis(ms));
    }
    if let Some(n) = b.get("failNext") {
        let count = u(n, "count").unwrap_or(1) as usize;
        let code = u(n, "code").unwrap_or(500) as u16;
        f.fail_next_verb(n.get("verb").and_then(Value::as_str), count, code);
    }
    if let Some(n) = b.get("failFraction") {
        let fraction = n
            .get("fraction")
            .and_then(Value::as_f64)
            .ok_or("failFraction.fraction")?;
        f.fail_fraction(fraction, u(n, "code").unwrap_or(500) as u16);
    }
    if let Some(s) = u(b, "retryAfter") {
        f.set_retry_after(s as u32);
    }
    match b.get("closeWatchesAfterMs") {
        Some(Value::Null) => f.close_watches_after(None),
        Some(v) => f.close_watches_after(Some(Duration::from_millis(
            v.as_u64().ok_or("closeWatchesAfterMs must be a number")?,
        ))),
        None => {}
    }
    if b.get("expireNextWatch").and_then(Value::as_bool) == Some(true) {
        f.expire_next_watch();
    }
    if b.get("cutNextResponse").and_then(Value::as_bool) == Some(true) {
        f.cut_next_response();
    }
    match b.get("pause").and_then(Value::as_bool) {
        Some(true) => f.pause(),
        Some(false) => f.resume(),
        None => {}
    }
    Ok(())
}
