//! Just enough X.509 for a CA bundle's summary and `explain`'s evidence: subject, issuer,
//! validity and DNS/IP subject alternative names of each certificate, read with a minimal
//! DER walk of `tbsCertificate` (RFC 5280 §4.1).
//!
//! No X.509 crate: the ones that parse validity (`x509-parser` and its `nom`, `der-parser`,
//! `asn1-rs`, `time` stack) cost far more than these few dozen lines, and nothing here
//! verifies a signature: the aggregator does that with the bundle we hand it.

use std::time::SystemTime;

/// One DER element: its tag and contents.
struct Tlv<'a> {
    tag: u8,
    body: &'a [u8],
}

/// Reads the element at the start of `input`; returns it and what follows.
fn tlv(input: &[u8]) -> Result<(Tlv<'_>, &[u8]), String> {
    let (&tag, rest) = input.split_first().ok_or("truncated DER")?;
    if tag & 0x1f == 0x1f {
        return Err("high tag numbers are not used in certificates".into());
    }
    let (&first, mut rest) = rest.split_first().ok_or("truncated DER length")?;
    let len = if first < 0x80 {
        usize::from(first)
    } else {
        let n = usize::from(first & 0x7f);
        if n == 0 || n > 4 || rest.len() < n {
            return Err("bad DER length".into());
        }
        let mut len = 0usize;
        for &b in &rest[..n] {
            len = (len << 8) | usize::from(b);
        }
        rest = &rest[n..];
        len
    };
    if rest.len() < len {
        return Err("truncated DER element".into());
    }
    Ok((
        Tlv {
            tag,
            body: &rest[..len],
        },
        &rest[len..],
    ))
}

/// Reads an element that must carry `tag`.
fn expect<'a>(input: &'a [u8], tag: u8, what: &str) -> Result<(Tlv<'a>, &'a [u8]), String> {
    let (t, rest) = tlv(input)?;
    if t.tag != tag {
        return Err(format!("{what}: unexpected DER tag 0x{:02x}", t.tag));
    }
    Ok((t, rest))
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;
const UTC_TIME: u8 = 0x17;
const GENERALIZED_TIME: u8 = 0x18;

/// What the summary of one certificate shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parsed {
    /// The subject as `CN=…,O=…` (RFC 4514 order: most specific first).
    pub(crate) subject: String,
    /// The issuer, written as the subject is.
    pub(crate) issuer: String,
    /// The start of the validity period.
    pub(crate) not_before: SystemTime,
    /// The end of the validity period.
    pub(crate) not_after: SystemTime,
    /// DNS names and IP addresses of the subjectAltName extension.
    pub(crate) sans: Vec<String>,
}

/// The subject and `notAfter` of a DER certificate.
pub(crate) fn parse(der: &[u8]) -> Result<Parsed, String> {
    let (cert, _) = expect(der, SEQUENCE, "certificate")?;
    let (tbs, _) = expect(cert.body, SEQUENCE, "tbsCertificate")?;
    let mut rest = tbs.body;
    // version [0] EXPLICIT, optional.
    let (first, after) = tlv(rest)?;
    if first.tag == 0xa0 {
        rest = after;
    }
    let (_serial, r) = expect(rest, 0x02, "serialNumber")?;
    let (_sig, r) = expect(r, SEQUENCE, "signature")?;
    let (issuer, r) = expect(r, SEQUENCE, "issuer")?;
    let (validity, r) = expect(r, SEQUENCE, "validity")?;
    let (subject, r) = expect(r, SEQUENCE, "subject")?;
    let (not_before, v) = tlv(validity.body)?;
    let (not_after, _) = tlv(v)?;
    let (_spki, mut r) = expect(r, SEQUENCE, "subjectPublicKeyInfo")?;
    let mut sans = Vec::new();
    // issuerUniqueID [1], subjectUniqueID [2], extensions [3] EXPLICIT.
    while !r.is_empty() {
        let (t, after) = tlv(r)?;
        r = after;
        if t.tag == 0xa3 {
            sans = subject_alt_names(t.body)?;
        }
    }
    Ok(Parsed {
        subject: name(subject.body)?,
        issuer: name(issuer.body)?,
        not_before: time(&not_before)?,
        not_after: time(&not_after)?,
        sans,
    })
}

/// The DNS names and IP addresses of the subjectAltName extension (OID 2.5.29.17) in an
/// `Extensions` sequence; empty without one.
fn subject_alt_names(extensions: &[u8]) -> Result<Vec<String>, String> {
    let (list, _) = expect(extensions, SEQUENCE, "extensions")?;
    let mut rest = list.body;
    while !rest.is_empty() {
        let (ext, r) = expect(rest, SEQUENCE, "extension")?;
        rest = r;
        let (oid, r) = expect(ext.body, OID, "extension id")?;
        if oid.body != [0x55, 0x1d, 0x11] {
            continue;
        }
        let (mut value, r) = tlv(r)?;
        if value.tag == 0x01 {
            // critical BOOLEAN
            value = tlv(r)?.0;
        }
        let (names, _) = expect(value.body, SEQUENCE, "subjectAltName")?;
        let mut out = Vec::new();
        let mut n = names.body;
        while !n.is_empty() {
            let (g, r) = tlv(n)?;
            n = r;
            match (g.tag, g.body.len()) {
                (0x82, _) => out.push(String::from_utf8_lossy(g.body).into_owned()),
                (0x87, 4) => out.push(
                    std::net::Ipv4Addr::new(g.body[0], g.body[1], g.body[2], g.body[3]).to_string(),
                ),
                (0x87, 16) => {
                    let mut b = [0u8; 16];
                    b.copy_from_slice(g.body);
                    out.push(std::net::Ipv6Addr::from(b).to_string());
                }
                _ => {}
            }
        }
        return Ok(out);
    }
    Ok(Vec::new())
}

