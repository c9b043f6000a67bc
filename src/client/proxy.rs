//! Which proxy, if any, carries the connections to the API server, decided as client-go does.
//!
//! The kubeconfig's `proxy-url` is used for every server, loopback included (client-go's
//! `http.ProxyURL`). Without it the environment decides, as Go's `httpproxy.FromEnvironment`:
//! `HTTPS_PROXY` for an https server, `HTTP_PROXY` for an http one (the upper-case name wins
//! over the lower-case one), `NO_PROXY` exempts hosts, and `localhost` or a loopback address
//! is never proxied. A client talks to one server, so the decision is made once.

use std::net::IpAddr;

use ureq::http::Uri;

use super::Error;

/// The proxy chosen for a server.
#[derive(Clone)]
pub(crate) struct Route {
    /// What ureq connects through; it carries no NO_PROXY list: the decision is made here.
    pub(crate) proxy: ureq::Proxy,
    /// `http://HOST:PORT (from HTTPS_PROXY)`, for the log: never the credentials.
    pub(crate) description: String,
}

/// The schemes a kubeconfig `proxy-url` may have (client-go's `parseProxyURL`).
const KUBECONFIG_SCHEMES: &[&str] = &["http", "https", "socks5"];

/// Checks a kubeconfig `proxy-url` as client-go's validation does; the error says why.
pub(crate) fn check_proxy_url(url: &str) -> Result<(), String> {
    let scheme = scheme(url);
    if !KUBECONFIG_SCHEMES.contains(&scheme.as_str()) {
        return Err(format!(
            "unsupported scheme {scheme:?}, must be http, https, or socks5"
        ));
    }
    parse(url).map(|_| ())
}

/// A URL's scheme, lower-cased, as Go's `url.Parse` reads it (empty when there is none).
fn scheme(url: &str) -> String {
    let Some((s, _)) = url.split_once(':') else {
        return String::new();
    };
    let mut chars = s.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid {
        s.to_ascii_lowercase()
    } else {
        String::new()
    }
}

/// The proxy for `server`: `proxy_url` when given, else the environment read through `env`.
pub(crate) fn route(
    server: &str,
    proxy_url: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Route>, Error> {
    if let Some(url) = proxy_url.filter(|u| !u.is_empty()) {
        check_proxy_url(url).map_err(|m| Error::Config(format!("proxy-url: {m}")))?;
        return Ok(Some(
            parse(url).map_err(Error::Config)?.describe("proxy-url"),
        ));
    }
    let uri: Uri = server
        .parse()
        .map_err(|_| Error::Config(format!("server {server:?} is not a URL")))?;
    let https = uri.scheme_str() == Some("https");
    // Go's getEnvAny: the first non-empty of the two names.
    let any = |names: [&'static str; 2]| {
        names
            .into_iter()
            .find_map(|n| env(n).filter(|v| !v.is_empty()).map(|v| (n, v)))
    };
    let chosen = if https {
        any(["HTTPS_PROXY", "https_proxy"])
    } else {
        any(["HTTP_PROXY", "http_proxy"])
    };
    let Some((name, value)) = chosen else {
        return Ok(None);
    };
    let host = uri.host().unwrap_or_default();
    let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
    let no_proxy = any(["NO_PROXY", "no_proxy"])
        .map(|(_, v)| v)
        .unwrap_or_default();
    if !use_proxy(host, port, &no_proxy) {
        return Ok(None);
    }
    // Go reads "host:port" as "http://host:port", and a proxy of any scheme but https and
    // socks5(h) as an http one (its transport only singles those out).
    let value = match value.split_once("://") {
        None => format!("http://{value}"),
        Some((s, rest)) => match s.to_ascii_lowercase().as_str() {
            "https" | "socks5" | "socks5h" => value,
            _ => format!("http://{rest}"),
        },
    };
    let parsed = parse(&value).map_err(|m| Error::Config(format!("{name}: {m}")))?;
    Ok(Some(parsed.describe(name)))
}

/// A parsed proxy and what may be shown of it.
struct Parsed {
    proxy: ureq::Proxy,
    shown: String,
}

impl Parsed {
    fn describe(self, source: &str) -> Route {
        Route {
            proxy: self.proxy,
            description: format!("{} (from {source})", self.shown),
        }
    }
}

fn parse(url: &str) -> Result<Parsed, String> {
    // Go hands the SOCKS5 proxy the server's name to resolve (as socks5h does); ureq's
    // socks5 would resolve it here first.
    let scheme = scheme(url);
    let rest = url.split_once("://").map_or("", |(_, r)| r);
    let for_ureq = match scheme.as_str() {
        "socks5" => format!("socks5h://{rest}"),
        s => format!("{s}://{rest}"),
    };
    let proxy = ureq::Proxy::new(&for_ureq).map_err(|_| "not a valid proxy URL".to_string())?;
    if proxy.host().is_empty() {
        return Err("the proxy URL names no host".into());
    }
    let host = proxy.host();
    Ok(Parsed {
        shown: format!("{scheme}://{host}:{}", proxy.port()),
        proxy,
    })
}

/// Go's `useProxy`: false for localhost, loopback addresses and what `no_proxy` exempts.
fn use_proxy(host: &str, port: u16, no_proxy: &str) -> bool {
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare == "localhost" {
        return false;
    }
    let ip = bare.parse::<IpAddr>().ok();
    if ip.is_some_and(|ip| ip.is_loopback() || is_mapped_loopback(ip)) {
        return false;
    }
    let host = bare.trim().to_ascii_lowercase();
    let port = port.to_string();
    !no_proxy
        .split(',')
        .map(|p| p.trim().to_ascii_lowercase())
        .filter(|p| !p.is_empty())
        .any(|p| exempts(&p, &host, &port, ip))
}

/// Go's `IsLoopback` also holds for `::ffff:127.0.0.1`.
fn is_mapped_loopback(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
        IpAddr::V4(_) => false,
    }
}

