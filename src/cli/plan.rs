//! `autoregister plan`: what `run` would do for every name, writing nothing.

use std::collections::{BTreeMap, BTreeSet};

use autoregister::api::APIService;
use autoregister::client::{Api, Canceller};
use autoregister::controller::load;
use autoregister::controller::{decide, Action, Current, Facts};
use autoregister::runtime::reflector::list_all;

use super::args::PlanArgs;
use super::{connect, exit, Failure};

/// Runs `plan`; returns the exit code.
pub fn plan(args: &PlanArgs) -> Result<i32, Failure> {
    let o = &args.ownership;
    if let Some(w) = o.upstream_key_warning() {
        eprintln!("autoregister: warning: {w}");
    }
    let ownership = o.ownership();
    let desired = load(&args.manifests, &ownership.label_key).map_err(Failure::usage)?;
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
    println!("{:width$}  CELL  {:7}  REASON", "NAME", "ACTION");
    for name in names {
        let current = existing
            .get(name)
            .map_or(Current::NotFound, Current::Present);
        // As if `run` started now: nothing synced yet, everything listed is present at start.
        let d = decide(
            &ownership,
            &Facts {
                desired: desired.get(name),
                current,
                synced_once: false,
                present_at_start: existing.contains_key(name),
                desired_set_empty: desired.is_empty(),
            },
        );
        let verb = d.action.verb();
        *counts.entry(verb).or_default() += 1;
        let detail = match &d.action {
            Action::Blocked(why) => format!(": {why}"),
            _ => String::new(),
        };
        println!(
            "{name:width$}  {:<4}  {verb:7}  {}{detail}",
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
