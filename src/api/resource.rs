//! What the generic client and runtime need to know about a kind.

use serde::{de::DeserializeOwned, Serialize};

use super::ObjectMeta;

/// A Kubernetes kind served at `/apis/<group>/<version>/<plural>` (or `/api/v1` for the core group).
pub trait Resource: Serialize + DeserializeOwned + Clone + Send + Sync + 'static {
    /// API group; empty for the core group.
    const GROUP: &'static str;
    /// API version within the group, e.g. `v1`.
    const VERSION: &'static str;
    /// Kind, e.g. `APIService`.
    const KIND: &'static str;
    /// Lower-case plural used in URLs, e.g. `apiservices`.
    const PLURAL: &'static str;
    /// Whether objects live in a namespace.
    const NAMESPACED: bool;

    /// The object's metadata.
    fn meta(&self) -> &ObjectMeta;
    /// The object's metadata, mutable.
    fn meta_mut(&mut self) -> &mut ObjectMeta;

    /// `group/version`, or `version` for the core group.
    fn api_version() -> String {
        if Self::GROUP.is_empty() {
            Self::VERSION.to_string()
        } else {
            format!("{}/{}", Self::GROUP, Self::VERSION)
        }
    }

    /// Path prefix of the group version: `/apis/<group>/<version>` or `/api/v1`.
    fn group_version_path() -> String {
        if Self::GROUP.is_empty() {
            format!("/api/{}", Self::VERSION)
        } else {
            format!("/apis/{}/{}", Self::GROUP, Self::VERSION)
        }
    }

    /// The object's name, or `""` when unset.
    fn name(&self) -> &str {
        self.meta().name.as_deref().unwrap_or("")
    }

    /// The object's resourceVersion, or `""` when unset.
    fn resource_version(&self) -> &str {
        self.meta().resource_version.as_deref().unwrap_or("")
    }
}
