//! A CA bundle read from PEM: certificates only, in their order; anything else is an error.

use std::fmt;
use std::time::SystemTime;

use base64::Engine;

use super::x509;

/// One certificate of a bundle, as `plan` and the expiry check see it.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertSummary {
    /// Subject, e.g. `CN=example CA,O=Example`.
    pub subject: String,
    /// SHA-256 of the DER certificate, colon-separated upper-case hex (as
    /// `openssl x509 -fingerprint -sha256` prints it).
    pub sha256: String,
    /// End of validity.
    pub not_after: SystemTime,
    /// Issuer, written as the subject is.
    pub issuer: String,
    /// Start of validity.
    pub not_before: SystemTime,
    /// DNS names and IP addresses it is valid for (subjectAltName).
    pub sans: Vec<String>,
    /// The certificate itself (DER), for verification.
    pub der: Vec<u8>,
}

/// A bundle of CA certificates: their canonical PEM (what `spec.caBundle` gets) and a
/// summary of each.
#[non_exhaustive]
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaBundle {
    /// The certificates re-encoded as PEM, in the source's order, nothing else.
    pub pem: Vec<u8>,
    /// One summary per certificate, same order.
    pub certs: Vec<CertSummary>,
}

impl CaBundle {
    /// Reads `text` as PEM CA certificates. Errors: no certificate at all, a private key
    /// (never copied anywhere), a block that is not a certificate, a certificate that does
    /// not parse.
    pub fn from_pem(text: &[u8]) -> Result<CaBundle, String> {
        let blocks = blocks(text)?;
        let mut pem = Vec::new();
        let mut certs = Vec::new();
        for (i, b) in blocks.iter().enumerate() {
            let n = i + 1;
            if b.label.contains("PRIVATE KEY") {
                return Err(format!(
                    "block {n} is a private key ({}), not a certificate: the key is not copied; \
                     point the reference at the CA certificate (e.g. key ca.crt, not tls.key)",
                    b.label
                ));
            }
            if b.label != "CERTIFICATE" {
                return Err(format!("block {n} is a {:?}, not a CERTIFICATE", b.label));
            }
            let parsed =
                x509::parse(&b.der).map_err(|e| format!("certificate {n} does not parse: {e}"))?;
            certs.push(CertSummary {
                subject: parsed.subject,
                sha256: fingerprint(&b.der),
                not_after: parsed.not_after,
                issuer: parsed.issuer,
                not_before: parsed.not_before,
                sans: parsed.sans,
                der: b.der.clone(),
            });
            encode(&mut pem, &b.der);
        }
        if certs.is_empty() {
            return Err(if text.iter().all(u8::is_ascii_whitespace) {
                "empty".to_string()
            } else {
                "no PEM certificate found".to_string()
            });
        }
        Ok(CaBundle { pem, certs })
    }

    /// The earliest `notAfter` of the bundle: when the first certificate expires.
    pub fn earliest_expiry(&self) -> Option<SystemTime> {
        self.certs.iter().map(|c| c.not_after).min()
    }
}

impl fmt::Display for CertSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "subject={} sha256={} notAfter={}",
            self.subject,
            self.sha256,
            crate::api::time::format_rfc3339(self.not_after)
        )
    }
}

/// SHA-256 as `AB:CD:…`.
fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    d.as_ref()
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(":")
}

/// One `-----BEGIN LABEL-----` … `-----END LABEL-----` block, decoded.
struct Block {
    label: String,
    der: Vec<u8>,
}

