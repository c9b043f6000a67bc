//! `autoregister plan`: what `run` would do for every name, writing nothing.

use std::collections::{BTreeMap, BTreeSet};

use autoregister::api::APIService;
use autoregister::client::{Api, Canceller};
use autoregister::controller::load;
use autoregister::controller::{decide, Current};
use autoregister::runtime::reflector::list_all;

use super::args::PlanArgs;
use super::{connect, exit, Failure};

/// Runs `plan`; returns the exit code.
pub fn plan(args: &PlanArgs) -> Result<i32, Failure> {
    let desired = load(&args.manifests).map_err(Failure::usage)?;
    let client = connect::client(&args.kube)?;
    let api: Api<APIService> = Api::all(client);
    let existing: BTreeMap<String, APIService> = match list_all(&api, 500, None, &Canceller::new())
    {
        Ok(listed) => listed
            .into_iter()
            .flat_map(|l| l.items)
            .map(|o| (o.metadata.name.clone().unwrap_or_default(), o))
            .collect(),
        Err(e) => return Err(Failure::failed(format!("cannot list APIServices: {e}"))),
    };
    let names: BTreeSet<&String> = desired.keys().chain(existing.keys()).collect();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    let width = names.iter().map(|n| n.len()).max().unwrap_or(4).max(4);
    println!("{:width$}  CELL  {:6}  REASON", "NAME", "ACTION");
    for name in names {
        let current = existing
            .get(name)
            .map_or(Current::NotFound, Current::Present);
        // As if `run` started now: nothing synced yet, everything listed is present at start.
        let d = decide(
            desired.get(name),
            current,
            false,
            existing.contains_key(name),
        );
        let verb = d.action.verb();
        *counts.entry(verb).or_default() += 1;
        println!(
            "{name:width$}  {:<4}  {verb:6}  {}",
            d.cell.to_string(),
            d.reason
        );
    }
    let summary: Vec<String> = counts.iter().map(|(v, n)| format!("{n} {v}")).collect();
    println!(
        "plan: {}",
        if summary.is_empty() {
            "nothing to do".to_string()
        } else {
            summary.join(", ")
        }
    );
    Ok(exit::OK)
}