/// `UTCTime` (`YYMMDDHHMMSSZ`, years 1950–2049) or `GeneralizedTime` (`YYYYMMDDHHMMSSZ`).
fn time(t: &Tlv<'_>) -> Result<SystemTime, String> {
    let s = std::str::from_utf8(t.body).map_err(|_| "notAfter is not ASCII")?;
    let digits = s.strip_suffix('Z').ok_or("notAfter is not in UTC")?;
    let full = match t.tag {
        UTC_TIME if digits.len() == 12 => {
            let yy: u32 = digits[..2].parse().map_err(|_| "bad notAfter year")?;
            let century = if yy >= 50 { "19" } else { "20" };
            format!("{century}{digits}")
        }
        GENERALIZED_TIME if digits.len() == 14 => digits.to_string(),
        _ => return Err(format!("unsupported notAfter {s:?}")),
    };
    if !full.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("bad notAfter {s:?}"));
    }
    let rfc3339 = format!(
        "{}-{}-{}T{}:{}:{}Z",
        &full[0..4],
        &full[4..6],
        &full[6..8],
        &full[8..10],
        &full[10..12],
        &full[12..14]
    );
    crate::api::time::parse_rfc3339(&rfc3339).ok_or_else(|| format!("bad notAfter {s:?}"))
}

/// A Name (`RDNSequence`) as `CN=…,OU=…,O=…`: attributes in reverse order, as RFC 4514
/// and `openssl x509 -subject -nameopt RFC2253` print them.
fn name(mut rdns: &[u8]) -> Result<String, String> {
    let mut parts = Vec::new();
    while !rdns.is_empty() {
        let (set, r) = expect(rdns, SET, "subject")?;
        rdns = r;
        let mut attrs = set.body;
        while !attrs.is_empty() {
            let (attr, r) = expect(attrs, SEQUENCE, "subject attribute")?;
            attrs = r;
            let (oid, r) = expect(attr.body, OID, "subject attribute type")?;
            let (value, _) = tlv(r)?;
            let label = match oid.body {
                [0x55, 0x04, 0x03] => "CN".to_string(),
                [0x55, 0x04, 0x06] => "C".to_string(),
                [0x55, 0x04, 0x07] => "L".to_string(),
                [0x55, 0x04, 0x08] => "ST".to_string(),
                [0x55, 0x04, 0x0a] => "O".to_string(),
                [0x55, 0x04, 0x0b] => "OU".to_string(),
                [0x55, 0x04, 0x05] => "serialNumber".to_string(),
                other => oid_text(other),
            };
            let text = String::from_utf8_lossy(value.body);
            let text: String = text.chars().filter(|c| !c.is_control()).collect();
            parts.push(format!("{label}={text}"));
        }
    }
    parts.reverse();
    Ok(parts.join(","))
}

/// An OID's dotted form, for attributes without a short name.
fn oid_text(body: &[u8]) -> String {
    let mut out = Vec::new();
    let mut acc: u64 = 0;
    for (i, &b) in body.iter().enumerate() {
        acc = (acc << 7) | u64::from(b & 0x7f);
        if b & 0x80 == 0 {
            if out.is_empty() && i < 8 {
                let (a, b) = if acc < 80 {
                    (acc / 40, acc % 40)
                } else {
                    (2, acc - 80)
                };
                out.push(a.to_string());
                out.push(b.to_string());
            } else {
                out.push(acc.to_string());
            }
            acc = 0;
        }
    }
    out.join(".")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn subject_and_not_after_of_a_generated_certificate() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "example CA");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Example");
        params.not_after = rcgen::date_time_ymd(2031, 7, 9);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let p = parse(cert.der()).unwrap();
        assert_eq!(p.subject, "O=Example,CN=example CA");
        assert_eq!(p.issuer, p.subject, "self-signed");
        assert!(p.sans.is_empty());
        // 2031-07-09T00:00:00Z
        assert_eq!(p.not_after, UNIX_EPOCH + Duration::from_secs(1_941_321_600));
    }

    #[test]
    fn issuer_and_names_of_a_serving_certificate() {
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.distinguished_name
            .push(rcgen::DnType::CommonName, "backend CA");
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let ca = ca.self_signed(&ca_key).unwrap();
        let mut leaf =
            rcgen::CertificateParams::new(vec!["api.ns.svc".to_string(), "127.0.0.1".to_string()])
                .unwrap();
        leaf.distinguished_name
            .push(rcgen::DnType::CommonName, "api");
        leaf.not_before = rcgen::date_time_ymd(2024, 1, 2);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = leaf.signed_by(&key, &ca, &ca_key).unwrap();
        let p = parse(cert.der()).unwrap();
        assert_eq!(p.subject, "CN=api");
        assert_eq!(p.issuer, "CN=backend CA");
        assert_eq!(p.sans, ["api.ns.svc", "127.0.0.1"]);
        // 2024-01-02T00:00:00Z
        assert_eq!(
            p.not_before,
            UNIX_EPOCH + Duration::from_secs(1_704_153_600)
        );
    }

    #[test]
    fn generalized_time_after_2049() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.not_after = rcgen::date_time_ymd(2051, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let p = parse(cert.der()).unwrap();
        // 2051-01-01T00:00:00Z
        assert_eq!(p.not_after, UNIX_EPOCH + Duration::from_secs(2_556_144_000));
    }

    #[test]
    fn garbage_is_an_error_not_a_panic() {
        for bad in [
            &b""[..],
            b"\x30",
            b"\x30\x85\x01",
            b"\x30\x03\x30\x01",
            b"\x1f\x00",
        ] {
            assert!(parse(bad).is_err(), "{bad:?}");
        }
    }
}
