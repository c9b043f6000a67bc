//! Secrets through the real binary: nothing of a token or key reaches the log even at
//! `RUST_LOG=trace`, and token files are read as client-go reads them.
#![cfg(feature = "testing")]

use std::path::Path;

use autoregister::testserver::TestServer;

#[path = "support/binary.rs"]
mod binary;

use binary::{manifest, stored, Proc, Scratch, WAIT};

/// A kubeconfig for `server` (its CA trusted) with `user` as the user's fields (indented 4).
fn kubeconfig(server: &TestServer, user: &str) -> String {
    use base64::Engine as _;
    let ca = server.ca_pem().expect("a TLS test server");
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n    \
         certificate-authority-data: {}\nusers:\n- name: t\n  user:\n{user}contexts:\n- name: t\n  \
         context:\n    cluster: t\n    user: t\ncurrent-context: t\n",
        server.url(),
        base64::engine::general_purpose::STANDARD.encode(ca)
    )
}

fn tls_server(token: &str) -> TestServer {
    TestServer::builder()
        .tls(true)
        .token(token)
        .start()
        .unwrap()
}

/// `run --once` with `kubeconfig` at `RUST_LOG=trace`; answers the exit code and the log.
fn once_at_trace(s: &Scratch, kubeconfig: &str) -> (i32, String) {
    let kc = s.0.join("kubeconfig");
    std::fs::write(&kc, kubeconfig).unwrap();
    let m = s.manifests();
    Proc::spawn_env(
        &[
            "run",
            "--manifests",
            m.to_str().unwrap(),
            "--kubeconfig",
            kc.to_str().unwrap(),
            "--once",
            "--timeout",
            "20s",
        ],
        &[("RUST_LOG", "trace")],
    )
    .wait_exit(WAIT)
}

/// Fails when any 6-character piece of `secret` is in `log`, as text or as the hex a wire
/// dump would show: 3 bytes spaced (`73 33 63`), 6 bytes packed (`733363...`). Packed hex
/// of 3 bytes is often six decimal digits (`9Pw` is 395077), which a log has by the
/// thousand (every timestamp's microseconds), so a shorter packed piece proves nothing.
fn assert_no_piece(log: &str, what: &str, secret: &str) {
    let b = secret.as_bytes();
    assert!(b.len() >= 6, "{what}: too short to check");
    let lower = log.to_ascii_lowercase();
    let line_with = |needle: &str| {
        lower
            .lines()
            .find(|l| l.contains(needle))
            .unwrap_or_default()
            .to_string()
    };
    for w in b.windows(6) {
        let piece = String::from_utf8_lossy(w);
        assert!(
            !log.contains(piece.as_ref()),
            "{what}: {piece:?} is in the log"
        );
        let packed: String = w.iter().map(|c| format!("{c:02x}")).collect();
        assert!(
            !lower.contains(&packed),
            "{what}: hex {packed:?} is in the log: {}",
            line_with(&packed)
        );
    }
    for w in b.windows(3) {
        let spaced = format!("{:02x} {:02x} {:02x}", w[0], w[1], w[2]);
        assert!(
            !lower.contains(&spaced),
            "{what}: hex {spaced:?} is in the log: {}",
            line_with(&spaced)
        );
    }
}

fn write_executable(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let mut perm = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).unwrap();
}

/// A client key and certificate (PEM); the test server does not ask for one, but the key
/// is read, parsed and loaded into TLS by the process.
fn client_key() -> (String, String) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["client".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    (cert.pem(), key.serialize_pem())
}

/// Writes what a user needs into the scratch folder; answers the kubeconfig user fields.
type UserFields = Box<dyn Fn(&Scratch) -> String + Send>;

#[test]
fn trace_logs_carry_no_piece_of_a_token_a_token_file_a_client_key_or_an_exec_credential() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let bearer = "Qz7Xk2Lm9Pw4Rt6Yv8NsBq3";
    let from_file = "J3Hd5Gf7Kq1Zx9Cv2BnWm5";
    let from_exec = "W4Er6Ty8Ui0Op2As4DfGh7";
    let (cert_pem, key_pem) = client_key();
    // The key's secret part: the PKCS#8 body after its fixed 48-character P-256 header
    // (the rest is the public key, which the certificate carries anyway).
    let key_body: String = key_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let key_secret = &key_body[48..90];
    let key_data = b64(&key_pem);

    let kc_key_data = key_data.clone();
    let runs: Vec<(&str, &str, UserFields)> = vec![
        (
            "bearer token and client key",
            bearer,
            Box::new(move |_| {
                format!(
                    "    token: {bearer}\n    client-certificate-data: {}\n    client-key-data: {}\n",
                    b64(&cert_pem),
                    kc_key_data
                )
            }),
        ),
        (
            "token file",
            from_file,
            Box::new(move |s| {
                let f = s.0.join("token");
                std::fs::write(&f, format!("{from_file}\n")).unwrap();
                format!("    tokenFile: {}\n", f.display())
            }),
        ),
        (
            "exec credential",
            from_exec,
            Box::new(move |s| {
                let plugin = s.0.join("plugin.sh");
                write_executable(
                    &plugin,
                    &format!(
                        "#!/bin/sh\nprintf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
                         \"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{from_exec}\"}}}}'\n"
                    ),
                );
                format!(
                    "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      \
                     interactiveMode: Never\n",
                    plugin.display()
                )
            }),
        ),
    ];
    let threads: Vec<_> = runs
        .into_iter()
        .enumerate()
        .map(|(i, (what, token, user))| {
            std::thread::spawn(move || {
                let server = tls_server(token);
                let s = Scratch::new(&format!("trace-{i}"));
                s.write("a.yaml", &manifest("a.example.com", &[], 10));
                let (code, log) = once_at_trace(&s, &kubeconfig(&server, &user(&s)));
                assert_eq!(code, 0, "{what}: {log}");
                assert!(stored(&server, "v1.a.example.com").is_some(), "{what}");
                // The run really logged below info, so an absence means something.
                assert!(log.contains(" DEBUG "), "{what}: no debug lines");
                (what, log)
            })
        })
        .collect();
    for t in threads {
        let (what, log) = t.join().unwrap();
        for (name, secret) in [
            ("bearer token", bearer),
            ("token file", from_file),
            ("exec credential", from_exec),
            ("client key", key_secret),
        ] {
            assert_no_piece(&log, &format!("{what} run, {name}"), secret);
        }
        // The key as it sits in the kubeconfig (base64 of the PEM), its secret stretch.
        assert_no_piece(
            &log,
            &format!("{what} run, client-key-data"),
            &key_data[104..156],
        );
    }
}

