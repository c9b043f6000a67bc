//! The docs cannot rot: README.md and `docs/*.md` are checked against the program.
//!
//! - every relative link and `#anchor` resolves (GitHub's anchor rules);
//! - every ```` ```sh run ```` block exits 0, run against a test API server;
//! - every flag named for `autoregister run`/`plan` (and `autoregister-testserver`) is in
//!   its `--help`, and every flag of `--help` is named;
//! - every `make TARGET` is a Makefile target;
//! - every Event reason the controller records is in the Events table, and every thread of
//!   an idle `run` in the threads table;
//! - the README stays under 200 lines and links every page.
//!
//! A failure names the file, the line and what is wrong. (The Rust blocks are doctests:
//! see the `cfg(doctest)` items at the end of `src/lib.rs`.)
#![cfg(feature = "testing")]

#[path = "support/markdown.rs"]
mod markdown;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Component, Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use autoregister::controller::EventReason;
use autoregister::testserver::TestServer;
use markdown::{Doc, Program};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const BIN: &str = env!("CARGO_BIN_EXE_autoregister");
const TESTSERVER_BIN: &str = env!("CARGO_BIN_EXE_autoregister-testserver");

/// Make targets the docs name ahead of the Makefile: other branches add them. Listed here so
/// the docs can say so now; the check fails once one exists, to have it removed from here.
const NOT_YET_IN_MAKEFILE: &[&str] = &[];
/// Event reasons the Events table documents ahead of the code (being added elsewhere); the
/// check fails once one is recorded, to have it removed from here.
const NOT_YET_RECORDED: &[&str] = &[];
/// The README is the front page: one read.
const README_MAX_LINES: usize = 200;
/// How long one runnable block may take.
const BLOCK_TIMEOUT: Duration = Duration::from_secs(120);

fn root() -> &'static Path {
    Path::new(ROOT)
}

fn docs() -> Vec<Doc> {
    markdown::load_all(root())
}

/// Fails listing every problem, one per line (each once).
fn assert_none(what: &str, mut problems: Vec<String>) {
    let mut seen = BTreeSet::new();
    problems.retain(|p| seen.insert(p.clone()));
    assert!(
        problems.is_empty(),
        "{what}: {} problem(s)\n{}",
        problems.len(),
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------
// Links and anchors

#[test]
fn every_relative_link_and_anchor_resolves() {
    assert_none("links", link_problems(root(), &docs()));
}

/// Problems with the links of `docs`, whose files live under `root`.
fn link_problems(root: &Path, docs: &[Doc]) -> Vec<String> {
    let mut anchors: HashMap<PathBuf, BTreeSet<String>> = HashMap::new();
    let mut problems = Vec::new();
    for doc in docs {
        for (line, target) in doc.links() {
            if target.is_empty() {
                problems.push(format!("{}: a link without a target", doc.at(line)));
                continue;
            }
            if ["http://", "https://", "mailto:"]
                .iter()
                .any(|s| target.starts_with(s))
            {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                doc.path.clone()
            } else {
                match normalize(&doc.path.parent().unwrap_or(Path::new("")).join(path)) {
                    Some(p) => p,
                    None => {
                        problems.push(format!(
                            "{}: link `{target}` leaves the repository",
                            doc.at(line)
                        ));
                        continue;
                    }
                }
            };
            if !root.join(&file).exists() {
                problems.push(format!(
                    "{}: link `{target}`: {} does not exist",
                    doc.at(line),
                    file.display()
                ));
                continue;
            }
            let Some(anchor) = anchor else { continue };
            if file.extension().is_none_or(|x| x != "md") {
                problems.push(format!(
                    "{}: link `{target}`: an anchor into {}, which is not Markdown",
                    doc.at(line),
                    file.display()
                ));
                continue;
            }
            let known = anchors.entry(file.clone()).or_insert_with(|| {
                let d = match docs.iter().find(|d| d.path == file) {
                    Some(d) => d.headings(),
                    None => markdown::load(root, &file).headings(),
                };
                d.into_iter().map(|(_, _, a)| a).collect()
            });
            if !known.contains(anchor) {
                let near: Vec<&String> = known
                    .iter()
                    .filter(|a| a.contains(anchor) || anchor.contains(a.as_str()))
                    .take(3)
                    .collect();
                problems.push(format!(
                    "{}: link `{target}`: {} has no heading with anchor #{anchor}{}",
                    doc.at(line),
                    file.display(),
                    if near.is_empty() {
                        String::new()
                    } else {
                        format!(" (close: {near:?})")
                    }
                ));
            }
        }
    }
    problems
}

/// `p` with `.` and `..` resolved; `None` when it climbs out of the repository.
fn normalize(p: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                if !out.pop() {
                    return None;
                }
            }
            Component::Normal(n) => out.push(n),
            Component::RootDir | Component::Prefix(_) => return None,
        }
    }
    Some(out)
}