/// Whether one NO_PROXY entry (trimmed, lower-case) exempts `host`:`port`.
fn exempts(entry: &str, host: &str, port: &str, ip: Option<IpAddr>) -> bool {
    if entry == "*" {
        return true;
    }
    if let Some((net, bits)) = parse_cidr(entry) {
        return ip.is_some_and(|ip| in_cidr(ip, net, bits));
    }
    let (mut phost, pport) = match split_host_port(entry) {
        Some(("", _)) => return false,
        Some((h, p)) => (h, p),
        None => (entry, ""),
    };
    if let Some(inner) = phost.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        phost = inner;
    }
    let port_ok = pport.is_empty() || pport == port;
    if let Ok(pip) = phost.parse::<IpAddr>() {
        return ip.is_some_and(|ip| same_ip(ip, pip)) && port_ok;
    }
    if phost.is_empty() || ip.is_some() {
        // Names never match an address.
        return false;
    }
    // "*.example.com" and ".example.com" match subdomains; "example.com" also itself.
    let phost = phost
        .strip_prefix('*')
        .filter(|h| h.starts_with('.'))
        .unwrap_or(phost);
    let matched = match phost.strip_prefix('.') {
        Some(_) => host.ends_with(phost),
        None => host == phost || host.ends_with(&format!(".{phost}")),
    };
    matched && port_ok
}

/// Go's `net.SplitHostPort`, enough for NO_PROXY entries: `host:port` or `[v6]:port`.
fn split_host_port(s: &str) -> Option<(&str, &str)> {
    if let Some(rest) = s.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return after.strip_prefix(':').map(|p| (host, p));
    }
    let (host, port) = s.split_once(':')?;
    // More than one colon without brackets is not host:port (a bare IPv6 address).
    (!port.contains(':')).then_some((host, port))
}

fn parse_cidr(s: &str) -> Option<(IpAddr, u8)> {
    let (addr, bits) = s.split_once('/')?;
    let ip: IpAddr = addr.parse().ok()?;
    let bits: u8 = bits.parse().ok()?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    (bits <= max).then_some((ip, bits))
}

fn in_cidr(ip: IpAddr, net: IpAddr, bits: u8) -> bool {
    let (ip, net, width) = match (unmap(ip), unmap(net)) {
        (IpAddr::V4(a), IpAddr::V4(b)) => (u32::from(a) as u128, u32::from(b) as u128, 32),
        (IpAddr::V6(a), IpAddr::V6(b)) => (u128::from(a), u128::from(b), 128),
        _ => return false,
    };
    if bits == 0 {
        return true;
    }
    let shift = width - u32::from(bits);
    ip >> shift == net >> shift
}

/// Go compares an IPv4 address and its IPv4-mapped IPv6 form as equal.
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

