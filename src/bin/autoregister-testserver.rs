//! The test API server as a process, for the demo and for tools outside the repo.

fn main() {
    eprintln!("not yet");
    std::process::exit(2);
}
