//! The request log: what clients asked and what they were answered, like client-go's fake `Actions()`.

use std::collections::HashMap;
use std::time::SystemTime;

use parking_lot::{Mutex, RwLock, RwLockReadGuard};
use serde::Serialize;
use serde_json::Value;

/// Most records kept; older ones are dropped (counters keep counting).
pub const DEFAULT_LOG_CAPACITY: usize = 100_000;

/// One request the server answered.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RequestRecord {
    /// `get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, or `discovery`/`other`.
    pub verb: String,
    /// HTTP method.
    pub method: String,
    /// URL path.
    pub path: String,
    /// Raw query string.
    pub query: String,
    /// Resource plural, e.g. `apiservices`, when the path names one.
    pub resource: Option<String>,
    /// Subresource, e.g. `status`.
    pub subresource: Option<String>,
    /// Namespace from the path.
    pub namespace: Option<String>,
    /// Object name from the path (or the created object's name).
    pub name: Option<String>,
    /// HTTP status code answered (200 for a watch that started).
    pub code: u16,
    /// When the request arrived.
    #[serde(serialize_with = "ser_time")]
    pub time: SystemTime,
    /// The request body as JSON, when there was one (e.g. DeleteOptions with preconditions).
    pub body: Option<Value>,
    /// The `User-Agent` header, as sent.
    pub user_agent: Option<String>,
    /// The `Content-Type` header, as sent (a patch's type: `application/apply-patch+yaml`
    /// for a server-side apply).
    pub content_type: Option<String>,
    /// The `fieldManager` query parameter, as sent (the manager defaults to the User-Agent's
    /// product name when it is absent).
    pub field_manager: Option<String>,
    /// `preconditions.uid` of the body (a delete's `DeleteOptions`), when given.
    pub uid_precondition: Option<String>,
    /// The user the bearer token authenticated as (see `Builder::user`); none without one.
    pub user: Option<String>,
    /// The groups the request impersonated (`Impersonate-Group`).
    pub groups: Vec<String>,
    /// The authenticated user that impersonated [`user`](Self::user), if any.
    pub impersonated_by: Option<String>,
}

fn ser_time<S: serde::Serializer>(t: &SystemTime, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&crate::api::time::format_rfc3339(*t))
}

/// The log and per-verb counters.
pub(crate) struct RequestLog {
    inner: Mutex<LogInner>,
    capacity: usize,
    /// Held (shared) by each request being handled, from before it may change the store
    /// until it is logged; readers of the log take it exclusively, so whatever a caller saw
    /// in the store before reading the log has its request in the log.
    in_flight: RwLock<()>,
}

#[derive(Default)]
struct LogInner {
    records: std::collections::VecDeque<RequestRecord>,
    counts: HashMap<String, usize>,
}

impl RequestLog {
    /// An empty log keeping at most `capacity` records.
    pub(crate) fn new(capacity: usize) -> Self {
        RequestLog {
            inner: Mutex::new(LogInner::default()),
            capacity,
            in_flight: RwLock::new(()),
        }
    }

    /// Marks a request as being handled until the guard drops (after [`push`](Self::push)).
    /// Not for watches, which stay open: their events change nothing.
    pub(crate) fn handling(&self) -> RwLockReadGuard<'_, ()> {
        self.in_flight.read()
    }

    /// Adds a record where its arrival puts it. Records are kept in the order requests
    /// arrived, not the order they finished: a write is visible to watchers before its
    /// handler logs it, so a request a watcher sends on that event can finish first (seen
    /// under load: a controller's retry logged before the edit that caused it). Arrival
    /// order always puts a cause before its effects.
    pub(crate) fn push(&self, rec: RequestRecord) {
        let mut l = self.inner.lock();
        *l.counts.entry(rec.verb.clone()).or_insert(0) += 1;
        // Almost always the newest: the search runs from the back.
        let at = l
            .records
            .iter()
            .rposition(|r| r.time <= rec.time)
            .map_or(0, |i| i + 1);
        l.records.insert(at, rec);
        while l.records.len() > self.capacity {
            l.records.pop_front();
        }
    }

    /// Every record kept, in the order the requests arrived.
    pub(crate) fn records(&self) -> Vec<RequestRecord> {
        let _settled = self.in_flight.write();
        self.inner.lock().records.iter().cloned().collect()
    }

    /// Requests of `verb` since the last clear.
    pub(crate) fn count(&self, verb: &str) -> usize {
        let _settled = self.in_flight.write();
        self.inner.lock().counts.get(verb).copied().unwrap_or(0)
    }

    /// All counters.
    pub(crate) fn counts(&self) -> HashMap<String, usize> {
        let _settled = self.in_flight.write();
        self.inner.lock().counts.clone()
    }

    /// Forgets records and counters.
    pub(crate) fn clear(&self) {
        let _settled = self.in_flight.write();
        let mut l = self.inner.lock();
        l.records.clear();
        l.counts.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn rec(verb: &str, at_ms: u64) -> RequestRecord {
        RequestRecord {
            verb: verb.into(),
            method: "PUT".into(),
            path: "/".into(),
            query: String::new(),
            resource: None,
            subresource: None,
            namespace: None,
            name: None,
            code: 200,
            time: SystemTime::UNIX_EPOCH + Duration::from_millis(at_ms),
            body: None,
            content_type: None,
            user_agent: None,
            field_manager: None,
            uid_precondition: None,
            user: None,
            groups: Vec::new(),
            impersonated_by: None,
        }
    }

    #[test]
    fn a_request_that_finishes_late_is_logged_where_it_arrived() {
        let log = RequestLog::new(10);
        // The edit arrived first, but the retry it caused finished before it was logged.
        log.push(rec("first", 10));
        log.push(rec("retry", 30));
        log.push(rec("edit", 20));
        log.push(rec("same-time", 30));
        let verbs: Vec<String> = log.records().into_iter().map(|r| r.verb).collect();
        assert_eq!(verbs, ["first", "edit", "retry", "same-time"]);
        assert_eq!(log.count("edit"), 1);
    }

    #[test]
    fn a_reader_waits_for_the_requests_being_handled() {
        let log = std::sync::Arc::new(RequestLog::new(10));
        // A write is in the store (its caller may have seen it) but not logged yet.
        let handling = log.handling();
        let reader = {
            let log = log.clone();
            std::thread::spawn(move || log.records().len())
        };
        // Time for a reader that did not wait to read an empty log (nothing to await: a
        // reader blocked on the lock shows no sign of it).
        std::thread::sleep(Duration::from_millis(50));
        log.push(rec("create", 10));
        drop(handling);
        assert_eq!(reader.join().unwrap(), 1);
    }

    #[test]
    fn the_oldest_arrivals_go_first_past_capacity() {
        let log = RequestLog::new(2);
        log.push(rec("b", 20));
        log.push(rec("c", 30));
        log.push(rec("a", 10));
        let verbs: Vec<String> = log.records().into_iter().map(|r| r.verb).collect();
        assert_eq!(verbs, ["b", "c"]);
    }
}
