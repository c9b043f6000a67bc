//! The seam between the reflector and the API: list a page, open a watch.

use crate::api::{ObjectList, Resource, WatchEvent};
use crate::client::{Api, Canceller, Error, ListParams, WatchParams};

/// A blocking stream of watch events; it ends when the server closes the watch.
pub type WatchEvents<K> = Box<dyn Iterator<Item = Result<WatchEvent<K>, Error>> + Send>;

/// Lists and watches one kind; [`Api`] in production, scripted fakes in tests.
pub trait ListerWatcher<K>: Send + Sync + 'static {
    /// Reads one page of objects; `cancel` must end a blocked request from another thread.
    fn list(&self, p: &ListParams, cancel: &Canceller) -> Result<ObjectList<K>, Error>;
    /// Opens a watch; `cancel` must end a blocked read of the stream from another thread.
    fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchEvents<K>, Error>;
}

impl<K: Resource> ListerWatcher<K> for Api<K> {
    fn list(&self, p: &ListParams, cancel: &Canceller) -> Result<ObjectList<K>, Error> {
        Api::list_cancellable(self, p, cancel)
    }

    fn watch(&self, p: &WatchParams, cancel: &Canceller) -> Result<WatchEvents<K>, Error> {
        Ok(Box::new(Api::watch(self, p, cancel)?))
    }
}
