//! The cache a reflector fills: objects by key behind one lock, handed out as `Arc`s.

use std::borrow::Borrow;
use std::collections::HashMap;

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::{Condvar, Mutex, RwLock};

use crate::api::Resource;
use crate::hash::Set;

/// A thread-safe map from key to the latest known object, plus a "synced once" flag.
///
/// Keys are the name for cluster-scoped kinds and `namespace/name` for namespaced ones
/// (see [`key_of`]). Readers hold the lock only for a lookup or a copy of the `Arc`s.
pub struct Store<K> {
    objects: RwLock<Set<Entry<K>>>,
    synced: Mutex<bool>,
    synced_cv: Condvar,
}

/// The cache key of `obj`: `namespace/name` for a namespaced kind, else `name`.
pub fn key_of<K: Resource>(obj: &K) -> String {
    match obj.meta().namespace.as_deref() {
        Some(ns) if K::NAMESPACED && !ns.is_empty() => format!("{ns}/{}", obj.name()),
        _ => obj.name().to_string(),
    }
}

/// A cached object found by its key. A key that is the object's name is read from the
/// object itself: thousands of cached names would otherwise each be copied once more.
struct Entry<K> {
    /// The key when it is not the name (`namespace/name`).
    key: Option<Box<str>>,
    obj: Arc<K>,
}

impl<K: Resource> Entry<K> {
    fn new(obj: Arc<K>) -> Self {
        let key = key_of(obj.as_ref());
        let key = (key != obj.name()).then(|| key.into_boxed_str());
        Entry { key, obj }
    }

    fn key(&self) -> &str {
        self.key.as_deref().unwrap_or_else(|| self.obj.name())
    }
}

impl<K: Resource> Borrow<str> for Entry<K> {
    fn borrow(&self) -> &str {
        self.key()
    }
}

// Hash and equality are the key's, as `Borrow<str>` requires.
impl<K: Resource> Hash for Entry<K> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.key().hash(state);
    }
}

impl<K: Resource> PartialEq for Entry<K> {
    fn eq(&self, other: &Self) -> bool {
        self.key() == other.key()
    }
}

impl<K: Resource> Eq for Entry<K> {}

impl<K: Resource> Default for Store<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K: Resource> Store<K> {
    /// An empty, not yet synced store.
    pub fn new() -> Self {
        Store {
            objects: RwLock::new(Set::default()),
            synced: Mutex::new(false),
            synced_cv: Condvar::new(),
        }
    }

    /// The object under `key`, if cached.
    pub fn get(&self, key: &str) -> Option<Arc<K>> {
        self.objects.read().get(key).map(|e| e.obj.clone())
    }

    /// Every cached object, in no particular order.
    pub fn list(&self) -> Vec<Arc<K>> {
        self.objects.read().iter().map(|e| e.obj.clone()).collect()
    }

    /// Every cached key, in no particular order.
    pub fn keys(&self) -> Vec<String> {
        self.objects
            .read()
            .iter()
            .map(|e| e.key().to_string())
            .collect()
    }

    /// Number of cached objects.
    pub fn len(&self) -> usize {
        self.objects.read().len()
    }

    /// Whether the cache is empty.
    pub fn is_empty(&self) -> bool {
        self.objects.read().is_empty()
    }

    /// True once a first full list has been stored (and its events delivered).
    pub fn has_synced(&self) -> bool {
        *self.synced.lock()
    }

    /// Waits until [`has_synced`](Self::has_synced) or `timeout`; answers whether it synced.
    pub fn wait_for_sync(&self, timeout: Duration) -> bool {
        let deadline = Instant::now().checked_add(timeout);
        let mut synced = self.synced.lock();
        while !*synced {
            match deadline {
                Some(d) => {
                    if self.synced_cv.wait_until(&mut synced, d).timed_out() {
                        return *synced;
                    }
                }
                // A timeout too large for an Instant is "forever".
                None => self.synced_cv.wait(&mut synced),
            }
        }
        true
    }

    /// Stores `obj` under its key; answers the object it replaced. Written by the reflector.
    pub fn insert(&self, obj: Arc<K>) -> Option<Arc<K>> {
        let entry = Entry::new(obj);
        self.objects.write().replace(entry).map(|e| e.obj)
    }

    /// Removes `key`; answers the object it held. Written by the reflector.
    pub fn remove(&self, key: &str) -> Option<Arc<K>> {
        self.objects.write().take(key).map(|e| e.obj)
    }

