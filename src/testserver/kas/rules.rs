//! kube-apiserver's own autoregister decision for one name, as a pure function.
//!
//! The same table as `controller/decision` (upstream's), but for kube-apiserver's desired set
//! and the kube-aggregator label: it is the other side of the fight a standalone controller
//! using that label would start, so the test server decides exactly as upstream does.

use serde_json::Value;

/// kube-aggregator's ownership label.
pub(crate) const LABEL: &str = "kube-aggregator.kubernetes.io/automanaged";
/// Label value: synced on start only.
pub(crate) const ON_START: &str = "onstart";
/// Label value: synced continuously.
pub(crate) const ALWAYS: &str = "true";

/// How kube-apiserver syncs a name it declares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// A built-in group: created/updated once per process start (`AddAPIServiceToSyncOnStart`).
    OnStart,
    /// A CRD group: kept registered (`AddAPIServiceToSync`).
    Always,
}

/// One APIService kube-apiserver declares.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Desired {
    /// The whole `spec` it writes.
    pub(crate) spec: Value,
    /// On start or always.
    pub(crate) mode: Mode,
}

impl Desired {
    /// The label value objects it creates carry.
    pub(crate) fn label_value(&self) -> &'static str {
        match self.mode {
            Mode::OnStart => ON_START,
            Mode::Always => ALWAYS,
        }
    }
}

/// What to do about one name.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing.
    None,
    /// Create the desired object.
    Create,
    /// Replace the current object's spec with the desired one.
    Update,
    /// Delete the current object with this UID as precondition.
    Delete(String),
}

/// What is known about one name.
pub(crate) struct Facts<'a> {
    /// What kube-apiserver declares for it.
    pub(crate) desired: Option<&'a Desired>,
    /// The stored object.
    pub(crate) current: Option<&'a Value>,
    /// Whether this process already synced the name successfully.
    pub(crate) synced: bool,
    /// Whether an `onstart`-labelled object had this name when this process started.
    pub(crate) at_start: bool,
}

/// The action and its table cell (`2B`, `6A`, …).
pub(crate) fn decide(f: &Facts<'_>) -> (Action, String) {
    let column = match f.desired.map(|d| d.mode) {
        None => 'A',
        Some(Mode::OnStart) => 'B',
        Some(Mode::Always) => 'C',
    };
    let label = f
        .current
        .and_then(|c| c.pointer("/metadata/labels"))
        .and_then(|l| l.get(LABEL))
        .and_then(Value::as_str);
    let row = match (f.current, label) {
        (None, _) => 2,
        (Some(_), Some(ON_START)) if f.at_start => 5,
        (Some(_), Some(ON_START)) => 4,
        (Some(_), Some(ALWAYS)) => 6,
        (Some(_), _) => 3,
    };
    let cell = format!("{row}{column}");
    let on_start_desired = f.desired.is_some_and(|d| d.mode == Mode::OnStart);
    let action = match (f.current, f.desired) {
        // Once rule for a built-in: synced once, never recreated nor restored (2B, 5B, 6B).
        _ if on_start_desired && f.synced => Action::None,
        (None, None) => Action::None,
        (None, Some(_)) => Action::Create,
        (Some(_), _) if row == 3 || row == 4 => Action::None,
        (Some(_), _) if row == 5 && f.synced => Action::None,
        (Some(cur), None) => Action::Delete(
            cur.pointer("/metadata/uid")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_string(),
        ),
        (Some(cur), Some(d)) if cur.get("spec") == Some(&d.spec) => Action::None,
        (Some(_), Some(_)) => Action::Update,
    };
    (action, cell)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(label: Option<&str>) -> Value {
        let mut o = json!({"metadata": {"name": "v1.x", "uid": "u1"}, "spec": {"group": "x"}});
        if let Some(l) = label {
            o["metadata"]["labels"] = json!({LABEL: l});
        }
        o
    }

    fn d(mode: Mode) -> Desired {
        Desired {
            spec: json!({"group": "x"}),
            mode,
        }
    }

    fn run(
        desired: Option<&Desired>,
        current: Option<&Value>,
        synced: bool,
        at_start: bool,
    ) -> (Action, String) {
        decide(&Facts {
            desired,
            current,
            synced,
            at_start,
        })
    }

    #[test]
    fn upstream_table_for_its_own_desired_set() {
        let (on, al) = (d(Mode::OnStart), d(Mode::Always));
        let (none, start, always, other) = (
            obj(None),
            obj(Some(ON_START)),
            obj(Some(ALWAYS)),
            obj(Some("x")),
        );
        let del = || Action::Delete("u1".into());
        // row 2
        assert_eq!(run(None, None, false, false), (Action::None, "2A".into()));
        assert_eq!(
            run(Some(&on), None, false, false),
            (Action::Create, "2B".into())
        );
        assert_eq!(
            run(Some(&on), None, true, false),
            (Action::None, "2B".into())
        );
        assert_eq!(
            run(Some(&al), None, true, false),
            (Action::Create, "2C".into())
        );
        // row 3: never touched, whatever the label is when it is not ours
        for o in [&none, &other] {
            assert_eq!(run(None, Some(o), false, false).0, Action::None);
            assert_eq!(run(Some(&al), Some(o), false, false).0, Action::None);
        }
        // row 4: onstart but added after start
        assert_eq!(
            run(None, Some(&start), false, false),
            (Action::None, "4A".into())
        );
        // row 5: onstart, present at start: once
        assert_eq!(run(None, Some(&start), false, true), (del(), "5A".into()));
        assert_eq!(
            run(None, Some(&start), true, true),
            (Action::None, "5A".into())
        );
        assert_eq!(run(Some(&al), Some(&start), false, true).0, Action::None); // same spec
        let mut drifted = start.clone();
        drifted["spec"] = json!({"group": "y"});
        assert_eq!(
            run(Some(&al), Some(&drifted), false, true),
            (Action::Update, "5C".into())
        );
        assert_eq!(
            run(Some(&al), Some(&drifted), true, true),
            (Action::None, "5C".into())
        );
        // row 6: always
        assert_eq!(run(None, Some(&always), true, false), (del(), "6A".into()));
        let mut drifted = always.clone();
        drifted["spec"] = json!({"group": "y"});
        assert_eq!(
            run(Some(&al), Some(&drifted), true, false),
            (Action::Update, "6C".into())
        );
        assert_eq!(
            run(Some(&on), Some(&drifted), false, false),
            (Action::Update, "6B".into())
        );
        assert_eq!(
            run(Some(&on), Some(&drifted), true, false),
            (Action::None, "6B".into())
        );
    }
}
