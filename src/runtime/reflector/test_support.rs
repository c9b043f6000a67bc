//! Helpers for the reflector's unit tests: objects and a handler that records events.

use std::sync::Arc;

use parking_lot::Mutex;

use crate::api::{APIService, ObjectMeta};

use super::EventHandler;

/// An APIService with a name and a resourceVersion.
pub(super) fn svc(name: &str, rv: &str) -> APIService {
    let mut metadata = ObjectMeta::named(name);
    metadata.resource_version = Some(rv.into());
    APIService {
        metadata,
        ..Default::default()
    }
}

/// Records events as `add a@1`, `update a@1->2`, `delete a@2`.
#[derive(Default)]
pub(super) struct Recorder(pub(super) Mutex<Vec<String>>);

impl Recorder {
    pub(super) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock())
    }
}

fn at(o: &APIService) -> String {
    format!(
        "{}@{}",
        o.metadata.name.as_deref().unwrap_or(""),
        o.metadata.resource_version.as_deref().unwrap_or("")
    )
}

impl EventHandler<APIService> for Recorder {
    fn on_add(&self, obj: &Arc<APIService>) {
        self.0.lock().push(format!("add {}", at(obj)));
    }
    fn on_update(&self, old: &Arc<APIService>, new: &Arc<APIService>) {
        let rv = new.metadata.resource_version.as_deref().unwrap_or("");
        self.0.lock().push(format!("update {}->{rv}", at(old)));
    }
    fn on_delete(&self, obj: &Arc<APIService>) {
        self.0.lock().push(format!("delete {}", at(obj)));
    }
}
