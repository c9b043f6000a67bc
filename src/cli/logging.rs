//! The process logger: env_logger filtered by `RUST_LOG`, with the HTTP and TLS libraries'
//! wire dumps cut off whatever `RUST_LOG` asks.

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Targets whose `trace` level dumps the wire unredacted: ureq prints every header,
/// `Authorization: Bearer …` included (split across hex-dump lines), at trace; its debug
/// lines redact sensitive headers. rustls is capped the same way so no key material or
/// decrypted record can ever show up. Their `debug` and above still pass.
const CAPPED_AT_DEBUG: [&str; 3] = ["ureq", "ureq_proto", "rustls"];

/// Whether `target` is one of [`CAPPED_AT_DEBUG`] or a module under one.
fn capped(target: &str) -> bool {
    CAPPED_AT_DEBUG.iter().any(|c| {
        target
            .strip_prefix(c)
            .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
    })
}

/// Whether a record passes the cap (before `RUST_LOG`'s own filter).
fn allowed(m: &Metadata<'_>) -> bool {
    m.level() < Level::Trace || !capped(m.target())
}

/// env_logger's logger behind the cap.
struct Capped(env_logger::Logger);

impl Log for Capped {
    fn enabled(&self, m: &Metadata<'_>) -> bool {
        allowed(m) && self.0.enabled(m)
    }

    fn log(&self, record: &Record<'_>) {
        if allowed(record.metadata()) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
    }
}

/// Logs to stderr, filtered by `RUST_LOG` (default `info`): `TIME LEVEL message` with
/// millisecond times, and at `debug`/`trace` `TIME LEVEL target: message` with microsecond
/// times, so our lines stand apart from rustls/ureq; the wire-dumping targets never below
/// debug.
pub fn init() {
    use std::io::Write as _;
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
            // Our own UTC timestamp: env_logger's costs a date-time crate (~100 KB).
            // Microseconds, as klog writes them: a start-up or a convergence is read off
            // the log in milliseconds.
            .format(|buf, record| {
                let now = std::time::SystemTime::now();
                if log::max_level() >= LevelFilter::Debug {
                    // Debug is for finding where time goes (BENCH_LOG): microseconds.
                    let now = autoregister::api::time::format_rfc3339_micro(now);
                    writeln!(
                        buf,
                        "{now} {:5} {}: {}",
                        record.level(),
                        record.target(),
                        record.args()
                    )
                } else {
                    let now = log_time(now);
                    writeln!(buf, "{now} {:5} {}", record.level(), record.args())
                }
            })
            .build();
    let max: LevelFilter = logger.filter();
    // Only fails when a logger is already set, which nothing in this process does.
    if log::set_boxed_logger(Box::new(Capped(logger))).is_ok() {
        log::set_max_level(max);
    }
}

/// RFC 3339 UTC with milliseconds (`2026-01-02T03:04:05.678Z`): enough to order a sync,
/// its Event and a probe, short enough to read.
fn log_time(t: std::time::SystemTime) -> String {
    let micro = autoregister::api::time::format_rfc3339_micro(t);
    // `…:05.678901Z` → `…:05.678Z`.
    match micro.len().checked_sub(4) {
        Some(cut) if micro.is_char_boundary(cut) => format!("{}Z", &micro[..cut]),
        _ => micro,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(target: &str, level: Level) -> Metadata<'_> {
        Metadata::builder().target(target).level(level).build()
    }

    #[test]
    fn log_times_have_milliseconds() {
        let t = std::time::UNIX_EPOCH + std::time::Duration::new(1_700_000_000, 123_456_789);
        assert_eq!(log_time(t), "2023-11-14T22:13:20.123Z");
    }

    #[test]
    fn wire_dumping_targets_stop_at_debug_and_others_pass_at_trace() {
        for t in [
            "ureq",
            "ureq::unversioned::transport::io",
            "ureq_proto::client",
            "rustls::client::hs",
        ] {
            assert!(!allowed(&meta(t, Level::Trace)), "{t} at trace");
            assert!(allowed(&meta(t, Level::Debug)), "{t} at debug");
        }
        for t in [
            "autoregister::runtime::reflector",
            "ureqx",
            "rustls_pki_types",
        ] {
            assert!(allowed(&meta(t, Level::Trace)), "{t} at trace");
        }
    }
}
