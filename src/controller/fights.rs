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
//! what we deleted) waits 5 ms doubling, as the workqueue's per-key backoff does, so a
//! fight costs a few writes, not the ~65 a second of an unpaced one. Only put-backs wait:
//! a manifest change (a field, a name added or removed) is written at once.
//!
//! The pace is capped at [`DEFAULT_FIGHT_BACKOFF_MAX`] (30 s), not the workqueue's error
//! cap of 1000 s: a fight is not an error to back off from but an undone registration,
//! and once the other writer stops, the manifest's value must be back within a minute
//! (GitOps self-heal loops bound their retry interval for the same reason). And it cools
//! down: once nobody has undone our write for twice the cap, the next one-off edit is put
//! back at once again.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::hash::Map;
use crate::runtime::workqueue::{DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY};

/// Contested writes to one name within [`FIGHT_WINDOW`] that make a fight.
pub const FIGHT_THRESHOLD: usize = 5;
/// The window over which contested writes are counted (5 in 5 minutes: not a one-off edit).
pub const FIGHT_WINDOW: Duration = Duration::from_secs(300);
/// The longest a put-back waits within a fight, by default: the registration is back
/// within half a minute of the other writer's last edit.
pub const DEFAULT_FIGHT_BACKOFF_MAX: Duration = Duration::from_secs(30);
/// The range a fight's cap may be set in: from the first put-back's pace (5 ms) to the
/// workqueue's error cap (1000 s), past which a fight would be paced slower than a failure.
pub const FIGHT_BACKOFF_MAX_RANGE: (Duration, Duration) = (DEFAULT_BASE_DELAY, DEFAULT_MAX_DELAY);

/// Counts contested writes per name and reports when they amount to a fight.
pub struct FightDetector {
    recent: Mutex<Map<String, Recent>>,
    contested: AtomicU64,
    fights: AtomicU64,
    /// The pace's cap; twice it without a contested write ends a fight.
    max_pace: Duration,
}

impl Default for FightDetector {
    fn default() -> Self {
        FightDetector::new(DEFAULT_FIGHT_BACKOFF_MAX)
    }
}

#[derive(Default)]
struct Recent {
    times: VecDeque<Instant>,
    /// When we last reported this name, so one fight is one warning per window.
    reported: Option<Instant>,
    /// Contested writes in a row, none further apart than the quiet window (twice the
    /// cap): what the next one's pace doubles from.
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
    /// A detector whose put-backs wait at most `max_pace` (within
    /// [`FIGHT_BACKOFF_MAX_RANGE`]; a value outside it is clamped into it).
    pub fn new(max_pace: Duration) -> Self {
        let (lo, hi) = FIGHT_BACKOFF_MAX_RANGE;
        FightDetector {
            recent: Mutex::default(),
            contested: AtomicU64::new(0),
            fights: AtomicU64::new(0),
            max_pace: max_pace.clamp(lo, hi),
        }
    }

    /// The longest a put-back waits within a fight.
    pub fn max_pace(&self) -> Duration {
        self.max_pace
    }

    /// How long nobody must undo our write before a name's fight is over and its pace
    /// starts from the base delay again: twice the cap, so a writer that undoes every
    /// put-back at once keeps the name at the cap, never reset by the cap's own wait.
    pub fn quiet_window(&self) -> Duration {
        self.max_pace.saturating_mul(2)
    }

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
        let quiet = self.quiet_window();
        let r = recent.entry(name.to_string()).or_default();
        if r.times
            .back()
            .is_some_and(|t| now.saturating_duration_since(*t) >= quiet)
        {
            // Nobody undid our last write for the quiet window: that fight is over.
            r.streak = 0;
        }
        r.streak = r.streak.saturating_add(1);
        let doublings = r.streak.saturating_sub(1).min(31);
        r.pace = DEFAULT_BASE_DELAY
            .saturating_mul(1u32 << doublings)
            .min(self.max_pace);
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

    /// Names in a fight at `now`: a fight's worth of contested writes within the window,
    /// the last one within the quiet window.
    pub fn in_fight(&self, now: Instant) -> usize {
        let quiet = self.quiet_window();
        self.recent
            .lock()
            .values()
            .filter(|r| {
                r.times.len() >= FIGHT_THRESHOLD
                    && r.times.back().is_some_and(|t| {
                        let age = now.saturating_duration_since(*t);
                        age < quiet && age < FIGHT_WINDOW
                    })
            })
            .count()
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
        // Capped at 30 s, not the workqueue's error cap.
        for _ in 0..40 {
            let c = d.contested_write("a", at);
            at += c.pace;
        }
        assert_eq!(d.contested_write("a", at).pace, DEFAULT_FIGHT_BACKOFF_MAX);
    }

    #[test]
    fn a_writer_undoing_every_put_back_keeps_the_pace_at_the_cap() {
        let d = FightDetector::new(Duration::from_secs(30));
        let t0 = Instant::now();
        let mut at = t0;
        let mut paces = Vec::new();
        for _ in 0..30 {
            // The other writer undoes each put-back at once; ours waits its pace.
            let c = d.contested_write("a", at);
            paces.push(c.pace);
            at += c.pace;
        }
        assert!(paces.iter().all(|p| *p <= Duration::from_secs(30)));
        // 5 ms · 2^12 = 20.48 s; the 14th and every later one wait the cap.
        assert_eq!(paces[12], Duration::from_millis(20_480));
        assert_eq!(paces[13..], [Duration::from_secs(30); 17]);
        assert_eq!(d.in_fight(at), 1);
    }

    #[test]
    fn a_fight_cools_down_after_twice_the_cap_without_a_contested_write() {
        let d = FightDetector::new(Duration::from_secs(30));
        let t0 = Instant::now();
        let mut at = t0;
        for _ in 0..20 {
            at += d.contested_write("a", at).pace;
        }
        assert_eq!(d.quiet_window(), Duration::from_secs(60));
        assert_eq!(d.in_fight(at), 1);
        // An edit 59 s after our last put-back still finds the fight on.
        let last = at - Duration::from_secs(30);
        assert_eq!(
            d.contested_write("a", last + Duration::from_secs(59)).pace,
            Duration::from_secs(30)
        );
        let last = last + Duration::from_secs(59);
        // Quiet for the window: no longer in a fight, and the next one-off edit is put
        // back after the base delay.
        let later = last + Duration::from_secs(60);
        assert_eq!(d.in_fight(later), 0);
        assert_eq!(d.contested_write("a", later).pace, DEFAULT_BASE_DELAY);
        assert_eq!(
            d.wait_before_put_back("a", later + DEFAULT_BASE_DELAY),
            None
        );
    }

    #[test]
    fn the_cap_is_kept_within_its_range() {
        let lo = FightDetector::new(Duration::from_millis(1));
        assert_eq!(lo.max_pace(), FIGHT_BACKOFF_MAX_RANGE.0);
        let hi = FightDetector::new(Duration::from_secs(5000));
        assert_eq!(hi.max_pace(), FIGHT_BACKOFF_MAX_RANGE.1);
        let t0 = Instant::now();
        let mut at = t0;
        let mut last = Duration::ZERO;
        for _ in 0..25 {
            last = hi.contested_write("a", at).pace;
            at += last;
        }
        assert_eq!(last, DEFAULT_MAX_DELAY);
    }
}
