//! Controller machinery: reflector and cache, workqueue with backoff, clocks, timers, leader
//! election.

pub mod backoff;
pub mod clock;
pub mod duration;
pub mod leader;
pub mod liveness;
pub mod prng;
pub mod reachability;
pub mod reflector;
pub mod store;
pub mod timers;
pub mod workqueue;
