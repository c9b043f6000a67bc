//! `autoregister explain`: why each APIService is (not) served, read from the cluster and
//! decided by [`autoregister::diagnosis`]; nothing is written.

use std::io::Write;

use serde_json::{json, Value};

use autoregister::api::APIService;
use autoregister::client::{Api, Canceller};
use autoregister::controller::availability::Observed;
use autoregister::diagnosis::{diagnose, gather, Diagnosis, Verdict};
use autoregister::runtime::reflector::list_all;

use super::args::{ExplainArgs, Output};
use super::signals::Stop;
use super::{connect, exit, Failure};

/// Runs `explain`; returns the exit code: 0 when every APIService examined is served, 1
/// when one is not, 2 (a [`Failure`]) on a usage or connection error.
pub fn explain(args: &ExplainArgs, stop: &Stop) -> Result<i32, Failure> {
    let cancel = Canceller::new();
    {
        let cancel = cancel.clone();
        stop.on_signal(move || cancel.cancel());
    }
    let client = connect::client(&args.kube)?
        .with_timeout(args.timeout)
        .with_canceller(&cancel);
    let api: Api<APIService> = Api::all(client.clone());
    let cannot = |why: String| Failure {
        code: exit::USAGE,
        messages: vec![format!("cannot read APIServices: {why}")],
    };
    let chosen: Vec<APIService> = if args.names.is_empty() {
        let listed = match list_all(&api, 500, None, &cancel) {
            Ok(Some(l)) => l.items,
            Ok(None) => return Err(cannot("no answer within --timeout".into())),
            Err(e) => return Err(cannot(e.to_string())),
        };
        listed
            .into_iter()
            .filter(|o| args.all || !Observed::of(o).is_available())
            .collect()
    } else {
        let mut got = Vec::new();
        for name in &args.names {
            match api.get(name) {
                Ok(o) => got.push(o),
                Err(e) if e.is_not_found() => {
                    return Err(Failure::usage([format!("apiservice {name:?} not found")]))
                }
                Err(e) => return Err(cannot(e.to_string())),
            }
        }
        got
    };
    if stop.signalled() {
        return Err(Failure::failed(
            "stopped by a signal before the explanation was complete",
        ));
    }
    let diagnoses: Vec<Diagnosis> = gather(&client, chosen).iter().map(diagnose).collect();
    if stop.signalled() {
        return Err(Failure::failed(
            "stopped by a signal before the explanation was complete",
        ));
    }
    match args.output {
        Output::Text => print_text(&diagnoses, args),
        Output::Json => print_json(&diagnoses),
    }
    let served = diagnoses.iter().all(|d| d.verdict != Verdict::NotServed);
    Ok(if served { exit::OK } else { exit::FAILED })
}

fn print_text(diagnoses: &[Diagnosis], args: &ExplainArgs) {
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let r = write_text(&mut out, diagnoses, args).and_then(|()| out.flush());
    if let Err(e) = r {
        super::output::write_failed(&e);
    }
}

fn write_text(
    out: &mut impl Write,
    diagnoses: &[Diagnosis],
    args: &ExplainArgs,
) -> std::io::Result<()> {
    if diagnoses.is_empty() {
        return writeln!(
            out,
            "every APIService is Available=True; --all explains each one"
        );
    }
    for (i, d) in diagnoses.iter().enumerate() {
        if i > 0 {
            writeln!(out)?;
        }
        writeln!(
            out,
            "{}: {} ({})",
            d.name,
            d.verdict.as_str(),
            d.cause.code()
        )?;
        writeln!(out, "  cause: {}", d.summary)?;
        if !d.evidence.is_empty() {
            writeln!(out, "  evidence:")?;
            for e in &d.evidence {
                writeln!(out, "    {e}")?;
            }
        }
        if !d.unchecked.is_empty() {
            writeln!(out, "  not checked:")?;
            for u in &d.unchecked {
                writeln!(out, "    {u}")?;
            }
        }
        if !d.fix.is_empty() {
            writeln!(out, "  fix: {}", d.fix)?;
        }
        if !d.consequences.is_empty() {
            writeln!(out, "  meanwhile:")?;
            for c in &d.consequences {
                writeln!(out, "    {c}")?;
            }
        }
    }
    let not_served = diagnoses
        .iter()
        .filter(|d| d.verdict == Verdict::NotServed)
        .count();
    if args.all || diagnoses.len() > 1 {
        writeln!(out)?;
        writeln!(
            out,
            "explain: {} examined, {not_served} not served",
            diagnoses.len()
        )?;
    }
    Ok(())
}

fn print_json(diagnoses: &[Diagnosis]) {
    let items: Vec<Value> = diagnoses.iter().map(to_json).collect();
    match serde_json::to_string_pretty(&json!({ "items": items })) {
        Ok(text) => super::output::print(&text),
        Err(e) => eprintln!("autoregister: cannot encode the explanation: {e}"),
    }
}

fn to_json(d: &Diagnosis) -> Value {
    json!({
        "name": d.name,
        "verdict": d.verdict.as_str(),
        "cause": d.cause.code(),
        "summary": d.summary,
        "evidence": d.evidence,
        "unchecked": d.unchecked,
        "fix": d.fix,
        "consequences": d.consequences,
    })
}
