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
            .with_custom_certificate_verifier(Arc::new(AcceptAnyServer::new(
                provider.signature_verification_algorithms,
            )))
    } else {
        let mut roots = RootCertStore::empty();
        if let Some(pem) = &tls.ca_pem {
            let (certs, _) = pem_roots(pem);
            if certs.is_empty() {
                return Err(Error::Config(
                    "CA data holds no usable PEM certificate".into(),
                ));
            }
            for cert in certs {
                roots
                    .add(cert)
                    .map_err(|e| Error::Config(format!("CA certificate: {e}")))?;
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
            let rsa_bits = rsa_modulus_bits(&key);
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| match e {
                    rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                        Error::Config(
                            "client certificate/key: the key does not match the certificate".into(),
                        )
                    }
                    e => match rsa_bits {
                        Some(bits) if bits < 2048 => Error::Config(format!(
                            "client key: an RSA key of {bits} bits is too short; at least 2048 \
                             bits are needed (kubectl accepts shorter ones, rustls does not): \
                             issue a new key and certificate"
                        )),
                        _ => Error::Config(format!("client certificate/key: {e}")),
                    },
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

/// The certificates of a PEM bundle that parse, and how many blocks were skipped: as Go's
/// `AppendCertsFromPEM`, a damaged block among good ones is passed over, not fatal.
pub(crate) fn pem_roots(pem: &[u8]) -> (Vec<CertificateDer<'static>>, usize) {
    use base64::Engine as _;
    const BEGIN: &[u8] = b"-----BEGIN CERTIFICATE-----";
    const END: &[u8] = b"-----END CERTIFICATE-----";
    let mut good = Vec::new();
    let mut skipped = 0;
    let mut rest = pem;
    while let Some(start) = find(rest, BEGIN) {
        let body = &rest[start + BEGIN.len()..];
        let Some(end) = find(body, END) else {
            // Truncated: no END line follows.
            skipped += 1;
            break;
        };
        // A block cut short before the next one begins is skipped; the next one is read.
        if let Some(next) = find(&body[..end], BEGIN) {
            skipped += 1;
            rest = &body[next..];
            continue;
        }
        let text: Vec<u8> = body[..end]
            .iter()
            .copied()
            .filter(|c| !c.is_ascii_whitespace())
            .collect();
        match base64::engine::general_purpose::STANDARD.decode(text) {
            Ok(der) if webpki_parses(&CertificateDer::from(der.as_slice())) => {
                good.push(CertificateDer::from(der))
            }
            _ => skipped += 1,
        }
        rest = &body[end + END.len()..];
    }
    (good, skipped)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn webpki_parses(cert: &CertificateDer<'_>) -> bool {
    RootCertStore::empty().add(cert.clone()).is_ok()
}

/// The modulus length of an RSA private key (PKCS#1 or PKCS#8), read from its DER just far
/// enough to say why a short key is refused.
fn rsa_modulus_bits(key: &PrivateKeyDer<'_>) -> Option<usize> {
    // DER: SEQUENCE { ... }; returns (tag, content, rest).
    fn tlv(b: &[u8]) -> Option<(u8, &[u8], &[u8])> {
        let (&tag, b) = b.split_first()?;
        let (&l0, mut b) = b.split_first()?;
        let len = if l0 < 0x80 {
            l0 as usize
        } else {
            let n = (l0 & 0x7f) as usize;
            if n > 4 || b.len() < n {
                return None;
            }
            let l = b[..n].iter().fold(0usize, |a, x| (a << 8) | *x as usize);
            b = &b[n..];
            l
        };
        (b.len() >= len).then(|| (tag, &b[..len], &b[len..]))
    }
    // RSAPrivateKey ::= SEQUENCE { version INTEGER, modulus INTEGER, ... }
    fn pkcs1(der: &[u8]) -> Option<usize> {
        let (0x30, seq, _) = tlv(der)? else {
            return None;
        };
        let (0x02, _, rest) = tlv(seq)? else {
            return None;
        };
        let (0x02, n, _) = tlv(rest)? else {
            return None;
        };
        let n = match n.iter().position(|b| *b != 0) {
            Some(i) => &n[i..],
            None => return Some(0),
        };
        Some(n.len() * 8 - n[0].leading_zeros() as usize)
    }
    match key {
        PrivateKeyDer::Pkcs1(k) => pkcs1(k.secret_pkcs1_der()),
        PrivateKeyDer::Pkcs8(k) => {
            // PrivateKeyInfo ::= SEQUENCE { version, AlgorithmIdentifier, OCTET STRING key }
            const RSA_OID: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x01];
            let (0x30, seq, _) = tlv(k.secret_pkcs8_der())? else {
                return None;
            };
            let (0x02, _, rest) = tlv(seq)? else {
                return None;
            };
            let (0x30, alg, rest) = tlv(rest)? else {
                return None;
            };
            let (0x06, oid, _) = tlv(alg)? else {
                return None;
            };
            if oid != RSA_OID {
                return None;
            }
            let (0x04, inner, _) = tlv(rest)? else {
                return None;
            };
            pkcs1(inner)
        }
        _ => None,
    }
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
pub(crate) struct AcceptAnyServer {
    algorithms: WebPkiSupportedAlgorithms,
}

impl AcceptAnyServer {
    /// Accepts any certificate; handshake signatures checked with `algorithms`.
    pub(crate) fn new(algorithms: WebPkiSupportedAlgorithms) -> Self {
        AcceptAnyServer { algorithms }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cert_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        rcgen::CertificateParams::new(vec!["ca".to_string()])
            .unwrap()
            .self_signed(&key)
            .unwrap()
            .pem()
    }

    #[test]
    fn damaged_blocks_in_a_ca_bundle_are_skipped_as_go_does() {
        let good = cert_pem();
        let bad = "-----BEGIN CERTIFICATE-----\nMIIBnotacert==\n-----END CERTIFICATE-----\n";
        let cut = "-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJ\n";
        let bundle = format!("{bad}{cut}{good}junk\n{good}");
        let (certs, skipped) = pem_roots(bundle.as_bytes());
        assert_eq!((certs.len(), skipped), (2, 2));
        assert_eq!(pem_roots(bad.as_bytes()).0.len(), 0);
        assert_eq!(pem_roots(b"no pem here"), (Vec::new(), 0));
    }

    #[test]
    fn short_rsa_keys_are_measured_for_the_message() {
        let pem = include_str!("../../tests/support/rsa1024.key");
        let key = PrivateKeyDer::from_pem_slice(pem.as_bytes()).unwrap();
        assert_eq!(rsa_modulus_bits(&key), Some(1024));
        let ec = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let key = PrivateKeyDer::from_pem_slice(ec.as_bytes()).unwrap();
        assert_eq!(rsa_modulus_bits(&key), None);
    }
}