/// Every PEM block of `text`, in order; text between blocks is ignored (openssl's
/// "Bag Attributes" and comments), a broken block is an error.
fn blocks(text: &[u8]) -> Result<Vec<Block>, String> {
    let text =
        std::str::from_utf8(text).map_err(|_| "not PEM: the data is not text".to_string())?;
    let mut out = Vec::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let line = line.trim();
        let Some(label) = line
            .strip_prefix("-----BEGIN ")
            .and_then(|l| l.strip_suffix("-----"))
        else {
            continue;
        };
        let n = out.len() + 1;
        let end = format!("-----END {label}-----");
        let mut body = String::new();
        let mut closed = false;
        for l in lines.by_ref() {
            let l = l.trim();
            if l == end {
                closed = true;
                break;
            }
            if l.starts_with("-----") {
                return Err(format!("block {n} ({label}) ends with {l:?}, not {end:?}"));
            }
            // Encapsulated headers (RFC 1421 "Proc-Type: ...") only appear with keys.
            if !l.contains(':') {
                body.push_str(l);
            }
        }
        if !closed {
            return Err(format!("block {n} ({label}) has no {end:?} line"));
        }
        let der = base64::engine::general_purpose::STANDARD
            .decode(body.as_bytes())
            .map_err(|e| format!("block {n} ({label}) is not valid base64: {e}"))?;
        out.push(Block {
            label: label.to_string(),
            der,
        });
    }
    Ok(out)
}

/// Appends `der` as a PEM CERTIFICATE block with 64-character lines.
fn encode(out: &mut Vec<u8>, der: &[u8]) {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    out.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.extend_from_slice(chunk);
        out.push(b'\n');
    }
    out.extend_from_slice(b"-----END CERTIFICATE-----\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ca(cn: &str) -> (String, Vec<u8>) {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, cn);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        (cert.pem(), cert.der().to_vec())
    }

    #[test]
    fn certificates_keep_their_order_and_nothing_else_is_copied() {
        let (old, _) = ca("old CA");
        let (new, new_der) = ca("new CA");
        let text = format!("Bag Attributes: x\n{old}\n# comment\n{new}");
        let b = CaBundle::from_pem(text.as_bytes()).unwrap();
        assert_eq!(b.certs.len(), 2);
        assert_eq!(b.certs[0].subject, "CN=old CA");
        assert_eq!(b.certs[1].subject, "CN=new CA");
        assert_eq!(b.certs[1].sha256, fingerprint(&new_der));
        assert_eq!(b.certs[1].sha256.len(), 32 * 3 - 1);
        let pem = String::from_utf8(b.pem.clone()).unwrap();
        assert!(!pem.contains("Bag") && !pem.contains("comment"), "{pem}");
        assert_eq!(pem.matches("BEGIN CERTIFICATE").count(), 2);
        // Canonical already: reading the output again gives the same bundle.
        assert_eq!(CaBundle::from_pem(&b.pem).unwrap(), b);
    }

    #[test]
    fn a_private_key_is_an_error_and_is_not_copied() {
        let (cert, _) = ca("CA");
        let key = rcgen::KeyPair::generate().unwrap().serialize_pem();
        let e = CaBundle::from_pem(format!("{cert}{key}").as_bytes()).unwrap_err();
        assert!(e.contains("block 2 is a private key (PRIVATE KEY)"), "{e}");
        assert!(!e.contains(&key[40..80]), "no key material in the message");
        let e = CaBundle::from_pem(
            b"-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----\n",
        )
        .unwrap_err();
        assert!(e.contains("private key (RSA PRIVATE KEY)"), "{e}");
    }

    #[test]
    fn empty_garbage_and_broken_blocks_are_errors() {
        assert_eq!(CaBundle::from_pem(b"").unwrap_err(), "empty");
        assert_eq!(CaBundle::from_pem(b" \n").unwrap_err(), "empty");
        assert_eq!(
            CaBundle::from_pem(b"hello").unwrap_err(),
            "no PEM certificate found"
        );
        let e =
            CaBundle::from_pem(b"-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n")
                .unwrap_err();
        assert!(e.contains("not valid base64"), "{e}");
        let e = CaBundle::from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n").unwrap_err();
        assert!(e.contains("has no"), "{e}");
        let e =
            CaBundle::from_pem(b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
                .unwrap_err();
        assert!(e.contains("certificate 1 does not parse"), "{e}");
        let e = CaBundle::from_pem(b"\xff\xfe").unwrap_err();
        assert!(e.contains("not text"), "{e}");
    }
}
