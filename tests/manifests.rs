//! Manifest loading through the public API: files on disk in, desired set or
//! located errors out.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use autoregister::api::{APIService, DEFAULT_LABEL_KEY};
use autoregister::controller::manifests::{fingerprint, ManifestError, ManifestSet};
use autoregister::controller::{Desired, SyncMode};

/// Loads PATH with the default ownership label.
fn load(path: &Path) -> Result<BTreeMap<String, Desired>, Vec<ManifestError>> {
    autoregister::controller::manifests::load(path, DEFAULT_LABEL_KEY)
}

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        let dir =
            std::env::temp_dir().join(format!("autoregister-it-{tag}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let p = self.0.join(name);
        fs::write(&p, text).unwrap();
        p
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn svc(name: &str) -> String {
    let (version, group) = name.split_once('.').unwrap();
    format!(
        "apiVersion: apiregistration.k8s.io/v1\nkind: APIService\nmetadata:\n  name: {name}\nspec:\n  group: {group}\n  version: {version}\n  groupPriorityMinimum: 100\n  versionPriority: 10\n"
    )
}

fn names(desired: &BTreeMap<String, Desired>) -> Vec<&str> {
    desired.keys().map(String::as_str).collect()
}

fn one_error(path: &Path) -> ManifestError {
    let mut errs = load(path).unwrap_err();
    assert_eq!(errs.len(), 1, "{errs:?}");
    errs.remove(0)
}

/// The checks kube-apiserver's `ValidateAPIService` makes that a manifest can fail.
fn api_server_validation(o: &APIService) -> Vec<String> {
    let mut errs = Vec::new();
    let s = &o.spec;
    let name = o.metadata.name.as_deref().unwrap_or_default();
    if s.group.is_empty() {
        if &*s.version != "v1" || name != "v1" {
            errs.push("only v1 may have an empty group".to_string());
        }
    } else if name != format!("{}.{}", s.version, s.group) {
        errs.push(format!("{name}: name must be version.group"));
    }
    if !(1..=20000).contains(&s.group_priority_minimum) {
        errs.push(format!("{name}: groupPriorityMinimum out of range"));
    }
    if !(1..=1000).contains(&s.version_priority) {
        errs.push(format!("{name}: versionPriority out of range"));
    }
    match &s.service {
        None if s.ca_bundle.is_some() || s.insecure_skip_tls_verify => {
            errs.push(format!("{name}: local APIService with TLS settings"))
        }
        None => {}
        Some(svc) => {
            if svc.namespace.is_empty() || svc.name.is_empty() {
                errs.push(format!("{name}: service needs namespace and name"));
            }
            if !svc.port.is_some_and(|p| (1..=65535).contains(&p)) {
                errs.push(format!("{name}: service port out of range"));
            }
            if s.insecure_skip_tls_verify && s.ca_bundle.is_some() {
                errs.push(format!(
                    "{name}: caBundle and insecureSkipTLSVerify both set"
                ));
            }
        }
    }
    errs
}

#[test]
fn example_manifests_load_and_pass_api_server_validation() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/apiservices");
    let desired = load(&dir).unwrap_or_else(|errs| panic!("{errs:#?}"));
    assert_eq!(
        names(&desired),
        [
            "v1.example.com",
            "v1alpha1.wardle.example.com",
            "v1beta1.custom.metrics.k8s.io",
            "v1beta1.external.metrics.k8s.io",
            "v1beta1.metrics.k8s.io",
            "v1beta1.wardle.example.com",
            "v1beta2.custom.metrics.k8s.io",
        ]
    );
    for (name, d) in &desired {
        assert_eq!(d.object.metadata.name.as_deref(), Some(name.as_str()));
        assert_eq!(api_server_validation(&d.object), Vec::<String>::new());
        let want = if name == "v1.example.com" {
            SyncMode::OnStart
        } else {
            SyncMode::Always
        };
        assert_eq!(d.mode, want, "{name}");
        let written = autoregister::controller::Ownership::default().labelled(&d.object, d.mode);
        assert_eq!(
            written.ownership(DEFAULT_LABEL_KEY),
            Some(want.label_value()),
            "{name}"
        );
    }
    let ca = desired["v1beta1.metrics.k8s.io"]
        .object
        .spec
        .ca_bundle
        .as_deref()
        .unwrap();
    assert!(
        ca.starts_with(b"-----BEGIN CERTIFICATE-----"),
        "caBundle decodes to a PEM"
    );
}

#[test]
fn multi_document_yaml_with_empty_documents() {
    let d = TempDir::new("multi");
    let f = d.write(
        "m.yaml",
        &format!(
            "# header\n---\n{}---\n---\n# nothing\n---\n{}",
            svc("v1.a.io"),
            svc("v1.b.io")
        ),
    );
    assert_eq!(names(&load(&f).unwrap()), ["v1.a.io", "v1.b.io"]);
}

#[test]
fn list_kinds_expand_to_their_items() {
    let d = TempDir::new("list");
    let indent = |s: String| s.replace('\n', "\n    ");
    d.write(
        "l.yaml",
        &format!(
            "apiVersion: v1\nkind: List\nitems:\n  - {}",
            indent(svc("v1.a.io"))
        ),
    );
    d.write(
        "t.yaml",
        &format!(
            "apiVersion: apiregistration.k8s.io/v1\nkind: APIServiceList\nitems:\n  - {}",
            indent(svc("v1.b.io"))
        ),
    );
    assert_eq!(names(&load(&d.0).unwrap()), ["v1.a.io", "v1.b.io"]);
}

#[test]
fn json_file() {
    let d = TempDir::new("json");
    let f = d.write(
        "a.json",
        r#"{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v2.a.io"},"spec":{"group":"a.io","version":"v2","groupPriorityMinimum":1,"versionPriority":1}}"#,
    );
    let desired = load(&f).unwrap();
    assert_eq!(&*desired["v2.a.io"].object.spec.version, "v2");
}

#[test]
fn directory_reads_only_manifest_files() {
    let d = TempDir::new("dir");
    d.write("a.yaml", &svc("v1.a.io"));
    d.write("b.yml", &svc("v1.b.io"));
    d.write("README.md", "not yaml: [");
    d.write(".c.yaml", "not yaml: [");
    d.write("c.yaml.bak", "not yaml: [");
    fs::create_dir(d.0.join("nested")).unwrap();
    d.write("nested/d.yaml", &svc("v1.d.io"));
    assert_eq!(names(&load(&d.0).unwrap()), ["v1.a.io", "v1.b.io"]);
}

/// A manifest that must fail, and where the error must point.
struct ErrCase {
    case: &'static str,
    file: &'static str,
    text: String,
    document: Option<usize>,
    line: usize,
    fragment: &'static str,
}

fn err_case(
    case: &'static str,
    file: &'static str,
    text: impl Into<String>,
    document: Option<usize>,
    line: usize,
    fragment: &'static str,
) -> ErrCase {
    let text = text.into();
    ErrCase {
        case,
        file,
        text,
        document,
        line,
        fragment,
    }
}

#[test]
fn each_error_names_file_document_and_line() {
    let a = svc("v1.a.io");
    let label = "  name: v1.a.io\n  labels:\n    kube-aggregator.kubernetes.io/automanaged: true\n";
    #[rustfmt::skip]
    let cases = [
        // The unclosed `[` fails at the end of input, line 12.
        err_case("yaml syntax", "a.yaml", format!("{a}---\nkind: [\n"), Some(2), 12, "invalid YAML"),
        err_case("wrong kind", "a.yaml", format!("{a}---\n\napiVersion: v1\nkind: ConfigMap\n"), Some(2), 12, "kind \"ConfigMap\""),
        err_case("old apiVersion", "a.yaml", a.replace("/v1\n", "/v1beta1\n"), Some(1), 1, "apiregistration.k8s.io/v1beta1\" is not supported"),
        err_case("missing name", "a.yaml", format!("---\n{}", a.replace("  name: v1.a.io\n", "")), Some(1), 4, "metadata.name: Required value"),
        err_case("bad field", "a.yaml", a.replace("10\n", "ten\n"), Some(1), 9, "spec.versionPriority: invalid type: expected integer, found string \"ten\""),
        err_case("unquoted label", "a.yaml", a.replace("  name: v1.a.io\n", label), Some(1), 6, "metadata.labels[\"kube-aggregator.kubernetes.io/automanaged\"]: invalid type: expected string, found boolean true (quote it in YAML: \"true\")"),
        err_case("typo in spec", "a.yaml", a.replace("  group:", "  servce: {}\n  group:"), Some(1), 6, "spec.servce: unknown field, did you mean spec.service?"),
        err_case("typo in metadata", "a.yaml", a.replace("  name: v1.a.io\n", "  name: v1.a.io\n  lables: {}\n"), Some(1), 5, "metadata.lables: unknown field, did you mean metadata.labels?"),
        err_case("typo at the top", "a.yaml", a.replace("kind:", "knd: x\nkind:"), Some(1), 2, "knd: unknown field, did you mean kind?"),
        err_case("typo in a list item", "a.yaml", format!("apiVersion: v1\nkind: List\nitems:\n- {}", svc("v1.a.io").replace("\n", "\n  ").replace("  versionPriority", "  versionPriorty")), Some(1), 12, "items[0].spec.versionPriorty: unknown field, did you mean items[0].spec.versionPriority?"),
        err_case("typo in json", "a.json", "{\"apiVersion\": \"apiregistration.k8s.io/v1\", \"kind\": \"APIService\",\n \"metadata\": {\"name\": \"v1.a.io\"},\n \"spec\": {\"group\": \"a.io\", \"verison\": \"v1\"}}", None, 3, "spec.verison: unknown field, did you mean spec.version?"),
        err_case("name not version.group", "a.yaml", a.replace("  name: v1.a.io", "  name: x"), Some(1), 4, "metadata.name: Invalid value: \"x\": must be `spec.version+\".\"+spec.group`: \"v1.a.io\""),
        err_case("list item", "a.yaml", "# x\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n", Some(1), 5, "items[0]: unsupported object"),
        err_case("not an object", "a.yaml", "- 1\n", Some(1), 1, "expected an object, found a list"),
        err_case("json syntax", "a.json", "{\n\"kind\": \"APIService\",\n}\n", None, 3, "invalid JSON"),
        err_case("json kind", "a.json", "\n\n{\"apiVersion\": \"v1\", \"kind\": \"Service\"}", None, 3, "kind \"Service\""),
    ];
    for c in cases {
        let d = TempDir::new(&format!("err-{}", c.case.replace(' ', "-")));
        let path = d.write(c.file, &c.text);
        let e = one_error(&d.0);
        let case = c.case;
        assert_eq!(e.file, path, "{case}");
        assert_eq!(
            (e.document, e.line),
            (c.document, Some(c.line)),
            "{case}: {e}"
        );
        assert!(e.message.contains(c.fragment), "{case}: {e}");
        let shown = e.to_string();
        let prefix = format!("{}:{}:", path.display(), c.line);
        assert!(shown.starts_with(&prefix), "{case}: {shown}");
    }
}

#[test]
fn missing_path_is_an_error() {
    let e = one_error(Path::new("/nonexistent/autoregister"));
    assert_eq!(e.file, Path::new("/nonexistent/autoregister"));
    assert_eq!((e.document, e.line), (None, None));
}

#[test]
fn duplicates_across_files_name_both_locations() {
    let d = TempDir::new("dup");
    d.write(
        "a.yaml",
        &format!("{}---\n{}", svc("v1.a.io"), svc("v1.x.io")),
    );
    let b = d.write("b.json", r#"{"apiVersion":"apiregistration.k8s.io/v1","kind":"APIService","metadata":{"name":"v1.x.io"},"spec":{"group":"x.io","version":"v1","groupPriorityMinimum":1,"versionPriority":1}}"#);
    let e = one_error(&d.0);
    assert_eq!(
        (e.file.as_path(), e.document, e.line),
        (b.as_path(), None, Some(1))
    );
    let first = format!("{}:11 (document 2)", d.0.join("a.yaml").display());
    assert!(e.message.contains(&first), "{e}");
    assert!(
        e.to_string().starts_with(&format!(
            "{}:1: duplicate APIService \"v1.x.io\"",
            b.display()
        )),
        "{e}"
    );
}

#[test]
fn reload_applies_edits_and_keeps_last_good_on_errors() {
    let d = TempDir::new("reload");
    d.write("a.yaml", &svc("v1.a.io"));
    let b = d.write("b.yaml", &svc("v1.b.io"));
    let mut set = ManifestSet::new(&d.0, DEFAULT_LABEL_KEY);
    let first = set.reload();
    assert!(first.errors.is_empty());
    assert_eq!(names(&first.desired), ["v1.a.io", "v1.b.io"]);

    // A typo in a.yaml: its object stays, the error names the file and line.
    let fp = fingerprint(&d.0);
    d.write("a.yaml", &format!("{}  typo: [\n", svc("v1.a.io")));
    assert_ne!(fingerprint(&d.0), fp);
    let r = set.reload();
    assert_eq!(names(&r.desired), ["v1.a.io", "v1.b.io"]);
    assert_eq!(r.desired, first.desired);
    assert_eq!((r.errors.len(), r.errors[0].line), (1, Some(11)));

    // b.yaml removed: its object goes; a.yaml still broken, still kept.
    fs::remove_file(b).unwrap();
    let r = set.reload();
    assert_eq!(names(&r.desired), ["v1.a.io"]);
    assert_eq!(r.errors.len(), 1);

    // a.yaml fixed and switched to onstart.
    let onstart = svc("v1.a.io").replace(
        "  name: v1.a.io\n",
        "  name: v1.a.io\n  labels:\n    kube-aggregator.kubernetes.io/automanaged: onstart\n",
    );
    d.write("a.yaml", &onstart);
    let r = set.reload();
    assert!(r.errors.is_empty());
    assert_eq!(r.desired["v1.a.io"].mode, SyncMode::OnStart);
}
