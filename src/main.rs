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
        Ok(Command::Explain(a)) => a.log_format,
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
        Ok(Command::Run(a)) => stoppable(|stop| match args::check_manifests(&a.manifests) {
            Ok(()) => report(cli::run::run(&a, stop)),
            Err(e) => usage_error(&e),
        }),
        Ok(Command::Plan(a)) => stoppable(|stop| match args::check_manifests(&a.manifests) {
            Ok(()) => report(cli::plan::plan(&a, stop)),
            Err(e) => usage_error(&e),
        }),
        Ok(Command::Explain(a)) => stoppable(|stop| report(cli::explain::explain(&a, stop))),
        Err(e) => usage_error(&e),
    };
    std::process::exit(code);
}

/// Runs a command with SIGTERM/SIGINT handled from its first instant: before it reads a
/// manifest or a kubeconfig, runs an exec plugin or connects (a signal before would kill
/// the process silently, as the default action does).
fn stoppable(command: impl FnOnce(&cli::signals::Stop) -> i32) -> i32 {
    match cli::signals::install() {
        Ok(stop) => command(&stop),
        Err(e) => {
            eprintln!("autoregister: cannot install signal handlers: {e}");
            exit::FAILED
        }
    }
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
