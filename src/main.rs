//! The `autoregister` command.

mod cli;

use cli::args::{self, Command};
use cli::exit;

/// Logs to stderr, filtered by `RUST_LOG` (default `info`): `TIME LEVEL message`, and at
/// `debug`/`trace` `TIME LEVEL target: message` so our lines stand apart from rustls/ureq.
/// The HTTP and TLS crates are capped at debug: their trace output dumps request headers,
/// bearer tokens included.
fn init_logging() {
    use std::io::Write as _;
    let logger =
        env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
            // Our own UTC timestamp: env_logger's costs a date-time crate (~100 KB).
            .format(|buf, record| {
                let now = log_time(std::time::SystemTime::now());
                if log::max_level() >= log::LevelFilter::Debug {
                    writeln!(
                        buf,
                        "{now} {:5} {}: {}",
                        record.level(),
                        record.target(),
                        record.args()
                    )
                } else {
                    writeln!(buf, "{now} {:5} {}", record.level(), record.args())
                }
            })
            .build();
    let max = logger.filter();
    // Only fails if a logger is already installed, which nothing else here does.
    if log::set_boxed_logger(Box::new(NoWireDump(logger))).is_ok() {
        log::set_max_level(max);
    }
}

/// Targets whose `trace` records carry the wire (headers, tokens).
const WIRE_TARGETS: &[&str] = &["ureq", "ureq_proto", "rustls"];

/// `env_logger`, minus trace records of [`WIRE_TARGETS`] whatever `RUST_LOG` says.
struct NoWireDump(env_logger::Logger);

impl log::Log for NoWireDump {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        let wire = m.level() == log::Level::Trace
            && WIRE_TARGETS.iter().any(|t| {
                m.target()
                    .strip_prefix(t)
                    .is_some_and(|rest| rest.is_empty() || rest.starts_with("::"))
            });
        !wire && self.0.enabled(m)
    }

    fn log(&self, record: &log::Record<'_>) {
        if self.enabled(record.metadata()) {
            self.0.log(record);
        }
    }

    fn flush(&self) {
        self.0.flush();
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

fn main() {
    init_logging();
    let code = match args::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => {
            println!("{}\n\n{}", args::USAGE, args::FLAGS);
            exit::OK
        }
        Ok(Command::Version) => {
            println!("autoregister {}", env!("CARGO_PKG_VERSION"));
            println!(
                "default ownership label: {}",
                autoregister::api::DEFAULT_LABEL_KEY
            );
            exit::OK
        }
        Ok(Command::Run(a)) => report(cli::run::run(&a)),
        Ok(Command::Plan(a)) => report(cli::plan::plan(&a)),
        Err(e) => {
            eprintln!("autoregister: {e}\n\n{}", args::USAGE);
            exit::USAGE
        }
    };
    std::process::exit(code);
}

/// The exit code of a command, printing its failure messages.
fn report(result: Result<i32, cli::Failure>) -> i32 {
    result.unwrap_or_else(|f| {
        for m in &f.messages {
            eprintln!("autoregister: {m}");
        }
        f.code
    })
}
