//! Controller machinery: reflector and cache, workqueue with backoff, clocks.

pub mod clock;
pub mod workqueue;
