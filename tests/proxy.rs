//! Proxies through the real binary, with kubectl as the oracle on the same kubeconfig and
//! environment: the kubeconfig's `proxy-url` (http with credentials, socks5), `HTTPS_PROXY`
//! and friends with `NO_PROXY`, loopback never proxied from the environment, and a refused
//! scheme. A small CONNECT/SOCKS5 proxy (tests/support/proxy.rs) sits in front of the TLS
//! test server and counts its tunnels.
//!
//! Most servers here are named `apiserver.proxy-test.invalid`: no resolver answers for
//! `.invalid`, only the proxy knows the name, so a request that arrives went through the
//! proxy, and a bypassed proxy shows as a failed lookup with no tunnel opened.
#![cfg(feature = "testing")]

#[path = "support/binary.rs"]
mod binary;
#[path = "support/proxy.rs"]
mod proxy;
#[path = "support/scripted.rs"]
mod scripted;

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use autoregister::api::APIService;
use autoregister::client::{Api, Canceller, Client, Config, Error, WatchParams};
use autoregister::testserver::TestServer;
use base64::Engine as _;
use binary::{manifest, stored, wait_until, Proc, Scratch, PROXY_VARS, WAIT};
use proxy::{Kind, TestProxy};

/// A name only the test proxy resolves.
const NAME: &str = "apiserver.proxy-test.invalid";
const TOKEN: &str = "proxy-test-token";
const OBJECT: &str = "v1.a.example.com";

fn tls_server() -> TestServer {
    TestServer::builder()
        .tls(true)
        .token(TOKEN)
        .start()
        .unwrap()
}

/// A kubeconfig for `server` at `url` (the certificate is checked for `localhost`, which it
/// names, whatever the URL's host), with `cluster_extra` lines in the cluster (indented 4).
fn kubeconfig(server: &TestServer, url: &str, cluster_extra: &str) -> String {
    kubeconfig_trusting(server, url, cluster_extra, "")
}

/// [`kubeconfig`] whose `certificate-authority-data` also holds `more_ca` (PEM).
fn kubeconfig_trusting(
    server: &TestServer,
    url: &str,
    cluster_extra: &str,
    more_ca: &str,
) -> String {
    let ca = match server.ca_pem() {
        Some(mut ca) => {
            ca.extend_from_slice(more_ca.as_bytes());
            format!(
                "    certificate-authority-data: {}\n    tls-server-name: localhost\n",
                base64::engine::general_purpose::STANDARD.encode(ca)
            )
        }
        None => String::new(),
    };
    let user = match server.token() {
        Some(t) => format!("    token: {t}\n"),
        None => "    {}\n".to_string(),
    };
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: {url}\n{ca}{cluster_extra}\
         users:\n- name: u\n  user:\n{user}contexts:\n- name: x\n  context: {{cluster: c, user: u}}\n\
         current-context: x\n"
    )
}

/// `https://NAME:PORT` for `server`.
fn named_url(server: &TestServer) -> String {
    let scheme = if server.ca_pem().is_some() {
        "https"
    } else {
        "http"
    };
    format!("{scheme}://{NAME}:{}", server.addr().port())
}

/// One scratch directory with the manifest and the kubeconfig written.
fn scratch(tag: &str, kubeconfig: &str) -> Scratch {
    let s = Scratch::new(tag);
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    std::fs::write(s.path("kubeconfig"), kubeconfig).unwrap();
    s
}

/// `run --once --timeout TIMEOUT` on the scratch kubeconfig with `env`: (exit code, log).
fn once(s: &Scratch, env: &[(&str, &str)], timeout: &str) -> (i32, String) {
    let (m, kc) = (s.manifests(), s.path("kubeconfig"));
    Proc::spawn_env(
        &[
            "run",
            "--once",
            "--timeout",
            timeout,
            "--manifests",
            m.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
        ],
        env,
    )
    .wait_exit(WAIT)
}

fn kubectl_bin() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    let found = std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file());
    if found.is_none() {
        println!("NOTICE: kubectl is not on the PATH; the kubectl side of this test is skipped");
    }
    found
}