// ---------------------------------------------------------------------------------------
// Runnable shell blocks

#[test]
fn every_runnable_shell_block_exits_0() {
    let docs = docs();
    let runnable = docs
        .iter()
        .flat_map(|d| d.blocks())
        .filter(|b| b.lang() == "sh" && b.has_attr("run"))
        .count();
    assert!(runnable >= 4, "only {runnable} runnable blocks found");
    let mut problems = Vec::new();
    for doc in &docs {
        problems.extend(run_blocks(doc));
    }
    assert_none("runnable blocks", problems);
}

/// Runs `doc`'s ```` ```sh run ```` blocks in order against one test server playing
/// kube-apiserver; a problem for each that does not exit 0.
fn run_blocks(doc: &Doc) -> Vec<String> {
    let blocks: Vec<_> = doc
        .blocks()
        .into_iter()
        .filter(|b| b.lang() == "sh" && b.has_attr("run"))
        .collect();
    if blocks.is_empty() {
        return Vec::new();
    }
    let server = TestServer::builder()
        .kube_apiserver(true)
        .start()
        .expect("a test server on loopback");
    let tag = doc.path.display().to_string().replace(['/', '.'], "-");
    let scratch =
        std::env::temp_dir().join(format!("autoregister-docs-{}-{tag}", std::process::id()));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).unwrap();
    let kubeconfig = scratch.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let bin_dirs = [Path::new(BIN), Path::new(TESTSERVER_BIN)]
        .iter()
        .filter_map(|p| p.parent())
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let path = format!("{bin_dirs}:{}", std::env::var("PATH").unwrap_or_default());
    let mut problems = Vec::new();
    for b in blocks {
        let script = scratch.join(format!("block-{}.sh", b.line));
        std::fs::write(&script, b.text()).unwrap();
        let out = scratch.join(format!("block-{}.out", b.line));
        let err = scratch.join(format!("block-{}.err", b.line));
        let mut cmd = Command::new("sh");
        cmd.arg("-e")
            .arg(&script)
            .current_dir(root())
            .env("PATH", &path)
            .env("KUBECONFIG", &kubeconfig)
            .env("HOME", &scratch)
            .env("TMPDIR", &scratch)
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&out).unwrap())
            .stderr(std::fs::File::create(&err).unwrap());
        // Its own process group, so what it leaves running in the background is ended too.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        let mut child = cmd.spawn().expect("sh");
        let deadline = Instant::now() + BLOCK_TIMEOUT;
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break Some(s);
            }
            if Instant::now() >= deadline {
                break None;
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let _ = Command::new("kill")
            .args(["-KILL", "--", &format!("-{}", child.id())])
            .stderr(Stdio::null())
            .status();
        let _ = child.wait();
        let failed = match status {
            Some(s) if s.success() => None,
            Some(s) => Some(format!("exited {}", s.code().unwrap_or(-1))),
            None => Some(format!(
                "did not finish within {}s",
                BLOCK_TIMEOUT.as_secs()
            )),
        };
        if let Some(why) = failed {
            problems.push(format!(
                "{}: the runnable block {why}\n--- block ---\n{}--- stdout ---\n{}\n--- stderr ---\n{}",
                doc.at(b.line),
                b.text(),
                excerpt(&out),
                excerpt(&err)
            ));
        }
    }
    let _ = std::fs::remove_dir_all(&scratch);
    problems
}

