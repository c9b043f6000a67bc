//! Name resolution for the API server's address, without a thread per request.
//!
//! ureq resolves the host before every request, pooled connection or not, and with a
//! timeout it does so on a new thread: one `clone`, a stack `mmap`/`munmap` and the TLB
//! shootdowns that go with it per request (a quarter of a convergence's CPU time, more
//! on musl). An IP literal (in-cluster `KUBERNETES_SERVICE_HOST`, most kubeconfigs) needs
//! no resolution at all; a name is resolved the ordinary way and remembered briefly.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use ureq::http::Uri;
use ureq::unversioned::resolver::{DefaultResolver, ResolvedSocketAddrs, Resolver};
use ureq::unversioned::transport::NextTimeout;

/// How long a resolved name is reused: new connections follow a DNS change within this,
/// and a busy controller resolves at most once per interval instead of once per request.
const NAME_TTL: Duration = Duration::from_secs(30);

/// IP literals as they are; names through ureq's resolver, cached for [`NAME_TTL`].
#[derive(Debug, Default)]
pub(crate) struct ServerResolver {
    inner: DefaultResolver,
    cache: Mutex<HashMap<String, (Instant, ResolvedSocketAddrs)>>,
}

impl Resolver for ServerResolver {
    fn resolve(
        &self,
        uri: &Uri,
        config: &ureq::config::Config,
        timeout: NextTimeout,
    ) -> Result<ResolvedSocketAddrs, ureq::Error> {
        let Some(authority) = uri.authority() else {
            // Let ureq report the malformed URL in its own words.
            return self.inner.resolve(uri, config, timeout);
        };
        let port = authority.port_u16().or_else(|| match uri.scheme_str() {
            Some("https") => Some(443),
            Some("http") => Some(80),
            _ => None,
        });
        let host = authority.host();
        let literal = host.trim_start_matches('[').trim_end_matches(']');
        if let (Ok(ip), Some(port)) = (literal.parse::<IpAddr>(), port) {
            let mut addrs = self.empty();
            addrs.push(SocketAddr::new(ip, port));
            return Ok(addrs);
        }
        let key = authority.as_str().to_string();
        let now = Instant::now();
        if let Some((at, addrs)) = self.cache.lock().get(&key) {
            if now.saturating_duration_since(*at) < NAME_TTL {
                return Ok(addrs.clone());
            }
        }
        let addrs = self.inner.resolve(uri, config, timeout)?;
        let mut cache = self.cache.lock();
        // One API server per client: the map stays tiny; never let it grow unbounded.
        if cache.len() >= 16 {
            cache.clear();
        }
        cache.insert(key, (now, addrs.clone()));
        Ok(addrs)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(r: &ServerResolver, url: &str) -> Vec<SocketAddr> {
        let config = ureq::config::Config::default();
        let uri: Uri = url.parse().unwrap();
        let timeout = NextTimeout {
            after: ureq::unversioned::transport::time::Duration::from_secs(5),
            reason: ureq::Timeout::Resolve,
            ..Default::default()
        };
        r.resolve(&uri, &config, timeout)
            .unwrap()
            .iter()
            .copied()
            .collect()
    }

    #[test]
    fn ip_literals_resolve_to_themselves_with_default_ports() {
        let r = ServerResolver::default();
        assert_eq!(
            resolve(&r, "https://10.0.0.1:6443/api"),
            ["10.0.0.1:6443".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolve(&r, "https://[fd00::1]/api"),
            ["[fd00::1]:443".parse::<SocketAddr>().unwrap()]
        );
        assert_eq!(
            resolve(&r, "http://127.0.0.1/x"),
            ["127.0.0.1:80".parse::<SocketAddr>().unwrap()]
        );
        assert!(r.cache.lock().is_empty(), "literals are not cached");
    }

    #[test]
    fn names_are_resolved_once_and_remembered() {
        let r = ServerResolver::default();
        let first = resolve(&r, "http://localhost:8080/");
        assert!(!first.is_empty());
        assert!(first
            .iter()
            .all(|a| a.port() == 8080 && a.ip().is_loopback()));
        assert_eq!(r.cache.lock().len(), 1);
        assert_eq!(resolve(&r, "http://localhost:8080/"), first);
    }
}
