//! One name of the plan: the decision `run` would take at its start, and what it means.

use serde_json::{json, Value};

use autoregister::api::APIService;
use autoregister::controller::ca::PlannedBundle;
use autoregister::controller::fields::field_changes;
use autoregister::controller::{Action, Cell, Decision, Ownership};

use super::diff::{self, Change};

/// What the server said to the dry run of this name's write.
#[derive(Clone, Debug, PartialEq)]
pub enum DryRun {
    /// No write planned, or `--dry-run=none`.
    NotSent,
    /// The server would accept it.
    Accepted,
    /// The server refused it, in its words.
    Refused(String),
}

/// One name of the plan.
pub struct Entry {
    /// APIService name.
    pub name: String,
    /// Table cell.
    pub cell: Cell,
    /// The decision's action (the write sent in a dry run).
    pub action: Action,
    /// The rule that decided.
    pub reason: &'static str,
    /// Why it is blocked or cannot be decided.
    pub detail: Option<String>,
    /// For an update or adoption: the fields that would change.
    pub changes: Vec<Change>,
    /// Fields of our object the manifest does not declare, left to the managers that set
    /// them (`spec.caBundle` injected by cainjector).
    pub kept: Vec<(String, Vec<String>)>,
    /// For a delete: why.
    pub why: Option<String>,
    /// The "once" rule, where it applies: what `run` does at its start and what a running
    /// instance does.
    pub once: Option<&'static str>,
    /// Desired, ours, or blocked: listed without `--all`.
    pub involves_us: bool,
    /// The dry run's answer.
    pub dry_run: DryRun,
    /// The `Available` condition of our object: `True`, `False`, `Unknown`; `-` otherwise.
    pub available: &'static str,
    /// Why our object is unavailable.
    pub unavailable: Option<String>,
    /// A running instance holds the name withdrawn: its `Withdrawn` Event's note.
    pub withdrawn: Option<String>,
    /// A running instance reported a fight over it within the last window: when, and its
    /// `FieldFight` Event's note (the fields, the other writer, the pace).
    pub fight: Option<(String, String)>,
    /// The CA bundle it would carry and where it comes from (from a source or literal).
    pub ca: Option<PlannedBundle>,
}

/// An onstart write: `run` makes it at its start, a running instance only until it has synced the name.
const ONCE_WRITE: &str = "onstart: run writes this once, at its start; a running instance that \
     has already synced this name leaves later changes alone until it restarts";
/// An onstart object present at start and no longer desired.
const ONCE_DELETE: &str = "onstart: run deletes this once, at its start; a running instance \
     that has already synced this name does not";

impl Entry {
    /// The entry for `name` from its decision, the object listed under it (if any) and the
    /// ownership policy.
    pub fn new(
        name: &str,
        d: Decision,
        current: Option<&APIService>,
        desired: bool,
        ownership: &Ownership,
    ) -> Entry {
        let ours = current.is_some_and(|c| ownership.is_managed(c));
        let mut e = Entry {
            name: name.to_string(),
            cell: d.cell,
            action: Action::None,
            reason: d.reason,
            detail: None,
            changes: Vec::new(),
            kept: Vec::new(),
            why: None,
            once: None,
            involves_us: desired || ours,
            dry_run: DryRun::NotSent,
            available: "-",
            unavailable: None,
            withdrawn: None,
            fight: None,
            ca: None,
        };
        let writes = !matches!(
            d.action,
            Action::None | Action::Blocked(_) | Action::Error(_)
        );
        if writes && (d.cell.column() == 'B' || d.cell.row() == 5) {
            e.once = Some(if matches!(d.action, Action::Delete { .. }) {
                ONCE_DELETE
            } else {
                ONCE_WRITE
            });
        }
        match &d.action {
            Action::Blocked(why) | Action::Error(why) => e.detail = Some(why.clone()),
            // A create's object is rendered when printed (a plan of thousands of creates
            // would otherwise hold each twice).
            Action::Create(_) => {}
            Action::Update(a) | Action::Adopt(a) => {
                if let Some(cur) = current {
                    e.changes = field_changes(&a.config, &a.differs, &a.released, cur)
                        .into_iter()
                        .map(|c| Change {
                            field: c.field.to_string(),
                            old: c.old,
                            new: c.new,
                        })
                        .collect();
                }
            }
            Action::Delete { .. } => {
                let label = current
                    .and_then(|c| ownership.managed_value(c))
                    .unwrap_or_default();
                e.why = Some(format!(
                    "ours ({}={label}) and in no manifest",
                    ownership.label_key
                ));
            }
            Action::None => {}
        }
        e.action = d.action;
        e
    }

    /// For a create: the object that would be sent.
    pub fn object(&self) -> Option<Value> {
        match &self.action {
            Action::Create(obj) => serde_json::to_value(obj).ok(),
            _ => None,
        }
    }

