//! Fault injection: latency, failing requests, watch cuts, forced 410s, cut or padded
//! bodies, pause.

use std::time::Duration;

use parking_lot::{Condvar, Mutex};

use super::util;

/// Programmable faults; every setter takes effect for the next request.
#[derive(Default)]
pub struct Faults {
    state: Mutex<FaultState>,
    resumed: Condvar,
}

#[derive(Default, Clone)]
struct FaultState {
    latency: Duration,
    fail_next: Vec<FailNext>,
    fail_fraction: f64,
    fail_fraction_code: u16,
    retry_after: Option<u32>,
    omit_retry_after: bool,
    watches_stalled: bool,
    close_watches_after: Option<Duration>,
    expire_next_watches: usize,
    cut_next_responses: usize,
    pad_next_lists: usize,
    race_next_updates: usize,
    race_next_deletes: usize,
    pad_to_bytes: usize,
    paused: bool,
}

#[derive(Clone)]
struct FailNext {
    count: usize,
    code: u16,
    verb: Option<String>,
}

/// Seconds of `Retry-After` sent with injected 429/503 answers unless set otherwise.
pub const DEFAULT_RETRY_AFTER: u32 = 1;

impl Faults {
    /// Adds `d` before every answer (0 turns it off).
    pub fn set_latency(&self, d: Duration) {
        self.state.lock().latency = d;
    }

    /// Fails the next `count` API requests with `code` (500, 429 with Retry-After, 503, ...).
    pub fn fail_next(&self, count: usize, code: u16) {
        self.fail_next_verb(None, count, code);
    }

    /// Like [`fail_next`](Self::fail_next) but only for one verb (`get`, `list`, `watch`,
    /// `create`, `update`, `patch`, `delete`); other requests pass.
    pub fn fail_next_verb(&self, verb: Option<&str>, count: usize, code: u16) {
        self.state.lock().fail_next.push(FailNext {
            count,
            code,
            verb: verb.map(str::to_string),
        });
    }

    /// Fails this fraction (0.0..=1.0) of API requests with `code`, at random.
    pub fn fail_fraction(&self, fraction: f64, code: u16) {
        let mut s = self.state.lock();
        s.fail_fraction = fraction.clamp(0.0, 1.0);
        s.fail_fraction_code = code;
    }

    /// The `Retry-After` seconds sent with injected 429/503 answers.
    pub fn set_retry_after(&self, secs: u32) {
        let mut s = self.state.lock();
        s.retry_after = Some(secs);
        s.omit_retry_after = false;
    }

    /// Injected 429/503 answers carry no `Retry-After` (nor `retryAfterSeconds`), as
    /// some proxies send them; [`set_retry_after`](Self::set_retry_after) undoes it.
    pub fn omit_retry_after(&self) {
        self.state.lock().omit_retry_after = true;
    }

    /// While on, open watches stay connected but deliver nothing (no events, no
    /// bookmarks): a stalled stream. Events held back are delivered when it is turned off.
    pub fn stall_watches(&self, on: bool) {
        self.state.lock().watches_stalled = on;
        self.resumed.notify_all();
    }

    /// Ends every watch stream (cleanly) this long after it started; `None` turns it off.
    pub fn close_watches_after(&self, d: Option<Duration>) {
        self.state.lock().close_watches_after = d;
    }

    /// The next watch that names a resourceVersion gets an ERROR event with 410 Expired.
    pub fn expire_next_watch(&self) {
        self.state.lock().expire_next_watches += 1;
    }

    /// The next API answer stops half way through its body and the connection is dropped.
    pub fn cut_next_response(&self) {
        self.state.lock().cut_next_responses += 1;
    }

    /// The next `count` updates lose a race: just before each is applied, another writer
    /// changes the object (an annotation), so it meets a real 409 Conflict (when it names
    /// a resourceVersion) and watches see the change, as on a busy cluster. (An injected
    /// 409 from [`fail_next_verb`](Self::fail_next_verb) comes with no change at all.)
    pub fn race_next_updates(&self, count: usize) {
        self.state.lock().race_next_updates += count;
    }

    /// The next `count` deletes lose a race the same way: just before each, another writer
    /// changes the object, so a delete with a resourceVersion precondition meets 409.
    pub fn race_next_deletes(&self, count: usize) {
        self.state.lock().race_next_deletes += count;
    }

