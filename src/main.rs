//! The `autoregister` command.

mod allocator;
mod cli;

use cli::args::{self, Command};
use cli::exit;
use cli::output::print;

fn main() {
    allocator::purge_freed_memory_at_once();
    cli::output::die_quietly_on_closed_stdout();
    let parsed = args::parse(std::env::args_os().skip(1));
    let format = match &parsed {
        Ok(Command::Run(a)) => a.log_format,
        Ok(Command::Plan(a)) => a.log_format,
        _ => args::LogFormat::Text,
    };
    cli::logging::init(format);
    let code = match parsed {
        Ok(Command::Help(topic)) => match args::help(topic.as_deref()) {
            Ok(text) => {
                print(&text);
                exit::OK
            }
            Err(e) => usage_error(&e),
        },
        Ok(Command::Version) => {
            use autoregister::build_info::{COMMIT, TARGET, VERSION};
            print(&format!(
                "autoregister {VERSION} (commit {COMMIT}, {TARGET})\n\
                 default ownership label: {}",
                autoregister::api::DEFAULT_LABEL_KEY
            ));
            exit::OK
        }
        Ok(Command::Run(a)) => match args::check_manifests(&a.manifests) {
            Ok(()) => report(cli::run::run(&a)),
            Err(e) => usage_error(&e),
        },
        Ok(Command::Plan(a)) => match args::check_manifests(&a.manifests) {
            Ok(()) => report(cli::plan::plan(&a)),
            Err(e) => usage_error(&e),
        },
        Err(e) => usage_error(&e),
    };
    std::process::exit(code);
}

/// Prints a usage error with the synopsis; exit 2.
fn usage_error(e: &str) -> i32 {
    eprintln!(
        "autoregister: {e}\n\n{}\n\n`autoregister help [COMMAND]` says more.",
        args::USAGE
    );
    exit::USAGE
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
