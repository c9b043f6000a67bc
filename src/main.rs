//! The `autoregister` command.

mod cli;

use cli::args::{self, Command};
use cli::exit;

fn main() {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("info"))
        .format_target(false)
        .init();
    let code = match args::parse(std::env::args_os().skip(1)) {
        Ok(Command::Help) => {
            println!("{}", args::USAGE);
            exit::OK
        }
        Ok(Command::Version) => {
            println!("autoregister {}", env!("CARGO_PKG_VERSION"));
            exit::OK
        }
        Ok(Command::Run(a)) => cli::run::run(&a),
        Ok(Command::Plan(a)) => cli::plan::plan(&a),
        Err(e) => {
            eprintln!("autoregister: {e}\n\n{}", args::USAGE);
            exit::USAGE
        }
    };
    std::process::exit(code);
}