    /// The next `count` successful list answers are padded with trailing spaces to
    /// `to_bytes` (still valid JSON): a server answer larger than a client's limit.
    pub fn pad_next_lists(&self, count: usize, to_bytes: usize) {
        let mut s = self.state.lock();
        s.pad_next_lists = count;
        s.pad_to_bytes = to_bytes;
    }

    /// Accepts connections and reads requests but answers nothing until [`resume`](Self::resume).
    pub fn pause(&self) {
        self.state.lock().paused = true;
    }

    /// Answers again; held requests proceed.
    pub fn resume(&self) {
        self.state.lock().paused = false;
        self.resumed.notify_all();
    }

    /// Whether the server is paused.
    pub fn is_paused(&self) -> bool {
        self.state.lock().paused
    }

    /// Turns every fault off (and resumes).
    pub fn clear(&self) {
        *self.state.lock() = FaultState::default();
        self.resumed.notify_all();
    }

    /// Blocks while paused; returns early when `stop()` says the connection must go.
    pub(crate) fn wait_unpaused(&self, stop: impl Fn() -> bool) {
        let mut s = self.state.lock();
        while s.paused && !stop() {
            self.resumed.wait_for(&mut s, Duration::from_millis(50));
        }
    }

    /// For a watch: blocks while paused or stalled; returns early on `stop()`.
    pub(crate) fn wait_watch_flowing(&self, stop: impl Fn() -> bool) {
        let mut s = self.state.lock();
        while (s.paused || s.watches_stalled) && !stop() {
            self.resumed.wait_for(&mut s, Duration::from_millis(50));
        }
    }

    /// Wakes paused connections so they notice a restart or shutdown.
    pub(crate) fn wake(&self) {
        self.resumed.notify_all();
    }

    /// The latency to add.
    pub(crate) fn latency(&self) -> Duration {
        self.state.lock().latency
    }

    /// An injected failure for this request, as (code, Retry-After seconds or none), if any.
    pub(crate) fn take_failure(&self, verb: &str) -> Option<(u16, Option<u32>)> {
        let mut s = self.state.lock();
        let retry = (!s.omit_retry_after).then(|| s.retry_after.unwrap_or(DEFAULT_RETRY_AFTER));
        if let Some(i) = s
            .fail_next
            .iter()
            .position(|f| f.count > 0 && f.verb.as_deref().is_none_or(|v| v == verb))
        {
            let code = s.fail_next[i].code;
            s.fail_next[i].count -= 1;
            s.fail_next.retain(|f| f.count > 0);
            return Some((code, retry));
        }
        if s.fail_fraction > 0.0 && util::random_f64() < s.fail_fraction {
            return Some((s.fail_fraction_code, retry));
        }
        None
    }

    /// Whether this answer must be cut mid-body (consumes the fault).
    pub(crate) fn take_cut(&self) -> bool {
        let mut s = self.state.lock();
        if s.cut_next_responses > 0 {
            s.cut_next_responses -= 1;
            true
        } else {
            false
        }
    }

    /// Whether this update (or delete) must lose a race (consumes the fault).
    pub(crate) fn take_race(&self, verb: &str) -> bool {
        let mut s = self.state.lock();
        let left = match verb {
            "update" => &mut s.race_next_updates,
            "delete" => &mut s.race_next_deletes,
            _ => return false,
        };
        if *left > 0 {
            *left -= 1;
            true
        } else {
            false
        }
    }

    /// The size to pad this list answer to, if it must be (consumes the fault).
    pub(crate) fn take_pad(&self) -> Option<usize> {
        let mut s = self.state.lock();
        if s.pad_next_lists > 0 {
            s.pad_next_lists -= 1;
            Some(s.pad_to_bytes)
        } else {
            None
        }
    }

    /// Whether this watch must be answered 410 (consumes the fault).
    pub(crate) fn take_expire(&self) -> bool {
        let mut s = self.state.lock();
        if s.expire_next_watches > 0 {
            s.expire_next_watches -= 1;
            true
        } else {
            false
        }
    }

    /// How long watches may run before the server closes them.
    pub(crate) fn watch_limit(&self) -> Option<Duration> {
        self.state.lock().close_watches_after
    }
}
