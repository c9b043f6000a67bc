//! Config::infer: kubeconfig loading order, merging, relative paths, in-cluster, errors.

use std::path::{Path, PathBuf};

use autoregister::client::{AuthConfig, Config, ConfigError, ConnectOptions, InferEnv};

/// A fresh directory for one test.
/// A PEM block (the kubeconfig checks the CA is PEM; its X.509 content is checked later).
/// A real CA certificate (PEM): kubectl and we refuse a CA bundle without a parsable one.
fn ca_pem() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    rcgen::CertificateParams::new(vec!["ca".to_string()])
        .unwrap()
        .self_signed(&key)
        .unwrap()
        .pem()
}

fn temp_dir(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("ar-kubeconfig-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn write(path: &Path, text: &str) -> PathBuf {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
    path.to_path_buf()
}

/// An environment with nothing set: no KUBECONFIG, no home, not in a cluster.
fn empty_env(dir: &Path) -> InferEnv {
    InferEnv {
        service_account_dir: dir.join("no-such-sa"),
        ..InferEnv::default()
    }
}

fn env_with(dir: &Path, files: &[&Path]) -> InferEnv {
    let joined = std::env::join_paths(files).unwrap();
    InferEnv {
        kubeconfig: Some(joined),
        ..empty_env(dir)
    }
}

fn infer(opts: &ConnectOptions, env: &InferEnv) -> Config {
    Config::infer_with(opts, env).unwrap_or_else(|e| panic!("{e}"))
}

fn infer_err(opts: &ConnectOptions, env: &InferEnv) -> ConfigError {
    match Config::infer_with(opts, env) {
        Ok(c) => panic!("expected an error, got {c:?}"),
        Err(e) => e,
    }
}

fn token(c: &Config) -> &str {
    match &c.auth {
        AuthConfig::Token(t) => t,
        other => panic!("not a token: {other:?}"),
    }
}

const FIRST: &str = r#"
apiVersion: v1
kind: Config
clusters:
- name: shared
  cluster:
    server: https://first.example:6443
- name: only-first
  cluster:
    server: https://only-first.example
users:
- name: shared
  user:
    token: first-token
contexts:
- name: shared
  context: {cluster: shared, user: shared}
- name: mixed
  context: {cluster: only-second, user: shared}
"#;

const SECOND: &str = r#"
clusters:
- name: shared
  cluster:
    server: https://second.example:6443
    tls-server-name: second-name
- name: only-second
  cluster:
    server: https://only-second.example
users:
- name: shared
  user:
    token: second-token
contexts:
- name: shared
  context: {cluster: only-second, user: shared}
current-context: shared
"#;

#[test]
fn first_file_that_names_an_entry_wins_it_whole() {
    let dir = temp_dir("merge");
    let a = write(&dir.join("a"), FIRST);
    let b = write(&dir.join("b"), SECOND);
    let c = infer(&ConnectOptions::default(), &env_with(&dir, &[&a, &b]));
    // Context "shared" from the first file → cluster "shared" from the first file.
    assert_eq!(c.server, "https://first.example:6443");
    // The first file's cluster wins whole: the second's tls-server-name is not mixed in.
    assert_eq!(c.tls.server_name, None);
    assert_eq!(token(&c), "first-token");
    assert_eq!(
        c.origin,
        format!("kubeconfig {} (context shared)", a.display())
    );
    // An entry only the second file has is still available.
    let c = infer(
        &ConnectOptions {
            context: Some("mixed".into()),
            ..Default::default()
        },
        &env_with(&dir, &[&a, &b]),
    );
    assert_eq!(c.server, "https://only-second.example");
}

#[test]
fn current_context_comes_from_the_first_file_that_sets_it() {
    let dir = temp_dir("current");
    let none = write(&dir.join("none"), FIRST);
    let second = write(
        &dir.join("second"),
        "current-context: mixed\ncontexts: []\n",
    );
    let third = write(&dir.join("third"), SECOND);
    let c = infer(
        &ConnectOptions::default(),
        &env_with(&dir, &[&none, &second, &third]),
    );
    assert_eq!(c.server, "https://only-second.example", "context mixed");
}

#[test]
fn context_flag_overrides_current_context() {
    let dir = temp_dir("ctxflag");
    let b = write(&dir.join("b"), SECOND);
    write(
        &dir.join("b2"),
        "", // an empty file is an empty config
    );
    let opts = ConnectOptions {
        context: Some("shared".into()),
        ..Default::default()
    };
    let c = infer(&opts, &env_with(&dir, &[&dir.join("b2"), &b]));
    assert_eq!(c.server, "https://only-second.example");
    let opts = ConnectOptions {
        context: Some("nope".into()),
        ..Default::default()
    };
    let e = infer_err(&opts, &env_with(&dir, &[&b]));
    assert!(e.to_string().contains("\"nope\" not found"), "{e}");
    assert!(e.to_string().contains(&b.display().to_string()), "{e}");
}

#[test]
fn explicit_kubeconfig_is_used_alone() {
    let dir = temp_dir("explicit");
    let a = write(&dir.join("a"), FIRST);
    let b = write(&dir.join("b"), SECOND);
    write(&dir.join("home/.kube/config"), SECOND);
    let env = InferEnv {
        home: Some(dir.join("home")),
        ..env_with(&dir, &[&b])
    };
    // FIRST has no current-context and must not borrow SECOND's.
    let opts = ConnectOptions {
        kubeconfig: Some(a.clone()),
        ..Default::default()
    };
    let e = infer_err(&opts, &env);
    assert!(e.to_string().contains("no current-context"), "{e}");
    let opts = ConnectOptions {
        kubeconfig: Some(a),
        context: Some("shared".into()),
        ..Default::default()
    };
    assert_eq!(infer(&opts, &env).server, "https://first.example:6443");
    // A missing explicit file is an error naming it, not a fallback.
    let missing = dir.join("missing");
    let opts = ConnectOptions {
        kubeconfig: Some(missing.clone()),
        ..Default::default()
    };
    let e = infer_err(&opts, &env);
    assert_eq!(e.file.as_deref(), Some(missing.as_path()));
}

#[test]
fn missing_files_in_kubeconfig_list_are_skipped() {
    let dir = temp_dir("skip");
    let b = write(&dir.join("b"), SECOND);
    let c = infer(
        &ConnectOptions::default(),
        &env_with(&dir, &[&dir.join("gone"), &b]),
    );
    assert_eq!(c.server, "https://only-second.example");
}

#[test]
fn home_kube_config_is_used_without_kubeconfig_env() {
    let dir = temp_dir("home");
    write(&dir.join(".kube/config"), SECOND);
    let env = InferEnv {
        home: Some(dir.clone()),
        ..empty_env(&dir)
    };
    assert_eq!(
        infer(&ConnectOptions::default(), &env).server,
        "https://only-second.example"
    );
}

#[test]
fn server_flag_overrides_the_cluster_or_stands_alone() {
    let dir = temp_dir("server");
    let b = write(&dir.join("b"), SECOND);
    let opts = ConnectOptions {
        server: Some("https://override:1".into()),
        ..Default::default()
    };
    let c = infer(&opts, &env_with(&dir, &[&b]));
    assert_eq!(c.server, "https://override:1");
    assert_eq!(
        token(&c),
        "second-token",
        "credentials still from the kubeconfig"
    );

    let opts = ConnectOptions {
        server: Some("http://127.0.0.1:8080/".into()),
        ..Default::default()
    };
    let c = infer(&opts, &empty_env(&dir));
    assert_eq!(c.server, "http://127.0.0.1:8080");
    assert!(matches!(c.auth, AuthConfig::None));
}

#[test]
fn nothing_found_is_an_error() {
    let dir = temp_dir("nothing");
    let e = infer_err(&ConnectOptions::default(), &empty_env(&dir));
    assert!(e.to_string().contains("no kubeconfig found"), "{e}");
}

#[test]
fn relative_paths_resolve_against_the_kubeconfig_directory() {
    let dir = temp_dir("relative");
    let sub = dir.join("sub");
    let ca = ca_pem();
    write(&sub.join("pki/ca.pem"), &ca);
    write(&sub.join("pki/client.pem"), "CLIENT CERT");
    write(&sub.join("pki/client.key"), "CLIENT KEY");
    let kc = write(
        &sub.join("config"),
        r#"
clusters:
- name: c
  cluster:
    server: https://c
    certificate-authority: pki/ca.pem
users:
- name: files
  user:
    client-certificate: pki/client.pem
    client-key: pki/client.key
    tokenFile: secrets/token
- name: plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
      interactiveMode: Never
- name: path-plugin
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1beta1
      command: kubelogin
      args: [get-token]
      env: [{name: A, value: b}]
      provideClusterInfo: true
contexts:
- name: files
  context: {cluster: c, user: files}
- name: plugin
  context: {cluster: c, user: plugin}
- name: path-plugin
  context: {cluster: c, user: path-plugin}
current-context: files
"#,
    );
    // Read from another working directory's point of view: paths must not depend on cwd.
    let env = env_with(&dir, &[&kc]);
    let c = infer(&ConnectOptions::default(), &env);
    assert_eq!(c.tls.ca_pem.as_deref(), Some(ca.as_bytes()));
    assert_eq!(c.tls.client_cert_pem.as_deref(), Some(&b"CLIENT CERT"[..]));
    assert_eq!(c.tls.client_key_pem.as_deref(), Some(&b"CLIENT KEY"[..]));
    match &c.auth {
        AuthConfig::TokenFile(p) => assert_eq!(p, &sub.join("secrets/token")),
        other => panic!("{other:?}"),
    }
    let ctx = |n: &str| ConnectOptions {
        context: Some(n.into()),
        ..Default::default()
    };
    match infer(&ctx("plugin"), &env).auth {
        AuthConfig::Exec(e) => {
            assert_eq!(Path::new(&e.command), sub.join("./bin/plugin"));
            assert_eq!(e.interactive_mode.as_deref(), Some("Never"));
        }
        other => panic!("{other:?}"),
    }
    match infer(&ctx("path-plugin"), &env).auth {
        AuthConfig::Exec(e) => {
            assert_eq!(e.command, "kubelogin", "bare names are looked up in PATH");
            assert_eq!(e.args, ["get-token"]);
            assert_eq!(e.env, [("A".to_string(), "b".to_string())]);
            assert_eq!(e.api_version, "client.authentication.k8s.io/v1beta1");
            assert!(e.provide_cluster_info);
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn inline_data_and_insecure_flag() {
    use base64::Engine as _;
    let dir = temp_dir("inline");
    let ca = ca_pem();
    let kc = write(
        &dir.join("config"),
        &r#"
clusters:
- name: c
  cluster:
    server: https://c
    certificate-authority-data: CA_DATA
    insecure-skip-tls-verify: false
    tls-server-name: api.internal
    unknown-field: ignored
- name: i
  cluster:
    server: https://i
    insecure-skip-tls-verify: true
users:
- name: u
  user: {username: admin, password: hunter2}
contexts:
- {name: c, context: {cluster: c, user: u, namespace: x}}
- {name: i, context: {cluster: i}}
current-context: c
"#
        .replace(
            "CA_DATA",
            &base64::engine::general_purpose::STANDARD.encode(&ca),
        ),
    );
    let env = env_with(&dir, &[&kc]);
    let c = infer(&ConnectOptions::default(), &env);
    assert_eq!(c.tls.ca_pem.as_deref(), Some(ca.as_bytes()));
    assert!(!c.tls.insecure_skip_verify);
    assert_eq!(c.tls.server_name.as_deref(), Some("api.internal"));
    assert!(matches!(&c.auth, AuthConfig::Basic { username, password }
        if username == "admin" && password == "hunter2"));
    assert!(!format!("{c:?}").contains("hunter2"), "Debug redacts");
    let opts = ConnectOptions {
        context: Some("i".into()),
        ..Default::default()
    };
    let c = infer(&opts, &env);
    assert!(c.tls.insecure_skip_verify);
    assert!(matches!(c.auth, AuthConfig::None));
}

#[test]
fn in_cluster_from_service_account_directory() {
    let dir = temp_dir("incluster");
    let sa = dir.join("sa");
    write(&sa.join("token"), "sa-token\n");
    write(&sa.join("ca.crt"), "SA CA");
    let env = InferEnv {
        service_host: Some("10.96.0.1".into()),
        service_port: Some("443".into()),
        service_account_dir: sa.clone(),
        ..InferEnv::default()
    };
    let c = infer(&ConnectOptions::default(), &env);
    assert_eq!(c.server, "https://10.96.0.1:443");
    assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"SA CA"[..]));
    assert!(matches!(&c.auth, AuthConfig::TokenFile(p) if p == &sa.join("token")));
    assert_eq!(c.origin, "in-cluster");

    let v6 = InferEnv {
        service_host: Some("fd00::1".into()),
        ..env.clone()
    };
    assert_eq!(
        infer(&ConnectOptions::default(), &v6).server,
        "https://[fd00::1]:443"
    );

    // A kubeconfig in home is preferred over in-cluster.
    write(&dir.join("home/.kube/config"), SECOND);
    let with_home = InferEnv {
        home: Some(dir.join("home")),
        ..env.clone()
    };
    assert_eq!(
        infer(&ConnectOptions::default(), &with_home).server,
        "https://only-second.example"
    );

    std::fs::remove_file(sa.join("token")).unwrap();
    let e = infer_err(&ConnectOptions::default(), &env);
    assert_eq!(e.file, Some(sa.join("token")));
}

/// Each broken kubeconfig is reported with its file and what is wrong.
#[test]
fn bad_kubeconfigs_name_the_file_and_the_problem() {
    let dir = temp_dir("bad");
    let case = |name: &str, text: &str, context: Option<&str>, want: &str| {
        let path = write(&dir.join(name), text);
        let opts = ConnectOptions {
            kubeconfig: Some(path.clone()),
            context: context.map(str::to_string),
            ..Default::default()
        };
        let e = infer_err(&opts, &empty_env(&dir));
        let text = e.to_string();
        assert!(text.contains(&path.display().to_string()), "{name}: {text}");
        assert!(text.contains(want), "{name}: {text} lacks {want:?}");
    };
    case(
        "yaml",
        "clusters:\n- name: a\n  cluster: {server: x\n",
        None,
        "line",
    );
    case("shape", "clusters: 5\n", None, "invalid kubeconfig");
    case(
        "nocluster",
        "contexts:\n- {name: a, context: {cluster: gone}}\ncurrent-context: a\n",
        None,
        "cluster \"gone\" is not defined",
    );
    case(
        "nouser",
        "clusters:\n- {name: c, cluster: {server: https://c}}\ncontexts:\n- {name: a, context: {cluster: c, user: ghost}}\n",
        Some("a"),
        "user \"ghost\" is not defined",
    );
    case(
        "ca",
        "clusters:\n- {name: c, cluster: {server: https://c, certificate-authority: nope.pem}}\ncontexts:\n- {name: a, context: {cluster: c}}\ncurrent-context: a\n",
        None,
        "cannot read certificate-authority",
    );
    case(
        "b64",
        "clusters:\n- {name: c, cluster: {server: https://c, certificate-authority-data: '!!notbase64'}}\ncontexts:\n- {name: a, context: {cluster: c}}\ncurrent-context: a\n",
        None,
        "bad base64",
    );
    case(
        "noserver",
        "clusters:\n- {name: c, cluster: {}}\ncontexts:\n- {name: a, context: {cluster: c}}\ncurrent-context: a\n",
        None,
        "has no server",
    );
    case(
        "halfcert",
        "clusters:\n- {name: c, cluster: {server: https://c}}\nusers:\n- {name: u, user: {client-certificate-data: QQ==}}\ncontexts:\n- {name: a, context: {cluster: c, user: u}}\ncurrent-context: a\n",
        None,
        "must be given with a client certificate",
    );
    case(
        "noctx",
        "clusters: []\n",
        Some("ghost"),
        "context \"ghost\" not found",
    );
}

/// A pod's environment with a service-account mount under `dir`.
fn pod_env(dir: &Path) -> InferEnv {
    let sa = dir.join("sa");
    write(&sa.join("token"), "sa-token\n");
    write(&sa.join("ca.crt"), &ca_pem());
    InferEnv {
        service_host: Some("10.96.0.1".into()),
        service_port: Some("443".into()),
        service_account_dir: sa,
        ..InferEnv::default()
    }
}

#[test]
fn in_cluster_fallback_when_the_kubeconfig_chooses_no_context() {
    let dir = temp_dir("fallback");
    let pod = pod_env(&dir);
    // KUBECONFIG naming an empty file.
    let empty = write(&dir.join("empty"), "");
    let env = InferEnv {
        kubeconfig: Some(empty.clone().into_os_string()),
        ..pod.clone()
    };
    assert_eq!(infer(&ConnectOptions::default(), &env).origin, "in-cluster");
    // ~/.kube/config with entries but no current-context.
    write(
        &dir.join("home/.kube/config"),
        SECOND.replace("current-context", "#").as_str(),
    );
    let env = InferEnv {
        home: Some(dir.join("home")),
        ..pod.clone()
    };
    assert_eq!(infer(&ConnectOptions::default(), &env).origin, "in-cluster");
    // An explicit --kubeconfig that is empty: the same (client-go's deferred loading).
    let opts = ConnectOptions {
        kubeconfig: Some(empty.clone()),
        ..Default::default()
    };
    assert_eq!(infer(&opts, &pod).origin, "in-cluster");
    // --as applies in the cluster too (ignoring it would widen the identity).
    let opts = ConnectOptions {
        impersonate: autoregister::client::Impersonation {
            user: Some("someone".into()),
            ..Default::default()
        },
        ..Default::default()
    };
    assert_eq!(
        infer(&opts, &pod).impersonate.user.as_deref(),
        Some("someone")
    );
    // A --context that does not exist is an error, not a fallback.
    let opts = ConnectOptions {
        kubeconfig: Some(empty.clone()),
        context: Some("ghost".into()),
        ..Default::default()
    };
    assert!(infer_err(&opts, &pod).to_string().contains("ghost"));
    // --server with no context: that server, not the pod's.
    let opts = ConnectOptions {
        kubeconfig: Some(empty.clone()),
        server: Some("https://elsewhere:6443".into()),
        ..Default::default()
    };
    assert_eq!(infer(&opts, &pod).server, "https://elsewhere:6443");
    // Outside a pod an empty kubeconfig says what is missing.
    let e = infer_err(&ConnectOptions::default(), &env_with(&dir, &[&empty]));
    assert!(e.to_string().contains("no current-context"), "{e}");
}

#[test]
fn empty_kubeconfig_flag_means_not_given() {
    let dir = temp_dir("emptyflag");
    let second = write(&dir.join("second"), SECOND);
    let opts = ConnectOptions {
        kubeconfig: Some(PathBuf::new()),
        ..Default::default()
    };
    assert_eq!(
        infer(&opts, &env_with(&dir, &[&second])).server,
        "https://only-second.example"
    );
}

#[test]
fn credentials_precedence_and_tls_only_as_client_go() {
    let dir = temp_dir("precedence");
    let plugin = "    exec: {apiVersion: client.authentication.k8s.io/v1, command: p, interactiveMode: Never}\n";
    let kc = |server: &str, user: &str| {
        let path = write(
            &dir.join("config"),
            &format!(
                "clusters:\n- name: c\n  cluster:\n    server: {server}\n    tls-server-name: api.internal\n\
                 users:\n- name: u\n  user:\n{user}contexts:\n- {{name: x, context: {{cluster: c, user: u}}}}\n\
                 current-context: x\n"
            ),
        );
        ConnectOptions {
            kubeconfig: Some(path),
            ..Default::default()
        }
    };
    let env = empty_env(&dir);
    let tf = write(&dir.join("token"), "from-file\n");
    let c = infer(
        &kc(
            "https://c",
            &format!("    token: t\n    tokenFile: {}\n", tf.display()),
        ),
        &env,
    );
    assert!(
        matches!(&c.auth, AuthConfig::TokenFileOr { path, token } if path == &tf && token == "t")
    );
    // A token, a password or a client certificate: the exec plugin is not used.
    for user in [
        format!("    token: t\n{plugin}"),
        format!("    username: u\n    password: p\n{plugin}"),
        format!(
            "    client-certificate-data: {}\n    client-key-data: a2V5\n{plugin}",
            {
                use base64::Engine as _;
                base64::engine::general_purpose::STANDARD.encode(ca_pem())
            }
        ),
    ] {
        let c = infer(&kc("https://c", &user), &env);
        assert!(!matches!(c.auth, AuthConfig::Exec(_)), "{user}");
    }
    assert!(matches!(
        infer(&kc("https://c", plugin), &env).auth,
        AuthConfig::Exec(_)
    ));
    // Toward http:// nothing is loaded at all.
    let c = infer(&kc("http://c", "    token: t\n"), &env);
    assert!(matches!(c.auth, AuthConfig::None));
    // --server clears tls-server-name; upper-case schemes and URL userinfo are normalised.
    let mut opts = kc("https://c", "    {}\n");
    assert_eq!(
        infer(&opts, &env).tls.server_name.as_deref(),
        Some("api.internal")
    );
    opts.server = Some("HTTPS://someone:pw%40x@other:6443".into());
    let c = infer(&opts, &env);
    assert_eq!(c.tls.server_name, None);
    assert_eq!(c.server, "https://other:6443");
    assert!(matches!(&c.auth, AuthConfig::Basic { username, password }
        if username == "someone" && password == "pw@x"));
    assert!(!format!("{c:?}").contains("pw@x"));
}

#[test]
fn bom_and_yaml_1_1_booleans_are_read_as_kubectl_reads_them() {
    let dir = temp_dir("bom");
    let path = write(
        &dir.join("config"),
        "\u{feff}clusters:\n- {name: c, cluster: {server: https://c, insecure-skip-tls-verify: yes}}\n\
         contexts:\n- {name: x, context: {cluster: c}}\ncurrent-context: x\n",
    );
    let opts = ConnectOptions {
        kubeconfig: Some(path),
        ..Default::default()
    };
    assert!(infer(&opts, &empty_env(&dir)).tls.insecure_skip_verify);
}
