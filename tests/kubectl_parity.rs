//! kubectl as the oracle for connecting: for each kubeconfig variant, `kubectl get
//! apiservices` and `autoregister plan` run with the same file, flags and environment
//! against the test API server (TLS, bearer tokens, client certificates, impersonation),
//! and must both succeed or both fail. The few deliberate differences are listed in the
//! cases with their reason. Skipped with a notice when `kubectl` is not on the PATH.
//!
//! Not comparable here, tested elsewhere: the in-cluster fallback (kubectl reads the fixed
//! mount `/var/run/secrets/kubernetes.io/serviceaccount`; see tests/kubeconfig.rs
//! `in_cluster_fallback_*`), and secrets in logs (tests/secrets.rs).
#![cfg(feature = "testing")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Instant;

use autoregister::testserver::TestServer;
use base64::Engine as _;

#[path = "support/binary.rs"]
mod binary;

/// The token users of the token servers: `admin` may impersonate, `plain` may not.
const ADMIN_TOKEN: &str = "admin-token-Hq7Zp3Kd";
const PLAIN_TOKEN: &str = "plain-token-Vb2Nx8Lm";

/// A 1024-bit RSA key and its self-signed certificate: Go takes it, rustls does not.
const SHORT_RSA_CERT: &str = include_str!("support/rsa1024.crt");
const SHORT_RSA_KEY: &str = include_str!("support/rsa1024.key");

fn b64(s: impl AsRef<[u8]>) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

/// A CA for client certificates and one certificate it issued.
struct ClientPki {
    ca_pem: String,
    cert_pem: String,
    key_pem: String,
}

fn client_pki() -> ClientPki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let ca_key = KeyPair::generate().unwrap();
    let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca.distinguished_name
        .push(DnType::CommonName, "parity-client-ca");
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.distinguished_name.push(DnType::CommonName, "cert-user");
    let cert = p.signed_by(&key, &ca_cert, &ca_key).unwrap();
    ClientPki {
        ca_pem: ca_cert.pem(),
        cert_pem: cert.pem(),
        key_pem: key.serialize_pem(),
    }
}

/// The servers every case may point at.
struct World {
    /// TLS, tokens required (admin may impersonate).
    tls: TestServer,
    /// TLS, no authentication.
    open: TestServer,
    /// TLS, a client certificate from `pki` required in the handshake.
    mtls: TestServer,
    /// Plain HTTP, tokens required: a credential sent in clear would get through.
    http: TestServer,
    pki: ClientPki,
    /// The directory shared files live in (CA files, plugins).
    dir: PathBuf,
}

impl World {
    fn ca(&self) -> String {
        b64(self.tls.ca_pem().unwrap())
    }
}

/// A check run after both clients: the servers, the case's directory, our output.
type Check = Box<dyn Fn(&World, &Path, &Output) + Send + Sync>;

/// How a case must end.
#[derive(Clone, Copy)]
enum Expect {
    /// Both succeed.
    Ok,
    /// Both fail.
    Fail,
    /// A deliberate difference: kubectl's result, ours, and why.
    Differs {
        kubectl: bool,
        ours: bool,
        why: &'static str,
    },
}

/// One variant: a kubeconfig, extra flags, environment and what must happen.
struct Case {
    name: &'static str,
    kubeconfig: String,
    /// Flags after the command (e.g. `--as`); `--kubeconfig FILE` comes first unless `own_kubeconfig_flag`.
    args: Vec<String>,
    env: Vec<(String, String)>,
    own_kubeconfig_flag: bool,
    expect: Expect,
    /// Checked after both ran (e.g. what the server saw); the case's dir is given.
    check: Option<Check>,
}

fn case(name: &'static str, kubeconfig: String, expect: Expect) -> Case {
    Case {
        name,
        kubeconfig,
        args: Vec::new(),
        env: Vec::new(),
        own_kubeconfig_flag: false,
        expect,
        check: None,
    }
}

impl Case {
    fn args(mut self, args: &[&str]) -> Self {
        self.args = args.iter().map(|s| s.to_string()).collect();
        self
    }
    fn env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }
    fn check(mut self, f: impl Fn(&World, &Path, &Output) + Send + Sync + 'static) -> Self {
        self.check = Some(Box::new(f));
        self
    }
}

/// A one-context kubeconfig: `cluster` and `user` are the fields, indented by four spaces.
fn kc(cluster: &str, user: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n{cluster}users:\n- name: u\n  user:\n{user}\
         contexts:\n- name: x\n  context:\n    cluster: c\n    user: u\ncurrent-context: x\n"
    )
}

