//! Controller machinery: reflector and cache, workqueue with backoff, clocks.

pub mod backoff;
pub mod clock;
pub mod prng;
pub mod reflector;
pub mod store;
pub mod workqueue;
