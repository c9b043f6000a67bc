//! The `autoregister` command.

mod cli;

use cli::args::{self, Command};
use cli::exit;

/// Logs to stderr, filtered by `RUST_LOG` (default `info`): `TIME LEVEL message`.
fn init_logging() {
    use std::io::Write as _;
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        // Our own UTC timestamp: env_logger's costs a date-time crate (~100 KB).
        .format(|buf, record| {
            let now = autoregister::api::time::format_rfc3339(std::time::SystemTime::now());
            writeln!(buf, "{now} {:5} {}", record.level(), record.args())
        })
        .init();
}

fn main() {
    init_logging();
    let code = match args::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => {
            println!("{}", args::USAGE);
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
