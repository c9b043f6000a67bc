//! Shared copies of the few strings nearly every cached object repeats.
//!
//! The managers a stripped `managedFields` names are one of a handful of lists across a
//! whole cluster ("autoregister", "kube-apiserver", ...): one shared copy each instead of
//! one per cached object.

use std::sync::Arc;

use parking_lot::Mutex;

/// Distinct strings kept; past this a string gets its own copy (a cluster where every
/// object has its own manager list gains nothing from sharing, and the scan stays short).
const MAX_INTERNED: usize = 32;

static INTERNED: Mutex<Vec<Arc<str>>> = Mutex::new(Vec::new());

/// A shared copy of `s`.
pub(crate) fn intern(s: &str) -> Arc<str> {
    let mut interned = INTERNED.lock();
    if let Some(found) = interned.iter().find(|i| ***i == *s) {
        return found.clone();
    }
    let new: Arc<str> = Arc::from(s);
    if interned.len() < MAX_INTERNED {
        interned.push(new.clone());
    }
    new
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_strings_share_one_copy() {
        let a = intern("intern-test-manager");
        let b = intern(&String::from("intern-test-manager"));
        assert!(Arc::ptr_eq(&a, &b));
        assert_eq!(&*a, "intern-test-manager");
        assert!(!Arc::ptr_eq(&a, &intern("intern-test-other")));
    }

    #[test]
    fn past_the_limit_strings_are_still_returned_whole() {
        let many: Vec<_> = (0..MAX_INTERNED + 5)
            .map(|i| intern(&format!("intern-limit-{i}")))
            .collect();
        for (i, s) in many.iter().enumerate() {
            assert_eq!(**s, *format!("intern-limit-{i}"));
        }
        assert!(INTERNED.lock().len() <= MAX_INTERNED);
    }
}