    /// The entry as one JSON object of the `-o json` document.
    pub fn to_json(&self) -> Value {
        let mut m = serde_json::Map::new();
        m.insert("name".into(), json!(self.name));
        m.insert("cell".into(), json!(self.cell.to_string()));
        m.insert("action".into(), json!(self.action.verb()));
        m.insert("reason".into(), json!(self.reason));
        if let Some(d) = &self.detail {
            m.insert("detail".into(), json!(d));
        }
        if !self.changes.is_empty() {
            let changes: Vec<Value> = self
                .changes
                .iter()
                .map(|c| json!({"field": c.field, "old": c.old, "new": c.new}))
                .collect();
            m.insert("changes".into(), Value::Array(changes));
        }
        if !self.kept.is_empty() {
            let kept: Vec<Value> = self
                .kept
                .iter()
                .map(|(field, by)| json!({"field": field, "managers": by}))
                .collect();
            m.insert("kept".into(), Value::Array(kept));
        }
        if let Some(o) = self.object() {
            m.insert("object".into(), o);
        }
        if let Some(w) = &self.why {
            m.insert("why".into(), json!(w));
        }
        if let Some(o) = self.once {
            m.insert("once".into(), json!(o));
        }
        if let Some(b) = &self.ca {
            m.insert("caBundle".into(), bundle_json(b));
            // The bundle is described above; base64 of it helps nobody.
            if let Some(spec) = m.get_mut("object").and_then(|o| o.get_mut("spec")) {
                if let Some(v) = spec.get_mut("caBundle") {
                    *v = json!(diff::shown("caBundle", Some(v)));
                }
            }
        }
        let dry = match &self.dry_run {
            DryRun::NotSent => json!({"result": "not sent"}),
            DryRun::Accepted => json!({"result": "accepted"}),
            DryRun::Refused(msg) => json!({"result": "refused", "message": msg}),
        };
        m.insert("dryRun".into(), dry);
        m.insert("available".into(), json!(self.available));
        if let Some(u) = &self.unavailable {
            m.insert("unavailable".into(), json!(u));
        }
        if let Some(w) = &self.withdrawn {
            m.insert("withdrawn".into(), json!(w));
        }
        if let Some(f) = &self.fight {
            m.insert("fight".into(), json!({"reportedAt": f.0, "note": f.1}));
        }
        Value::Object(m)
    }

    /// The lines under the entry's row in text output.
    pub fn detail_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        out.extend(self.changes.iter().map(Change::line));
        out.extend(
            self.kept
                .iter()
                .map(|(field, by)| format!("{field}: kept, set by {}", by.join(", "))),
        );
        if let Action::Create(obj) = &self.action {
            if let Ok(spec) = serde_json::to_value(&obj.spec) {
                out.extend(diff::leaves("spec", &spec));
            }
            for (k, v) in obj.metadata.labels.iter().flat_map(|l| l.iter()) {
                out.push(format!("metadata.labels[{k:?}]: {v}"));
            }
        }
        if let Some(b) = &self.ca {
            out.extend(bundle_lines(b));
        }
        if let Some(w) = &self.why {
            out.push(format!("why: {w}"));
        }
        if let Some(o) = self.once {
            out.push(o.to_string());
        }
        if let Some(u) = &self.unavailable {
            out.push(u.clone());
        }
        if let Some(w) = &self.withdrawn {
            out.push(format!("withdrawn by a running instance: {w}"));
        }
        if let Some((at, note)) = &self.fight {
            out.push(format!(
                "fight reported by a running instance at {at}: {note}"
            ));
        }
        match &self.dry_run {
            DryRun::NotSent => {}
            DryRun::Accepted => out.push("dry run: accepted by the server".into()),
            DryRun::Refused(msg) => out.push(format!("dry run: REFUSED by the server: {msg}")),
        }
        out
    }
}

/// A bundle as subject, fingerprint and expiry per certificate, never as base64.
fn bundle_lines(b: &PlannedBundle) -> Vec<String> {
    let from = match &b.source {
        Some(s) => format!("from {s}"),
        None => "literal".to_string(),
    };
    match &b.bundle {
        Ok(bundle) => {
            let n = bundle.certs.len();
            let mut out = vec![format!(
                "caBundle {from}: {n} certificate{}",
                if n == 1 { "" } else { "s" }
            )];
            out.extend(bundle.certs.iter().map(|c| {
                format!(
                    "  subject={} sha256={} notAfter={}",
                    c.subject,
                    c.sha256,
                    autoregister::api::time::format_rfc3339(c.not_after)
                )
            }));
            out
        }
        // A literal bundle that does not parse is still written as given.
        Err(why) if b.source.is_none() => vec![format!("caBundle {from}: not summarised: {why}")],
        // A source's error is the entry's detail already.
        Err(_) => Vec::new(),
    }
}

/// The `caBundle` member of an entry's JSON: source, and certificates or the error.
fn bundle_json(b: &PlannedBundle) -> Value {
    let source = b.source.as_ref().map(|s| s.to_string());
    match &b.bundle {
        Ok(bundle) => json!({
            "source": source,
            "certificates": bundle.certs.iter().map(|c| json!({
                "subject": c.subject,
                "sha256": c.sha256,
                "notAfter": autoregister::api::time::format_rfc3339(c.not_after),
            })).collect::<Vec<_>>(),
        }),
        Err(why) => json!({"source": source, "error": why}),
    }
}