#[test]
fn a_token_file_is_trimmed_and_re_read_when_it_rotates() {
    let token = "rotatedTokenM5Nb7Vc9Xz";
    let server = tls_server(token);
    let s = Scratch::new("token-file");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let f = s.0.join("token");
    // Not yet the token the server takes: the first requests are refused.
    std::fs::write(&f, "expired-token\n").unwrap();
    let kc = s.0.join("kubeconfig");
    std::fs::write(
        &kc,
        kubeconfig(&server, &format!("    tokenFile: {}\n", f.display())),
    )
    .unwrap();
    let m = s.manifests();
    let p = Proc::spawn(&[
        "run",
        "--manifests",
        m.to_str().unwrap(),
        "--kubeconfig",
        kc.to_str().unwrap(),
        "--once",
        "--timeout",
        "20s",
    ]);
    assert!(
        binary::wait_until(|| server.requests().iter().any(|r| r.code == 401)),
        "{}",
        p.log()
    );
    // Rotated, written the way a kubelet or an editor may leave it: surrounding whitespace.
    std::fs::write(&f, format!("  {token}\r\n\n")).unwrap();
    let (code, log) = p.wait_exit(WAIT);
    assert_eq!(code, 0, "{log}");
    assert!(stored(&server, "v1.a.example.com").is_some());
    assert!(!log.contains("failed to parse header value"), "{log}");
}

#[test]
fn trace_logs_carry_no_password_from_the_kubeconfig_or_the_server_url() {
    use base64::Engine as _;
    let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
    let kc_password = "KcPassw0rdQ4zLm8";
    let url_password = "UrlPassw0rdXy7Hb3";
    // No authentication on this server: basic auth is sent and ignored, so the run converges
    // and logs everything it does, requests and answers included.
    let server = TestServer::builder().tls(true).start().unwrap();
    let with_userinfo =
        server
            .url()
            .replacen("https://", &format!("https://someone:{url_password}@"), 1);
    let runs = [
        (
            "password in the kubeconfig, userinfo in the URL",
            format!("    username: admin\n    password: {kc_password}\n"),
        ),
        (
            "userinfo in the URL as the only credential",
            "    {}\n".to_string(),
        ),
    ];
    for (i, (what, user)) in runs.iter().enumerate() {
        let s = Scratch::new(&format!("password-{i}"));
        s.write("a.yaml", &manifest(&format!("a{i}.example.com"), &[], 10));
        let kc = kubeconfig(&server, user).replace(server.url(), &with_userinfo);
        assert!(kc.contains(url_password));
        let (code, log) = once_at_trace(&s, &kc);
        assert_eq!(code, 0, "{what}: {log}");
        assert!(log.contains(" DEBUG "), "{what}: no debug lines");
        assert!(
            log.contains("connecting to https://127.0.0.1"),
            "{what}: {log}"
        );
        for (name, secret) in [
            ("kubeconfig password", kc_password.to_string()),
            ("URL password", url_password.to_string()),
            ("basic auth header", b64(&format!("admin:{kc_password}"))),
            ("basic auth header", b64(&format!("someone:{url_password}"))),
        ] {
            assert_no_piece(&log, &format!("{what}, {name}"), &secret);
        }
    }
}

#[test]
fn no_credential_is_sent_to_an_http_server_and_a_warning_says_so() {
    let token = "clearTextTokenK9Lp2Vd";
    // Plain HTTP that would accept the token: had it been sent, the request log names the user.
    let server = TestServer::builder().token(token).start().unwrap();
    let s = Scratch::new("http-token");
    s.write("a.yaml", &manifest("a.example.com", &[], 10));
    let kc = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: t\n  cluster:\n    server: {}\n\
         users:\n- name: t\n  user:\n    token: {token}\ncontexts:\n- name: t\n  context:\n    \
         cluster: t\n    user: t\ncurrent-context: t\n",
        server.url()
    );
    let kc_path = s.0.join("kubeconfig");
    std::fs::write(&kc_path, &kc).unwrap();
    let m = s.manifests();
    let (code, log) = Proc::spawn_env(
        &[
            "plan",
            "--manifests",
            m.to_str().unwrap(),
            "--kubeconfig",
            kc_path.to_str().unwrap(),
        ],
        &[("RUST_LOG", "trace")],
    )
    .wait_exit(WAIT);
    assert_ne!(code, 0, "the server wants a token it was never sent: {log}");
    assert!(log.contains("credentials were not sent"), "{log}");
    assert!(!server.requests().is_empty(), "the server was asked");
    assert!(
        server.requests().iter().all(|r| r.user.is_none()),
        "a token reached the http server"
    );
    assert_no_piece(&log, "token toward http", token);
}
