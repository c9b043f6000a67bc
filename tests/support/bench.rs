//! What the benches share: the binaries they measure and the median of their rounds.
#![allow(dead_code)]

/// The binaries measured: `BENCH_BINS=label=path,label=path` (`make bench` passes the
/// release and the static one), else the release build cargo made for this bench.
pub fn binaries() -> Vec<(String, String)> {
    match std::env::var("BENCH_BINS") {
        Ok(list) => list
            .split(',')
            .filter_map(|entry| entry.split_once('='))
            .map(|(l, p)| (l.to_string(), p.to_string()))
            .collect(),
        Err(_) => vec![(
            "release".to_string(),
            env!("CARGO_BIN_EXE_autoregister").to_string(),
        )],
    }
}

/// The middle value of `v` (the upper middle of an even count); `v` must not be empty.
pub fn median<T: PartialOrd>(mut v: Vec<T>) -> T {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    v.swap_remove(v.len() / 2)
}
