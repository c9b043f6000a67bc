//! The reflector against a scripted in-memory lister/watcher, and once over real HTTP.

use std::collections::VecDeque;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender};
use parking_lot::Mutex;

use autoregister::api::{
    APIService, ListMeta, ObjectList, ObjectMeta, Status, StatusCause, StatusDetails, WatchEvent,
};
use autoregister::client::{Api, Canceller, Client, Config, Error, ListParams, WatchParams};
use autoregister::runtime::backoff::BackoffConfig;
use autoregister::runtime::reflector::{
    EventHandler, ListerWatcher, Reflector, ReflectorHandle, ReflectorOptions, WatchEvents,
};
use autoregister::runtime::store::Store;

// ---------------------------------------------------------------- fixtures

fn svc(name: &str, rv: &str) -> APIService {
    let mut metadata = ObjectMeta::named(name);
    metadata.resource_version = Some(rv.into());
    APIService {
        metadata,
        ..Default::default()
    }
}

fn page(items: &[(&str, &str)], rv: &str, cont: Option<&str>) -> ObjectList<APIService> {
    ObjectList {
        api_version: "apiregistration.k8s.io/v1".into(),
        kind: "APIServiceList".into(),
        metadata: ListMeta {
            resource_version: Some(rv.into()),
            continue_: cont.map(str::to_string),
            remaining_item_count: None,
        },
        items: items.iter().map(|(n, v)| svc(n, v)).collect(),
    }
}

fn gone_status() -> Status {
    Status::failure(410, "Expired", "too old resource version: 10 (42)")
}

fn too_large_error() -> Error {
    let mut s = Status::failure(
        504,
        "Timeout",
        "Too large resource version: 100, current: 5",
    );
    s.details = Some(StatusDetails {
        causes: vec![StatusCause {
            reason: Some("ResourceVersionTooLarge".into()),
            message: Some("Too large resource version".into()),
            field: None,
        }],
        // The real server also says retryAfterSeconds: 1; left out to keep the test fast.
        ..Default::default()
    });
    Error::api(504, Some(s), None)
}

/// Backoff short enough for tests, no jitter so waits can be checked.
fn fast_backoff(initial_ms: u64) -> BackoffConfig {
    BackoffConfig {
        initial: Duration::from_millis(initial_ms),
        factor: 2.0,
        max: Duration::from_millis(initial_ms * 4),
        reset_after: Duration::from_secs(120),
        jitter: 0.0,
    }
}

fn opts(backoff: BackoffConfig) -> ReflectorOptions {
    ReflectorOptions {
        backoff,
        ..Default::default()
    }
}