/// `kubectl get apiservices` on the scratch kubeconfig with `env` (and no other proxy
/// variable): whether it succeeded, or `None` without kubectl.
fn kubectl(s: &Scratch, env: &[(&str, &str)]) -> Option<bool> {
    let bin = kubectl_bin()?;
    let mut cmd = Command::new(bin);
    for var in PROXY_VARS {
        cmd.env_remove(var);
    }
    let kc = s.path("kubeconfig");
    let out = cmd
        .args(["--kubeconfig", kc.to_str().unwrap()])
        .args(["--cache-dir", s.path("cache").to_str().unwrap()])
        .args(["--request-timeout", "10s", "get", "apiservices"])
        .env("HOME", &s.0)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    eprintln!(
        "kubectl with {env:?}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Some(out.status.success())
}

/// kubectl succeeds exactly when `ours_ok`, and opens tunnels through `proxy` exactly when
/// `proxied` (skipped without kubectl).
fn kubectl_agrees(
    s: &Scratch,
    env: &[(&str, &str)],
    ours_ok: bool,
    proxy: &TestProxy,
    proxied: bool,
) {
    let before = proxy.tunnels();
    let Some(ok) = kubectl(s, env) else { return };
    assert_eq!(ok, ours_ok, "kubectl disagrees with {env:?}");
    assert_eq!(
        proxy.tunnels() > before,
        proxied,
        "kubectl's use of the proxy with {env:?}"
    );
}

/// Fails when any 6-character piece of `secret` is in `log`.
fn assert_not_logged(log: &str, what: &str, secret: &str) {
    for w in secret.as_bytes().windows(6) {
        let piece = String::from_utf8_lossy(w);
        assert!(
            !log.contains(piece.as_ref()),
            "{what}: {piece:?} is in the log"
        );
    }
}

#[test]
fn proxy_url_carries_the_connection_with_credentials_never_logged() {
    let server = tls_server();
    let (user, password) = ("ursula-q", "pr0xy-s3cret-pw");
    let creds = format!("{user}:{password}");
    let proxy = TestProxy::start(Kind::Connect, Some(&creds), &[(NAME, server.addr())]);
    let kc = kubeconfig(
        &server,
        &named_url(&server),
        &format!("    proxy-url: {}\n", proxy.url_with(&format!("{creds}@"))),
    );
    let s = scratch("proxy-url", &kc);

    let (code, log) = once(&s, &[("RUST_LOG", "trace")], "20s");
    assert_eq!(code, 0, "{log}");
    assert!(stored(&server, OBJECT).is_some());
    assert!(proxy.tunnels() >= 1);
    let target = format!("CONNECT {NAME}:{} HTTP/1.1", server.addr().port());
    let basic = base64::engine::general_purpose::STANDARD.encode(&creds);
    assert!(
        proxy.heads().iter().all(|h| h.starts_with(&target)
            && h.contains(&format!("Proxy-Authorization: Basic {basic}"))),
        "{:?}",
        proxy.heads()
    );
    let shown = format!("using proxy http://{} (from proxy-url)", proxy.addr());
    assert_eq!(log.matches(&shown).count(), 1, "{log}");
    assert_not_logged(&log, "proxy password", password);
    assert_not_logged(&log, "proxy user", user);
    assert_not_logged(&log, "proxy credentials, base64", &basic);

    kubectl_agrees(&s, &[], true, &proxy, true);
}

#[test]
fn proxy_url_applies_to_a_loopback_server_too() {
    // client-go's proxy-url is http.ProxyURL: every request, loopback included.
    let server = tls_server();
    let proxy = TestProxy::start(Kind::Connect, None, &[]);
    let kc = kubeconfig(
        &server,
        server.url(),
        &format!("    proxy-url: {}\n", proxy.url()),
    );
    let s = scratch("proxy-url-loopback", &kc);
    let (code, log) = once(&s, &[], "20s");
    assert_eq!(code, 0, "{log}");
    assert!(proxy.tunnels() >= 1, "{log}");
    kubectl_agrees(&s, &[], true, &proxy, true);
}

#[test]
fn watches_go_through_the_proxy_and_stay_cancellable() {
    let server = tls_server();
    let proxy = TestProxy::start(Kind::Connect, None, &[(NAME, server.addr())]);
    let kc = kubeconfig(
        &server,
        &named_url(&server),
        &format!("    proxy-url: {}\n", proxy.url()),
    );
    let s = scratch("proxy-watch", &kc);
    let (m, kcp) = (s.manifests(), s.path("kubeconfig"));
    let p = Proc::spawn(&[
        "run",
        "--manifests",
        m.to_str().unwrap(),
        "--kubeconfig",
        kcp.to_str().unwrap(),
    ]);
    assert!(
        wait_until(|| stored(&server, OBJECT).is_some()),
        "{}",
        p.log()
    );
    let first = binary::uid(&server, OBJECT);
    // The watch is open (a delete before it would be missed: the empty list's
    // resourceVersion, 0, starts a watch at the present).
    let watching = || {
        server.requests().iter().any(|r| {
            r.verb == "watch" && r.resource.as_deref() == Some("apiservices") && r.code == 200
        })
    };
    assert!(wait_until(watching), "{}", p.log());
    // Another writer deletes it: only the watch, which can reach the server through the
    // proxy alone, tells the controller, which creates it again.
    server.delete_object("apiservices", None, OBJECT);
    assert!(
        wait_until(|| binary::uid(&server, OBJECT).is_some_and(|u| Some(&u) != first.as_ref())),
        "{}",
        p.log()
    );
    assert!(proxy.open_tunnels() >= 1);

    let asked = Instant::now();
    let (code, log) = p.terminate_within(Duration::from_secs(10));
    assert_eq!(code, Some(0), "{log}");
    assert!(
        asked.elapsed() < Duration::from_secs(3),
        "stopping took {:?}: a watch through the proxy held it up\n{log}",
        asked.elapsed()
    );
    assert!(
        wait_until(|| proxy.open_tunnels() == 0),
        "tunnels still open after the exit"
    );
}

#[test]
fn https_proxy_from_the_environment_upper_case_first() {
    let server = tls_server();
    let proxy = TestProxy::start(Kind::Connect, None, &[(NAME, server.addr())]);
    let s = scratch("https-proxy", &kubeconfig(&server, &named_url(&server), ""));
    let url = proxy.url();
    let ftp = url.replace("http://", "ftp://");
    // Nothing listens on port 1 of loopback.
    let dead = "http://127.0.0.1:1";

    for (env, source) in [
        (vec![("HTTPS_PROXY", url.as_str())], "HTTPS_PROXY"),
        (vec![("https_proxy", url.as_str())], "https_proxy"),
        // Go reads the upper-case name first.
        (
            vec![("HTTPS_PROXY", url.as_str()), ("https_proxy", dead)],
            "HTTPS_PROXY",
        ),
        // Go uses a proxy of another scheme (but https, socks5) as an http one.
        (vec![("HTTPS_PROXY", ftp.as_str())], "HTTPS_PROXY"),
        // A name outside NO_PROXY is proxied.
        (
            vec![
                ("HTTPS_PROXY", url.as_str()),
                ("NO_PROXY", "other.invalid,10.0.0.0/8"),
            ],
            "HTTPS_PROXY",
        ),
    ] {
        let before = proxy.tunnels();
        let (code, log) = once(&s, &env, "20s");
        assert_eq!(code, 0, "{env:?}: {log}");
        assert!(proxy.tunnels() > before, "{env:?}");
        let shown = format!("using proxy http://{} (from {source})", proxy.addr());
        assert!(log.contains(&shown), "{env:?}: {log}");
        kubectl_agrees(&s, &env, true, &proxy, true);
    }

    // HTTP_PROXY is for http servers only: this https server is dialled directly, and its
    // name does not resolve.
    let env = [("HTTP_PROXY", url.as_str())];
    let before = proxy.tunnels();
    let (code, log) = once(&s, &env, "2s");
    assert_eq!(code, 1, "{log}");
    assert!(!log.contains("using proxy"), "{log}");
    assert_eq!(proxy.tunnels(), before);
    kubectl_agrees(&s, &env, false, &proxy, false);
}

#[test]
fn no_proxy_names_and_domain_suffixes_bypass_the_proxy() {
    let server = tls_server();
    let proxy = TestProxy::start(Kind::Connect, None, &[(NAME, server.addr())]);
    let s = scratch(
        "no-proxy-names",
        &kubeconfig(&server, &named_url(&server), ""),
    );
    let url = proxy.url();
    for (var, no_proxy) in [
        ("NO_PROXY", NAME),
        ("no_proxy", ".proxy-test.invalid"),
        ("NO_PROXY", "proxy-test.invalid"),
        ("NO_PROXY", "*.proxy-test.invalid"),
        ("NO_PROXY", "other.example, PROXY-TEST.invalid"),
        ("no_proxy", &format!("{NAME}:{}", server.addr().port())),
        ("NO_PROXY", "*"),
    ] {
        let env = [("HTTPS_PROXY", url.as_str()), (var, no_proxy)];
        // Bypassed, the name is looked up here and is not found.
        let (code, log) = once(&s, &env, "2s");
        assert_eq!(code, 1, "{env:?}: {log}");
        assert!(!log.contains("using proxy"), "{env:?}: {log}");
        assert_eq!(proxy.tunnels(), 0, "{env:?}");
        kubectl_agrees(&s, &env, false, &proxy, false);
    }
}

/// This machine's address toward the outside (no packet is sent), if it has one that is
/// not loopback: a server there is proxied by Go's environment rules.
fn outward_address() -> Option<IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("203.0.113.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn no_proxy_addresses_and_cidrs_bypass_the_proxy() {
    let Some(ip) = outward_address() else {
        println!("NOTICE: no address but loopback; the NO_PROXY address test is skipped");
        return;
    };
    let server = TestServer::builder()
        .addr(SocketAddr::new(ip, 0).to_string())
        .tls(true)
        .token(TOKEN)
        .start()
        .unwrap();
    let proxy = TestProxy::start(Kind::Connect, None, &[]);
    let url = format!("https://{}", server.addr());
    let s = scratch("no-proxy-cidr", &kubeconfig(&server, &url, ""));
    let proxy_url = proxy.url();
    let IpAddr::V4(v4) = ip else {
        println!("NOTICE: an IPv6 outward address; the NO_PROXY CIDR test is skipped");
        return;
    };
    let [a, b, c, _] = v4.octets();
    let cidr24 = format!("{a}.{b}.{c}.0/24");
    let exact = ip.to_string();
    let with_port = server.addr().to_string();
    for (no_proxy, proxied) in [
        ("", true),
        ("198.51.100.0/24, 10.0.0.0/8", true),
        (cidr24.as_str(), false),
        (exact.as_str(), false),
        (with_port.as_str(), false),
        // A name entry never matches an address.
        ("example.com", true),
    ] {
        let env = [("HTTPS_PROXY", proxy_url.as_str()), ("NO_PROXY", no_proxy)];
        let before = proxy.tunnels();
        let (code, log) = once(&s, &env, "20s");
        assert_eq!(code, 0, "NO_PROXY={no_proxy:?}: {log}");
        assert_eq!(
            proxy.tunnels() > before,
            proxied,
            "NO_PROXY={no_proxy:?}: {log}"
        );
        assert_eq!(log.contains("using proxy"), proxied, "{log}");
        kubectl_agrees(&s, &env, true, &proxy, proxied);
    }
}

#[test]
fn loopback_servers_are_never_proxied_from_the_environment() {
    let server = tls_server();
    let proxy = TestProxy::start(Kind::Connect, None, &[]);
    let port = server.addr().port();
    for url in [
        format!("https://127.0.0.1:{port}"),
        format!("https://localhost:{port}"),
    ] {
        let s = scratch("loopback", &kubeconfig(&server, &url, ""));
        let env = [("HTTPS_PROXY", proxy.url())];
        let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
        let (code, log) = once(&s, &env, "20s");
        assert_eq!(code, 0, "{url}: {log}");
        assert!(!log.contains("using proxy"), "{log}");
        assert_eq!(proxy.tunnels(), 0, "{url}");
        kubectl_agrees(&s, &env, true, &proxy, false);
    }
}

#[test]
fn a_proxy_url_with_an_unsupported_scheme_is_a_kubeconfig_error() {
    let server = tls_server();
    let proxy = TestProxy::start(Kind::Connect, None, &[]);
    for bad in ["ftp://127.0.0.1:21", "socks4://127.0.0.1:1080"] {
        let kc = kubeconfig(&server, server.url(), &format!("    proxy-url: {bad}\n"));
        let s = scratch("bad-scheme", &kc);
        let (code, log) = once(&s, &[], "5s");
        assert_eq!(code, 2, "{bad}: {log}");
        let file = s.path("kubeconfig");
        assert!(
            log.contains(&file.display().to_string())
                && log.contains("proxy-url")
                && log.contains("unsupported scheme"),
            "{bad}: {log}"
        );
        kubectl_agrees(&s, &[], false, &proxy, false);
    }
}

#[test]
fn a_proxy_refusing_the_credentials_fails_the_connection() {
    let server = tls_server();
    let proxy = TestProxy::start(
        Kind::Connect,
        Some("ursula-q:right-pw"),
        &[(NAME, server.addr())],
    );
    for userinfo in ["", "ursula-q:wrong-pw@"] {
        let kc = kubeconfig(
            &server,
            &named_url(&server),
            &format!("    proxy-url: {}\n", proxy.url_with(userinfo)),
        );
        let s = scratch("proxy-407", &kc);
        let (code, log) = once(&s, &[], "2s");
        assert_eq!(code, 1, "{log}");
        assert!(log.contains("407"), "the proxy's answer is named: {log}");
        assert!(stored(&server, OBJECT).is_none());
        kubectl_agrees(&s, &[], false, &proxy, false);
    }
}

#[test]
fn socks5_proxy_url_with_credentials() {
    let server = tls_server();
    let (user, password) = ("sam-sock", "s0cks-s3cret-pw");
    let creds = format!("{user}:{password}");
    let proxy = TestProxy::start(Kind::Socks5, Some(&creds), &[(NAME, server.addr())]);
    let kc = kubeconfig(
        &server,
        &named_url(&server),
        &format!("    proxy-url: {}\n", proxy.url_with(&format!("{creds}@"))),
    );
    let s = scratch("socks5", &kc);
    let (code, log) = once(&s, &[("RUST_LOG", "trace")], "20s");
    assert_eq!(code, 0, "{log}");
    assert!(stored(&server, OBJECT).is_some());
    // As Go: the name goes to the proxy, which resolves it.
    let sent = format!("SOCKS5 {creds} {NAME}:{}", server.addr().port());
    assert!(
        !proxy.heads().is_empty() && proxy.heads().iter().all(|h| *h == sent),
        "{:?}",
        proxy.heads()
    );
    assert!(
        log.contains(&format!(
            "using proxy socks5://{} (from proxy-url)",
            proxy.addr()
        )),
        "{log}"
    );
    assert_not_logged(&log, "proxy password", password);
    assert_not_logged(&log, "proxy user", user);
    kubectl_agrees(&s, &[], true, &proxy, true);
}

#[test]
fn an_https_proxy_is_checked_with_the_cluster_tls_settings() {
    // As Go: the TLS to an https proxy uses the cluster's CA bundle and tls-server-name.
    let server = tls_server();
    let proxy = TestProxy::start(Kind::HttpsConnect, None, &[(NAME, server.addr())]);
    let proxy_ca = proxy.ca_pem().unwrap().to_string();
    let line = format!("    proxy-url: {}\n", proxy.url());
    assert!(line.contains("https://127.0.0.1:"), "{line}");

    let s = scratch(
        "https-proxy-trusted",
        &kubeconfig_trusting(&server, &named_url(&server), &line, &proxy_ca),
    );
    let (code, log) = once(&s, &[], "20s");
    assert_eq!(code, 0, "{log}");
    assert!(proxy.tunnels() >= 1);
    kubectl_agrees(&s, &[], true, &proxy, true);

    // The proxy's CA not in the bundle: refused before any tunnel.
    let before = proxy.tunnels();
    let s = scratch(
        "https-proxy-untrusted",
        &kubeconfig(&server, &named_url(&server), &line),
    );
    let (code, log) = once(&s, &[], "2s");
    assert_eq!(code, 1, "{log}");
    assert!(log.contains("UnknownIssuer"), "{log}");
    assert_eq!(proxy.tunnels(), before);
    kubectl_agrees(&s, &[], false, &proxy, false);
}

#[test]
fn an_http_server_is_reached_through_a_connect_tunnel() {
    // Go sends absolute-form requests to the proxy for http:// servers; this client opens a
    // CONNECT tunnel for them too (ureq's way). kubectl is not asked: the test proxy only
    // speaks CONNECT.
    let server = TestServer::start();
    let proxy = TestProxy::start(Kind::Connect, None, &[(NAME, server.addr())]);
    let kc = kubeconfig(
        &server,
        &named_url(&server),
        &format!("    proxy-url: {}\n", proxy.url()),
    );
    let s = scratch("http-tunnel", &kc);
    let (code, log) = once(&s, &[], "20s");
    assert_eq!(code, 0, "{log}");
    assert!(stored(&server, OBJECT).is_some());
    assert!(proxy.tunnels() >= 1);
    let target = format!("CONNECT {NAME}:{} HTTP/1.1", server.addr().port());
    assert!(proxy.heads().iter().all(|h| h.starts_with(&target)));
}

/// An API for a server that answers every watch with its head and then silence, reached
/// only through a `kind` proxy (its name is one only the proxy resolves).
fn silent_watches_through(kind: Kind) -> (scripted::Server, TestProxy, Api<APIService>) {
    let streams = Arc::new(Mutex::new(Vec::new()));
    let server = scripted::Server::with_handler(move |_| {
        let (handle, answer) = scripted::Answer::stream();
        // Kept open, never written: the connection goes quiet.
        streams.lock().unwrap().push(handle);
        answer
    });
    let name = "watch.proxy-test.invalid";
    let proxy = TestProxy::start(kind, None, &[(name, server.addr())]);
    let mut config = Config::new(format!("http://{name}:{}", server.addr().port()));
    config.proxy_url = Some(proxy.url());
    let api = Api::<APIService>::all(Client::new(config).unwrap());
    (server, proxy, api)
}

#[test]
fn a_silent_watch_through_a_proxy_fails_as_a_dead_connection() {
    for kind in [Kind::Connect, Kind::Socks5] {
        let (_server, proxy, api) = silent_watches_through(kind);
        let idle = Duration::from_millis(300);
        let params = WatchParams {
            timeout_seconds: 300,
            idle_timeout: Some(idle),
            ..WatchParams::default()
        };
        let started = Instant::now();
        let mut stream = api.watch(&params, &Canceller::new()).unwrap();
        let first = stream.next();
        let took = started.elapsed();
        match first {
            Some(Err(Error::Timeout(m))) => assert!(m.contains("presumed dead"), "{kind:?}: {m}"),
            other => panic!("{kind:?}: expected an idle timeout, got {other:?}"),
        }
        assert!(took >= idle, "{kind:?}: cut after {took:?}");
        assert!(
            took < Duration::from_secs(10),
            "{kind:?}: noticed after {took:?}"
        );
        assert_eq!(proxy.tunnels(), 1, "{kind:?}");
    }
}

#[test]
fn cancel_closes_a_watch_through_a_proxy_at_once() {
    for kind in [Kind::Connect, Kind::Socks5] {
        let (_server, proxy, api) = silent_watches_through(kind);
        let params = WatchParams {
            timeout_seconds: 300,
            ..WatchParams::default()
        };
        let cancel = Canceller::new();
        let mut stream = api.watch(&params, &cancel).unwrap();
        assert_eq!(proxy.open_tunnels(), 1, "{kind:?}");
        let c = cancel.clone();
        let reader = std::thread::spawn(move || stream.next().map(|r| r.map(|_| ())));
        let asked = Instant::now();
        c.cancel();
        let r = reader.join().unwrap();
        assert!(matches!(r, Some(Err(Error::Cancelled))), "{kind:?}: {r:?}");
        assert!(
            asked.elapsed() < Duration::from_secs(1),
            "{kind:?}: {:?}",
            asked.elapsed()
        );
        // The socket to the proxy was closed, so the tunnel ends.
        assert!(wait_until(|| proxy.open_tunnels() == 0), "{kind:?}");
    }
}