/// A command's output, its head and tail when long: a usage error is at the start, a
/// runtime failure at the end.
fn excerpt(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= 30 {
        return lines.join("\n");
    }
    format!(
        "{}\n[… {} lines …]\n{}",
        lines[..10].join("\n"),
        lines.len() - 25,
        lines[lines.len() - 15..].join("\n")
    )
}

// ---------------------------------------------------------------------------------------
// Flags

/// The flags each program accepts, from its own `--help`.
struct Helps {
    run: BTreeSet<String>,
    plan: BTreeSet<String>,
    explain: BTreeSet<String>,
    testserver: BTreeSet<String>,
}

/// Flags every program takes that need no documenting of their own.
const HELP_FLAGS: [&str; 2] = ["--help", "-h"];
/// `autoregister` before a command.
const TOP_FLAGS: [&str; 4] = ["--help", "-h", "--version", "-V"];

impl Helps {
    fn read() -> Helps {
        let help = |bin: &str, args: &[&str]| -> BTreeSet<String> {
            let out = Command::new(bin).args(args).output().expect("--help runs");
            assert!(out.status.success(), "{bin} {args:?} failed");
            markdown::help_flags(&String::from_utf8_lossy(&out.stdout))
                .into_iter()
                .collect()
        };
        let helps = Helps {
            run: help(BIN, &["run", "--help"]),
            plan: help(BIN, &["plan", "--help"]),
            explain: help(BIN, &["explain", "--help"]),
            testserver: help(TESTSERVER_BIN, &["--help"]),
        };
        // The parser itself must find flags, or every check below passes vacuously.
        for (what, set) in [
            ("run", &helps.run),
            ("plan", &helps.plan),
            ("explain", &helps.explain),
            ("testserver", &helps.testserver),
        ] {
            assert!(set.len() > 5, "no flags parsed from {what} --help: {set:?}");
        }
        helps
    }

    /// What `program` accepts on page `doc`.
    fn accepted(&self, program: &Program, doc: &Doc) -> BTreeSet<String> {
        let with = |base: &BTreeSet<String>, extra: &[&str]| -> BTreeSet<String> {
            base.iter()
                .cloned()
                .chain(extra.iter().map(|s| s.to_string()))
                .collect()
        };
        let everything = || {
            let mut all = with(&self.run, &TOP_FLAGS);
            all.extend(self.plan.iter().cloned());
            all
        };
        match program {
            Program::Autoregister(c) => match c.as_str() {
                "run" => with(&self.run, &HELP_FLAGS),
                "plan" => with(&self.plan, &HELP_FLAGS),
                "explain" => with(&self.explain, &HELP_FLAGS),
                "version" | "help" => with(&BTreeSet::new(), &HELP_FLAGS),
                "top" => with(&BTreeSet::new(), &TOP_FLAGS),
                _ => everything(),
            },
            Program::TestServer => with(&self.testserver, &HELP_FLAGS),
            Program::Bare if is_testserver_page(doc) => with(&self.testserver, &HELP_FLAGS),
            Program::Bare if is_explain_page(doc) => with(&self.explain, &HELP_FLAGS),
            Program::Bare => everything(),
            Program::Other(_) => BTreeSet::new(),
        }
    }
}

/// On the test server's page a flag alone is the test server's.
fn is_testserver_page(doc: &Doc) -> bool {
    doc.path.file_name().is_some_and(|f| f == "testserver.md")
}

/// On the troubleshooting page a flag alone is `explain`'s.
fn is_explain_page(doc: &Doc) -> bool {
    doc.path
        .file_name()
        .is_some_and(|f| f == "troubleshooting.md")
}