/// Polls `cond` until it holds or 5 s pass.
fn wait_for(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(5);
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

// ---------------------------------------------------------------- recording handler

#[derive(Default)]
struct Recorder(Mutex<Vec<String>>);

fn at(o: &APIService) -> String {
    format!(
        "{}@{}",
        o.metadata.name.as_deref().unwrap_or(""),
        o.metadata.resource_version.as_deref().unwrap_or("")
    )
}

impl Recorder {
    fn events(&self) -> Vec<String> {
        self.0.lock().clone()
    }
    fn len(&self) -> usize {
        self.0.lock().len()
    }
}

impl EventHandler<APIService> for Recorder {
    fn on_add(&self, obj: &Arc<APIService>) {
        self.0.lock().push(format!("add {}", at(obj)));
    }
    fn on_update(&self, old: &Arc<APIService>, new: &Arc<APIService>) {
        let rv = new.metadata.resource_version.as_deref().unwrap_or("");
        self.0.lock().push(format!("update {}->{rv}", at(old)));
    }
    fn on_delete(&self, obj: &Arc<APIService>) {
        self.0.lock().push(format!("delete {}", at(obj)));
    }
}

// ---------------------------------------------------------------- scripted lister/watcher

type Ev = Result<WatchEvent<APIService>, Error>;

enum WatchScript {
    /// The watch request fails.
    Fail(Error),
    /// The stream yields what the test sends and ends when the sender is dropped.
    Stream(Receiver<Ev>),
}

#[derive(Clone, Debug)]
enum Call {
    List(ListParams, Instant),
    Watch(WatchParams, Instant),
}

#[derive(Default)]
struct Fake {
    lists: Mutex<VecDeque<Result<ObjectList<APIService>, Error>>>,
    watches: Mutex<VecDeque<WatchScript>>,
    calls: Mutex<Vec<Call>>,
    /// Cancellers handed to watches, to check stop cancelled them.
    cancellers: Mutex<Vec<Canceller>>,
}

impl Fake {
    fn new() -> Arc<Self> {
        Arc::new(Fake::default())
    }
    fn list_ok(&self, p: ObjectList<APIService>) {
        self.lists.lock().push_back(Ok(p));
    }
    fn list_err(&self, e: Error) {
        self.lists.lock().push_back(Err(e));
    }
    fn watch_err(&self, e: Error) {
        self.watches.lock().push_back(WatchScript::Fail(e));
    }
    /// A watch whose events the test feeds through the returned sender.
    fn watch_stream(&self) -> Sender<Ev> {
        let (tx, rx) = crossbeam_channel::unbounded();
        self.watches.lock().push_back(WatchScript::Stream(rx));
        tx
    }
    /// A watch that yields `events` and then closes.
    fn watch_events(&self, events: Vec<Ev>) {
        let tx = self.watch_stream();
        for e in events {
            tx.send(e).unwrap();
        }
    }
    fn list_calls(&self) -> Vec<(ListParams, Instant)> {
        let calls = self.calls.lock();
        calls
            .iter()
            .filter_map(|c| match c {
                Call::List(p, t) => Some((p.clone(), *t)),
                Call::Watch(..) => None,
            })
            .collect()
    }
    fn watch_calls(&self) -> Vec<(WatchParams, Instant)> {
        let calls = self.calls.lock();
        calls
            .iter()
            .filter_map(|c| match c {
                Call::Watch(p, t) => Some((p.clone(), *t)),
                Call::List(..) => None,
            })
            .collect()
    }
    fn watch_rvs(&self) -> Vec<String> {
        self.watch_calls()
            .into_iter()
            .map(|(p, _)| p.resource_version)
            .collect()
    }
}

struct FakeLw(Arc<Fake>);

impl ListerWatcher<APIService> for FakeLw {
    fn list(&self, p: &ListParams, _: &Canceller) -> Result<ObjectList<APIService>, Error> {
        self.0
            .calls
            .lock()
            .push(Call::List(p.clone(), Instant::now()));
        self.0
            .lists
            .lock()
            .pop_front()
            .unwrap_or_else(|| Err(Error::Connect("no scripted list".into())))
    }

    fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchEvents<APIService>, Error> {
        self.0
            .calls
            .lock()
            .push(Call::Watch(p.clone(), Instant::now()));
        self.0.cancellers.lock().push(cancel.clone());
        let script = self.0.watches.lock().pop_front();
        let (rx, ends) = match script {
            Some(WatchScript::Fail(e)) => return Err(e),
            Some(WatchScript::Stream(rx)) => (rx, None),
            // Unscripted: an idle watch that ends, as a server's does, after timeoutSeconds.
            None => (
                crossbeam_channel::never(),
                Some(Instant::now() + Duration::from_secs(u64::from(p.timeout_seconds))),
            ),
        };
        Ok(Box::new(FakeStream {
            rx,
            ends,
            cancel: cancel.clone(),
            done: false,
        }))
    }
}

/// Stands in for a socket read: blocks for the next event, ends on cancel.
struct FakeStream {
    rx: Receiver<Ev>,
    /// When the server would close this watch.
    ends: Option<Instant>,
    cancel: Canceller,
    done: bool,
}

impl Iterator for FakeStream {
    type Item = Ev;
    fn next(&mut self) -> Option<Ev> {
        if self.done {
            return None;
        }
        loop {
            // Canceller has no wakeup of its own (the real one shuts the socket): check often.
            if self.cancel.is_cancelled() {
                self.done = true;
                return Some(Err(Error::Cancelled));
            }
            if self.ends.is_some_and(|t| Instant::now() >= t) {
                self.done = true;
                return None;
            }
            match self.rx.recv_timeout(Duration::from_millis(2)) {
                Ok(ev) => return Some(ev),
                Err(RecvTimeoutError::Timeout) => continue,
                Err(RecvTimeoutError::Disconnected) => {
                    self.done = true;
                    return None;
                }
            }
        }
    }
}

struct Running {
    fake: Arc<Fake>,
    store: Arc<Store<APIService>>,
    rec: Arc<Recorder>,
    handle: ReflectorHandle,
}

fn start(fake: &Arc<Fake>, opts: ReflectorOptions) -> Running {
    let store = Arc::new(Store::new());
    let rec = Arc::new(Recorder::default());
    let handle = Reflector::spawn(FakeLw(fake.clone()), store.clone(), rec.clone(), opts);
    Running {
        fake: fake.clone(),
        store,
        rec,
        handle,
    }
}

impl Running {
    fn keys(&self) -> Vec<String> {
        let mut k = self.store.keys();
        k.sort();
        k
    }
    fn rv_of(&self, key: &str) -> String {
        self.store
            .get(key)
            .and_then(|o| o.metadata.resource_version.as_deref().map(str::to_string))
            .unwrap_or_default()
    }
    fn wait_watches(&self, n: usize) {
        wait_for(&format!("{n} watch calls"), || {
            self.fake.watch_calls().len() >= n
        });
    }
    fn wait_events(&self, n: usize) {
        wait_for(&format!("{n} events"), || self.rec.len() >= n);
    }
}

// ---------------------------------------------------------------- list

#[test]
fn initial_list_is_paginated_then_all_adds_then_synced() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1"), ("b", "2")], "10", Some("c1")));
    fake.list_ok(page(&[("c", "3"), ("d", "4")], "10", Some("c2")));
    fake.list_ok(page(&[("e", "5")], "10", None));
    let r = start(
        &fake,
        ReflectorOptions {
            page_size: 2,
            label_selector: Some("team=api".into()),
            ..Default::default()
        },
    );
    assert!(r.store.wait_for_sync(Duration::from_secs(5)));
    // Synced is set after the adds were delivered: all five are already recorded.
    assert_eq!(
        r.rec.events(),
        ["add a@1", "add b@2", "add c@3", "add d@4", "add e@5"]
    );
    assert_eq!(r.keys(), ["a", "b", "c", "d", "e"]);

    let lists = fake.list_calls();
    let tokens: Vec<_> = lists
        .iter()
        .map(|(p, _)| p.continue_token.clone())
        .collect();
    assert_eq!(tokens, [None, Some("c1".into()), Some("c2".into())]);
    for (p, _) in &lists {
        assert_eq!(p.limit, Some(2));
        assert_eq!(
            p.resource_version, None,
            "a consistent list, not from a cache"
        );
        assert_eq!(p.label_selector.as_deref(), Some("team=api"));
    }

    r.wait_watches(1);
    let (w, _) = fake.watch_calls()[0].clone();
    assert_eq!(w.resource_version, "10");
    assert!(w.allow_bookmarks);
    assert!(
        (300..=600).contains(&w.timeout_seconds),
        "{}",
        w.timeout_seconds
    );
    assert_eq!(w.label_selector.as_deref(), Some("team=api"));
}

