//! The hash maps and sets of the controller's own bookkeeping.
//!
//! Every watch event and sync looks names up in a dozen maps; std's SipHash took ~3 % of
//! the instructions of converging 1,000 APIServices. foldhash is several times faster on
//! short keys. Its seed comes from addresses (ASLR) and the clock rather than the OS's
//! random source, which is weaker against keys crafted to collide; the keys here are
//! names of cluster-scoped objects (creating them is an administrator's right) and of
//! the controller's own work, not text from strangers.

/// A map under the crate's hasher.
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, Hasher>;

/// A set under the crate's hasher.
pub(crate) type Set<K> = std::collections::HashSet<K, Hasher>;

/// The crate's hasher: foldhash, randomly seeded.
pub(crate) type Hasher = foldhash::fast::RandomState;
