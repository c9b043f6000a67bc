//! The rustls client configuration: the cluster's CA only, optional client certificate, optional no-verify.

use std::sync::{Arc, Once};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::ResolvesClientCert;
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};

use super::config::TlsConfig;
use super::Error;

/// Builds the client TLS configuration (ring provider, roots only from `tls.ca_pem`);
/// `client_cert` supplies the client certificate per handshake when the config has none.
pub(crate) fn client_config(
    tls: &TlsConfig,
    client_cert: Option<Arc<dyn ResolvesClientCert>>,
) -> Result<Arc<ClientConfig>, Error> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Config(format!("TLS: {e}")))?;
    let builder = if tls.insecure_skip_verify {
        static WARN: Once = Once::new();
        WARN.call_once(|| {
            log::warn!("TLS verification of the API server is disabled (insecure-skip-tls-verify)")
        });
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServer {
                algorithms: provider.signature_verification_algorithms,
            }))
    } else {
        let mut roots = RootCertStore::empty();
        if let Some(pem) = &tls.ca_pem {
            let mut n = 0;
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| Error::Config(format!("CA certificate: {e}")))?;
                roots
                    .add(cert)
                    .map_err(|e| Error::Config(format!("CA certificate: {e}")))?;
                n += 1;
            }
            if n == 0 {
                return Err(Error::Config("CA data holds no PEM certificate".into()));
            }
        }
        builder.with_root_certificates(roots)
    };
    let config = match (&tls.client_cert_pem, &tls.client_key_pem) {
        (Some(cert), Some(key)) => {
            let chain = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| Error::Config(format!("client certificate: {e}")))?;
            if chain.is_empty() {
                return Err(Error::Config(
                    "client certificate data holds no PEM certificate".into(),
                ));
            }
            // Accepts PKCS#8, PKCS#1 (RSA) and SEC1 (EC) keys.
            let key = PrivateKeyDer::from_pem_slice(key)
                .map_err(|e| Error::Config(format!("client key: {e}")))?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| match e {
                    rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                        Error::Config(
                            "client certificate/key: the key does not match the certificate".into(),
                        )
                    }
                    e => Error::Config(format!("client certificate/key: {e}")),
                })?
        }
        (None, None) => match client_cert {
            Some(resolver) => builder.with_client_cert_resolver(resolver),
            None => builder.with_no_client_auth(),
        },
        _ => {
            return Err(Error::Config(
                "a client certificate needs both the certificate and the key".into(),
            ))
        }
    };
    Ok(Arc::new(config))
}

/// The name to verify and send as SNI: the `tls-server-name` override or the URL's host.
pub(crate) fn server_name(tls: &TlsConfig, url_host: &str) -> Result<ServerName<'static>, Error> {
    let name = tls.server_name.as_deref().unwrap_or(url_host);
    let name = name.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(name.to_string())
        .map_err(|e| Error::Config(format!("invalid TLS server name {name:?}: {e}")))
}

/// `insecure-skip-tls-verify`: any certificate is accepted, but handshake signatures are still
/// checked so the session keys belong to whoever sent the certificate.
#[derive(Debug)]
struct AcceptAnyServer {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AcceptAnyServer {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}
