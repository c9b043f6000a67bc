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

/// Logs to stderr, filtered by `RUST_LOG` (default `info`): `TIME LEVEL message`; the
/// wire-dumping targets never below debug.
pub fn init() {
    use std::io::Write as _;
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
            // Our own UTC timestamp: env_logger's costs a date-time crate (~100 KB).
            // Microseconds, as klog writes them: a start-up or a convergence is read off
            // the log in milliseconds.
            .format(|buf, record| {
                let now =
                    autoregister::api::time::format_rfc3339_micro(std::time::SystemTime::now());
                writeln!(buf, "{now} {:5} {}", record.level(), record.args())
            })
            .build();
    let max: LevelFilter = logger.filter();
    // Only fails when a logger is already set, which nothing in this process does.
    if log::set_boxed_logger(Box::new(Capped(logger))).is_ok() {
        log::set_max_level(max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(target: &str, level: Level) -> Metadata<'_> {
        Metadata::builder().target(target).level(level).build()
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
