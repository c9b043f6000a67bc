//! One read of a source, for `plan` (no watch: it runs once and writes nothing).

use base64::Engine;

use super::pem::CaBundle;
use super::registry::{read_file, Unresolved};
use super::source::CaSource;
use crate::api::{ConfigMap, Secret};
use crate::client::{Api, Client, ListParams};

/// What `source` holds now, read once (a file from disk). An object is read with the
/// list `run`'s watch starts with (field selector `metadata.name=NAME`), so `plan` needs no
/// grant beyond `run`'s (`list` and `watch` with `resourceNames`).
pub fn resolve_once(client: &Client, source: &CaSource) -> Result<CaBundle, Unresolved> {
    let b64 = |s: &str| {
        base64::engine::general_purpose::STANDARD
            .decode(s)
            .map_err(|_| Unresolved::Invalid(format!("{source}: value is not base64")))
    };
    let read_error = |e: crate::client::Error| {
        if e.is_not_found() {
            Unresolved::Invalid(format!("{source}: not found"))
        } else {
            Unresolved::Pending(format!("{source}: cannot be read: {e}"))
        }
    };
    let not_found = || Unresolved::Invalid(format!("{source}: not found"));
    let pem = match source {
        CaSource::File(path) => return read_file(source, path),
        CaSource::Secret {
            namespace,
            name,
            key,
        } => {
            let s = one::<Secret>(client, namespace, name)
                .map_err(read_error)?
                .ok_or_else(not_found)?;
            match s.data.as_ref().and_then(|d| d.get(key)) {
                Some(v) => b64(v)?,
                None => return Err(missing_key(source, s.data.iter().flat_map(|d| d.keys()))),
            }
        }
        CaSource::ConfigMap {
            namespace,
            name,
            key,
        } => {
            let c = one::<ConfigMap>(client, namespace, name)
                .map_err(read_error)?
                .ok_or_else(not_found)?;
            if let Some(v) = c.data.as_ref().and_then(|d| d.get(key)) {
                v.as_bytes().to_vec()
            } else if let Some(v) = c.binary_data.as_ref().and_then(|d| d.get(key)) {
                b64(v)?
            } else {
                let keys = c
                    .data
                    .iter()
                    .chain(c.binary_data.iter())
                    .flat_map(|d| d.keys());
                return Err(missing_key(source, keys));
            }
        }
    };
    CaBundle::from_pem(&pem).map_err(|e| Unresolved::Invalid(format!("{source}: {e}")))
}

/// The object `namespace/name`, listed by a field selector on its name.
fn one<K: crate::api::Resource>(
    client: &Client,
    namespace: &str,
    name: &str,
) -> Result<Option<K>, crate::client::Error> {
    let list = Api::<K>::namespaced(client.clone(), namespace).list(&ListParams {
        field_selector: Some(format!("metadata.name={name}")),
        ..Default::default()
    })?;
    Ok(list.items.into_iter().find(|o| o.name() == name))
}

/// No `key` in the object: says which keys it has (names only, never values).
pub(super) fn missing_key<'a>(
    source: &CaSource,
    keys: impl Iterator<Item = &'a String>,
) -> Unresolved {
    let keys: Vec<&str> = keys.map(String::as_str).collect();
    Unresolved::Invalid(if keys.is_empty() {
        format!("{source}: has no data")
    } else {
        format!("{source}: no such key (it has {})", keys.join(", "))
    })
}

/// The CA bundle a planned APIService would carry, and where it comes from.
#[non_exhaustive]
#[derive(Clone, Debug)]
pub struct PlannedBundle {
    /// The annotation's source; `None` for a literal `spec.caBundle`.
    pub source: Option<CaSource>,
    /// The bundle, or why there is none (for a source: the name is held, nothing written).
    pub bundle: Result<CaBundle, String>,
}

/// Fills the `caBundle` of every desired object that names a source, reading each source
/// once; answers the bundle (or the reason there is none) of every object that has one.
pub fn fill_for_plan(
    client: &Client,
    desired: &mut std::collections::BTreeMap<String, crate::controller::decision::Desired>,
) -> std::collections::BTreeMap<String, PlannedBundle> {
    let mut read: std::collections::HashMap<CaSource, Result<CaBundle, String>> =
        Default::default();
    let mut out = std::collections::BTreeMap::new();
    for (name, d) in desired.iter_mut() {
        let source = match CaSource::of(&d.object) {
            Ok(s) => s,
            Err(e) => {
                out.insert(
                    name.clone(),
                    PlannedBundle {
                        source: None,
                        bundle: Err(e),
                    },
                );
                continue;
            }
        };
        let Some(source) = source else {
            if let Some(literal) = d.object.spec.ca_bundle.as_deref() {
                out.insert(
                    name.clone(),
                    PlannedBundle {
                        source: None,
                        bundle: CaBundle::from_pem(literal),
                    },
                );
            }
            continue;
        };
        let bundle = read
            .entry(source.clone())
            .or_insert_with(|| resolve_once(client, &source).map_err(|u| u.message().to_string()))
            .clone();
        if let Ok(b) = &bundle {
            let mut obj = (*d.object).clone();
            obj.spec.ca_bundle = Some(b.pem.clone().into_boxed_slice());
            *d = crate::controller::decision::Desired::shared(std::sync::Arc::new(obj), d.mode);
        }
        out.insert(
            name.clone(),
            PlannedBundle {
                source: Some(source),
                bundle,
            },
        );
    }
    out
}
