//! Watch streams: replay from the history, live events, bookmarks, timeouts, 410 and too-large answers.

use std::io::{self, Write};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::errors::{self, ApiErr};
use super::http::{self, Request};
use super::kinds::Kind;
use super::selector::Selector;
use super::server::Shared;
use super::store::{Event, EventType};
use crate::runtime::clock::deadline_after;

/// Server-side watch length when the client gives no `timeoutSeconds` (the real server's
/// `--min-request-timeout` default).
const DEFAULT_WATCH_SECONDS: u64 = 1800;

/// What the watch asked for, checked before the stream starts (errors are ordinary answers).
pub(crate) struct WatchRequest {
    selector: Selector,
    resource_version: Option<u64>,
    timeout: Duration,
    bookmarks: bool,
}

/// Parses the watch parameters.
pub(crate) fn parse(req: &Request, kind: &Kind) -> Result<WatchRequest, ApiErr> {
    let selector = Selector::parse_with(
        req.query("labelSelector"),
        req.query("fieldSelector"),
        kind.fields,
    )
    .map_err(errors::bad_request)?;
    let resource_version = match req.query("resourceVersion") {
        None | Some("") | Some("0") => None,
        Some(v) => Some(
            v.parse::<u64>()
                .map_err(|_| errors::bad_request(format!("invalid resource version: {v}")))?,
        ),
    };
    let timeout = match req.query("timeoutSeconds") {
        Some(t) if !t.is_empty() => Duration::from_secs(
            t.parse::<u64>()
                .map_err(|_| errors::bad_request(format!("invalid timeoutSeconds {t:?}")))?,
        ),
        _ => Duration::from_secs(DEFAULT_WATCH_SECONDS),
    };
    Ok(WatchRequest {
        selector,
        resource_version,
        timeout,
        bookmarks: req.query_bool("allowWatchBookmarks"),
    })
}

fn event_line(type_: &str, obj: &Value) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"type\":\"");
    out.extend_from_slice(type_.as_bytes());
    out.extend_from_slice(b"\",\"object\":");
    // Serializing a Value into a Vec cannot fail.
    let _ = serde_json::to_writer(&mut out, obj);
    out.extend_from_slice(b"}\n");
    out
}

fn error_event<W: Write>(w: &mut W, e: &ApiErr) -> io::Result<()> {
    let status = serde_json::to_value(&e.status).unwrap_or(Value::Null);
    http::write_chunk(w, &event_line("ERROR", &status))?;
    http::write_last_chunk(w)
}

/// The event as this watch sees it through its namespace and selector, if at all.
fn view(ev: &Event, kind: &Kind, ns: Option<&str>, sel: &Selector) -> Option<&'static str> {
    if ev.plural != kind.plural || ns.is_some_and(|n| n != ev.namespace) {
        return None;
    }
    let now = sel.matches(&ev.obj);
    let before = ev.prev.as_ref().is_some_and(|p| sel.matches(p));
    match ev.type_ {
        EventType::Added => now.then_some("ADDED"),
        EventType::Deleted => (now || before).then_some("DELETED"),
        EventType::Modified => match (before, now) {
            (true, true) => Some("MODIFIED"),
            (false, true) => Some("ADDED"),
            (true, false) => Some("DELETED"),
            (false, false) => None,
        },
    }
}

/// Why a watch loop ended.
pub(crate) enum End {
    /// Timeout or injected close: the stream was ended cleanly; the connection may be reused.
    Clean,
    /// Restart or shutdown: drop the connection.
    Drop,
}

