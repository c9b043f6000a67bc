//! Why an Event is recorded: its reason, type and action.

use std::fmt;

/// The reasons this controller records Events for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum EventReason {
    /// Created a desired APIService (action `Create`).
    Registered,
    /// Replaced a managed APIService's spec (action `Update`).
    Updated,
    /// Deleted a managed APIService that is no longer desired (action `Delete`).
    Deregistered,
    /// Took over a desired APIService that had no ownership label (`--adopt`; action `Adopt`).
    Adopted,
    /// Left a desired APIService alone because someone else owns it (Warning, action `Skip`).
    NotOwned,
    /// Refused to delete managed APIServices because the desired set became empty
    /// (Warning, action `Delete`; `--allow-empty` permits it).
    EmptySetRefused,
    /// An APIService of ours became unavailable (Warning, action `Check`): its
    /// `Available` condition turned `False`.
    Unavailable,
    /// An APIService of ours became available again (action `Check`).
    Available,
    /// Deleted an APIService of ours that stayed unavailable, held as withdrawn until its
    /// backend looks ready (Warning, action `Delete`).
    Withdrawn,
    /// Registered a withdrawn APIService again: its backend looks ready (action `Create`).
    Restored,
    /// The server refused a write as invalid (422); not sent again until the manifest or
    /// the object changes (Warning, action `Write`).
    Rejected,
    /// Held a desired APIService because its CA source gives no usable bundle (Warning,
    /// action `Update`: nothing is written until the source is fixed).
    CABundleInvalid,
    /// The APIService's CA bundle expires soon (Warning, action `Check`).
    CABundleExpiring,
    /// Another manager keeps rewriting a field the manifest declares, and we keep putting
    /// it back (Warning, action `Update`): named once per fight, with the field and writer.
    FieldFight,
}

impl EventReason {
    /// Every reason, for documentation and tests.
    pub const ALL: [EventReason; 14] = [
        EventReason::Registered,
        EventReason::Updated,
        EventReason::Deregistered,
        EventReason::Adopted,
        EventReason::NotOwned,
        EventReason::EmptySetRefused,
        EventReason::Unavailable,
        EventReason::Available,
        EventReason::Withdrawn,
        EventReason::Restored,
        EventReason::Rejected,
        EventReason::CABundleInvalid,
        EventReason::CABundleExpiring,
        EventReason::FieldFight,
    ];

    /// The Event's `reason`, CamelCase as Kubernetes writes them.
    pub fn as_str(self) -> &'static str {
        match self {
            EventReason::Registered => "Registered",
            EventReason::Updated => "Updated",
            EventReason::Deregistered => "Deregistered",
            EventReason::Adopted => "Adopted",
            EventReason::NotOwned => "NotOwned",
            EventReason::EmptySetRefused => "EmptySetRefused",
            EventReason::Unavailable => "Unavailable",
            EventReason::Available => "Available",
            EventReason::Withdrawn => "Withdrawn",
            EventReason::Restored => "Restored",
            EventReason::Rejected => "Rejected",
            EventReason::CABundleInvalid => "CABundleInvalid",
            EventReason::CABundleExpiring => "CABundleExpiring",
            EventReason::FieldFight => "FieldFight",
        }
    }

    /// `Normal` for a write, `Warning` for a refusal an operator should look at.
    pub fn event_type(self) -> &'static str {
        match self {
            EventReason::NotOwned
            | EventReason::EmptySetRefused
            | EventReason::Rejected
            | EventReason::Unavailable
            | EventReason::Withdrawn
            | EventReason::CABundleInvalid
            | EventReason::CABundleExpiring
            | EventReason::FieldFight => "Warning",
            _ => "Normal",
        }
    }

    /// The Event's `action`: what was done, or (for a refusal) not done.
    pub fn action(self) -> &'static str {
        match self {
            EventReason::Registered | EventReason::Restored => "Create",
            EventReason::Updated => "Update",
            EventReason::Deregistered | EventReason::EmptySetRefused | EventReason::Withdrawn => {
                "Delete"
            }
            EventReason::Unavailable | EventReason::Available => "Check",
            EventReason::Adopted => "Adopt",
            EventReason::NotOwned => "Skip",
            EventReason::Rejected => "Write",
            EventReason::CABundleInvalid => "Update",
            EventReason::CABundleExpiring => "Check",
            EventReason::FieldFight => "Update",
        }
    }
}

impl fmt::Display for EventReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
