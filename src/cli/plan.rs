//! `autoregister plan`: what `run` would do for every name, writing nothing.

use std::collections::{BTreeMap, BTreeSet};

use autoregister::api::APIService;
use autoregister::client::Api;
use autoregister::controller::decision::{decide, Action, Current};
use autoregister::controller::manifests::ManifestSet;
use autoregister::runtime::reflector::list_all;

use super::args::PlanArgs;
use super::{connect, exit};

/// Runs `plan`; returns the exit code.
pub fn plan(args: &PlanArgs) -> i32 {
    let mut manifests = ManifestSet::new(&args.manifests);
    let loaded = manifests.reload();
    if !loaded.errors.is_empty() {
        for e in &loaded.errors {
            eprintln!("autoregister: {e}");
        }
        return exit::USAGE;
    }
    let client = match connect::client(&args.kube) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("autoregister: {e}");
            return exit::USAGE;
        }
    };
    let api: Api<APIService> = Api::all(client);
    let existing: BTreeMap<String, APIService> = match list_all(&api, 500, None) {
        Ok((items, _rv)) => items.into_iter().map(|o| (o.metadata.name.clone().unwrap_or_default(), o)).collect(),
        Err(e) => {
            eprintln!("autoregister: cannot list APIServices: {e}");
            return exit::FAILED;
        }
    };
    let names: BTreeSet<&String> = loaded.desired.keys().chain(existing.keys()).collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(4).max(4);
    println!("{:width$}  CELL  ACTION", "NAME");
    for name in names {
        let current = existing.get(name).map_or(Current::NotFound, Current::Present);
        // As if `run` started now: nothing synced yet, everything listed is present at start.
        let d = decide(loaded.desired.get(name), current, false, existing.contains_key(name));
        let verb = match &d.action {
            Action::None => "none",
            Action::Create(_) => "create",
            Action::Update(_) => "update",
            Action::Delete { .. } => "delete",
            Action::Error(_) => "error",
        };
        *counts.entry(verb).or_default() += 1;
        println!("{name:width$}  {:<4}  {verb}", d.cell.to_string());
    }
    let summary: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    println!("plan: {}", if summary.is_empty() { "nothing to do".to_string() } else { summary.join(", ") });
    exit::OK
}
