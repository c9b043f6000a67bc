//! The manifest watcher's reload policy: fingerprint, settle, last-good set, empty-set guard.
//!
//! Polled about once a second by whoever runs the controller. A change is applied
//! only once PATH has stopped changing (the same fingerprint on two polls in a
//! row), so a half-written file or a folder being refilled is never applied. A
//! file that fails keeps its last good objects ([`ManifestSet`]); PATH missing or
//! unreadable keeps the whole last set and is retried on the next change. A reload
//! that would empty a non-empty set is held unless `allow_empty`: emptying a folder
//! by mistake must not deregister every API.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::{fingerprint, ManifestError, ManifestSet};
use crate::controller::Desired;

/// What a poll found.
#[derive(Debug)]
pub enum Poll {
    /// PATH is as last applied.
    Unchanged,
    /// PATH changed and is not yet settled; nothing applied.
    Settling,
    /// PATH settled on a new state: apply `desired` (the effective set, by name).
    Changed(Reloaded),
}

/// A settled reload.
#[derive(Debug)]
pub struct Reloaded {
    /// The set to apply (shared with the reloader: the caller keeps it as what is applied
    /// without another copy of every name).
    pub desired: Arc<BTreeMap<String, Desired>>,
    /// What is wrong on disk; the affected objects kept their previous state.
    pub errors: Vec<ManifestError>,
    /// PATH declared nothing and the last set was kept (the empty-set guard).
    pub held_empty: bool,
}

/// Re-reads PATH when it has changed and settled, keeping what worked.
#[derive(Debug)]
pub struct Reloader {
    set: ManifestSet,
    allow_empty: bool,
    /// Fingerprint of the state last read.
    applied: u64,
    /// Fingerprint seen on the previous poll while it differs from `applied`.
    candidate: Option<u64>,
    /// The set last handed out.
    current: Arc<BTreeMap<String, Desired>>,
}

impl Reloader {
    /// A reloader for PATH (modes from `label_key`); nothing is read until [`load`](Self::load).
    pub fn new(path: impl Into<PathBuf>, label_key: &str, allow_empty: bool) -> Reloader {
        let set = ManifestSet::new(path, label_key);
        let applied = fingerprint(set.path());
        Reloader {
            set,
            allow_empty,
            applied,
            candidate: None,
            current: Arc::default(),
        }
    }

    /// The file or directory read.
    pub fn path(&self) -> &Path {
        self.set.path()
    }

    /// Reads PATH now, settled or not (at start, and again after winning leadership so
    /// that what changed while standing by is seen); the fingerprint is taken first, so
    /// a change during the read is picked up by the next poll.
    pub fn load(&mut self) -> Reloaded {
        self.applied = fingerprint(self.set.path());
        self.candidate = None;
        self.read()
    }

    /// Checks PATH; reads it when it changed and has settled since the previous poll.
    pub fn poll(&mut self) -> Poll {
        let now = fingerprint(self.set.path());
        if now == self.applied {
            self.candidate = None;
            return Poll::Unchanged;
        }
        if self.candidate != Some(now) {
            self.candidate = Some(now);
            return Poll::Settling;
        }
        self.applied = now;
        self.candidate = None;
        Poll::Changed(self.read())
    }

