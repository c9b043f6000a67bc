//! The default candidate identity: host name plus a random suffix, as client-go users build it.

use crate::runtime::prng::XorShift64;

/// `<hostname>_<16 hex digits>`: the host name says which pod leads; the suffix keeps two
/// processes on one host (or a restarted pod with the same name) apart.
pub fn default_identity() -> String {
    let suffix = XorShift64::from_entropy().next_u64();
    format!("{}_{suffix:016x}", hostname())
}

/// The host name from the kernel, else `$HOSTNAME`, else `autoregister`.
fn hostname() -> String {
    let from_kernel = std::fs::read_to_string("/proc/sys/kernel/hostname").ok();
    from_kernel
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "autoregister".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_is_host_and_unique_suffix() {
        let a = default_identity();
        let b = default_identity();
        let (host, suffix) = a.rsplit_once('_').unwrap();
        assert_eq!(host, hostname());
        assert_eq!(suffix.len(), 16);
        assert!(suffix.bytes().all(|c| c.is_ascii_hexdigit()));
        assert_ne!(a, b);
    }
}
