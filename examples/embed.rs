//! Embedding the controller in a plain `fn main`, no async runtime.
//!
//! `cargo run --example embed -- http://127.0.0.1:8080` (any API server URL): registers two
//! APIServices under this example's own ownership label, waits until both are in place,
//! deregisters the one it keeps continuously and shuts down. The one synced on start stays:
//! as upstream, such an object is only looked at when a controller starts (the next start
//! without it in the set deletes it).

use std::time::Duration;

use autoregister::{APIService, APIServiceSpec, Client, Config, Controller, ControllerOptions};

/// This program's own ownership label: it never touches objects labelled with another key
/// (such as the `autoregister` binary's), and they never touch its objects.
const LABEL_KEY: &str = "example.com/embed-example";

fn spec(version: &str) -> APIServiceSpec {
    APIServiceSpec {
        // No service: served by kube-apiserver itself (a "local" APIService), so the
        // example needs no backend.
        group: "embed.example.com".into(),
        version: version.into(),
        group_priority_minimum: 1000,
        version_priority: 15,
        ..Default::default()
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let server = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "http://127.0.0.1:8080".into());
    run(&server)
}

/// Registers both APIServices at `server`, deregisters the continuous one and shuts down.
pub fn run(server: &str) -> Result<(), Box<dyn std::error::Error>> {
    let mut config = Config::new(server);
    config.user_agent = "embed-example/0.1".into();
    let mut options = ControllerOptions::new(LABEL_KEY);
    // Removing its last names at the end is meant to delete them, not held back as a
    // manifest folder emptied by mistake would be.
    options.allow_empty = true;
    let controller = Controller::new(Client::new(config)?, options);

    // The upstream registration interface: sync continuously, or once at start.
    controller.add_api_service_to_sync(APIService::new("v1.embed.example.com", spec("v1")));
    controller.add_api_service_to_sync_on_start(APIService::new(
        "v1beta1.embed.example.com",
        spec("v1beta1"),
    ));
    controller.start();
    if let Err(pending) = controller.wait_converged(Duration::from_secs(10)) {
        controller.shutdown();
        return Err(format!("not registered: {pending:?}").into());
    }
    println!("registered v1.embed.example.com and v1beta1.embed.example.com");

    // The handle is Clone + Send + Sync: other threads may add or remove names meanwhile.
    controller.remove_api_service_to_sync("v1.embed.example.com");
    if let Err(pending) = controller.wait_converged(Duration::from_secs(10)) {
        controller.shutdown();
        return Err(format!("not deregistered: {pending:?}").into());
    }
    println!("deregistered v1.embed.example.com");
    controller.shutdown();
    Ok(())
}
