//! TLS: a generated CA and a serving certificate for 127.0.0.1/localhost, optionally
//! requiring client certificates from a given CA.

use std::sync::Arc;

use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

/// A CA and the rustls configuration serving with a certificate it signed.
pub(crate) struct TlsSetup {
    pub(crate) ca_pem: Vec<u8>,
    pub(crate) config: Arc<rustls::ServerConfig>,
}

fn err(e: impl std::fmt::Display) -> std::io::Error {
    std::io::Error::other(format!("TLS setup: {e}"))
}

/// Generates a fresh CA and serving certificate (valid for 127.0.0.1, ::1 and localhost).
/// With `client_ca` (PEM), every connection must present a client certificate signed by
/// it, as kube-apiserver's `--client-ca-file` makes it for x509 authentication.
pub(crate) fn generate(client_ca: Option<&[u8]>) -> std::io::Result<TlsSetup> {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose};
    let ca_key = KeyPair::generate().map_err(err)?;
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(err)?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "autoregister-testserver-ca");
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = ca_params.self_signed(&ca_key).map_err(err)?;

    let key = KeyPair::generate().map_err(err)?;
    let mut params = CertificateParams::new(vec![
        "127.0.0.1".to_string(),
        "::1".to_string(),
        "localhost".to_string(),
    ])
    .map_err(err)?;
    params
        .distinguished_name
        .push(DnType::CommonName, "autoregister-testserver");
    let cert = params.signed_by(&key, &ca, &ca_key).map_err(err)?;

    let chain = vec![CertificateDer::from(cert.der().to_vec())];
    let key_der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(err)?;
    let builder = match client_ca {
        None => builder.with_no_client_auth(),
        Some(pem) => {
            use rustls_pki_types::pem::PemObject;
            let mut roots = rustls::RootCertStore::empty();
            for cert in CertificateDer::pem_slice_iter(pem) {
                roots
                    .add(cert.map_err(|e| err(format!("client CA: {e}")))?)
                    .map_err(|e| err(format!("client CA: {e}")))?;
            }
            if roots.is_empty() {
                return Err(err("client CA holds no PEM certificate"));
            }
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .build()
            .map_err(|e| err(format!("client CA: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let config = builder.with_single_cert(chain, key_der).map_err(err)?;
    Ok(TlsSetup {
        ca_pem: ca.pem().into_bytes(),
        config: Arc::new(config),
    })
}