/// Every (line, program, flag) the docs name: in code spans, and in the lines of code
/// blocks that are shell or plain text.
fn named_flags(doc: &Doc) -> Vec<(usize, Program, String)> {
    let mut out = Vec::new();
    for (line, span) in doc.code_spans() {
        for (program, flags) in markdown::command_lines(&span, false) {
            out.extend(flags.into_iter().map(|f| (line, program.clone(), f)));
        }
    }
    for b in doc.blocks() {
        if !matches!(
            b.lang().as_str(),
            "" | "sh" | "shell" | "bash" | "console" | "text"
        ) {
            continue;
        }
        for (line, text) in &b.body {
            for (program, flags) in markdown::command_lines(text, true) {
                out.extend(flags.into_iter().map(|f| (*line, program.clone(), f)));
            }
        }
    }
    out
}

#[test]
fn every_flag_named_in_the_docs_exists() {
    let helps = Helps::read();
    assert_none("flags named in the docs", unknown_flags(&helps, &docs()));
}

fn unknown_flags(helps: &Helps, docs: &[Doc]) -> Vec<String> {
    let mut problems = Vec::new();
    for doc in docs {
        for (line, program, flag) in named_flags(doc) {
            if !helps.accepted(&program, doc).contains(&flag) {
                let whose = match &program {
                    Program::Autoregister(c) if c == "top" => "autoregister --help".to_string(),
                    Program::Autoregister(c) if c == "any" || c == "help" || c == "version" => {
                        "any autoregister command's --help".to_string()
                    }
                    Program::Autoregister(c) => format!("autoregister {c} --help"),
                    Program::TestServer => "autoregister-testserver --help".to_string(),
                    Program::Bare if is_testserver_page(doc) => {
                        "autoregister-testserver --help".to_string()
                    }
                    Program::Bare if is_explain_page(doc) => {
                        "autoregister explain --help".to_string()
                    }
                    _ => "autoregister run --help or plan --help".to_string(),
                };
                problems.push(format!(
                    "{}: `{flag}` is not a flag of {whose}",
                    doc.at(line)
                ));
            }
        }
    }
    problems
}

#[test]
fn every_flag_of_help_is_documented() {
    let helps = Helps::read();
    assert_none("flags of --help", undocumented_flags(&helps, &docs()));
}

