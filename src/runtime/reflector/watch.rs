//! Applying one watch stream to the cache, and how a watch can end.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::api::{Resource, WatchEvent};
use crate::client::Error;
use crate::runtime::store::{key_of, Store};

use super::{EventHandler, WatchEvents};

/// Why a watch (or a list) failed, in terms of what the reflector does next.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Failure {
    /// 410 Gone / Expired: the resourceVersion was compacted away; relist.
    Gone,
    /// 504 "Too large resource version": the server's history is behind ours; relist.
    TooLarge,
    /// No answer, or the connection broke (refused, TLS, timeout, cut, idle): the server we
    /// come back to may not be the one we lost (restarted empty, restored), so back off and
    /// relist rather than trust the cache and resume.
    Connection,
    /// 429: the server is shedding load but its history is intact; back off and resume.
    Throttled,
    /// Anything else (an error answer or event, a garbled stream): the server may not be
    /// the one that served the cache (a 5xx from one restarting empty), so back off and
    /// relist, as client-go does.
    Other,
}

/// Classifies an error from opening or reading a watch.
pub(super) fn classify(e: &Error) -> Failure {
    if e.is_gone() {
        Failure::Gone
    } else if e.is_resource_version_too_large() {
        Failure::TooLarge
    } else if e.is_transport() {
        Failure::Connection
    } else if e.is_too_many_requests() {
        Failure::Throttled
    } else {
        Failure::Other
    }
}

/// How a watch stream ended.
#[derive(Debug)]
pub(super) enum WatchEnd {
    /// The server closed it cleanly (its `timeoutSeconds` ran out, or it restarted).
    Closed,
    /// Shutdown cancelled it.
    Stopped,
    /// Transport or decode failure, or an `ERROR` event.
    Failed(Error),
    /// An event carried a resourceVersion older than one already seen on this watch: the
    /// server's history moved backwards under us (a restore); nothing cached can be trusted.
    Backwards {
        /// The newest version seen before.
        seen: String,
        /// The older version the event carried.
        got: String,
    },
}

/// Reads `events` to their end, applying each to `store` and `handler` in order under
/// `deliver` (so a resync never interleaves with an event). `rv` follows every object
/// and bookmark; `progress` is called after each event.
pub(super) fn consume<K: Resource>(
    events: WatchEvents<K>,
    store: &Store<K>,
    handler: &dyn EventHandler<K>,
    deliver: &Mutex<()>,
    rv: &mut String,
    stopped: &dyn Fn() -> bool,
    progress: &mut dyn FnMut(),
) -> WatchEnd {
    for event in events {
        if stopped() {
            return WatchEnd::Stopped;
        }
        let event = match event {
            Ok(ev) => ev,
            Err(e) => return WatchEnd::Failed(e),
        };
        let event_rv = match &event {
            WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) => {
                o.resource_version()
            }
            WatchEvent::Bookmark(v) => v.as_str(),
            WatchEvent::Error(_) => "",
        };
        if older(event_rv, rv) {
            return WatchEnd::Backwards {
                seen: rv.clone(),
                got: event_rv.to_string(),
            };
        }
        match event {
            WatchEvent::Added(obj) | WatchEvent::Modified(obj) => {
                advance(rv, obj.resource_version());
                let new = Arc::new(obj);
                let _turn = deliver.lock();
                match store.insert(new.clone()) {
                    Some(old) => handler.on_update(&old, &new),
                    None => handler.on_add(&new),
                }
            }
            WatchEvent::Deleted(obj) => {
                advance(rv, obj.resource_version());
                let _turn = deliver.lock();
                // A delete of something we never saw changes nothing and invents no event.
                if store.remove(&key_of(&obj)).is_some() {
                    handler.on_delete(&Arc::new(obj));
                }
            }
            WatchEvent::Bookmark(v) => advance(rv, &v),
            WatchEvent::Error(status) => {
                let code = status.code.unwrap_or(500);
                return WatchEnd::Failed(Error::api(code, Some(*status), None));
            }
        }
        progress();
    }
    if stopped() {
        WatchEnd::Stopped
    } else {
        WatchEnd::Closed
    }
}

/// Whether `got` is an older version than `seen`; only comparable when both are integers
/// (the API does not promise that; kube-apiserver's are etcd revisions).
pub(super) fn older(got: &str, seen: &str) -> bool {
    match (got.parse::<u64>(), seen.parse::<u64>()) {
        (Ok(g), Ok(s)) => g < s,
        _ => false,
    }
}

