//! The recorder: a non-blocking `record`, and a timer task that writes Events, paced.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crossbeam_channel::{bounded, Receiver, Sender, TrySendError};
use log::{debug, warn};
use parking_lot::Mutex;

use super::{Deduper, EventReason, DEDUP_WINDOW};
use crate::api::{time, APIService, Event, ObjectMeta, ObjectReference, Resource};
use crate::client::{Api, Client};
use crate::runtime::timers::{Task, TimerHandle, Timers};
use crate::text;
use crate::token_bucket::TokenBucket;

/// `reportingController` of every Event.
pub const REPORTING_CONTROLLER: &str = "autoregister";

/// Where Events about APIServices go: they are cluster-scoped, and client-go's recorder puts
/// such Events in `default` (`metav1.NamespaceDefault`), where `kubectl describe` looks.
pub const EVENT_NAMESPACE: &str = "default";

/// Events waiting to be written; past this, new ones are dropped (best-effort).
pub const QUEUE_CAPACITY: usize = 256;

/// Event writes per second after a burst of [`EVENTS_BURST`]: registering a thousand
/// APIServices must not send a thousand Events at once (client-go's spam filter has a
/// burst of 25 too).
pub const EVENTS_QPS: f32 = 5.0;
/// See [`EVENTS_QPS`].
pub const EVENTS_BURST: u32 = 25;

/// An Event that cannot be written within this long is dropped: it must not hold up shutdown.
pub const EVENT_WRITE_TIMEOUT: Duration = Duration::from_secs(2);

/// The API server refuses an Event `note` longer than 1 kB.
pub const MAX_NOTE_BYTES: usize = 1024;

/// Records Events; a cheap `Clone + Send + Sync` handle. A disabled recorder does nothing.
#[derive(Clone)]
pub struct EventRecorder {
    shared: Option<Arc<Shared>>,
}

struct Shared {
    instance: String,
    api: Api<Event>,
    tx: Sender<(EventReason, Event)>,
    rx: Receiver<(EventReason, Event)>,
    dedup: Mutex<Deduper>,
    /// Nothing is written once set.
    stopped: AtomicBool,
    started: Mutex<bool>,
    /// The writer task, once started; cancelled on stop.
    task: Mutex<Option<TimerHandle>>,
    /// The writer's own timers, when it was started without shared ones.
    own_timers: Mutex<Option<Arc<Timers>>>,
    /// The writer's pacing and the Event that waits for its token.
    writer: Mutex<Writer>,
    /// Events queued or being written, for [`EventRecorder::flush`].
    pending: AtomicUsize,
}

/// The writer's state between two runs of its task.
struct Writer {
    bucket: TokenBucket,
    /// An Event taken from the queue whose token is due at this instant.
    waiting: Option<(Instant, EventReason, Event)>,
    /// Whether a failure was warned about (the rest go to debug).
    warned: bool,
}

impl EventRecorder {
    /// A recorder that records nothing (`--events=false`).
    pub fn disabled() -> EventRecorder {
        EventRecorder { shared: None }
    }

    /// A recorder writing through `client` as `instance` (the leader-election identity),
    /// its writes carrying `field_manager`; nothing is written until [`start`](Self::start).
    pub fn new(client: Client, instance: impl Into<String>, field_manager: &str) -> EventRecorder {
        let (tx, rx) = bounded(QUEUE_CAPACITY);
        let api = Api::namespaced(client, EVENT_NAMESPACE)
            .with_timeout(EVENT_WRITE_TIMEOUT)
            .with_field_manager(field_manager.to_string());
        EventRecorder {
            shared: Some(Arc::new(Shared {
                instance: instance.into(),
                api,
                tx,
                rx,
                dedup: Mutex::new(Deduper::new(DEDUP_WINDOW)),
                stopped: AtomicBool::new(false),
                started: Mutex::new(false),
                task: Mutex::new(None),
                own_timers: Mutex::new(None),
                writer: Mutex::new(Writer {
                    bucket: TokenBucket::new(f64::from(EVENTS_QPS), EVENTS_BURST, Instant::now()),
                    waiting: None,
                    warned: false,
                }),
                pending: AtomicUsize::new(0),
            })),
        }
    }

    /// Whether Events are recorded at all.
    pub fn is_enabled(&self) -> bool {
        self.shared.is_some()
    }

    /// Records an Event about APIService `name` (with `uid` when known). Never blocks: a
    /// repeat within the dedup window, or an Event past a full queue, is dropped.
    pub fn record(&self, name: &str, uid: Option<&str>, reason: EventReason, note: &str) {
        if let Some(shared) = self.room(name, reason) {
            Self::enqueue(shared, name, uid, reason, note);
        }
    }

    /// [`record`](Self::record), with the note made only for an Event that can be queued:
    /// a thousand registrations at once record a thousand Events, most of them past the
    /// queue's capacity.
    pub fn record_with(
        &self,
        name: &str,
        uid: Option<&str>,
        reason: EventReason,
        note: impl FnOnce() -> String,
    ) {
        if let Some(shared) = self.room(name, reason) {
            Self::enqueue(shared, name, uid, reason, &note());
        }
    }

