//! Trimming objects before they reach the cache, as client-go's `SetTransform`.

use crate::api::{ObjectList, WatchEvent};
use crate::client::{Canceller, Error, ListParams, WatchParams};

use super::{ListerWatcher, WatchEvents};

/// A [`ListerWatcher`] that passes every listed and watched object through `transform`
/// before the reflector sees it: what the cache, the handlers and deletes' last known
/// state hold is the transformed object. Each page and event is transformed as it
/// arrives, so the untrimmed form of a whole list is never alive at once.
pub struct Transformed<L, K> {
    inner: L,
    transform: fn(&mut K),
}

impl<L, K> Transformed<L, K> {
    /// `inner`, with `transform` applied to each object it yields.
    pub fn new(inner: L, transform: fn(&mut K)) -> Self {
        Transformed { inner, transform }
    }
}

impl<K: Send + 'static, L: ListerWatcher<K>> ListerWatcher<K> for Transformed<L, K> {
    fn list(&self, p: &ListParams, cancel: &Canceller) -> Result<ObjectList<K>, Error> {
        let mut page = self.inner.list(p, cancel)?;
        page.items.iter_mut().for_each(self.transform);
        Ok(page)
    }

    fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchEvents<K>, Error> {
        let transform = self.transform;
        let events = self.inner.watch(p, cancel)?.map(move |event| {
            event.map(|mut event| {
                if let WatchEvent::Added(o) | WatchEvent::Modified(o) | WatchEvent::Deleted(o) =
                    &mut event
                {
                    transform(o);
                }
                event
            })
        });
        Ok(Box::new(events))
    }
}