    fn read(&mut self) -> Reloaded {
        let loaded = self.set.reload();
        let held_empty = loaded.desired.is_empty() && !self.current.is_empty() && !self.allow_empty;
        if !held_empty {
            self.current = Arc::new(loaded.desired);
        }
        Reloaded {
            desired: self.current.clone(),
            errors: loaded.errors,
            held_empty,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::DEFAULT_LABEL_KEY;
    use crate::controller::manifests::testutil::TempDir;

    fn svc(name: &str) -> String {
        format!(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\nspec:\n  group: {}\n  version: v1\n  groupPriorityMinimum: 1\n  versionPriority: 1\n",
            name.trim_start_matches("v1.")
        )
    }

    fn names(r: &Reloaded) -> Vec<&str> {
        r.desired.keys().map(String::as_str).collect()
    }

    fn changed(p: Poll) -> Reloaded {
        match p {
            Poll::Changed(r) => r,
            other => panic!("expected a settled change, got {other:?}"),
        }
    }

    #[test]
    fn a_change_applies_only_once_it_has_settled() {
        let d = TempDir::new("reload-settle");
        d.write("a.yaml", &svc("v1.a"));
        let mut r = Reloader::new(d.dir(), DEFAULT_LABEL_KEY, false);
        assert_eq!(names(&r.load()), ["v1.a"]);
        assert!(matches!(r.poll(), Poll::Unchanged));
        d.write("b.yaml", &svc("v1.b"));
        assert!(matches!(r.poll(), Poll::Settling), "first sighting");
        // Still being written: the fingerprint moves again, so it keeps settling.
        d.write("b.yaml", &format!("{}---\n{}", svc("v1.b"), svc("v1.c")));
        assert!(matches!(r.poll(), Poll::Settling));
        let got = changed(r.poll());
        assert_eq!(names(&got), ["v1.a", "v1.b", "v1.c"]);
        assert!(matches!(r.poll(), Poll::Unchanged));
    }

    #[test]
    fn truncation_does_not_deregister_before_it_settles() {
        let d = TempDir::new("reload-trunc");
        d.write("a.yaml", &format!("{}---\n{}", svc("v1.a"), svc("v1.b")));
        let mut r = Reloader::new(d.dir(), DEFAULT_LABEL_KEY, false);
        r.load();
        d.write("a.yaml", &svc("v1.a"));
        assert!(matches!(r.poll(), Poll::Settling), "nothing applied yet");
        d.write("a.yaml", &format!("{}---\n{}", svc("v1.a"), svc("v1.b")));
        // Rewritten in full before settling: back to the applied state or a new one,
        // never the truncated one.
        match r.poll() {
            Poll::Unchanged | Poll::Settling => {}
            Poll::Changed(got) => panic!("applied a transient state: {:?}", names(&got)),
        }
        let settled = (0..3).find_map(|_| match r.poll() {
            Poll::Changed(got) => Some(names(&got).len()),
            Poll::Unchanged => Some(2),
            Poll::Settling => None,
        });
        assert_eq!(settled, Some(2));
    }

    #[test]
    fn an_emptied_folder_keeps_the_last_set_unless_allowed() {
        for allow_empty in [false, true] {
            let d = TempDir::new(&format!("reload-empty-{allow_empty}"));
            let a = d.write("a.yaml", &svc("v1.a"));
            let mut r = Reloader::new(d.dir(), DEFAULT_LABEL_KEY, allow_empty);
            r.load();
            std::fs::remove_file(a).unwrap();
            assert!(matches!(r.poll(), Poll::Settling));
            let got = changed(r.poll());
            assert_eq!(got.held_empty, !allow_empty);
            let want: &[&str] = if allow_empty { &[] } else { &["v1.a"] };
            assert_eq!(names(&got), want, "allow_empty={allow_empty}");
        }
    }

    #[test]
    fn a_missing_path_keeps_the_last_set_and_comes_back() {
        let d = TempDir::new("reload-missing");
        let sub = d.path("m");
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("a.yaml"), svc("v1.a")).unwrap();
        let mut r = Reloader::new(&sub, DEFAULT_LABEL_KEY, true);
        r.load();
        std::fs::remove_dir_all(&sub).unwrap();
        r.poll();
        let got = changed(r.poll());
        assert_eq!(
            names(&got),
            ["v1.a"],
            "even with allow_empty: missing is not empty"
        );
        assert_eq!(got.errors.len(), 1);
        std::fs::create_dir(&sub).unwrap();
        std::fs::write(sub.join("b.yaml"), svc("v1.b")).unwrap();
        r.poll();
        assert_eq!(names(&changed(r.poll())), ["v1.b"]);
    }

    #[test]
    fn a_file_replaced_by_a_directory_keeps_its_objects() {
        let d = TempDir::new("reload-dir");
        let a = d.write("a.yaml", &svc("v1.a"));
        d.write("b.yaml", &svc("v1.b"));
        let mut r = Reloader::new(d.dir(), DEFAULT_LABEL_KEY, false);
        r.load();
        std::fs::remove_file(&a).unwrap();
        std::fs::create_dir(&a).unwrap();
        r.poll();
        let got = changed(r.poll());
        assert_eq!(names(&got), ["v1.a", "v1.b"]);
        assert_eq!(got.errors.len(), 1);
        assert_eq!(got.errors[0].file, a);
    }
}
