//! Replacing the whole cache after a (re)list, and telling the handler what changed.

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::Resource;
use crate::runtime::store::{key_of, Store};

use super::EventHandler;

/// How many events a replace delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Replaced {
    pub(super) added: usize,
    pub(super) updated: usize,
    pub(super) deleted: usize,
    pub(super) unchanged: usize,
}

/// Swaps `items` into `store` in one write, then delivers the differences: deletes (with
/// the last known state) for keys that vanished, updates for a changed resourceVersion,
/// adds for new keys. Unchanged objects keep their old `Arc` and produce no event.
///
/// `trust_versions` false (the server's history moved backwards) turns that shortcut off:
/// writes after a restore reuse resourceVersions the cache has already seen for other
/// states, so an equal version no longer means an equal object; every kept key is an update.
pub(super) fn replace<K: Resource>(
    store: &Store<K>,
    items: Vec<K>,
    handler: &dyn EventHandler<K>,
    trust_versions: bool,
) -> Replaced {
    let mut order = Vec::with_capacity(items.len());
    let mut next: HashMap<String, Arc<K>> = HashMap::with_capacity(items.len());
    for obj in items {
        let key = key_of(&obj);
        // A key listed twice (a misbehaving server) keeps its last state and one event.
        if next.insert(key.clone(), Arc::new(obj)).is_none() {
            order.push(key);
        }
    }
    // Unchanged objects keep the Arc readers may already hold; decided before the swap,
    // from a snapshot, so the write lock is held for the swap only.
    let reusable = if trust_versions {
        store_snapshot(store)
    } else {
        Vec::new()
    };
    for (key, old) in reusable {
        if let Some(new) = next.get_mut(&key) {
            if new.resource_version() == old.resource_version()
                && !old.resource_version().is_empty()
            {
                *new = old;
            }
        }
    }
    let old = store.replace(next.clone());

    let mut out = Replaced::default();
    // Keys only are sorted: one sort for every kind.
    let mut gone: Vec<&String> = old.keys().filter(|k| !next.contains_key(*k)).collect();
    crate::sort::sort(&mut gone);
    for obj in gone.into_iter().filter_map(|k| old.get(k)) {
        handler.on_delete(obj);
        out.deleted += 1;
    }
    for key in &order {
        let Some(new) = next.get(key) else { continue };
        match old.get(key) {
            None => {
                handler.on_add(new);
                out.added += 1;
            }
            Some(prev) if Arc::ptr_eq(prev, new) => out.unchanged += 1,
            Some(prev) => {
                handler.on_update(prev, new);
                out.updated += 1;
            }
        }
    }
    out
}

fn store_snapshot<K: Resource>(store: &Store<K>) -> Vec<(String, Arc<K>)> {
    store
        .list()
        .into_iter()
        .map(|o| (key_of(o.as_ref()), o))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::APIService;
    use crate::runtime::reflector::test_support::{svc, Recorder};

    fn store_with(items: &[(&str, &str)]) -> Store<APIService> {
        let store = Store::new();
        for (n, rv) in items {
            store.insert(Arc::new(svc(n, rv)));
        }
        store
    }

    #[test]
    fn first_replace_is_all_adds_in_list_order() {
        let store = Store::new();
        let rec = Recorder::default();
        let got = replace(&store, vec![svc("b", "1"), svc("a", "2")], &rec, true);
        assert_eq!(rec.take(), ["add b@1", "add a@2"]);
        assert_eq!(
            got,
            Replaced {
                added: 2,
                ..Default::default()
            }
        );
        assert_eq!(store.len(), 2);
    }

    #[test]
    fn relist_delivers_deletes_updates_adds_and_nothing_for_unchanged() {
        let store = store_with(&[("a", "1"), ("b", "1"), ("c", "1"), ("e", "4")]);
        let a_before = store.get("a").unwrap();
        let rec = Recorder::default();
        let got = replace(
            &store,
            vec![svc("a", "1"), svc("b", "2"), svc("d", "3")],
            &rec,
            true,
        );
        assert_eq!(
            rec.take(),
            ["delete c@1", "delete e@4", "update b@1->2", "add d@3"]
        );
        assert_eq!(
            got,
            Replaced {
                added: 1,
                updated: 1,
                deleted: 2,
                unchanged: 1
            }
        );
        let mut keys = store.keys();
        keys.sort();
        assert_eq!(keys, ["a", "b", "d"]);
        assert!(
            Arc::ptr_eq(&a_before, &store.get("a").unwrap()),
            "unchanged objects keep their Arc"
        );
        assert_eq!(store.get("b").unwrap().resource_version(), "2");
    }

    #[test]
    fn duplicate_keys_in_a_list_give_one_event_with_the_last_state() {
        let store = Store::new();
        let rec = Recorder::default();
        replace(&store, vec![svc("a", "1"), svc("a", "2")], &rec, true);
        assert_eq!(rec.take(), ["add a@2"]);
        assert_eq!(store.get("a").unwrap().resource_version(), "2");
    }

    #[test]
    fn empty_relist_deletes_everything() {
        let store = store_with(&[("a", "1"), ("b", "2")]);
        let rec = Recorder::default();
        replace(&store, vec![], &rec, true);
        assert_eq!(rec.take(), ["delete a@1", "delete b@2"]);
        assert!(store.is_empty());
    }

    #[test]
    fn untrusted_versions_make_every_kept_object_an_update() {
        let store = store_with(&[("a", "1"), ("b", "1")]);
        let a_before = store.get("a").unwrap();
        let rec = Recorder::default();
        let got = replace(&store, vec![svc("a", "1"), svc("c", "1")], &rec, false);
        assert_eq!(rec.take(), ["delete b@1", "update a@1->1", "add c@1"]);
        assert_eq!(got.updated, 1);
        assert_eq!(got.unchanged, 0);
        assert!(
            !Arc::ptr_eq(&a_before, &store.get("a").unwrap()),
            "the listed state replaces the cached one"
        );
    }
}