    /// Swaps in a whole new map in one write (readers never see half of it); answers the old one.
    pub fn replace(&self, objects: HashMap<String, Arc<K>>) -> HashMap<String, Arc<K>> {
        let next: Set<Entry<K>> = objects.into_values().map(Entry::new).collect();
        let old = std::mem::replace(&mut *self.objects.write(), next);
        old.into_iter()
            .map(|e| (e.key().to_string(), e.obj))
            .collect()
    }

    /// Marks the store synced and wakes every [`wait_for_sync`](Self::wait_for_sync).
    pub fn mark_synced(&self) {
        let mut synced = self.synced.lock();
        if !*synced {
            *synced = true;
            self.synced_cv.notify_all();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{APIService, ObjectMeta};

    fn svc(name: &str, rv: &str) -> Arc<APIService> {
        let mut meta = ObjectMeta::named(name);
        meta.resource_version = Some(rv.into());
        Arc::new(APIService {
            metadata: meta,
            ..Default::default()
        })
    }

    #[test]
    fn cluster_scoped_key_is_the_name_even_with_a_namespace() {
        let mut s = APIService {
            metadata: ObjectMeta::named("v1.example.com"),
            ..Default::default()
        };
        assert_eq!(key_of(&s), "v1.example.com");
        s.metadata.namespace = Some("ignored".into());
        assert_eq!(key_of(&s), "v1.example.com");
    }

    #[test]
    fn insert_get_remove_list() {
        let store = Store::new();
        assert!(store.is_empty());
        assert!(store.insert(svc("a", "1")).is_none());
        let old = store.insert(svc("a", "2")).unwrap();
        assert_eq!(old.resource_version(), "1");
        store.insert(svc("b", "3"));
        assert_eq!(store.len(), 2);
        assert_eq!(store.get("a").unwrap().resource_version(), "2");
        let mut keys = store.keys();
        keys.sort();
        assert_eq!(keys, ["a", "b"]);
        assert_eq!(store.remove("a").unwrap().resource_version(), "2");
        assert!(store.get("a").is_none());
        assert_eq!(store.list().len(), 1);
    }

    #[test]
    fn readers_share_the_stored_arc() {
        let store = Store::new();
        let a = svc("a", "1");
        store.insert(a.clone());
        assert!(Arc::ptr_eq(&a, &store.get("a").unwrap()));
    }

    #[test]
    fn replace_swaps_the_whole_map() {
        let store = Store::new();
        store.insert(svc("a", "1"));
        let mut next = HashMap::new();
        next.insert("b".to_string(), svc("b", "2"));
        let old = store.replace(next);
        assert_eq!(old.len(), 1);
        assert!(old.contains_key("a"));
        assert_eq!(store.keys(), ["b"]);
    }

    #[test]
    fn wait_for_sync_times_out_then_wakes_on_sync() {
        let store = Arc::new(Store::<APIService>::new());
        assert!(!store.has_synced());
        let t = Instant::now();
        assert!(!store.wait_for_sync(Duration::from_millis(30)));
        assert!(t.elapsed() >= Duration::from_millis(30));

        let waiter = {
            let store = store.clone();
            std::thread::spawn(move || store.wait_for_sync(Duration::from_secs(10)))
        };
        store.mark_synced();
        assert!(waiter.join().unwrap());
        assert!(store.has_synced());
        assert!(store.wait_for_sync(Duration::ZERO));
        assert!(store.wait_for_sync(Duration::MAX));
    }
}

#[cfg(test)]
mod namespaced_tests {
    use super::*;
    use crate::api::ObjectMeta;
    use serde::{Deserialize, Serialize};

    #[derive(Clone, Default, Serialize, Deserialize)]
    struct Lease {
        metadata: ObjectMeta,
    }

    impl Resource for Lease {
        const GROUP: &'static str = "coordination.k8s.io";
        const VERSION: &'static str = "v1";
        const KIND: &'static str = "Lease";
        const PLURAL: &'static str = "leases";
        const NAMESPACED: bool = true;
        fn meta(&self) -> &ObjectMeta {
            &self.metadata
        }
        fn meta_mut(&mut self) -> &mut ObjectMeta {
            &mut self.metadata
        }
    }

    #[test]
    fn namespaced_key_is_namespace_slash_name() {
        let mut l = Lease {
            metadata: ObjectMeta::named("lock"),
        };
        assert_eq!(key_of(&l), "lock");
        l.metadata.namespace = Some("kube-system".into());
        assert_eq!(key_of(&l), "kube-system/lock");
        let store = Store::new();
        store.insert(Arc::new(l));
        assert!(store.get("kube-system/lock").is_some());
    }
}