    /// The recorder's state when Events are on and the queue has room for this one.
    fn room(&self, name: &str, reason: EventReason) -> Option<&Shared> {
        let shared = self.shared.as_deref()?;
        if shared.tx.is_full() {
            debug!("event {reason} for {name}: queue full, dropped");
            return None;
        }
        Some(shared)
    }

    /// Deduplicates the Event and queues it for the writer.
    fn enqueue(shared: &Shared, name: &str, uid: Option<&str>, reason: EventReason, note: &str) {
        let note = truncate(note, MAX_NOTE_BYTES);
        if !shared
            .dedup
            .lock()
            .admit(name, reason, note, Instant::now())
        {
            debug!("event {reason} for {name}: repeat within the dedup window, dropped");
            return;
        }
        let event = make_event(&shared.instance, name, uid, reason, note, SystemTime::now());
        // Counted before it is queued, so the writer never sees it uncounted.
        shared.pending.fetch_add(1, Ordering::SeqCst);
        match shared.tx.try_send((reason, event)) {
            // A writer waiting for its next token takes this one in turn: waking it for
            // every Event of a thousand creates would only put it back to sleep.
            Ok(()) => {
                if let Some(t) = &*shared.task.lock() {
                    t.wake_if_idle();
                }
            }
            Err(e) => {
                shared.pending.fetch_sub(1, Ordering::SeqCst);
                if matches!(e, TrySendError::Full(_)) {
                    debug!("event {reason} for {name}: queue full, dropped");
                }
            }
        }
    }

    /// Starts the writer on a thread of its own (`autoregister-events`). Idempotent; does
    /// nothing after [`shutdown`](Self::shutdown).
    pub fn start(&self) {
        let Some(shared) = &self.shared else {
            return;
        };
        let timers = Timers::new("autoregister-events");
        if self.start_on(&timers) {
            *shared.own_timers.lock() = Some(timers);
        }
    }

    /// Starts the writer as a task of `timers` (shared with other components); answers
    /// whether it started now. Idempotent; does nothing after [`shutdown`](Self::shutdown).
    pub fn start_on(&self, timers: &Timers) -> bool {
        let Some(shared) = &self.shared else {
            return false;
        };
        let mut started = shared.started.lock();
        if *started {
            return false;
        }
        *started = true;
        // At once: Events recorded before the start are waiting.
        let task = timers.add(shared.clone(), Some(timers.clock().now()));
        *shared.task.lock() = Some(task);
        true
    }

