//! The process logger: env_logger filtered by `RUST_LOG`, with the HTTP and TLS libraries'
//! wire dumps cut off whatever `RUST_LOG` asks.

use std::io::Write as _;

use log::{Level, LevelFilter, Log, Metadata, Record};

use super::args::LogFormat;

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

/// Logs to stderr, filtered by `RUST_LOG` (default `info`), as `format` says: text is
/// `TIME LEVEL message` (and at `debug`/`trace` `TIME LEVEL target: message`, so our lines
/// stand apart from rustls/ureq); json is one object per line with `time`, `level`,
/// `target`, `message` and the line's fields (`name`, `cell`, `action`). Times are UTC
/// with microseconds at every level, as klog writes them. The wire-dumping targets never
/// go below debug. A `RUST_LOG` that does not parse, or names no module of this program,
/// is warned about once (in the same format) instead of silencing everything.
pub fn init(format: LogFormat) {
    let spec = std::env::var("RUST_LOG").ok();
    let (filter, warnings) = match spec.as_deref() {
        Some(s) if !s.trim().is_empty() => check_filter(s),
        _ => ("info".to_string(), Vec::new()),
    };
    let logger = env_logger::Builder::new()
        .parse_filters(&filter)
        .format(move |buf, record| {
            let line = render(
                format,
                record.level(),
                record.target(),
                record.args(),
                |v| {
                    let _ = record.key_values().visit(v);
                },
            );
            buf.write_all(line.as_bytes())
        })
        .build();
    let max: LevelFilter = logger.filter();
    // Only fails when a logger is already set, which nothing in this process does.
    if log::set_boxed_logger(Box::new(Capped(logger))).is_ok() {
        log::set_max_level(max);
    }
    // Written directly: the filter may well exclude warnings.
    for w in warnings {
        let line = render(
            format,
            Level::Warn,
            module_path!(),
            &format_args!("{w}"),
            |_| {},
        );
        eprint!("{line}");
    }
}

/// One log line, newline included.
fn render(
    format: LogFormat,
    level: Level,
    target: &str,
    message: &std::fmt::Arguments<'_>,
    fields: impl FnOnce(&mut Fields),
) -> String {
    let now = autoregister::api::time::format_rfc3339_micro(std::time::SystemTime::now());
    match format {
        LogFormat::Text if log::max_level() >= LevelFilter::Debug => {
            format!("{now} {level:5} {target}: {message}\n")
        }
        LogFormat::Text => format!("{now} {level:5} {message}\n"),
        LogFormat::Json => {
            // Written in this order (a JSON map would sort the keys): time, level, target,
            // message, then the line's fields; a field never overrides those four.
            let mut f = Fields(Vec::new());
            fields(&mut f);
            let fixed = [
                ("time", now),
                ("level", level.as_str().to_string()),
                ("target", target.to_string()),
                ("message", message.to_string()),
            ];
            let mut line = String::from("{");
            let pairs = fixed
                .into_iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::String(v)))
                .chain(f.0.into_iter().filter(|(k, _)| {
                    !matches!(k.as_str(), "time" | "level" | "target" | "message")
                }));
            for (i, (k, v)) in pairs.enumerate() {
                if i > 0 {
                    line.push(',');
                }
                line.push_str(&serde_json::Value::String(k).to_string());
                line.push(':');
                line.push_str(&v.to_string());
            }
            line.push_str("}\n");
            line
        }
    }
}

/// A line's key-value fields (`info!(name:% = n, cell:% = c; "...")`), as JSON strings.
struct Fields(Vec<(String, serde_json::Value)>);

impl<'kvs> log::kv::VisitSource<'kvs> for Fields {
    fn visit_pair(
        &mut self,
        key: log::kv::Key<'kvs>,
        value: log::kv::Value<'kvs>,
    ) -> Result<(), log::kv::Error> {
        self.0.push((key.to_string(), value.to_string().into()));
        Ok(())
    }
}

/// Crates whose log lines this program can print: a `RUST_LOG` module outside them
/// matches nothing.
const KNOWN_TARGETS: [&str; 6] = [
    "autoregister",
    "ureq",
    "ureq_proto",
    "rustls",
    "rustls_pki_types",
    "webpki",
];