#[test]
fn default_page_size_is_500() {
    let fake = Fake::new();
    fake.list_ok(page(&[], "1", None));
    let r = start(&fake, ReflectorOptions::default());
    assert!(r.store.wait_for_sync(Duration::from_secs(5)));
    assert_eq!(fake.list_calls()[0].0.limit, Some(500));
    assert!(r.store.is_empty());
}

#[test]
fn expired_continue_token_falls_back_to_one_full_list() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", Some("c1")));
    fake.list_err(Error::api(410, Some(gone_status()), None));
    fake.list_ok(page(&[("a", "1"), ("b", "2")], "12", None));
    let r = start(
        &fake,
        ReflectorOptions {
            page_size: 1,
            ..opts(fast_backoff(1))
        },
    );
    assert!(r.store.wait_for_sync(Duration::from_secs(5)));
    let lists = fake.list_calls();
    assert_eq!(lists.len(), 3);
    assert_eq!(lists[2].0.limit, None);
    assert_eq!(lists[2].0.continue_token, None);
    assert_eq!(r.rec.events(), ["add a@1", "add b@2"]);
    r.wait_watches(1);
    assert_eq!(fake.watch_rvs(), ["12"]);
}

#[test]
fn not_synced_while_the_first_list_fails() {
    let fake = Fake::new();
    fake.list_err(Error::Connect("refused".into()));
    let r = start(&fake, opts(fast_backoff(60_000)));
    wait_for("a list call", || !fake.list_calls().is_empty());
    assert!(!r.store.has_synced());
    assert!(!r.store.wait_for_sync(Duration::from_millis(50)));
}

// ---------------------------------------------------------------- watch