/// Serves one watch on `w` until timeout, restart, shutdown or a write error; `epoch` is the
/// restart count when the request arrived (a restart since then drops the connection).
pub(crate) fn serve<W: Write>(
    shared: &Shared,
    kind: &'static Kind,
    ns: Option<&str>,
    wr: &WatchRequest,
    w: &mut W,
    epoch: u64,
) -> io::Result<End> {
    // Restarted while this request was starting: its connection is already gone, and it must
    // not consume a fault (e.g. an armed 410) meant for the next watch.
    if shared.store.state.lock().epoch != epoch {
        return Ok(End::Drop);
    }
    let start = Instant::now();
    let mut deadline = start + wr.timeout;
    if let Some(limit) = shared.faults.watch_limit() {
        deadline = deadline.min(start + limit);
    }
    http::write_chunked_head(w, "application/json", &shared.flow_control_headers())?;
    if wr.resource_version.is_some() && shared.faults.take_expire() {
        let rv = wr.resource_version.unwrap_or(0);
        error_event(
            w,
            &errors::expired(format!("too old resource version: {rv} ({})", rv + 1)),
        )?;
        return Ok(End::Clean);
    }
    let store = &shared.store;
    let mut pending: Vec<Vec<u8>> = Vec::new();
    let mut cursor = {
        let st = store.state.lock();
        match wr.resource_version {
            None => {
                for ((p, ons, _), obj) in st.objects.iter() {
                    if *p == kind.plural && ns.is_none_or(|n| n == ons) && wr.selector.matches(obj)
                    {
                        pending.push(event_line("ADDED", obj));
                    }
                }
                st.rv
            }
            Some(rv) if rv > st.rv => {
                let e = errors::too_large_rv(rv, st.rv);
                drop(st);
                error_event(w, &e)?;
                return Ok(End::Clean);
            }
            Some(rv) if rv < st.history_start => {
                let e = errors::expired(format!(
                    "too old resource version: {rv} ({})",
                    st.history_start + 1
                ));
                drop(st);
                error_event(w, &e)?;
                return Ok(End::Clean);
            }
            Some(rv) => rv,
        }
    };
    let mut next_bookmark = deadline_after(Instant::now(), shared.bookmark_interval);
    loop {
        // A paused server delivers nothing, watches included; a stalled watch neither.
        shared.faults.wait_watch_flowing(|| {
            let st = store.state.lock();
            st.shutdown || st.epoch != epoch
        });
        // One write for everything pending (one chunk per event, as the real server frames
        // them): a burst of creates costs the watcher a few syscalls, not one per event.
        if !pending.is_empty() {
            http::write_chunks(w, pending.drain(..))?;
        }
        let now = Instant::now();
        if now >= deadline {
            http::write_last_chunk(w)?;
            return Ok(End::Clean);
        }
        if wr.bookmarks && now >= next_bookmark {
            let b = json!({
                "kind": kind.kind,
                "apiVersion": kind.api_version(),
                "metadata": {"resourceVersion": cursor.to_string()}
            });
            http::write_chunk(w, &event_line("BOOKMARK", &b))?;
            next_bookmark = deadline_after(now, shared.bookmark_interval);
        }
        let mut st = store.state.lock();
        // Events to send, serialized once the lock is released (creates wait on that lock).
        let mut ready: Vec<(&'static str, Arc<Event>)> = Vec::new();
        loop {
            if st.shutdown || st.epoch != epoch {
                return Ok(End::Drop);
            }
            let from = st.history.partition_point(|e| e.rv <= cursor);
            if from < st.history.len() || st.rv > cursor {
                for ev in st.history.iter().skip(from) {
                    if let Some(t) = view(ev, kind, ns, &wr.selector) {
                        ready.push((t, ev.clone()));
                    }
                }
                cursor = st.rv;
                if !ready.is_empty() {
                    break;
                }
            }
            let now = Instant::now();
            let mut wake = deadline;
            if wr.bookmarks {
                wake = wake.min(next_bookmark);
            }
            if now >= wake {
                break;
            }
            store.wait(&mut st, wake - now);
        }
        drop(st);
        pending.extend(ready.iter().map(|(t, ev)| event_line(t, &ev.obj)));
    }
}
