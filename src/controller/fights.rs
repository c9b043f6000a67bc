//! Noticing a fight: another writer undoing our writes to the same object again and again.
//!
//! A write to a name this process has already synced means something undid our
//! work: the object was deleted (we create it again), its spec was changed (we
//! update it again) or a managed object we removed came back (we delete it again).
//! One such write is normal (someone ran `kubectl edit`); many in a short window
//! are two controllers fighting — typically two instances with the same label key
//! and different manifests, or an injector writing a field the manifest declares too.
//! We cannot stop that, but we say so, naming the writer, and pace our side: each
//! further put-back within a fight (of a field, a create of what we created, a delete of
//! what we deleted) waits as the workqueue's per-key backoff would (5 ms doubling up to
//! 1000 s), so a fight costs a few writes, not the ~65 a second of an unpaced one. Only
//! put-backs wait: a manifest change (a field, a name added or removed) is written at once.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::runtime::workqueue::{DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY};

/// Contested writes to one name within [`FIGHT_WINDOW`] that make a fight.
pub const FIGHT_THRESHOLD: usize = 5;
/// The window over which contested writes are counted (5 in 5 minutes: not a one-off edit).
pub const FIGHT_WINDOW: Duration = Duration::from_secs(300);

/// Counts contested writes per name and reports when they amount to a fight.
#[derive(Default)]
pub struct FightDetector {
    recent: Mutex<HashMap<String, Recent>>,
    contested: AtomicU64,
    fights: AtomicU64,
}

#[derive(Default)]
struct Recent {
    times: VecDeque<Instant>,
    /// When we last reported this name, so one fight is one warning per window.
    reported: Option<Instant>,
    /// Contested writes in a row, none further apart than its pace and a window: what
    /// the next one's pace doubles from.
    streak: u32,
    /// The pace given after the last contested write.
    pace: Duration,
    /// No put-back before this (the last contested write plus its pace).
    not_before: Option<Instant>,
}

/// What a contested write means for the name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Contested {
    /// How long the name waits before it is written again.
    pub pace: Duration,
    /// Set when this write completes a fight not yet reported within the window.
    pub fight: Option<Fight>,
}

/// A fight worth a warning: who undoes our writes, and how often.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fight {
    /// Contested writes within the window, this one included.
    pub writes: usize,
}

impl FightDetector {
    /// Records a contested write to `name` at `now`: how long the name waits before its
    /// next write, and the fight when this write completes one not yet reported within
    /// the window.
    pub fn contested_write(&self, name: &str, now: Instant) -> Contested {
        self.contested.fetch_add(1, Ordering::Relaxed);
        let mut recent = self.recent.lock();
        // Forget names that have been quiet for their pace and a window, so the map
        // stays small and a fight long over starts from the base delay again.
        recent.retain(|_, r| {
            r.times.back().is_some_and(|t| {
                now.saturating_duration_since(*t) < r.pace.saturating_add(FIGHT_WINDOW)
            })
        });
        let r = recent.entry(name.to_string()).or_default();
        r.streak = r.streak.saturating_add(1);
        let doublings = r.streak.saturating_sub(1).min(31);
        r.pace = DEFAULT_BASE_DELAY
            .saturating_mul(1u32 << doublings)
            .min(DEFAULT_MAX_DELAY);
        let pace = r.pace;
        r.not_before = Some(now + pace);
        r.times.push_back(now);
        while r
            .times
            .front()
            .is_some_and(|t| now.saturating_duration_since(*t) >= FIGHT_WINDOW)
        {
            r.times.pop_front();
        }
        let due = r
            .reported
            .is_none_or(|at| now.saturating_duration_since(at) >= FIGHT_WINDOW);
        let fight = (r.times.len() >= FIGHT_THRESHOLD && due).then(|| {
            r.reported = Some(now);
            self.fights.fetch_add(1, Ordering::Relaxed);
            Fight {
                writes: r.times.len(),
            }
        });
        Contested { pace, fight }
    }

    /// How long a put-back of `name` must still wait at `now` (its pace since the last
    /// contested write), if it must.
    pub fn wait_before_put_back(&self, name: &str, now: Instant) -> Option<Duration> {
        let recent = self.recent.lock();
        let until = recent.get(name)?.not_before?;
        (until > now).then(|| until - now)
    }

    /// Writes that redid work another writer undid, since start.
    pub fn contested_writes(&self) -> u64 {
        self.contested.load(Ordering::Relaxed)
    }

    /// Fights reported, since start.
    pub fn fights(&self) -> u64 {
        self.fights.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_contested_writes_in_the_window_are_one_fight_reported_once() {
        let d = FightDetector::default();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        for i in 0..4 {
            assert_eq!(d.contested_write("a", at(i * 10)).fight, None, "write {i}");
        }
        assert_eq!(
            d.contested_write("a", at(40)).fight,
            Some(Fight { writes: 5 })
        );
        assert_eq!(
            d.contested_write("a", at(50)).fight,
            None,
            "reported once per window"
        );
        assert_eq!(d.contested_writes(), 6);
        assert_eq!(d.fights(), 1);
        // Another name counts on its own.
        assert_eq!(d.contested_write("b", at(50)).fight, None);
    }

    #[test]
    fn writes_spread_wider_than_the_window_are_no_fight() {
        let d = FightDetector::default();
        let t0 = Instant::now();
        for i in 0..20u64 {
            assert_eq!(
                d.contested_write("a", t0 + Duration::from_secs(i * 100))
                    .fight,
                None
            );
        }
        assert_eq!(d.fights(), 0);
    }

    #[test]
    fn a_fight_that_goes_on_is_reported_again_after_a_window() {
        let d = FightDetector::default();
        let t0 = Instant::now();
        let mut reports = 0;
        for i in 0..120u64 {
            if d.contested_write("a", t0 + Duration::from_secs(i * 5))
                .fight
                .is_some()
            {
                reports += 1;
            }
        }
        // 600 s of writes every 5 s: reported at the 5th write, then once per 300 s.
        assert_eq!(reports, 2);
    }

    #[test]
    fn each_further_contested_write_waits_twice_as_long_as_the_workqueue_backoff() {
        let d = FightDetector::default();
        let t0 = Instant::now();
        let mut at = t0;
        let mut paces = Vec::new();
        for _ in 0..6 {
            let c = d.contested_write("a", at);
            paces.push(c.pace.as_millis());
            at += c.pace;
        }
        assert_eq!(paces, [5, 10, 20, 40, 80, 160]);
        // Until the pace has passed, a put-back waits.
        let c = d.contested_write("b", t0);
        assert_eq!(d.wait_before_put_back("b", t0), Some(c.pace));
        assert_eq!(d.wait_before_put_back("b", t0 + c.pace), None);
        assert_eq!(d.wait_before_put_back("never", t0), None);
        // Capped as the per-key backoff is.
        for _ in 0..40 {
            let c = d.contested_write("a", at);
            at += c.pace;
        }
        assert_eq!(d.contested_write("a", at).pace, DEFAULT_MAX_DELAY);
        // A fight over for its pace and a window starts again from the base delay.
        let later = at + DEFAULT_MAX_DELAY + FIGHT_WINDOW;
        assert_eq!(
            d.contested_write("a", later).pace,
            DEFAULT_BASE_DELAY,
            "a new fight"
        );
    }
}