fn same_ip(a: IpAddr, b: IpAddr) -> bool {
    unmap(a) == unmap(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn chosen(server: &str, proxy_url: Option<&str>, vars: &[(&str, &str)]) -> Option<String> {
        route(server, proxy_url, &env(vars))
            .unwrap()
            .map(|r| r.description)
    }

    #[test]
    fn proxy_url_wins_and_applies_to_loopback_too() {
        let vars = [("HTTPS_PROXY", "http://env:1"), ("NO_PROXY", "*")];
        assert_eq!(
            chosen("https://127.0.0.1:6443", Some("socks5://p:1080"), &vars).as_deref(),
            Some("socks5://p:1080 (from proxy-url)")
        );
        assert_eq!(
            chosen("https://10.0.0.1", Some("http://user:pw@proxy"), &[]).as_deref(),
            Some("http://proxy:80 (from proxy-url)")
        );
    }

    #[test]
    fn the_server_scheme_picks_the_variable_and_upper_case_wins() {
        let vars = [
            ("HTTPS_PROXY", "http://upper:1"),
            ("https_proxy", "http://lower:1"),
            ("http_proxy", "lower-plain:2"),
        ];
        assert_eq!(
            chosen("https://10.0.0.1", None, &vars).as_deref(),
            Some("http://upper:1 (from HTTPS_PROXY)")
        );
        assert_eq!(
            chosen("http://10.0.0.1", None, &vars).as_deref(),
            Some("http://lower-plain:2 (from http_proxy)")
        );
        // An empty upper-case value does not hide the lower-case one.
        let vars = [("HTTPS_PROXY", ""), ("https_proxy", "https://lower:3")];
        assert_eq!(
            chosen("https://a.example", None, &vars).as_deref(),
            Some("https://lower:3 (from https_proxy)")
        );
        // HTTP_PROXY is not used for an https server.
        assert_eq!(
            chosen("https://10.0.0.1", None, &[("HTTP_PROXY", "p:1")]),
            None
        );
    }

    #[test]
    fn loopback_and_localhost_are_never_proxied_from_the_environment() {
        let vars = [("HTTPS_PROXY", "http://p:1")];
        for server in [
            "https://127.0.0.1:6443",
            "https://127.9.9.9",
            "https://[::1]:443",
            "https://[::ffff:127.0.0.1]",
            "https://localhost:6443",
        ] {
            assert_eq!(chosen(server, None, &vars), None, "{server}");
        }
        assert!(chosen("https://localhost.example:1", None, &vars).is_some());
    }

    #[test]
    fn no_proxy_entries_as_go_reads_them() {
        let cases: &[(&str, &str, bool)] = &[
            // (server, NO_PROXY, proxied)
            ("https://api.example.com", "example.com", false),
            ("https://example.com", "example.com", false),
            ("https://api.example.com", ".example.com", false),
            ("https://example.com", ".example.com", true),
            ("https://api.example.com", "*.example.com", false),
            ("https://notexample.com", "example.com", true),
            ("https://API.Example.COM", "example.com", false),
            ("https://api.example.com:6443", "example.com:6443", false),
            ("https://api.example.com:6443", "example.com:443", true),
            ("https://api.example.com", "example.com:443", false),
            ("https://10.1.2.3", "10.0.0.0/8", false),
            ("https://10.1.2.3", "10.1.2.3", false),
            ("https://10.1.2.3:6443", "10.1.2.3:6443", false),
            ("https://10.1.2.3:6443", "10.1.2.3:443", true),
            ("https://11.1.2.3", "10.0.0.0/8", true),
            ("https://[fd00::5]", "fd00::/16", false),
            ("https://[fd00::5]:6443", "[fd00::5]:6443", false),
            ("https://[fd00::5]", "fd00::5", false),
            ("https://10.1.2.3", "example.com, 10.1.0.0/16", false),
            // A name entry never matches an address, nor a CIDR a name.
            ("https://10.1.2.3", "3", true),
            ("https://a.example.com", "10.0.0.0/8", true),
            ("https://anything", "*", false),
            ("https://a.example.com", " , ,", true),
        ];
        for (server, no_proxy, proxied) in cases {
            let vars = [("HTTPS_PROXY", "http://p:1"), ("no_proxy", no_proxy)];
            assert_eq!(
                chosen(server, None, &vars).is_some(),
                *proxied,
                "{server} with NO_PROXY={no_proxy:?}"
            );
        }
    }

    #[test]
    fn kubeconfig_proxy_url_schemes_as_client_go() {
        for ok in [
            "http://p:3128",
            "https://p",
            "socks5://u:pw@p:1080",
            "http://u:p%40ss@p",
        ] {
            assert_eq!(check_proxy_url(ok), Ok(()), "{ok}");
        }
        // Go lower-cases the scheme.
        assert_eq!(check_proxy_url("HTTP://p"), Ok(()));
        for bad in ["ftp://p:21", "socks4://p", "p:3128", "10.0.0.1:3128"] {
            let e = check_proxy_url(bad).unwrap_err();
            assert!(e.contains("unsupported scheme"), "{bad}: {e}");
        }
        assert!(check_proxy_url("http://").is_err());
    }

    #[test]
    fn an_environment_proxy_of_another_scheme_is_an_http_proxy_as_in_go() {
        assert_eq!(
            chosen("https://10.0.0.1", None, &[("https_proxy", "ftp://p:21")]).as_deref(),
            Some("http://p:21 (from https_proxy)")
        );
        assert_eq!(
            chosen(
                "https://10.0.0.1",
                None,
                &[("HTTPS_PROXY", "socks5h://p:1")]
            )
            .as_deref(),
            Some("socks5h://p:1 (from HTTPS_PROXY)")
        );
        let e = route(
            "https://10.0.0.1",
            None,
            &env(&[("HTTPS_PROXY", "http://")]),
        )
        .err()
        .unwrap();
        assert!(e.to_string().contains("HTTPS_PROXY"), "{e}");
    }

    #[test]
    fn descriptions_never_show_credentials() {
        let r = route(
            "https://10.0.0.1",
            Some("http://someone:s3cret@proxy.example:3128"),
            &env(&[]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(r.description, "http://proxy.example:3128 (from proxy-url)");
        assert_eq!(r.proxy.username(), Some("someone"));
        assert_eq!(r.proxy.password(), Some("s3cret"));
    }
}