    /// Waits up to `timeout` until every queued Event has been written (or has failed), so
    /// that a `--once` run that converged leaves its Events behind; false when some are left.
    /// Returns at once when the Event rate would hold the last one past `timeout`: waiting
    /// would end the same way, later (a run that registered hundreds of APIServices).
    pub fn flush(&self, timeout: Duration) -> bool {
        let Some(shared) = &self.shared else {
            return true;
        };
        if shared.task.lock().is_none() {
            return shared.pending.load(Ordering::SeqCst) == 0;
        }
        let deadline = Instant::now() + timeout;
        while shared.pending.load(Ordering::SeqCst) > 0 {
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            if shared.last_due(now).is_some_and(|due| due > deadline) {
                debug!(
                    "not waiting for the queued Events: the Event rate ({EVENTS_QPS}/s after a \
                     burst of {EVENTS_BURST}) holds them past the exit"
                );
                return false;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    /// Tells the writer to stop without waiting: queued Events are dropped, nothing more is
    /// sent (one being written finishes or times out). Idempotent.
    pub fn stop(&self) {
        let Some(shared) = &self.shared else {
            return;
        };
        *shared.started.lock() = true;
        // Not cancelled here: a stop must not wait for an Event being written.
        shared.stopped.store(true, Ordering::SeqCst);
    }

    /// [`stop`](Self::stop)s and waits for the writer; an Event being written ends within
    /// [`EVENT_WRITE_TIMEOUT`]. Idempotent.
    pub fn shutdown(&self) {
        self.stop();
        let Some(shared) = &self.shared else {
            return;
        };
        // Cancelling waits for an Event being written.
        let task = shared.task.lock().take();
        if let Some(t) = task {
            t.cancel();
            // The writer has ended: what is still counted was never sent.
            let left = shared.pending.swap(0, Ordering::SeqCst);
            if left > 0 {
                debug!("{} not written: stopped first", text::count(left, "Event"));
            }
        }
        if let Some(t) = shared.own_timers.lock().take() {
            t.shutdown();
        }
    }
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("enabled", &self.is_enabled())
            .finish()
    }
}

impl Shared {
    /// When the last queued Event's token is due, at the writer's pace; None while an Event
    /// is being written (the writer holds its state).
    fn last_due(&self, now: Instant) -> Option<Instant> {
        let w = self.writer.try_lock()?;
        let queued = u32::try_from(self.rx.len()).unwrap_or(u32::MAX);
        let last = now + w.bucket.time_for(queued, now);
        Some(w.waiting.as_ref().map_or(last, |(at, ..)| last.max(*at)))
    }
}

impl Task for Shared {
    /// Writes the next Event once its token is due; runs again for the next one, or waits
    /// for `record` when none is queued.
    fn fire(&self, now: Instant) -> Option<Instant> {
        let mut w = self.writer.lock();
        if self.stopped.load(Ordering::SeqCst) {
            return None;
        }
        let (reason, event) = match w.waiting.take() {
            Some((at, reason, event)) if at <= now => (reason, event),
            Some((at, reason, event)) => {
                w.waiting = Some((at, reason, event));
                return Some(at);
            }
            None => {
                let (reason, event) = self.rx.try_recv().ok()?;
                // Paced: a token is reserved now and used when due.
                let wait = w.bucket.reserve(now);
                if !wait.is_zero() {
                    let at = now + wait;
                    w.waiting = Some((at, reason, event));
                    return Some(at);
                }
                (reason, event)
            }
        };
        let what = format!("{} for {}", event.reason, event.regarding.name);
        let written = self.api.create_unread(&event);
        if written.is_err() {
            // Never written, so a later identical Event is no repeat.
            self.dedup
                .lock()
                .forget(&event.regarding.name, reason, &event.note);
        }
        self.pending.fetch_sub(1, Ordering::SeqCst);
        match written {
            Ok(()) => debug!("event {what} recorded"),
            // Stopping or no longer leading: not a failure worth a warning.
            Err(e) if e.is_cancelled() => debug!("event {what} not written: {e}"),
            // One warning says what is wrong (RBAC, usually); the rest would be noise.
            Err(e) if !w.warned => {
                w.warned = true;
                warn!(
                    "cannot record Event {what}: {e} (Events are best-effort; \
                     the ServiceAccount needs create on events.k8s.io events in {EVENT_NAMESPACE}; \
                     further failures are logged at debug)"
                );
            }
            Err(e) => debug!("cannot record Event {what}: {e}"),
        }
        // The next one, if any, at once (its token decides when it is written).
        (!self.rx.is_empty()).then_some(now)
    }
}

/// The Event client-go's `events.EventRecorder` would write for this APIService.
fn make_event(
    instance: &str,
    name: &str,
    uid: Option<&str>,
    reason: EventReason,
    note: &str,
    now: SystemTime,
) -> Event {
    let nanos = now
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let mut metadata = ObjectMeta::named(format!("{name}.{nanos:x}"));
    metadata.namespace = Some(EVENT_NAMESPACE.into());
    Event {
        api_version: Event::api_version(),
        kind: Event::KIND.to_string(),
        metadata,
        event_time: time::format_rfc3339_micro(now),
        reporting_controller: REPORTING_CONTROLLER.to_string(),
        reporting_instance: instance.to_string(),
        action: reason.action().to_string(),
        reason: reason.as_str().to_string(),
        regarding: ObjectReference {
            api_version: APIService::api_version(),
            kind: APIService::KIND.to_string(),
            name: name.to_string(),
            uid: uid.unwrap_or_default().to_string(),
            ..Default::default()
        },
        note: note.to_string(),
        type_: reason.event_type().to_string(),
        extra: Default::default(),
    }
}

/// At most `max` bytes of `s`, cut at a character boundary.
fn truncate(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut cut = max;
    while !s.is_char_boundary(cut) {
        cut -= 1;
    }
    &s[..cut]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_names_the_apiservice_in_default_as_client_go_does() {
        let t = UNIX_EPOCH + Duration::new(1_700_000_000, 5);
        let e = make_event(
            "host_1",
            "v1.foo",
            Some("u-1"),
            EventReason::NotOwned,
            "x",
            t,
        );
        assert_eq!(e.metadata.namespace.as_deref(), Some("default"));
        assert_eq!(
            e.metadata.name.as_deref(),
            Some(format!("v1.foo.{:x}", 1_700_000_000_000_000_005u128).as_str())
        );
        assert_eq!(
            (e.type_.as_str(), e.action.as_str(), e.reason.as_str()),
            ("Warning", "Skip", "NotOwned")
        );
        assert_eq!(e.regarding.api_version, "apiregistration.k8s.io/v1");
        assert_eq!(e.regarding.uid, "u-1");
        assert_eq!(e.event_time.len(), "2023-11-14T22:13:20.000000Z".len());
    }

    #[test]
    fn notes_are_cut_to_1kb_on_a_character_boundary() {
        let long = "é".repeat(600);
        let cut = truncate(&long, MAX_NOTE_BYTES);
        assert!(cut.len() <= MAX_NOTE_BYTES && cut.len() >= MAX_NOTE_BYTES - 1);
        assert_eq!(truncate("short", MAX_NOTE_BYTES), "short");
    }

    #[test]
    fn a_disabled_recorder_does_nothing() {
        let r = EventRecorder::disabled();
        r.record("v1.foo", None, EventReason::Registered, "");
        r.start();
        r.shutdown();
        assert!(!r.is_enabled());
    }
}