fn fields(pairs: &[(&str, &str)]) -> String {
    if pairs.is_empty() {
        return "    {}\n".into();
    }
    pairs
        .iter()
        .map(|(k, v)| format!("    {k}: {v}\n"))
        .collect()
}

fn write_exec(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
    let mut perm = std::fs::metadata(path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perm, 0o755);
    std::fs::set_permissions(path, perm).unwrap();
}

fn exec_user(command: &Path, extra: &str) -> String {
    format!(
        "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: {}\n      \
         interactiveMode: Never\n{extra}",
        command.display()
    )
}

fn token_plugin(path: &Path, token: &str, marker: Option<&Path>) {
    let touch = marker
        .map(|m| format!("touch '{}'\n", m.display()))
        .unwrap_or_default();
    write_exec(
        path,
        &format!(
            "#!/bin/sh\n{touch}printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\
             \"kind\":\"ExecCredential\",\"status\":{{\"token\":\"{token}\"}}}}'\n"
        ),
    );
}

/// An unexpired OIDC id-token (unsigned claims are all kubectl's oidc plugin reads).
fn id_token() -> String {
    let url = |s: &str| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(s);
    format!(
        "{}.{}.{}",
        url(r#"{"alg":"RS256","typ":"JWT"}"#),
        url(r#"{"iss":"https://issuer.invalid","sub":"oidc-user","aud":"x","exp":4102444800}"#),
        url("signature")
    )
}

fn cases(w: &World) -> Vec<Case> {
    let tls = w.tls.url().to_string();
    let http = w.http.url().to_string();
    let open = w.open.url().to_string();
    let mtls = w.mtls.url().to_string();
    let ca = w.ca();
    let open_ca = b64(w.open.ca_pem().unwrap());
    let mtls_ca = b64(w.mtls.ca_pem().unwrap());
    let tls_cluster = fields(&[("server", &tls), ("certificate-authority-data", &ca)]);
    let open_cluster = fields(&[("server", &open), ("certificate-authority-data", &open_ca)]);
    let mtls_cluster = fields(&[("server", &mtls), ("certificate-authority-data", &mtls_ca)]);
    let http_cluster = fields(&[("server", &http)]);
    let admin = fields(&[("token", ADMIN_TOKEN)]);
    let plain = fields(&[("token", PLAIN_TOKEN)]);
    let cert = b64(&w.pki.cert_pem);
    let key = b64(&w.pki.key_pem);
    let d = &w.dir;
    let file = |name: &str, text: &str| {
        let p = d.join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let failing_plugin = d.join("failing-plugin.sh");
    write_exec(
        &failing_plugin,
        "#!/bin/sh\necho plugin must not run >&2\nexit 1\n",
    );
    let http_marker = d.join("http-plugin-ran");
    let http_plugin = d.join("http-plugin.sh");
    token_plugin(&http_plugin, ADMIN_TOKEN, Some(&http_marker));

    // An exec plugin answering with a client certificate that expired an hour ago.
    let expired = d.join("expired-cert.json");
    std::fs::write(
        &expired,
        serde_json::json!({
            "apiVersion": "client.authentication.k8s.io/v1",
            "kind": "ExecCredential",
            "status": {
                "clientCertificateData": w.pki.cert_pem,
                "clientKeyData": w.pki.key_pem,
                "expirationTimestamp": "2000-01-01T00:00:00Z",
            }
        })
        .to_string(),
    )
    .unwrap();
    let expired_plugin = d.join("expired-plugin.sh");
    write_exec(
        &expired_plugin,
        &format!("#!/bin/sh\ncat '{}'\n", expired.display()),
    );

    // provideClusterInfo: the plugin answers only when it was given the cluster's exec
    // extension as spec.cluster.config and the server exactly as written (trailing slash).
    let info_plugin = d.join("info-plugin.sh");
    write_exec(
        &info_plugin,
        &format!(
            "#!/bin/sh\ncase \"$KUBERNETES_EXEC_INFO\" in *'\"team\":\"blue\"'*) ;; \
             *) echo \"no config: $KUBERNETES_EXEC_INFO\" >&2; exit 1;; esac\n\
             case \"$KUBERNETES_EXEC_INFO\" in *'\"server\":\"{tls}/\"'*) ;; \
             *) echo \"server not verbatim: $KUBERNETES_EXEC_INFO\" >&2; exit 1;; esac\n\
             printf '{{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\
             \"status\":{{\"token\":\"{ADMIN_TOKEN}\"}}}}'\n"
        ),
    );

    let ca_pem = String::from_utf8(w.tls.ca_pem().unwrap()).unwrap();
    let ca_file = file("ca.pem", &ca_pem);
    let good_token_file = file("token-newline", &format!("{ADMIN_TOKEN}\n"));
    let bad_block =
        "-----BEGIN CERTIFICATE-----\nMIIBroken0000notacertificate==\n-----END CERTIFICATE-----\n";
    let truncated = "-----BEGIN CERTIFICATE-----\nMIIBkTCB+wIJAKHHIG\n";
    let cert_file = file("client.crt", &w.pki.cert_pem);
    let empty_kubeconfig = file("empty-kubeconfig", "");
    let good_kubeconfig = file("good-kubeconfig", &kc(&tls_cluster, &admin));
    let upper = tls.replacen("https://", "HTTPS://", 1);
    let userinfo = open.replacen("https://", "https://someone:S3cretPassw0rd@", 1);
    let userinfo_tls = tls.replacen("https://", "https://someone:S3cretPassw0rd@", 1);
    let no_password = |_: &World, _: &Path, ours: &Output| {
        let text = outcome(ours);
        assert!(!text.contains("S3cretPassw0rd"), "{text}");
    };

    let no_user_seen = |server: fn(&World) -> &TestServer| {
        move |w: &World, _: &Path, _: &Output| {
            let seen: Vec<_> = server(w)
                .requests()
                .into_iter()
                .filter_map(|r| r.user)
                .collect();
            assert!(
                seen.is_empty(),
                "a credential reached the http server: {seen:?}"
            );
        }
    };

    vec![
        // Security: credentials only over TLS.
        case("token_not_sent_over_http", kc(&http_cluster, &admin), Expect::Fail)
            .check(no_user_seen(|w| &w.http)),
        case(
            "token_file_not_sent_over_http",
            kc(&http_cluster, &fields(&[("tokenFile", &good_token_file)])),
            Expect::Fail,
        )
        .check(no_user_seen(|w| &w.http)),
        case(
            "exec_plugin_not_run_over_http",
            kc(&http_cluster, &exec_user(&http_plugin, "")),
            Expect::Fail,
        )
        .check(move |w, _, _| {
            assert!(!w.dir.join("http-plugin-ran").exists(), "the plugin ran");
            no_user_seen(|w| &w.http)(w, Path::new(""), &empty_output());
        }),
        // URL userinfo: basic auth, which the token server refuses (kube-apiserver has no
        // basic auth since 1.19; kubectl, finding no credential, prompts and reads EOF).
        case(
            "url_userinfo_is_basic_auth_and_never_printed",
            kc(&fields(&[("server", &userinfo_tls), ("certificate-authority-data", &ca)]), "    {}\n"),
            Expect::Fail,
        )
        .check(no_password),
        case(
            "url_userinfo_with_a_kubeconfig_user",
            kc(&fields(&[("server", &userinfo), ("certificate-authority-data", &open_ca)]), "    username: someone\n"),
            Expect::Ok,
        )
        .check(no_password),
        // Impersonation.
        case(
            "as_anonymous_is_refused",
            kc(&tls_cluster, &format!("{admin}    as: system:anonymous\n")),
            Expect::Fail,
        ),
        case(
            "as_a_known_user_is_honoured",
            kc(&tls_cluster, &format!("{admin}    as: plain\n")),
            Expect::Ok,
        )
        .check(|w, _, _| {
            assert!(w.tls.requests().iter().any(|r| r.user.as_deref() == Some("plain")
                && r.impersonated_by.as_deref() == Some("admin")));
        }),
        case(
            "as_without_the_permission_is_refused",
            kc(&tls_cluster, &format!("{plain}    as: admin\n")),
            Expect::Fail,
        ),
        case(
            "as_groups_uid_and_user_extra",
            kc(
                &tls_cluster,
                &format!(
                    "{admin}    as: someone\n    as-uid: \"1234\"\n    as-groups: [system:masters]\n    \
                     as-user-extra:\n      reason: [testing]\n"
                ),
            ),
            Expect::Ok,
        ),
        case(
            "as_groups_without_as_is_invalid",
            kc(&tls_cluster, &format!("{admin}    as-groups: [system:masters]\n")),
            Expect::Fail,
        ),
        case("as_flag_anonymous_is_refused", kc(&tls_cluster, &admin), Expect::Fail)
            .args(&["--as", "system:anonymous"]),
        case("as_flag_known_user", kc(&tls_cluster, &admin), Expect::Ok).args(&["--as", "plain"]),
        case("as_group_flag", kc(&tls_cluster, &admin), Expect::Ok)
            .args(&["--as", "someone", "--as-group", "system:masters"]),
        case("as_group_flag_without_as", kc(&tls_cluster, &admin), Expect::Fail)
            .args(&["--as-group", "system:masters"]),
        case(
            "as_flag_overrides_the_kubeconfig_as",
            kc(&tls_cluster, &format!("{admin}    as: system:anonymous\n")),
            Expect::Ok,
        )
        .args(&["--as", "plain"]),
        // Token files.
        case(
            "token_file_with_a_trailing_newline",
            kc(&tls_cluster, &fields(&[("tokenFile", &good_token_file)])),
            Expect::Ok,
        ),
        // Precedence.
        case(
            "readable_token_file_wins_over_token",
            kc(&tls_cluster, &fields(&[("token", "wrong-token"), ("tokenFile", &good_token_file)])),
            Expect::Ok,
        ),
        case(
            "token_is_the_fallback_of_an_unreadable_token_file",
            kc(&tls_cluster, &fields(&[("token", ADMIN_TOKEN), ("tokenFile", "/nonexistent/token")])),
            Expect::Ok,
        ),
        case(
            "unreadable_token_file_alone_fails",
            kc(&tls_cluster, &fields(&[("tokenFile", "/nonexistent/token")])),
            Expect::Fail,
        ),
        case(
            "token_skips_the_exec_plugin",
            kc(&tls_cluster, &format!("{admin}{}", exec_user(&failing_plugin, ""))),
            Expect::Ok,
        ),
        case(
            "client_certificate_skips_the_exec_plugin",
            kc(
                &mtls_cluster,
                &format!(
                    "    client-certificate-data: {cert}\n    client-key-data: {key}\n{}",
                    exec_user(&failing_plugin, "")
                ),
            ),
            Expect::Ok,
        ),
        case(
            "basic_auth_skips_the_exec_plugin",
            kc(
                &open_cluster,
                &format!("    username: someone\n    password: pw\n{}", exec_user(&failing_plugin, "")),
            ),
            Expect::Ok,
        ),
        case(
            "server_flag_clears_tls_server_name",
            kc(&format!("{tls_cluster}    tls-server-name: wrong.example\n"), &admin),
            Expect::Ok,
        )
        .args(&["--server", &tls]),
        case(
            "tls_server_name_is_checked_without_server_flag",
            kc(&format!("{tls_cluster}    tls-server-name: wrong.example\n"), &admin),
            Expect::Fail,
        ),
        Case {
            own_kubeconfig_flag: true,
            ..case("empty_kubeconfig_flag_means_not_given", String::new(), Expect::Ok)
                .args(&["--kubeconfig", ""])
                .env("KUBECONFIG", &good_kubeconfig)
        },
        Case {
            own_kubeconfig_flag: true,
            ..case("empty_kubeconfig_outside_a_cluster", String::new(), Expect::Fail)
                .env("KUBECONFIG", &empty_kubeconfig)
        },
        // Exec plugins.
        case(
            "exec_certificate_already_expired_is_used",
            kc(&mtls_cluster, &exec_user(&expired_plugin, "")),
            Expect::Ok,
        ),
        case(
            "exec_provide_cluster_info_passes_extension_and_server_verbatim",
            kc(
                &format!(
                    "    server: {tls}/\n    certificate-authority-data: {ca}\n    extensions:\n    \
                     - name: client.authentication.k8s.io/exec\n      extension:\n        team: blue\n"
                ),
                &exec_user(&info_plugin, "      provideClusterInfo: true\n"),
            ),
            Expect::Ok,
        ),
        // Parsing.
        case("utf8_bom", format!("\u{feff}{}", kc(&tls_cluster, &admin)), Expect::Ok),
        case(
            "upper_case_scheme",
            kc(&fields(&[("server", &upper), ("certificate-authority-data", &ca)]), &admin),
            Expect::Ok,
        ),
        case(
            "insecure_skip_tls_verify_yes",
            kc(&fields(&[("server", &tls), ("insecure-skip-tls-verify", "yes")]), &admin),
            Expect::Ok,
        ),
        case(
            "ca_bundle_with_one_bad_block",
            kc(
                &fields(&[("server", &tls), ("certificate-authority-data", &b64(format!("{bad_block}{ca_pem}")))]),
                &admin,
            ),
            Expect::Ok,
        ),
        case(
            "ca_bundle_with_a_truncated_block",
            kc(
                &fields(&[("server", &tls), ("certificate-authority-data", &b64(format!("{truncated}{ca_pem}")))]),
                &admin,
            ),
            Expect::Ok,
        ),
        case(
            "ca_bundle_of_bad_blocks_only",
            kc(&fields(&[("server", &tls), ("certificate-authority-data", &b64(bad_block))]), &admin),
            Expect::Fail,
        ),
        // Validation.
        case(
            "password_with_token",
            kc(&tls_cluster, &fields(&[("token", ADMIN_TOKEN), ("username", "u"), ("password", "p")])),
            Expect::Fail,
        ),
        case(
            "password_with_token_file",
            kc(&tls_cluster, &fields(&[("tokenFile", &good_token_file), ("username", "u"), ("password", "p")])),
            Expect::Fail,
        ),
        case(
            "client_certificate_file_and_data",
            kc(
                &mtls_cluster,
                &fields(&[("client-certificate", &cert_file), ("client-certificate-data", &cert), ("client-key-data", &key)]),
            ),
            Expect::Fail,
        ),
        case(
            "ca_file_and_data",
            kc(&fields(&[("server", &tls), ("certificate-authority", &ca_file), ("certificate-authority-data", &ca)]), &admin),
            Expect::Fail,
        ),
        case(
            "insecure_with_a_ca",
            kc(&format!("{tls_cluster}    insecure-skip-tls-verify: true\n"), &admin),
            Expect::Fail,
        ),
        case(
            "cluster_name_twice",
            kc(&tls_cluster, &admin).replace(
                "clusters:\n",
                &format!("clusters:\n- name: c\n  cluster:\n{tls_cluster}"),
            ),
            Expect::Fail,
        ),
        case(
            "exec_env_entry_without_a_name",
            kc(&tls_cluster, &exec_user(&info_plugin, "      env:\n      - name: \"\"\n        value: x\n")),
            Expect::Fail,
        ),
        case(
            "spaces_inside_base64",
            kc(&fields(&[("server", &tls), ("certificate-authority-data", &format!("\"{} {}\"", &ca[..40], &ca[40..]))]), &admin),
            Expect::Fail,
        ),
        // Deliberate differences.
        case(
            "rsa_1024_client_key",
            kc(
                &tls_cluster,
                &format!(
                    "{admin}    client-certificate-data: {}\n    client-key-data: {}\n",
                    b64(SHORT_RSA_CERT),
                    b64(SHORT_RSA_KEY)
                ),
            ),
            Expect::Differs {
                kubectl: true,
                ours: false,
                why: "rustls (ring) refuses RSA keys under 2048 bits; we say so instead of \
                      connecting without the certificate",
            },
        )
        .check(|_, _, ours| {
            let text = String::from_utf8_lossy(&ours.stderr);
            assert!(text.contains("2048"), "{text}");
        }),
        case(
            "auth_provider_oidc",
            kc(
                &tls_cluster,
                &format!(
                    "    auth-provider:\n      name: oidc\n      config:\n        idp-issuer-url: https://issuer.invalid\n        \
                     client-id: x\n        id-token: {}\n",
                    id_token()
                ),
            ),
            Expect::Differs {
                kubectl: true,
                ours: false,
                why: "auth-provider plugins are deprecated in client-go; we refuse them and point \
                      at exec plugins (kubelogin)",
            },
        )
        .check(|_, _, ours| {
            let text = String::from_utf8_lossy(&ours.stderr);
            assert!(text.contains("kubelogin"), "{text}");
        }),
    ]
}

fn empty_output() -> Output {
    Output {
        status: std::process::ExitStatus::default(),
        stdout: Vec::new(),
        stderr: Vec::new(),
    }
}

/// Runs `cmd` with only PATH, HOME and `env` set.
fn run(mut cmd: Command, home: &Path, env: &[(String, String)]) -> Output {
    cmd.env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null());
    cmd.output().expect("run a client")
}

/// `ok`, or the first error line.
fn summary(o: &Output) -> String {
    if o.status.success() {
        return "ok".into();
    }
    let err = String::from_utf8_lossy(&o.stderr);
    let line = err
        .lines()
        .find(|l| l.contains("error") || l.contains("ERROR") || l.contains("rror:"))
        .or_else(|| err.lines().last())
        .unwrap_or_default();
    format!("FAIL: {}", line.chars().take(220).collect::<String>())
}

fn outcome(o: &Output) -> String {
    format!(
        "exit {:?}\n{}{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

#[test]
fn kubectl_and_autoregister_agree_on_every_kubeconfig_variant() {
    let Some(kubectl) = on_path("kubectl") else {
        println!("NOTICE: kubectl is not on the PATH; skipping the kubectl parity suite");
        return;
    };
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("autoregister-parity-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let pki = client_pki();
    let token_server = |tls: bool| {
        TestServer::builder()
            .tls(tls)
            .user(ADMIN_TOKEN, "admin")
            .user(PLAIN_TOKEN, "plain")
            .user(id_token(), "oidc-user")
            .impersonator("admin")
            .start()
            .unwrap()
    };
    let world = World {
        tls: token_server(true),
        open: TestServer::builder().tls(true).start().unwrap(),
        mtls: TestServer::builder()
            .client_ca(pki.ca_pem.clone())
            .start()
            .unwrap(),
        http: token_server(false),
        pki,
        dir: dir.clone(),
    };
    let manifests = dir.join("manifests");
    std::fs::create_dir_all(&manifests).unwrap();
    std::fs::write(
        manifests.join("a.yaml"),
        binary::manifest("a.example.com", &[], 10),
    )
    .unwrap();

    let all = cases(&world);
    let total = all.len();
    let queue = Mutex::new(all.into_iter().enumerate().collect::<Vec<_>>());
    let failures = Mutex::new(Vec::<String>::new());
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| loop {
                let Some((i, c)) = queue.lock().unwrap().pop() else {
                    return;
                };
                let home = dir.join(format!("case-{i}"));
                std::fs::create_dir_all(&home).unwrap();
                let file = home.join("kubeconfig");
                std::fs::write(&file, &c.kubeconfig).unwrap();
                let mut kflags: Vec<String> = Vec::new();
                if !c.own_kubeconfig_flag {
                    kflags = vec!["--kubeconfig".into(), file.display().to_string()];
                }
                let mut k = Command::new(&kubectl);
                k.args(&kflags)
                    .args(["--cache-dir", &home.join("cache").display().to_string()])
                    .args(["--request-timeout", "10s", "get", "apiservices"])
                    .args(&c.args);
                let kout = run(k, &home, &c.env);
                let mut a = Command::new(binary::exe());
                a.args(["plan", "--manifests", &manifests.display().to_string()])
                    .args(&kflags)
                    .args(["--timeout", "10s"])
                    .args(&c.args);
                let aout = run(a, &home, &c.env);
                let (k_ok, a_ok) = (kout.status.success(), aout.status.success());
                // One line per case (seen with --nocapture): why each side failed.
                println!(
                    "{}: kubectl {} | autoregister {}",
                    c.name,
                    summary(&kout),
                    summary(&aout)
                );
                let (want_k, want_a) = match c.expect {
                    Expect::Ok => (true, true),
                    Expect::Fail => (false, false),
                    Expect::Differs { kubectl, ours, why } => {
                        println!("{}: deliberate difference: {why}", c.name);
                        (kubectl, ours)
                    }
                };
                if (k_ok, a_ok) != (want_k, want_a) {
                    failures.lock().unwrap().push(format!(
                        "{}: kubectl ok={k_ok} (want {want_k}), autoregister ok={a_ok} (want {want_a})\n\
                         --- kubectl: {}\n--- autoregister: {}",
                        c.name,
                        outcome(&kout),
                        outcome(&aout)
                    ));
                    continue;
                }
                if let Some(check) = &c.check {
                    let name = c.name;
                    if let Err(e) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        check(&world, &home, &aout)
                    })) {
                        let m = e
                            .downcast_ref::<String>()
                            .cloned()
                            .or_else(|| e.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_default();
                        failures.lock().unwrap().push(format!("{name}: check failed: {m}"));
                    }
                }
            });
        }
    });
    let failures = failures.into_inner().unwrap();
    println!(
        "{total} kubeconfig variants compared with kubectl in {:?}",
        started.elapsed()
    );
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        failures.is_empty(),
        "{} of {total} variants differ:\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}
