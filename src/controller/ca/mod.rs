//! CA bundles from where the CA lives: a Secret, a ConfigMap or a file named by an
//! annotation on the desired APIService, kept current as the source changes, with the
//! bundle's expiry watched.
//!
//! The desired object's `spec.caBundle` is filled from its source right before each
//! decision, so the decision compares complete specs and a rotation is an ordinary
//! update. A source that cannot give a bundle never produces a write: the name is held
//! (the object keeps its last good bundle) until the source changes.

mod named;
mod pem;
mod plan;
mod registry;
mod source;
mod x509;

use std::sync::Arc;
use std::time::Duration;

pub use pem::{CaBundle, CertSummary};
pub use plan::{fill_for_plan, resolve_once, PlannedBundle};
pub(crate) use registry::CaSources;
pub use registry::Unresolved;
pub use source::{
    check_manifest, CaSource, DEFAULT_CA_KEY, INJECT_CA_FROM_CONFIGMAP, INJECT_CA_FROM_FILE,
    INJECT_CA_FROM_SECRET,
};

use super::decision::Desired;

/// Default of the expiry warning (`--ca-expiry-warning`): 14 days, long enough for a
/// renewal to go through review.
pub const DEFAULT_EXPIRY_WARNING: Duration = Duration::from_secs(14 * 24 * 3600);

/// `desired` with its `caBundle` from its source, and the bundle it carries (for the
/// expiry check); a literal bundle is kept as given. `Err`: the source gives none.
pub(crate) fn fill(
    ca: &CaSources,
    desired: Desired,
) -> Result<(Desired, Option<CaBundle>), Unresolved> {
    let source = CaSource::of(&desired.object).map_err(Unresolved::Invalid)?;
    let Some(source) = source else {
        // A literal bundle: watched for expiry when it parses, written as given regardless.
        let parsed = desired
            .object
            .spec
            .ca_bundle
            .as_deref()
            .and_then(|b| CaBundle::from_pem(b).ok());
        return Ok((desired, parsed));
    };
    let bundle = ca.resolve(&source)?;
    let mut obj = (*desired.object).clone();
    obj.spec.ca_bundle = Some(bundle.pem.clone().into_boxed_slice());
    Ok((Desired::shared(Arc::new(obj), desired.mode), Some(bundle)))
}
