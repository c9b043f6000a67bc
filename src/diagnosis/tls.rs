//! Does a serving certificate pass the check kube-aggregator makes: a chain to a CA of
//! `caBundle`, valid now, for `SERVICE.NAMESPACE.svc`? Asked of rustls's WebPKI verifier,
//! as the aggregator asks Go's `crypto/x509`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rustls::client::danger::ServerCertVerifier;
use rustls::client::WebPkiServerVerifier;
use rustls::{CertificateError, RootCertStore};
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};

use super::Cause;
use crate::controller::ca::CaBundle;

/// Verifies `chain` (certificate first) against `bundle` for `name` at `now`: `Ok`, or
/// the cause and the verifier's words.
pub fn verify(
    chain: &CaBundle,
    bundle: &CaBundle,
    name: &str,
    now: SystemTime,
) -> Result<(), (Cause, String)> {
    let mut roots = RootCertStore::empty();
    for c in &bundle.certs {
        // A CA the store cannot take (not a usable trust anchor) signs nothing here.
        let _ = roots.add(CertificateDer::from(c.der.clone()));
    }
    if roots.is_empty() {
        return Err((
            Cause::CABundleInvalid,
            "no certificate of caBundle is a usable CA".into(),
        ));
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| (Cause::CABundleInvalid, e.to_string()))?;
    let mut certs = chain
        .certs
        .iter()
        .map(|c| CertificateDer::from(c.der.clone()));
    let Some(leaf) = certs.next() else {
        return Err((Cause::DiscoveryFailed, "no serving certificate".into()));
    };
    let intermediates: Vec<CertificateDer<'static>> = certs.collect();
    let server_name = ServerName::try_from(name.to_string()).map_err(|e| {
        (
            Cause::CertWrongName,
            format!("{name:?} is not a host name: {e}"),
        )
    })?;
    let secs = now.duration_since(UNIX_EPOCH).unwrap_or_default().as_secs();
    match verifier.verify_server_cert(
        &leaf,
        &intermediates,
        &server_name,
        &[],
        UnixTime::since_unix_epoch(std::time::Duration::from_secs(secs)),
    ) {
        Ok(_) => Ok(()),
        Err(rustls::Error::InvalidCertificate(e)) => Err(classify(&e)),
        Err(e) => Err((Cause::DiscoveryFailed, e.to_string())),
    }
}

fn classify(e: &CertificateError) -> (Cause, String) {
    let cause = match e {
        CertificateError::UnknownIssuer | CertificateError::BadSignature => {
            Cause::CertNotSignedByCA
        }
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            Cause::CertWrongName
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => Cause::CertExpired,
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            Cause::CertNotYetValid
        }
        _ => Cause::DiscoveryFailed,
    };
    (cause, format!("{e:?}"))
}