fn advance(rv: &mut String, seen: &str) {
    if !seen.is_empty() {
        seen.clone_into(rv);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIService, Status};
    use crate::runtime::reflector::test_support::{svc, Recorder};

    fn run(
        events: Vec<Result<WatchEvent<APIService>, Error>>,
        store: &Store<APIService>,
        rec: &Recorder,
        rv: &mut String,
    ) -> (WatchEnd, usize) {
        let mut n = 0;
        let end = consume(
            Box::new(events.into_iter()),
            store,
            rec,
            &Mutex::new(()),
            rv,
            &|| false,
            &mut || n += 1,
        );
        (end, n)
    }

    #[test]
    fn events_apply_in_order_and_move_the_resource_version() {
        let store = Store::new();
        let rec = Recorder::default();
        let mut rv = "10".to_string();
        let (end, n) = run(
            vec![
                Ok(WatchEvent::Added(svc("a", "11"))),
                Ok(WatchEvent::Modified(svc("a", "12"))),
                Ok(WatchEvent::Added(svc("b", "13"))),
                Ok(WatchEvent::Deleted(svc("a", "14"))),
                Ok(WatchEvent::Bookmark("20".into())),
            ],
            &store,
            &rec,
            &mut rv,
        );
        assert!(matches!(end, WatchEnd::Closed));
        assert_eq!(n, 5);
        assert_eq!(rv, "20");
        assert_eq!(
            rec.take(),
            ["add a@11", "update a@11->12", "add b@13", "delete a@14"]
        );
        assert_eq!(store.keys(), ["b"]);
    }

    #[test]
    fn delete_of_an_unknown_object_invents_nothing() {
        let store = Store::new();
        let rec = Recorder::default();
        let mut rv = String::new();
        run(
            vec![Ok(WatchEvent::Deleted(svc("x", "5")))],
            &store,
            &rec,
            &mut rv,
        );
        assert!(rec.take().is_empty());
        assert_eq!(rv, "5");
    }

    #[test]
    fn error_event_ends_the_watch_with_its_status() {
        let store = Store::new();
        let rec = Recorder::default();
        let mut rv = "1".to_string();
        let status = Status::failure(410, "Expired", "too old resource version: 1 (5)");
        let (end, _) = run(
            vec![
                Ok(WatchEvent::Error(Box::new(status))),
                Ok(WatchEvent::Added(svc("late", "9"))),
            ],
            &store,
            &rec,
            &mut rv,
        );
        let WatchEnd::Failed(e) = end else {
            panic!("{end:?}")
        };
        assert_eq!(classify(&e), Failure::Gone);
        assert!(store.is_empty(), "nothing after the error is applied");
    }

    #[test]
    fn an_event_older_than_one_seen_ends_the_watch_as_backwards() {
        let store = Store::new();
        let rec = Recorder::default();
        let mut rv = "10".to_string();
        let (end, _) = run(
            vec![
                Ok(WatchEvent::Added(svc("a", "11"))),
                Ok(WatchEvent::Bookmark("12".into())),
                // A restored server numbering from 5 again.
                Ok(WatchEvent::Added(svc("b", "5"))),
            ],
            &store,
            &rec,
            &mut rv,
        );
        let WatchEnd::Backwards { seen, got } = end else {
            panic!("{end:?}")
        };
        assert_eq!((seen.as_str(), got.as_str()), ("12", "5"));
        assert_eq!(rec.take(), ["add a@11"], "the older event is not applied");
        assert!(older("5", "12") && !older("12", "12") && !older("x", "12"));
    }

    #[test]
    fn classification() {
        let gone = Error::api(410, None, None);
        assert_eq!(classify(&gone), Failure::Gone);
        let expired = Error::api(500, Some(Status::failure(500, "Expired", "x")), None);
        assert_eq!(classify(&expired), Failure::Gone);
        let mut too_large = Status::failure(
            504,
            "Timeout",
            "Too large resource version: 100, current: 5",
        );
        too_large.details = None;
        assert_eq!(
            classify(&Error::api(504, Some(too_large), None)),
            Failure::TooLarge
        );
        assert_eq!(classify(&Error::api(500, None, None)), Failure::Other);
        assert_eq!(classify(&Error::api(429, None, None)), Failure::Throttled);
        assert_eq!(
            classify(&Error::Connect("refused".into())),
            Failure::Connection
        );
        assert_eq!(classify(&Error::Io("cut".into())), Failure::Connection);
        assert_eq!(
            classify(&Error::Timeout("idle".into())),
            Failure::Connection
        );
    }
}
