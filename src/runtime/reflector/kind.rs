//! The seam between the reflector's loop and one kind: everything that touches typed
//! objects sits behind a small object-safe trait, so the loop (list, watch, relist, back
//! off) is compiled once for every kind instead of once per kind.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::api::Resource;
use crate::client::{Canceller, Error, WatchParams};
use crate::runtime::store::Store;

use super::list::list_all;
use super::replace::{replace, Replaced};
use super::watch::{consume, WatchEnd};
use super::{EventHandler, ListerWatcher};

/// What a full list found.
pub(super) struct Relisted {
    /// The list's resourceVersion, to watch from.
    pub(super) resource_version: String,
    /// Objects listed.
    pub(super) listed: usize,
    /// The events the replace delivered.
    pub(super) counts: Replaced,
}

/// How far a watch has got, reported as it goes.
pub(super) enum Step {
    /// The server answered: the stream is open.
    Opened,
    /// One event was applied.
    Event,
}

/// The typed half of one reflector: the lister-watcher, the cache and the handler.
pub(super) trait Kind: Send + Sync {
    /// Lists every page (`Ok(None)` once cancelled) and swaps the result into the cache
    /// under `deliver`, delivering the differences. `trust_versions` is asked with the
    /// list's resourceVersion before the swap (see [`replace`]).
    fn relist(
        &self,
        page_size: u32,
        label_selector: Option<&str>,
        cancel: &Canceller,
        deliver: &Mutex<()>,
        trust_versions: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Option<Relisted>, Error>;

    /// Opens a watch (`Err` when it cannot be opened), then applies its events until it
    /// ends (see [`consume`]), telling `progress` each [`Step`].
    fn watch(
        &self,
        params: &WatchParams,
        cancel: &Canceller,
        deliver: &Mutex<()>,
        rv: &mut String,
        stopped: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(Step),
    ) -> Result<WatchEnd, Error>;

    /// The first list has completed.
    fn mark_synced(&self);

    /// Whether the first list has completed.
    fn has_synced(&self) -> bool;

    /// Tells the handler a relist (not the first list) has been delivered.
    fn on_relisted(&self);

    /// Re-delivers every cached object as an update (the caller holds the delivery lock).
    fn resync(&self);
}

/// [`Kind`] for `K`.
pub(super) struct Typed<K> {
    pub(super) lw: Box<dyn ListerWatcher<K>>,
    pub(super) store: Arc<Store<K>>,
    pub(super) handler: Arc<dyn EventHandler<K>>,
}

impl<K: Resource> Kind for Typed<K> {
    fn relist(
        &self,
        page_size: u32,
        label_selector: Option<&str>,
        cancel: &Canceller,
        deliver: &Mutex<()>,
        trust_versions: &mut dyn FnMut(&str) -> bool,
    ) -> Result<Option<Relisted>, Error> {
        let Some(listed) = list_all(self.lw.as_ref(), page_size, label_selector, cancel)? else {
            return Ok(None);
        };
        let trust = trust_versions(&listed.resource_version);
        let n = listed.items.len();
        let counts = {
            let _turn = deliver.lock();
            replace(&self.store, listed.items, self.handler.as_ref(), trust)
        };
        Ok(Some(Relisted {
            resource_version: listed.resource_version,
            listed: n,
            counts,
        }))
    }

    fn watch(
        &self,
        params: &WatchParams,
        cancel: &Canceller,
        deliver: &Mutex<()>,
        rv: &mut String,
        stopped: &dyn Fn() -> bool,
        progress: &mut dyn FnMut(Step),
    ) -> Result<WatchEnd, Error> {
        let events = self.lw.watch(params, cancel)?;
        progress(Step::Opened);
        Ok(consume(
            events,
            &self.store,
            self.handler.as_ref(),
            deliver,
            rv,
            stopped,
            &mut || progress(Step::Event),
        ))
    }

    fn mark_synced(&self) {
        self.store.mark_synced();
    }

    fn has_synced(&self) -> bool {
        self.store.has_synced()
    }

    fn on_relisted(&self) {
        self.handler.on_relisted();
    }

    fn resync(&self) {
        for obj in self.store.list() {
            self.handler.on_update(&obj, &obj);
        }
    }
}
