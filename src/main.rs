//! The `autoregister` command.

fn main() {
    println!("autoregister {}", env!("CARGO_PKG_VERSION"));
}