#[test]
fn watch_events_are_applied_in_order() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    let tx = fake.watch_stream();
    let r = start(&fake, opts(fast_backoff(1)));
    assert!(r.store.wait_for_sync(Duration::from_secs(5)));
    tx.send(Ok(WatchEvent::Added(svc("b", "11")))).unwrap();
    tx.send(Ok(WatchEvent::Modified(svc("a", "12")))).unwrap();
    tx.send(Ok(WatchEvent::Deleted(svc("b", "13")))).unwrap();
    tx.send(Ok(WatchEvent::Modified(svc("a", "14")))).unwrap();
    tx.send(Ok(WatchEvent::Added(svc("c", "15")))).unwrap();
    r.wait_events(6);
    assert_eq!(
        r.rec.events(),
        [
            "add a@1",
            "add b@11",
            "update a@1->12",
            "delete b@13",
            "update a@12->14",
            "add c@15"
        ]
    );
    assert_eq!(r.keys(), ["a", "c"]);
    assert_eq!(r.rv_of("a"), "14");
}

#[test]
fn closed_watch_resumes_from_last_resource_version_without_relist() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    fake.watch_events(vec![
        Ok(WatchEvent::Modified(svc("a", "11"))),
        Ok(WatchEvent::Added(svc("b", "12"))),
    ]);
    let r = start(&fake, opts(fast_backoff(60_000)));
    r.wait_watches(2);
    assert_eq!(fake.watch_rvs(), ["10", "12"]);
    assert_eq!(fake.list_calls().len(), 1, "no relist");
    assert_eq!(r.rec.events(), ["add a@1", "update a@1->11", "add b@12"]);
}

#[test]
fn bookmark_advances_the_resource_version_of_the_next_watch() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    fake.watch_events(vec![Ok(WatchEvent::Bookmark("50".into()))]);
    let r = start(&fake, opts(fast_backoff(60_000)));
    r.wait_watches(2);
    assert_eq!(fake.watch_rvs(), ["10", "50"]);
    assert_eq!(fake.list_calls().len(), 1);
    assert_eq!(r.rec.events(), ["add a@1"], "a bookmark is not an event");
}

#[test]
fn watch_closed_at_once_without_events_backs_off() {
    let fake = Fake::new();
    fake.list_ok(page(&[], "10", None));
    fake.watch_events(vec![]);
    fake.watch_events(vec![]);
    let r = start(&fake, opts(fast_backoff(100)));
    r.wait_watches(3);
    let w = fake.watch_calls();
    assert!(
        w[1].1 - w[0].1 >= Duration::from_millis(100),
        "{:?}",
        w[1].1 - w[0].1
    );
    assert!(
        w[2].1 - w[1].1 >= Duration::from_millis(200),
        "{:?}",
        w[2].1 - w[1].1
    );
    assert_eq!(fake.watch_rvs(), ["10", "10", "10"]);
    assert_eq!(fake.list_calls().len(), 1);
}

#[test]
fn a_429_backs_off_and_resumes_from_the_last_resource_version() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    fake.watch_events(vec![Ok(WatchEvent::Modified(svc("a", "11")))]);
    fake.watch_err(Error::api(429, None, None));
    fake.watch_events(vec![
        Ok(WatchEvent::Added(svc("b", "12"))),
        Ok(WatchEvent::Error(Box::new(Status::failure(
            429,
            "TooManyRequests",
            "storage is (re)initializing",
        )))),
    ]);
    let r = start(&fake, opts(fast_backoff(20)));
    r.wait_watches(4);
    assert_eq!(fake.watch_rvs(), ["10", "11", "11", "12"]);
    assert_eq!(
        fake.list_calls().len(),
        1,
        "a throttling server keeps its history: no reason to relist"
    );
    let w = fake.watch_calls();
    for i in 2..4 {
        assert!(
            w[i].1 - w[i - 1].1 >= Duration::from_millis(20),
            "attempt {i} waited"
        );
    }
    assert_eq!(r.rec.events(), ["add a@1", "update a@1->11", "add b@12"]);
}

