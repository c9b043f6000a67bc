//! A client-go style workqueue: dedup, processing set, delays, per-key rate limiting.
