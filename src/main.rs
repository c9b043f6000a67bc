//! The `autoregister` command.

mod allocator;
mod cli;

use cli::args::{self, Command};
use cli::exit;

fn main() {
    allocator::purge_freed_memory_at_once();
    cli::logging::init();
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
