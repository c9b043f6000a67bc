//! Manifests: the desired set read from a file or a directory of YAML/JSON files.
//!
//! `PATH` is a file, or a directory whose `*.yaml`, `*.yml` and `*.json` files are
//! read in name order (not recursively; dotfiles and other files are ignored).
//! YAML files may hold several documents; `List` and `APIServiceList` objects
//! expand to their items. Only `apiregistration.k8s.io/v1` `APIService` objects
//! are accepted. An object whose ownership label (ours or, for compatibility,
//! `kube-aggregator.kubernetes.io/automanaged`) is `onstart` is synced on start,
//! every other one continuously.
//!
//! Objects are decoded strictly (`schema`: unknown fields and wrong types, placed at their
//! line and column by `locate`, with a `suggest`ion) and checked against the rules
//! kube-apiserver applies (`crate::api::validation`), so a manifest the server would refuse
//! never reaches a write.
//!
//! A file over [`MAX_MANIFEST_BYTES`] (16 MiB) is refused without being read whole.
//!
//! [`load`] reads PATH once and fails on any error; [`ManifestSet`] re-reads it
//! while running and keeps a broken file's last good objects; [`Reloader`] adds
//! the policy of when to re-read and what to apply.

mod documents;
mod error;
mod files;
mod from_str;
mod json_value;
mod locate;
mod object;
mod parse;
mod reload;
mod schema;
mod set;
pub(crate) mod suggest;
#[cfg(test)]
mod testutil;

pub use error::ManifestError;
pub use files::{fingerprint, manifest_files, read_manifest, MAX_MANIFEST_BYTES};
pub use from_str::parse_api_services;
pub use parse::{parse_file, Manifest};
pub use reload::{Poll, Reloaded, Reloader};
pub use set::{load, ManifestSet, Reload};
