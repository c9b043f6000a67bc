//! What a reflector tells its owner about each change to the cache.

use std::sync::Arc;

/// Callbacks run on the reflector thread after the store changed; keep them cheap
/// (enqueue a key), since the next event waits for them.
pub trait EventHandler<K>: Send + Sync {
    /// `obj` appeared (first list, watch `ADDED`, or new in a relist).
    fn on_add(&self, obj: &Arc<K>);
    /// `old` became `new`; a resync delivers `(obj, obj)`.
    fn on_update(&self, old: &Arc<K>, new: &Arc<K>);
    /// `obj` went away; this is its last known state.
    fn on_delete(&self, obj: &Arc<K>);
    /// A relist (not the first list) has replaced the cache and its differences were
    /// delivered. Often the server was away: an owner whose retries of unchanged keys
    /// backed off meanwhile can retry them now rather than when their backoff ends.
    fn on_relisted(&self) {}
}