/// Chaos seed 536: a server restarted empty answered the watch with a 504 while it came
/// back; resuming from the old resourceVersion never showed the cache was stale.
#[test]
fn server_errors_back_off_then_relist_instead_of_resuming() {
    for failure in [
        Err(Error::api(504, None, None)),
        Err(Error::api(503, None, None)),
        Ok(vec![Ok(WatchEvent::Error(Box::new(Status::failure(
            500,
            "InternalError",
            "etcd hiccup",
        ))))]),
        Ok(vec![Err(Error::Decode("garbled event".into()))]),
    ] {
        let fake = Fake::new();
        fake.list_ok(page(&[("a", "1"), ("b", "2")], "10", None));
        match failure {
            Err(e) => fake.watch_err(e),
            Ok(events) => fake.watch_events(events),
        }
        // The server that answers next lost b: only a list shows it.
        fake.list_ok(page(&[("a", "1")], "12", None));
        let r = start(&fake, opts(fast_backoff(20)));
        r.wait_watches(2);
        let lists = fake.list_calls();
        assert_eq!(lists.len(), 2, "the failed watch is followed by a list");
        assert_eq!(fake.watch_rvs(), ["10", "12"], "never resumes from 10");
        let w = fake.watch_calls();
        assert!(
            lists[1].1 - w[0].1 >= Duration::from_millis(20),
            "a failure waits the backoff"
        );
        assert_eq!(r.rec.events(), ["add a@1", "add b@2", "delete b@2"]);
        assert_eq!(r.keys(), ["a"]);
    }
}

#[test]
fn a_broken_connection_backs_off_then_relists_instead_of_resuming() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    fake.watch_events(vec![
        Ok(WatchEvent::Added(svc("b", "11"))),
        Err(Error::Io("connection reset".into())),
    ]);
    // The server that answers next lost b (restarted empty, restored): only a list shows it.
    fake.list_ok(page(&[("a", "1")], "12", None));
    let r = start(&fake, opts(fast_backoff(20)));
    r.wait_watches(2);
    let lists = fake.list_calls();
    assert_eq!(lists.len(), 2, "the broken watch is followed by a list");
    assert_eq!(fake.watch_rvs(), ["10", "12"], "never resumes from 11");
    let w = fake.watch_calls();
    assert!(
        lists[1].1 - w[0].1 >= Duration::from_millis(20),
        "a connection failure waits the backoff"
    );
    assert_eq!(r.rec.events(), ["add a@1", "add b@11", "delete b@11"]);
    assert_eq!(r.keys(), ["a"]);
}

#[test]
fn a_failed_watch_connect_relists_too() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1"), ("b", "2")], "10", None));
    fake.watch_err(Error::Connect("connection refused".into()));
    fake.list_ok(page(&[("a", "1")], "12", None));
    let r = start(&fake, opts(fast_backoff(1)));
    r.wait_watches(2);
    assert_eq!(fake.watch_rvs(), ["10", "12"]);
    assert_eq!(r.rec.events(), ["add a@1", "add b@2", "delete b@2"]);
}

#[test]
fn a_watch_going_backwards_relists_and_distrusts_cached_versions() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "10")], "10", None));
    fake.watch_events(vec![
        Ok(WatchEvent::Added(svc("b", "11"))),
        // A restored server counting again from an older revision, under the same watch.
        Ok(WatchEvent::Added(svc("c", "5"))),
    ]);
    fake.list_ok(page(&[("a", "10"), ("c", "5")], "6", None));
    let r = start(&fake, opts(fast_backoff(1000)));
    r.wait_watches(2);
    assert_eq!(fake.list_calls().len(), 2);
    let w = fake.watch_calls();
    assert!(
        w[1].1 - w[0].1 < Duration::from_millis(900),
        "relists at once, not after the 1 s backoff"
    );
    assert_eq!(
        r.rec.events(),
        [
            "add a@10",
            "add b@11",
            "delete b@11",
            // Versions are reused after a restore: an equal one is no proof of equal content.
            "update a@10->10",
            "add c@5"
        ]
    );
    assert_eq!(fake.watch_rvs(), ["10", "6"]);
}

#[test]
fn periodic_relist_catches_a_change_no_watch_showed() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    fake.list_ok(page(&[("a", "1"), ("b", "11")], "11", None));
    let r = start(
        &fake,
        ReflectorOptions {
            relist: Some(Duration::from_millis(300)),
            ..opts(fast_backoff(1000))
        },
    );
    r.wait_events(2);
    assert_eq!(r.rec.events(), ["add a@1", "add b@11"]);
    let lists = fake.list_calls();
    assert!(lists[1].1 - lists[0].1 >= Duration::from_millis(300));
    // The watch was asked to end when the relist is due (whole seconds, at least 1).
    assert_eq!(fake.watch_calls()[0].0.timeout_seconds, 1);
}

#[test]
fn default_relist_is_ten_minutes_and_idle_timeout_two() {
    let o = ReflectorOptions::default();
    assert_eq!(o.relist, Some(Duration::from_secs(600)));
    assert_eq!(o.watch_idle_timeout, Some(Duration::from_secs(120)));
}

// ---------------------------------------------------------------- relist

