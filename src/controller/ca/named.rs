//! Listing and watching one named object (field selector `metadata.name=NAME` in its
//! namespace), so RBAC can grant exactly that object with `resourceNames`.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::api::{ObjectList, Resource, WatchEvent};
use crate::client::{Api, Canceller, Error, ListParams, WatchParams};
use crate::runtime::reflector::{ListerWatcher, WatchEvents};

/// A [`ListerWatcher`] of one object: what it lists and watches passes through `trim`
/// (drops every data value but the CA's) before the cache sees it; a 403 is logged once
/// per distinct answer, naming the grant that is missing.
pub(crate) struct Named<K> {
    pub(crate) api: Api<K>,
    pub(crate) namespace: String,
    pub(crate) name: String,
    pub(crate) key: String,
    pub(crate) trim: fn(&mut K, &str),
    /// The last 403 logged, so a reflector retrying every 30 s does not repeat it.
    pub(crate) denied: Arc<Mutex<Option<String>>>,
}

impl<K: Resource> Named<K> {
    fn selector(&self) -> Option<String> {
        Some(format!("metadata.name={}", self.name))
    }

    fn report(&self, verb: &str, e: &Error) {
        if !e.is_forbidden() {
            return;
        }
        let what = format!("{verb}: {e}");
        let mut last = self.denied.lock();
        if last.as_deref() == Some(what.as_str()) {
            log::debug!(
                "{} {}/{}: still forbidden: {what}",
                K::KIND,
                self.namespace,
                self.name
            );
            return;
        }
        log::warn!(
            "CA source {kind} {ns}/{name}: cannot {verb} it, forbidden by RBAC ({e}); \
             grant list and watch on {plural} with resourceNames [{name}] in namespace \
             {ns}{follow}",
            kind = K::KIND,
            ns = self.namespace,
            name = self.name,
            plural = K::PLURAL,
            follow = if verb == "watch" {
                "; until then its changes are seen only when it is listed again"
            } else {
                ""
            }
        );
        *last = Some(what);
    }
}

impl<K: Resource> ListerWatcher<K> for Named<K> {
    fn list(&self, p: &ListParams, cancel: &Canceller) -> Result<ObjectList<K>, Error> {
        let mut p = p.clone();
        p.field_selector = self.selector();
        match self.api.list_cancellable(&p, cancel) {
            Ok(mut page) => {
                for o in &mut page.items {
                    (self.trim)(o, &self.key);
                }
                Ok(page)
            }
            Err(e) => {
                self.report("list", &e);
                Err(e)
            }
        }
    }

    fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchEvents<K>, Error> {
        let mut p = p.clone();
        p.field_selector = self.selector();
        let events = match self.api.watch(&p, cancel) {
            Ok(events) => events,
            Err(e) => {
                self.report("watch", &e);
                return Err(e);
            }
        };
        // A watch that opens means the grant is there (again).
        *self.denied.lock() = None;
        let (trim, key) = (self.trim, self.key.clone());
        Ok(Box::new(events.map(move |event| {
            event.map(|mut event| {
                if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) =
                    &mut event
                {
                    trim(o, &key);
                }
                event
            })
        })))
    }
}
