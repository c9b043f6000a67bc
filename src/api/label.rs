//! Label keys as Kubernetes accepts them: `[prefix/]name`.

/// Why `key` is not a valid label key (a qualified name: an optional DNS-subdomain
/// prefix of at most 253 characters, `/`, and a name of at most 63 characters of
/// alphanumerics, `-`, `_` and `.`, beginning and ending with an alphanumeric).
pub fn validate_label_key(key: &str) -> Result<(), String> {
    let (prefix, name) = match key.split_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, key),
    };
    if let Some(p) = prefix {
        if p.is_empty() || p.len() > 253 {
            return Err(format!(
                "label key {key:?}: the prefix must be 1 to 253 characters"
            ));
        }
        let dns_label = |l: &str| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        };
        if !p.split('.').all(dns_label) {
            return Err(format!(
                "label key {key:?}: the prefix must be a DNS subdomain (lowercase alphanumerics, '-', '.')"
            ));
        }
    }
    let alnum = |c: Option<char>| c.is_some_and(|c| c.is_ascii_alphanumeric());
    if name.is_empty()
        || name.len() > 63
        || !alnum(name.chars().next())
        || !alnum(name.chars().last())
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(format!(
            "label key {key:?}: the name part must be 1 to 63 alphanumerics, '-', '_' or '.', \
             beginning and ending with an alphanumeric"
        ));
    }
    Ok(())
}

/// Whether `key`'s prefix is one Kubernetes reserves for its own components.
pub fn is_reserved_label_key(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    ["kubernetes.io", "k8s.io"]
        .iter()
        .any(|r| prefix == *r || prefix.ends_with(&format!(".{r}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn valid_and_invalid_keys() {
        for ok in [
            "autoregister.dev/automanaged",
            "kube-aggregator.kubernetes.io/automanaged",
            "a/b",
            "managed",
            "x.y-z/A_b.9",
        ] {
            assert_eq!(validate_label_key(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "/x",
            "x/",
            "a/b/c",
            "UPPER.dev/x",
            "-a.dev/x",
            "a.dev/-x",
            "a.dev/x y",
            &format!("a.dev/{}", "x".repeat(64)),
            &format!("{}/x", "a".repeat(254)),
        ] {
            assert!(validate_label_key(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn reserved_prefixes() {
        assert!(is_reserved_label_key(
            "kube-aggregator.kubernetes.io/automanaged"
        ));
        assert!(is_reserved_label_key("k8s.io/x"));
        assert!(is_reserved_label_key("apps.k8s.io/x"));
        assert!(!is_reserved_label_key("autoregister.dev/automanaged"));
        assert!(!is_reserved_label_key("notk8s.io/x"));
        assert!(!is_reserved_label_key("automanaged"));
    }
}