#[test]
fn gone_after_a_long_error_streak_relists_at_once() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    // Five refusals (429s resume the watch): the backoff has grown to 10 ms × 4⁵ ≈ 10 s.
    for _ in 0..5 {
        fake.watch_err(Error::api(429, None, None));
    }
    fake.watch_err(Error::api(410, Some(gone_status()), None));
    fake.list_ok(page(&[("b", "2")], "20", None));
    let r = start(
        &fake,
        ReflectorOptions {
            backoff: BackoffConfig {
                initial: Duration::from_millis(10),
                factor: 4.0,
                max: Duration::from_secs(30),
                reset_after: Duration::from_secs(120),
                jitter: 0.0,
            },
            ..Default::default()
        },
    );
    r.wait_watches(7);
    let w = fake.watch_calls();
    let lists = fake.list_calls();
    assert_eq!(lists.len(), 2);
    assert!(
        lists[1].1 - w[5].1 < Duration::from_secs(1),
        "relisted {:?} after the 410",
        lists[1].1 - w[5].1
    );
    assert_eq!(fake.watch_rvs()[6], "20");
    assert_eq!(r.rec.events(), ["add a@1", "delete a@1", "add b@2"]);
}

#[test]
fn gone_right_after_the_list_it_came_from_backs_off() {
    let fake = Fake::new();
    for _ in 0..3 {
        fake.list_ok(page(&[("a", "1")], "10", None));
        fake.watch_err(Error::api(410, Some(gone_status()), None));
    }
    let r = start(&fake, opts(fast_backoff(20)));
    r.wait_watches(3);
    let lists = fake.list_calls();
    let w = fake.watch_calls();
    for i in 1..3 {
        assert!(
            lists[i].1 - w[i - 1].1 >= Duration::from_millis(20),
            "a server expiring what it just listed is not relisted in a tight loop"
        );
    }
}

#[test]
fn gone_answer_relists_with_synthetic_deletes_updates_adds() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1"), ("b", "1"), ("c", "1")], "10", None));
    fake.watch_err(Error::api(410, Some(gone_status()), None));
    fake.list_ok(page(&[("a", "1"), ("b", "2"), ("d", "3")], "20", None));
    let r = start(&fake, opts(fast_backoff(1)));
    r.wait_watches(2);
    assert_eq!(
        r.rec.events(),
        [
            "add a@1",
            "add b@1",
            "add c@1",
            "delete c@1",
            "update b@1->2",
            "add d@3"
        ]
    );
    assert_eq!(r.keys(), ["a", "b", "d"]);
    assert_eq!(r.rv_of("b"), "2");
    assert_eq!(fake.watch_rvs(), ["10", "20"]);
    let lists = fake.list_calls();
    assert_eq!(lists.len(), 2);
    assert_eq!(
        lists[1].0.resource_version, None,
        "the relist is a consistent list"
    );
}

#[test]
fn gone_error_event_relists_without_losing_or_inventing_events() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1"), ("b", "1")], "10", None));
    fake.watch_events(vec![
        Ok(WatchEvent::Added(svc("c", "11"))),
        Ok(WatchEvent::Error(Box::new(gone_status()))),
    ]);
    // Meanwhile on the server: b deleted, c unchanged, d created.
    fake.list_ok(page(&[("a", "1"), ("c", "11"), ("d", "15")], "15", None));
    let r = start(&fake, opts(fast_backoff(1)));
    r.wait_watches(2);
    assert_eq!(
        r.rec.events(),
        ["add a@1", "add b@1", "add c@11", "delete b@1", "add d@15"]
    );
    assert_eq!(r.keys(), ["a", "c", "d"]);
    assert_eq!(fake.watch_rvs(), ["10", "15"]);
}

#[test]
fn too_large_resource_version_relists_from_scratch() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "100")], "100", None));
    fake.watch_err(too_large_error());
    // The restored server's history is older than our cache.
    fake.list_ok(page(&[("a", "3")], "5", None));
    let r = start(&fake, opts(fast_backoff(1)));
    r.wait_watches(2);
    assert_eq!(fake.list_calls().len(), 2);
    assert_eq!(
        fake.watch_rvs(),
        ["100", "5"],
        "never retries the too-large version"
    );
    assert_eq!(r.rec.events(), ["add a@100", "update a@100->3"]);
    assert_eq!(r.rv_of("a"), "3");
}