fn undocumented_flags(helps: &Helps, docs: &[Doc]) -> Vec<String> {
    let mut named: BTreeMap<&str, BTreeSet<String>> = BTreeMap::new();
    for doc in docs {
        for (_, program, flag) in named_flags(doc) {
            let to: &[&str] = match &program {
                Program::Autoregister(c) if c == "run" => &["run"],
                Program::Autoregister(c) if c == "plan" => &["plan"],
                Program::Autoregister(c) if c == "explain" => &["explain"],
                Program::Autoregister(c) if c == "any" => &["run", "plan"],
                Program::TestServer => &["testserver"],
                Program::Bare if is_testserver_page(doc) => &["testserver"],
                Program::Bare if is_explain_page(doc) => &["explain"],
                Program::Bare => &["run", "plan"],
                _ => &[],
            };
            for t in to {
                named.entry(t).or_default().insert(flag.clone());
            }
        }
    }
    let mut problems = Vec::new();
    for (what, help, page) in [
        (
            "autoregister run --help",
            &helps.run,
            "docs/running.md#flags",
        ),
        (
            "autoregister plan --help",
            &helps.plan,
            "docs/running.md#flags",
        ),
        (
            "autoregister explain --help",
            &helps.explain,
            "docs/troubleshooting.md#explain",
        ),
        (
            "autoregister-testserver --help",
            &helps.testserver,
            "docs/testserver.md#as-a-process",
        ),
    ] {
        let key = match what {
            "autoregister run --help" => "run",
            "autoregister plan --help" => "plan",
            "autoregister explain --help" => "explain",
            _ => "testserver",
        };
        let documented = named.get(key).cloned().unwrap_or_default();
        for flag in help {
            if HELP_FLAGS.contains(&flag.as_str()) || documented.contains(flag) {
                continue;
            }
            problems.push(format!(
                "{what} lists `{flag}`, which no page documents (add it to {page})"
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// Make targets

#[test]
fn every_make_target_named_exists() {
    let makefile = std::fs::read_to_string(root().join("Makefile")).unwrap();
    assert_none(
        "make targets",
        make_target_problems(&makefile_targets(&makefile), &docs()),
    );
}

/// The Makefile's rule names (`name:` at the start of a line, not `name :=`).
fn makefile_targets(makefile: &str) -> BTreeSet<String> {
    makefile
        .lines()
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let ok = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
                && !rest.starts_with('=');
            ok.then(|| name.to_string())
        })
        .collect()
}

fn make_target_problems(targets: &BTreeSet<String>, docs: &[Doc]) -> Vec<String> {
    let mut problems = Vec::new();
    for pending in NOT_YET_IN_MAKEFILE {
        if targets.contains(*pending) {
            problems.push(format!(
                "Makefile: `{pending}` is a target now: remove it from NOT_YET_IN_MAKEFILE in tests/docs.rs"
            ));
        }
    }
    for doc in docs {
        let mut texts: Vec<(usize, String)> = doc.code_spans();
        for b in doc.blocks() {
            texts.extend(b.body.iter().cloned());
        }
        for (line, text) in texts {
            for t in markdown::make_targets(&text) {
                if !targets.contains(&t) && !NOT_YET_IN_MAKEFILE.contains(&t.as_str()) {
                    problems.push(format!(
                        "{}: `make {t}`: the Makefile has no target `{t}`",
                        doc.at(line)
                    ));
                }
            }
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// Events

#[test]
fn every_event_reason_is_in_the_events_table() {
    let doc = markdown::load(root(), Path::new("docs/running.md"));
    assert_none("the Events table", event_problems(&doc));
}

/// The line of the heading with `anchor` in `doc` (0 when there is none).
fn heading_line(doc: &Doc, anchor: &str) -> usize {
    doc.headings()
        .into_iter()
        .find(|(_, _, a)| a == anchor)
        .map_or(0, |(n, _, _)| n)
}

/// The rows of the table under heading `anchor` of `doc`: line and cells.
fn table_under(doc: &Doc, anchor: &str) -> Vec<(usize, Vec<String>)> {
    let headings = doc.headings();
    let Some(i) = headings.iter().position(|(_, _, a)| a == anchor) else {
        return Vec::new();
    };
    let start = headings[i].0;
    let end = headings.get(i + 1).map_or(usize::MAX, |h| h.0);
    doc.prose()
        .into_iter()
        .filter(|(n, l)| *n > start && *n < end && l.trim_start().starts_with('|'))
        .map(|(n, l)| {
            let cells = l
                .trim()
                .trim_matches('|')
                .split('|')
                .map(|c| c.trim().trim_matches('`').to_string())
                .collect();
            (n, cells)
        })
        .skip(2) // the header and the |---| row
        .collect()
}

fn event_problems(doc: &Doc) -> Vec<String> {
    let rows = table_under(doc, "events");
    let mut problems = Vec::new();
    if rows.is_empty() {
        return vec![format!(
            "{}: no table under a heading `Events`",
            doc.path.display()
        )];
    }
    let table: BTreeMap<String, (usize, String, String)> = rows
        .into_iter()
        .map(|(n, c)| {
            let get = |i: usize| c.get(i).cloned().unwrap_or_default();
            (get(0), (n, get(1), get(2)))
        })
        .collect();
    let recorded: BTreeSet<&str> = EventReason::ALL.iter().map(|r| r.as_str()).collect();
    for r in EventReason::ALL {
        match table.get(r.as_str()) {
            None => problems.push(format!(
                "{}: the Events table has no row for `{}` ({} {})",
                doc.at(heading_line(doc, "events")),
                r.as_str(),
                r.event_type(),
                r.action()
            )),
            Some((n, ty, action)) => {
                if ty != r.event_type() || action != r.action() {
                    problems.push(format!(
                        "{}: `{}` is type {}, action `{}` (the table says {ty}, `{action}`)",
                        doc.at(*n),
                        r.as_str(),
                        r.event_type(),
                        r.action()
                    ));
                }
            }
        }
    }
    for (reason, (n, _, _)) in &table {
        let pending = NOT_YET_RECORDED.contains(&reason.as_str());
        if !recorded.contains(reason.as_str()) && !pending {
            problems.push(format!(
                "{}: `{reason}` is not an Event reason the controller records",
                doc.at(*n)
            ));
        }
        if recorded.contains(reason.as_str()) && pending {
            problems.push(format!(
                "{}: `{reason}` is recorded now: remove it from NOT_YET_RECORDED in tests/docs.rs",
                doc.at(*n)
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------
// Threads

#[test]
fn every_thread_of_an_idle_run_is_in_the_threads_table() {
    let doc = markdown::load(root(), Path::new("docs/running.md"));
    let documented: Vec<String> = table_under(&doc, "threads")
        .into_iter()
        .filter_map(|(_, c)| c.first().map(|cell| cell.replace('`', "")))
        .map(|name| name.split_whitespace().next().unwrap_or("").to_string())
        .collect();
    assert!(documented.len() > 5, "no threads table: {documented:?}");

    let server = TestServer::builder()
        .kube_apiserver(true)
        .start()
        .expect("a test server on loopback");
    let before = server.list_objects("apiservices", None).len();
    let dir =
        std::env::temp_dir().join(format!("autoregister-docs-threads-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    server.write_kubeconfig(&kubeconfig).unwrap();
    let mut child = Command::new(BIN)
        .args([
            "run",
            "--manifests",
            "examples/apiservices/",
            "--leader-elect",
        ])
        .args([
            "--lease-namespace",
            "default",
            "--health-addr",
            "127.0.0.1:0",
        ])
        .arg("--kubeconfig")
        .arg(&kubeconfig)
        .current_dir(root())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // Idle: every desired APIService registered (7 in examples/apiservices/).
    let deadline = Instant::now() + Duration::from_secs(30);
    while server.list_objects("apiservices", None).len() < before + 7 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let threads = thread_names(child.id());
    let _ = Command::new("kill").arg(child.id().to_string()).status();
    let _ = child.wait();
    let _ = std::fs::remove_dir_all(&dir);
    assert_eq!(
        server.list_objects("apiservices", None).len(),
        before + 7,
        "run did not register examples/apiservices/"
    );
    let problems: Vec<String> = threads
        .iter()
        .filter(|t| !documented.iter().any(|d| thread_matches(t, d)))
        .map(|t| {
            format!(
                "{}: thread `{t}` of an idle run is not in the threads table",
                doc.at(heading_line(&doc, "threads"))
            )
        })
        .collect();
    assert_none("threads", problems);
}

/// The names (`comm`, at most 15 bytes) of the threads of process `pid`.
fn thread_names(pid: u32) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(format!("/proc/{pid}/task"))
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .filter_map(|e| std::fs::read_to_string(e.path().join("comm")).ok())
                .map(|s| s.trim().to_string())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names.dedup();
    names
}

/// Whether `comm` (cut to 15 bytes by the kernel) is the documented thread `name`, where a
/// trailing `N` stands for a number.
fn thread_matches(comm: &str, name: &str) -> bool {
    let cut = |s: &str| s.chars().take(15).collect::<String>();
    if cut(name) == comm {
        return true;
    }
    match name.strip_suffix('N') {
        Some(prefix) => {
            comm.starts_with(prefix) && comm[prefix.len()..].chars().all(|c| c.is_ascii_digit())
        }
        None => false,
    }
}

// ---------------------------------------------------------------------------------------
// The README

#[test]
fn the_readme_is_short_and_links_every_page() {
    let readme = markdown::load(root(), Path::new("README.md"));
    let mut problems = Vec::new();
    if readme.lines.len() > README_MAX_LINES {
        problems.push(format!(
            "README.md: {} lines, more than {README_MAX_LINES}: move detail to docs/",
            readme.lines.len()
        ));
    }
    let linked: BTreeSet<String> = readme.links().into_iter().map(|(_, t)| t).collect();
    for doc in docs().iter().filter(|d| d.path.starts_with("docs")) {
        let target = doc.path.display().to_string();
        if !linked
            .iter()
            .any(|l| l.split('#').next() == Some(target.as_str()))
        {
            problems.push(format!("README.md: does not link {target}"));
        }
    }
    assert_none("README", problems);
}

// ---------------------------------------------------------------------------------------
// The checks themselves, on small inputs

#[test]
fn anchors_follow_githubs_rules() {
    let doc = Doc::parse(
        Path::new("x.md"),
        "# Running `run --once`\n## CA bundles from a Secret, a ConfigMap or a file\n\
         ## Events\n## Events\n## Refused, as kubectl refuses them\n```sh\n# not a heading\n```\n\
         ## The [test server](y.md), for *your* tests\n",
    );
    let anchors: Vec<String> = doc.headings().into_iter().map(|(_, _, a)| a).collect();
    assert_eq!(
        anchors,
        [
            "running-run---once",
            "ca-bundles-from-a-secret-a-configmap-or-a-file",
            "events",
            "events-1",
            "refused-as-kubectl-refuses-them",
            "the-test-server-for-your-tests",
        ]
    );
}

#[test]
fn a_broken_link_or_anchor_is_named_with_file_and_line() {
    let doc = Doc::parse(
        Path::new("README.md"),
        "# Top\n\nSee [running](docs/running.md#flags) and\n[nowhere](docs/nowhere.md), \
         [here](#top), [gone](#gone) and `[not](a-link.md)`.\n",
    );
    let problems = link_problems(root(), &[doc]);
    assert_eq!(problems.len(), 2, "{problems:#?}");
    assert!(
        problems[0].starts_with("README.md:4: link `docs/nowhere.md`"),
        "{problems:#?}"
    );
    assert!(
        problems[1].starts_with("README.md:4: link `#gone`"),
        "{problems:#?}"
    );
}

#[test]
fn command_lines_are_attributed_to_their_program() {
    let flags = |s: &str| markdown::command_lines(s, true);
    assert_eq!(
        flags("autoregister run --manifests d/ --once   # --not-a-flag"),
        [(
            Program::Autoregister("run".into()),
            vec!["--manifests".to_string(), "--once".to_string()]
        )]
    );
    assert_eq!(
        flags("KUBECONFIG=k kubectl apply --server-side && autoregister plan -o json"),
        [(Program::Autoregister("plan".into()), vec!["-o".to_string()])]
    );
    assert_eq!(
        flags("dir=$(mktemp -d)"),
        Vec::<(Program, Vec<String>)>::new()
    );
    assert_eq!(
        flags("cargo run --features testing --bin autoregister-testserver -- --addr 127.0.0.1:0"),
        [(Program::TestServer, vec!["--addr".to_string()])]
    );
    assert_eq!(
        flags("--events[=BOOL]"),
        [(Program::Bare, vec!["--events".to_string()])]
    );
}

#[test]
fn an_unknown_or_undocumented_flag_is_named() {
    let helps = Helps::read();
    let doc = Doc::parse(
        Path::new("docs/x.md"),
        "Give `--adopt`, or\n`autoregister run --no-such-flag`.\n\n```sh\nautoregister plan --once\n```\n",
    );
    let problems = unknown_flags(&helps, std::slice::from_ref(&doc));
    assert_eq!(
        problems,
        [
            "docs/x.md:2: `--no-such-flag` is not a flag of autoregister run --help",
            "docs/x.md:5: `--once` is not a flag of autoregister plan --help",
        ]
    );
    let undocumented = undocumented_flags(&helps, &[doc]);
    assert!(
        undocumented.contains(
            &"autoregister run --help lists `--workers`, which no page documents (add it to docs/running.md#flags)"
                .to_string()
        ),
        "{undocumented:#?}"
    );
}
