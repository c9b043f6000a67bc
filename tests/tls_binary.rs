//! TLS refusals and x509 client authentication end to end: the real binary against
//! the test API server serving HTTPS and requiring client certificates from a CA.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;

use std::time::Duration;

use autoregister::testserver::TestServer;
use base64::Engine as _;
use binary::{manifest, Proc, Scratch};
use rcgen::{BasicConstraints, CertificateParams, ExtendedKeyUsagePurpose, IsCa, KeyPair};

const WAIT: Duration = Duration::from_secs(30);

/// A CA for client certificates.
struct ClientCa {
    cert: rcgen::Certificate,
    key: KeyPair,
}

impl ClientCa {
    fn new() -> ClientCa {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        let cert = p.self_signed(&key).unwrap();
        ClientCa { cert, key }
    }

    /// A client certificate and key (PEM); `expired` puts its validity in 2000.
    fn issue(&self, expired: bool) -> (String, String) {
        let key = KeyPair::generate().unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        if expired {
            p.not_before = rcgen::date_time_ymd(2000, 1, 1);
            p.not_after = rcgen::date_time_ymd(2000, 12, 31);
        }
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem())
    }
}

fn b64(s: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A kubeconfig for `server` whose user is the given cluster CA field and client cert.
fn kubeconfig(server: &TestServer, ca_field: &str, user: Option<(&str, &str)>) -> String {
    let user = match user {
        Some((cert, key)) => format!(
            "  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(cert.as_bytes()),
            b64(key.as_bytes())
        ),
        None => "  user: {}\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {}\n    {ca_field}\n\
         users:\n- name: u\n{user}contexts:\n- name: x\n  context: {{cluster: c, user: u}}\ncurrent-context: x\n",
        server.url()
    )
}

fn ca_data(server: &TestServer) -> String {
    format!(
        "certificate-authority-data: {}",
        b64(&server.ca_pem().unwrap())
    )
}

/// `run --once --timeout T` with `kubeconfig`; (exit code, log). A refused handshake
/// fails until the timeout, so those cases use a short one.
fn once(s: &Scratch, kubeconfig: &str, timeout: &str) -> (i32, String) {
    let kc = s.0.join("kc.yaml");
    std::fs::write(&kc, kubeconfig).unwrap();
    let m = s.manifests();
    let p = Proc::spawn(&[
        "run",
        "--once",
        "--timeout",
        timeout,
        "--manifests",
        m.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
    ]);
    p.wait_exit(WAIT)
}

#[test]
fn client_certificate_authenticates_through_the_binary_and_bad_ones_are_refused() {
    let clients = ClientCa::new();
    let server = TestServer::builder()
        .client_ca(clients.cert.pem())
        .start()
        .unwrap();
    let s = Scratch::new("tls-client-cert");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));

    let (cert, key) = clients.issue(false);
    let (code, log) = once(
        &s,
        &kubeconfig(&server, &ca_data(&server), Some((&cert, &key))),
        "20s",
    );
    assert_eq!(code, 0, "{log}");
    assert!(server
        .get_object("apiservices", None, "v1.a.example.com")
        .is_some());

    // No certificate: the handshake is refused, the reason named.
    let before = server.requests().len();
    let (code, log) = once(&s, &kubeconfig(&server, &ca_data(&server), None), "1s");
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("CertificateRequired"), "{log}");

    // An expired certificate: refused by the server, the alert names the expiry.
    let (cert, key) = clients.issue(true);
    let (code, log) = once(
        &s,
        &kubeconfig(&server, &ca_data(&server), Some((&cert, &key))),
        "1s",
    );
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("CertificateExpired"), "{log}");

    // A key that is not the certificate's: refused before connecting (exit 2, bad kubeconfig).
    let (cert, _) = clients.issue(false);
    let (_, other_key) = clients.issue(false);
    let (code, log) = once(
        &s,
        &kubeconfig(&server, &ca_data(&server), Some((&cert, &other_key))),
        "1s",
    );
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("does not match"), "{log}");
    assert_eq!(
        server.requests().len(),
        before,
        "no refused client got a request through"
    );
}

#[test]
fn a_ca_file_that_is_not_pem_is_refused_naming_the_file() {
    let server = TestServer::builder().tls(true).start().unwrap();
    let s = Scratch::new("tls-ca-der");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    // The CA as DER (what `openssl x509 -outform der` writes), not PEM.
    let pem = server.ca_pem().unwrap();
    let der = rustls_pki_types::pem::PemObject::from_pem_slice(&pem)
        .map(|c: rustls_pki_types::CertificateDer| c.to_vec())
        .unwrap();
    let ca = s.0.join("ca.der");
    std::fs::write(&ca, der).unwrap();
    let field = format!("certificate-authority: {}", ca.display());
    let (code, log) = once(&s, &kubeconfig(&server, &field, None), "1s");
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("ca.der") && log.contains("PEM"), "{log}");
    assert!(!log.contains("insecure"), "{log}");
    assert!(server.requests().is_empty(), "nothing was sent");
}