#[test]
fn too_large_as_an_error_event_also_relists() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "100")], "100", None));
    let Error::Api(api) = too_large_error() else {
        unreachable!()
    };
    fake.watch_events(vec![Ok(WatchEvent::Error(Box::new(api.status)))]);
    fake.list_ok(page(&[], "5", None));
    let r = start(&fake, opts(fast_backoff(1)));
    r.wait_watches(2);
    assert_eq!(fake.watch_rvs(), ["100", "5"]);
    assert_eq!(r.rec.events(), ["add a@100", "delete a@100"]);
}

// ---------------------------------------------------------------- backoff

#[test]
fn server_down_then_recovery_with_growing_waits() {
    let fake = Fake::new();
    for _ in 0..3 {
        fake.list_err(Error::Connect("connection refused".into()));
    }
    fake.list_ok(page(&[("a", "1")], "10", None));
    let r = start(&fake, opts(fast_backoff(20)));
    assert!(r.store.wait_for_sync(Duration::from_secs(5)));
    let t: Vec<Instant> = fake.list_calls().into_iter().map(|(_, t)| t).collect();
    assert_eq!(t.len(), 4);
    for (i, min) in [20u64, 40, 80].into_iter().enumerate() {
        let gap = t[i + 1] - t[i];
        assert!(
            gap >= Duration::from_millis(min),
            "wait {i}: {gap:?} < {min} ms"
        );
    }
    assert_eq!(r.rec.events(), ["add a@1"]);
    r.wait_watches(1);
}

#[test]
fn retry_after_is_a_minimum_wait() {
    let fake = Fake::new();
    fake.list_err(Error::api(429, None, Some(Duration::from_millis(200))));
    fake.list_ok(page(&[], "10", None));
    let r = start(&fake, opts(fast_backoff(1)));
    assert!(r.store.wait_for_sync(Duration::from_secs(5)));
    let t: Vec<Instant> = fake.list_calls().into_iter().map(|(_, t)| t).collect();
    assert!(
        t[1] - t[0] >= Duration::from_millis(200),
        "{:?}",
        t[1] - t[0]
    );
}

// ---------------------------------------------------------------- resync

#[test]
fn resync_redelivers_every_cached_object_as_an_update() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1"), ("b", "2")], "10", None));
    let r = start(
        &fake,
        ReflectorOptions {
            resync: Some(Duration::from_millis(20)),
            ..Default::default()
        },
    );
    wait_for("two resyncs", || {
        let ev = r.rec.events();
        ev.iter().filter(|e| *e == "update a@1->1").count() >= 2
            && ev.iter().filter(|e| *e == "update b@2->2").count() >= 2
    });
    let ev = r.rec.events();
    assert_eq!(
        ev[..2],
        ["add a@1", "add b@2"],
        "resync starts after the first list"
    );
}

// ---------------------------------------------------------------- shutdown

#[test]
fn stop_while_blocked_in_a_watch_is_prompt() {
    let fake = Fake::new();
    fake.list_ok(page(&[], "10", None));
    let r = start(&fake, ReflectorOptions::default());
    r.wait_watches(1);
    let t = Instant::now();
    r.handle.join();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(fake.cancellers.lock().iter().all(Canceller::is_cancelled));
}

#[test]
fn drop_while_blocked_in_a_watch_is_prompt() {
    let fake = Fake::new();
    fake.list_ok(page(&[], "10", None));
    let r = start(&fake, ReflectorOptions::default());
    r.wait_watches(1);
    let t = Instant::now();
    drop(r);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    assert!(fake.cancellers.lock()[0].is_cancelled());
}

#[test]
fn stop_while_backing_off_is_prompt() {
    let fake = Fake::new();
    fake.list_err(Error::api(503, None, None));
    let r = start(&fake, opts(fast_backoff(60_000)));
    wait_for("a list call", || !fake.list_calls().is_empty());
    let t = Instant::now();
    r.handle.stop();
    r.handle.stop();
    assert!(
        wait_finished(&r.handle, Duration::from_secs(1)),
        "still running after 1 s"
    );
    assert!(t.elapsed() < Duration::from_secs(1));
    r.handle.join();
    assert_eq!(fake.list_calls().len(), 1);
}

#[test]
fn stop_with_resync_thread_is_prompt() {
    let fake = Fake::new();
    fake.list_ok(page(&[("a", "1")], "10", None));
    let r = start(
        &fake,
        ReflectorOptions {
            resync: Some(Duration::from_secs(3600)),
            ..Default::default()
        },
    );
    r.wait_watches(1);
    let t = Instant::now();
    r.handle.join();
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
}