/// `RUST_LOG` in env_logger's syntax (`LEVEL`, `MODULE`, `MODULE=LEVEL`, comma-separated,
/// `/TEXT` at the end): the directives to keep, and one warning for what is wrong. Invalid
/// directives are dropped (env_logger drops them too, with a line in a format of its own);
/// a module matching none of ours is kept, as asked, but said to log nothing.
fn check_filter(spec: &str) -> (String, Vec<String>) {
    let (mods, text) = match spec.split_once('/') {
        Some((m, t)) => (m, Some(t)),
        None => (spec, None),
    };
    let level = |s: &str| s.trim().parse::<LevelFilter>().is_ok();
    let known = |m: &str| {
        KNOWN_TARGETS.iter().any(|k| {
            m.strip_prefix(k)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
        })
    };
    let (mut keep, mut invalid, mut unknown) = (Vec::new(), Vec::new(), Vec::new());
    for d in mods.split(',').map(str::trim).filter(|d| !d.is_empty()) {
        let (module, lvl) = match d.split_once('=') {
            Some((m, l)) => (m.trim(), l.trim()),
            None if level(d) => {
                keep.push(d.to_string());
                continue;
            }
            None => (d, ""),
        };
        let bad_level = !lvl.is_empty() && !level(lvl);
        if module.is_empty() || bad_level || module.contains(char::is_whitespace) {
            invalid.push(d.to_string());
            continue;
        }
        if !known(module) {
            unknown.push(module.to_string());
        }
        keep.push(d.to_string());
    }
    let mut why = Vec::new();
    if !invalid.is_empty() {
        why.push(format!(
            "ignoring {} (not LEVEL, MODULE or MODULE=LEVEL)",
            invalid.join(", ")
        ));
    }
    if !unknown.is_empty() {
        why.push(format!(
            "{} is no level (error, warn, info, debug, trace, off) and no module of this \
             program (autoregister, ureq, rustls), so it logs nothing",
            unknown.join(", ")
        ));
    }
    let warnings = if why.is_empty() {
        Vec::new()
    } else {
        vec![format!("RUST_LOG={spec:?}: {}", why.join("; "))]
    };
    let mut filter = keep.join(",");
    if filter.is_empty() {
        // Nothing usable left: the default level, not silence.
        filter.push_str("info");
    }
    if let Some(t) = text {
        filter.push('/');
        filter.push_str(t);
    }
    (filter, warnings)
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

    #[test]
    fn a_rust_log_that_does_not_parse_is_warned_about_and_dropped() {
        let (f, w) = check_filter("debug");
        assert_eq!((f.as_str(), w.len()), ("debug", 0));
        let (f, w) = check_filter("autoregister=debug,ureq=info");
        assert_eq!((f.as_str(), w.len()), ("autoregister=debug,ureq=info", 0));
        // A typo of a level is a module of that name: everything else would be silent.
        let (f, w) = check_filter("verbose");
        assert_eq!(f, "verbose");
        assert!(w[0].contains("verbose is no level"), "{w:?}");
        let (f, w) = check_filter("autoregister=loud,info");
        assert_eq!(f, "info");
        assert!(w[0].contains("ignoring autoregister=loud"), "{w:?}");
        let (f, w) = check_filter("=debug");
        assert_eq!(f, "info");
        assert_eq!(w.len(), 1);
    }

    #[test]
    fn json_lines_carry_the_fields() {
        let line = render(
            LogFormat::Json,
            Level::Info,
            "autoregister::controller::sync",
            &format_args!("v1.x 2C create: ok"),
            |f| {
                f.0.push(("name".into(), "v1.x".into()));
                f.0.push(("cell".into(), "2C".into()));
            },
        );
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["level"], "INFO");
        assert_eq!(v["message"], "v1.x 2C create: ok");
        assert_eq!(
            (v["name"].as_str(), v["cell"].as_str()),
            (Some("v1.x"), Some("2C"))
        );
        assert!(v["time"].as_str().is_some_and(|t| t.ends_with('Z')));
        assert!(line.starts_with("{\"time\":"), "{line}");
    }
}