fn wait_finished(h: &ReflectorHandle, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while !h.is_finished() {
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    true
}

// ---------------------------------------------------------------- real HTTP

/// Reads one request head; answers its request line.
fn read_request(stream: &TcpStream) -> String {
    let mut reader = BufReader::new(stream);
    let mut first = String::new();
    reader.read_line(&mut first).unwrap();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 || line == "\r\n" {
            break;
        }
    }
    first.trim_end().to_string()
}

fn chunk(out: &mut impl Write, data: &str) {
    write!(out, "{:x}\r\n{data}\r\n", data.len()).unwrap();
    out.flush().unwrap();
}

/// A minimal API server: one list, then a chunked watch with three events that ends;
/// later watches end at once. Request lines go to `seen`.
fn serve(listener: TcpListener, seen: Arc<Mutex<Vec<String>>>) {
    let mut watches = 0;
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { return };
        let line = read_request(&stream);
        if line.is_empty() {
            return;
        }
        seen.lock().push(line.clone());
        if !line.contains("watch=true") {
            let body = serde_json::json!({
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIServiceList",
                "metadata": {"resourceVersion": "10"},
                "items": [
                    {"metadata": {"name": "v1.a.example.com", "resourceVersion": "7"},
                     "spec": {"group": "a.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10}},
                    {"metadata": {"name": "v1.b.example.com", "resourceVersion": "8"},
                     "spec": {"group": "b.example.com", "version": "v1", "groupPriorityMinimum": 100, "versionPriority": 10}}
                ]
            })
            .to_string();
            write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
            continue;
        }
        watches += 1;
        write!(
            stream,
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        if watches == 1 {
            chunk(
                &mut stream,
                r#"{"type":"ADDED","object":{"metadata":{"name":"v1.c.example.com","resourceVersion":"11"},"spec":{"group":"c.example.com","version":"v1"}}}"#,
            );
            chunk(&mut stream, "\n");
            // One event split over two chunks, as a real server may send it.
            chunk(
                &mut stream,
                r#"{"type":"DELETED","object":{"metadata":{"name":"v1.a.exa"#,
            );
            chunk(&mut stream, "mple.com\",\"resourceVersion\":\"12\"}}}\n");
            chunk(
                &mut stream,
                "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"13\"}}}\n",
            );
        }
        stream.write_all(b"0\r\n\r\n").unwrap();
        // Drain until the client closes, so it reads the whole body first.
        let _ = stream.read(&mut [0u8; 64]);
    }
}

#[test]
fn lists_and_watches_a_real_http_server_through_api() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    {
        let seen = seen.clone();
        std::thread::spawn(move || serve(listener, seen));
    }
    let client = Client::new(Config::new(format!("http://{addr}"))).unwrap();
    let api: Api<APIService> = Api::all(client);
    let store = Arc::new(Store::new());
    let rec = Arc::new(Recorder::default());
    // Long backoff: after the second (empty) watch the reflector waits, and stops from there.
    let handle = Reflector::spawn(api, store.clone(), rec.clone(), opts(fast_backoff(60_000)));
    assert!(store.wait_for_sync(Duration::from_secs(5)));
    wait_for("the second watch", || {
        seen.lock()
            .iter()
            .filter(|l| l.contains("watch=true"))
            .count()
            >= 2
    });
    assert_eq!(
        rec.events(),
        [
            "add v1.a.example.com@7",
            "add v1.b.example.com@8",
            "add v1.c.example.com@11",
            "delete v1.a.example.com@12"
        ]
    );
    let mut keys = store.keys();
    keys.sort();
    assert_eq!(keys, ["v1.b.example.com", "v1.c.example.com"]);
    assert_eq!(
        &*store.get("v1.b.example.com").unwrap().spec.group,
        "b.example.com"
    );

    let lines = seen.lock().clone();
    assert!(
        lines[0].starts_with("GET /apis/apiregistration.k8s.io/v1/apiservices?limit=500 "),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("watch=true&resourceVersion=10&allowWatchBookmarks=true&timeoutSeconds="),
        "{}",
        lines[1]
    );
    assert!(
        lines[2].contains("resourceVersion=13&"),
        "the bookmark's version: {}",
        lines[2]
    );
    assert_eq!(
        lines.iter().filter(|l| !l.contains("watch=true")).count(),
        1,
        "no relist"
    );

    let t = Instant::now();
    handle.join();
    assert!(t.elapsed() < Duration::from_secs(1));
}
