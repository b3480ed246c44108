//! The built `toolcap` binary, run as a user would: every subcommand and every exit code.
#![allow(
    clippy::disallowed_methods,
    reason = "the tests run the built binary and write fixture files"
)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

#[path = "../../../tests/shared/accounts.rs"]
mod accounts;
use accounts::{copy_program, is_root};

struct Env {
    dir: tempfile::TempDir,
    root: PathBuf,
}

impl Env {
    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("work/out")).unwrap();
        std::fs::write(root.join("work/notes.md"), "hello notes").unwrap();
        std::fs::write(
            root.join("p.toml"),
            format!(
                "id = \"cli\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n[safety.process]\nallow = [\"echo\"]\ndeny_args = [\"echo --force*\"]\n",
                w = root.join("work").display()
            ),
        )
        .unwrap();
        Self { dir, root }
    }

    /// `toolcap` started with `stdin`, its output piped, for a test that talks to it.
    fn spawn(&self, args: &[&str], stdin: std::process::Stdio) -> std::process::Child {
        Command::new(env!("CARGO_BIN_EXE_toolcap"))
            .args(args)
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("HOME", &self.root)
            .current_dir(self.root.join("work"))
            .stdin(stdin)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    }

    fn toolcap(&self, args: &[&str]) -> Output {
        self.toolcap_under(&[], args)
    }

    /// [`Env::toolcap`] started by `wrapper` (`taskset -c 0`), when it is given.
    fn toolcap_under(&self, wrapper: &[&str], args: &[&str]) -> Output {
        let toolcap = env!("CARGO_BIN_EXE_toolcap");
        let mut command = match wrapper.split_first() {
            Some((program, rest)) => {
                let mut command = Command::new(program);
                command.args(rest).arg(toolcap);
                command
            }
            None => Command::new(toolcap),
        };
        command
            .args(args)
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env("HOME", &self.root)
            .env_remove("RUST_LOG")
            .current_dir(self.root.join("work"))
            .output()
            .unwrap()
    }

    /// `toolcap validate --personality P --guard-config C`, the files named in this
    /// environment, then `more`.
    fn validate_guard(&self, personality: &str, config: &str, more: &[&str]) -> Output {
        let (p, c) = (self.path(personality), self.path(config));
        let mut args = vec!["validate", "--personality", &p, "--guard-config", &c];
        args.extend_from_slice(more);
        self.toolcap(&args)
    }

    /// `toolcap mcp guard` with `personality` and `config`, its stdin closed.
    fn guard(&self, personality: &Path, config: &Path) -> Output {
        self.toolcap(&[
            "mcp",
            "guard",
            "--personality",
            personality.to_str().unwrap(),
            "--config",
            config.to_str().unwrap(),
        ])
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }
}

/// Makes a FIFO at `path` (`mkfifo`).
fn mkfifo(path: &Path) {
    assert!(
        Command::new("mkfifo").arg(path).status().unwrap().success(),
        "mkfifo {path:?}"
    );
}

fn code(o: &Output) -> i32 {
    o.status.code().unwrap()
}

fn stdout_json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "stdout is not JSON ({e}): {}",
            String::from_utf8_lossy(&o.stdout)
        )
    })
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn call_exit_codes_and_output_contract() {
    let env = Env::new();
    let p = env.path("p.toml");
    let ok = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
    assert_eq!(
        stdout_json(&ok),
        serde_json::json!({"ok": true, "value": "hello notes"})
    );
    assert!(
        ok.stderr.is_empty(),
        "nothing on stderr for a successful call: {}",
        stderr(&ok)
    );

    let denied = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "read_file",
        r#"{"path": "/etc/passwd"}"#,
    ]);
    assert_eq!(code(&denied), 1);
    assert_eq!(
        stdout_json(&denied),
        serde_json::json!({"ok": false, "code": "denied", "error": "PATH_NOT_REACHABLE: read not permitted for /etc/passwd"})
    );
    assert!(denied.stderr.is_empty(), "{}", stderr(&denied));

    let wrote = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--workdir",
        &env.path("work/out"),
        "write_file",
        r#"{"path": "r.md", "content": "abc"}"#,
    ]);
    assert_eq!(
        (code(&wrote), stdout_json(&wrote)),
        (0, serde_json::json!({"ok": true, "value": 3}))
    );
    assert_eq!(
        std::fs::read_to_string(env.root.join("work/out/r.md")).unwrap(),
        "abc"
    );

    let spawned = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "run_command",
        r#"{"binary": "echo", "args": ["--force"]}"#,
    ]);
    assert_eq!(code(&spawned), 1);
    assert_eq!(
        stdout_json(&spawned)["error"],
        "ARGS_NOT_ALLOWED: echo --force refused by policy (the deny_args pattern `echo --force*`)"
    );

    let invalid = env.toolcap(&["call", "--personality", &p, "read_file", r#"{"path": 5}"#]);
    assert_eq!(code(&invalid), 1);
    assert_eq!(stdout_json(&invalid)["code"], "input_invalid");
}

// guarantee: G-REG-16
/// An error that repeats what the call gave (a path, a binary's name) is bounded: a megabyte
/// of path comes back as the code, what was refused and why, in at most 8 KiB, saying how much
/// was left out, whether the policy refused it or the operating system did.
#[test]
fn an_error_repeating_a_huge_argument_is_bounded() {
    use std::io::Write as _;
    let env = Env::new();
    let p = env.path("p.toml");
    let audit = env.path("audit.jsonl");
    let call = |tool: &str, args: Value| -> Value {
        let mut child = env.spawn(
            &["call", "--personality", &p, "--audit", &audit, tool, "-"],
            std::process::Stdio::piped(),
        );
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(args.to_string().as_bytes()).unwrap();
        drop(stdin);
        let out = child.wait_with_output().unwrap();
        assert_eq!(code(&out), 1, "{tool}: {}", stderr(&out));
        stdout_json(&out)
    };
    let long = "a".repeat(1 << 20);
    let work = env.path("work");
    for (tool, args, expected, begins, ends) in [
        (
            "read_file",
            serde_json::json!({"path": format!("/etc/{long}")}),
            "denied",
            "PATH_NOT_REACHABLE: read not permitted for /etc/aaaa".to_owned(),
            "aaaa".to_owned(),
        ),
        (
            "read_file",
            serde_json::json!({"path": format!("{long}/x")}),
            "execution_failed",
            format!("{work}/aaaa"),
            "aaaa/x: File name too long (os error 36)".to_owned(),
        ),
        (
            "run_command",
            serde_json::json!({"binary": long, "args": []}),
            "denied",
            "BINARY_NOT_ALLOWED: aaaa".to_owned(),
            "aaaa is not in the declared allowedBinaries".to_owned(),
        ),
    ] {
        let result = call(tool, args);
        assert_eq!(result["code"], expected, "{tool}");
        let error = result["error"].as_str().unwrap();
        assert!(error.len() <= 8 * 1024, "{tool}: {} bytes", error.len());
        assert!(error.starts_with(&begins), "{tool}: {}", &error[..80]);
        assert!(
            error.ends_with(&ends),
            "{tool}: {}",
            &error[error.len() - 80..]
        );
        assert!(error.contains(" bytes not shown) …"), "{tool}");
    }
    // The audit log records the registry's refusal (the path outside the reach, refused before
    // the tool ran) with the same bounded reason; the others are the tools' own errors, which
    // an audit event carries as codes only.
    let log = std::fs::read_to_string(&audit).unwrap();
    let denials: Vec<Value> = log
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .filter(|event: &Value| event["event"] == "tool_denied")
        .collect();
    assert_eq!(denials.len(), 1, "{log:.400}");
    for event in &denials {
        let reason = event["reason"].as_str().unwrap();
        assert!(reason.len() <= 8 * 1024, "{} bytes", reason.len());
        assert!(reason.contains(" bytes not shown) …"), "{reason:.200}");
    }
    assert!(log.len() < 64 * 1024, "the whole log: {} bytes", log.len());
}

/// `call --capsule`: the same calls give the same results, but the tool's code ran in a worker
/// (this binary re-executed), and a worker mode invoked by hand with bad arguments refuses.
#[test]
fn call_in_a_capsule_gives_the_same_answers() {
    let env = Env::new();
    let p = env.path("p.toml");
    let cases = [
        (
            "read_file",
            r#"{"path": "notes.md"}"#,
            0,
            serde_json::json!({"ok": true, "value": "hello notes"}),
        ),
        (
            "read_file",
            r#"{"path": "/etc/passwd"}"#,
            1,
            serde_json::json!({"ok": false, "code": "denied", "error": "PATH_NOT_REACHABLE: read not permitted for /etc/passwd"}),
        ),
        (
            "write_file",
            r#"{"path": "out/c.md", "content": "capsule"}"#,
            0,
            serde_json::json!({"ok": true, "value": 7}),
        ),
        (
            "list_dir",
            r#"{"path": "out"}"#,
            0,
            serde_json::json!({"ok": true, "value": ["c.md"]}),
        ),
        (
            "kv_set",
            r#"{"key": "k", "value": [1, 2]}"#,
            0,
            serde_json::json!({"ok": true, "value": null}),
        ),
        (
            "kv_get",
            r#"{"key": "k"}"#,
            0,
            serde_json::json!({"ok": true, "value": [1, 2]}),
        ),
    ];
    for (tool, args, exit, expected) in cases {
        let out = env.toolcap(&["call", "--capsule", "--personality", &p, tool, args]);
        assert_eq!(
            (code(&out), stdout_json(&out)),
            (exit, expected),
            "{tool} {args}: {}",
            stderr(&out)
        );
    }
    let spawned = env.toolcap(&[
        "call",
        "--capsule",
        "--personality",
        &p,
        "run_command",
        r#"{"binary": "echo", "args": ["hi"]}"#,
    ]);
    assert_eq!(stdout_json(&spawned)["value"]["stdout"], "hi\n");

    // The worker mode is not a way around anything: without its channel it refuses.
    for args in [
        &["--toolcap-capsule-worker"][..],
        &["--toolcap-capsule-worker", "read_file", "{}"],
        &[
            "--toolcap-capsule-worker",
            "read_file",
            r#"{"max_frame": 65536}"#,
        ],
    ] {
        let out = env.toolcap(args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
        assert!(
            stderr(&out).starts_with("toolcap capsule worker: "),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn key_value_state_persists_across_processes() {
    let env = Env::new();
    let p = env.path("p.toml");
    let store = env.path("state.redb");
    let set = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--store",
        &store,
        "kv_set",
        r#"{"key": "k", "value": {"n": 1}}"#,
    ]);
    assert_eq!(code(&set), 0, "{}", stderr(&set));
    let get = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--store",
        &store,
        "kv_get",
        r#"{"key": "k"}"#,
    ]);
    assert_eq!(
        stdout_json(&get),
        serde_json::json!({"ok": true, "value": {"n": 1}})
    );
    let ttl = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--store",
        &store,
        "kv_set",
        r#"{"key": "k", "value": 1, "ttl_seconds": 0}"#,
    ]);
    assert_eq!(
        stdout_json(&ttl),
        serde_json::json!({"ok": false, "code": "input_invalid", "error": "ttl_seconds: must be a positive integer"})
    );
    let unreachable = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--store",
        "redis://127.0.0.1:1/",
        "kv_get",
        r#"{"key": "k"}"#,
    ]);
    assert_eq!(code(&unreachable), 1);
    assert_eq!(stdout_json(&unreachable)["code"], "not_available");
}

#[test]
fn user_errors_are_one_line_and_exit_2() {
    let env = Env::new();
    std::fs::write(env.root.join("bad.toml"), "id = \"x\"\n[fs_reach\n").unwrap();
    std::fs::write(
        env.root.join("typo.toml"),
        "id = \"x\"\n[safety.netwrok]\nallow = [\"a.com\"]\n",
    )
    .unwrap();
    std::fs::write(env.root.join("p.ini"), "id = x").unwrap();
    let p = env.path("p.toml");
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec![
                "call".into(),
                "--personality".into(),
                env.path("missing.toml"),
                "read_file".into(),
                "{}".into(),
            ],
            "cannot read personality file",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                env.path("bad.toml"),
                "read_file".into(),
                "{}".into(),
            ],
            "invalid personality file",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                env.path("typo.toml"),
                "read_file".into(),
                "{}".into(),
            ],
            "safety.netwrok",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                env.path("p.ini"),
                "read_file".into(),
                "{}".into(),
            ],
            "cannot tell the format",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                p.clone(),
                "rm_rf".into(),
                "{}".into(),
            ],
            "unknown tool \"rm_rf\"",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                p.clone(),
                "read_file".into(),
                "{not json".into(),
            ],
            "ARGS_JSON is not valid JSON",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                p.clone(),
                "read_file".into(),
                "[1]".into(),
            ],
            "ARGS_JSON must be a JSON object",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                p.clone(),
                "--workdir".into(),
                env.path("nowhere"),
                "read_file".into(),
                "{}".into(),
            ],
            "does not exist",
        ),
        (
            vec![
                "call".into(),
                "--personality".into(),
                p.clone(),
                "--workdir".into(),
                env.path("work/notes.md"),
                "read_file".into(),
                "{}".into(),
            ],
            "is not a directory",
        ),
        (
            vec![
                "explain".into(),
                "--personality".into(),
                env.path("missing.toml"),
                "read_file".into(),
                "{}".into(),
            ],
            "cannot read personality file",
        ),
        (
            vec![
                "validate".into(),
                "--personality".into(),
                env.path("typo.toml"),
            ],
            "unknown field `netwrok`",
        ),
        (vec!["frobnicate".into()], "unrecognized subcommand"),
        (vec!["call".into(), "read_file".into()], "--personality"),
    ];
    for (args, needle) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = env.toolcap(&args);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}: nothing on stdout");
        if args[0] != "frobnicate" && args.len() > 2 {
            assert_eq!(
                err.trim_end().lines().count(),
                1,
                "{args:?}: one line: {err}"
            );
        }
    }
}

#[test]
fn explain_says_which_rule_decides() {
    let env = Env::new();
    let p = env.path("p.toml");
    let allowed = env.toolcap(&[
        "explain",
        "--personality",
        &p,
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&allowed), 0, "{}", stderr(&allowed));
    let v = stdout_json(&allowed);
    assert_eq!(v["allowed"], true);
    let rule = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "fs_reach.read")
        .unwrap();
    assert_eq!(
        rule["rule"],
        format!(
            "{} is under the fs_reach.read root {}",
            env.path("work/notes.md"),
            env.path("work")
        )
    );

    let refused = env.toolcap(&[
        "explain",
        "--personality",
        &p,
        "run_command",
        r#"{"binary": "echo", "args": ["--force-with-lease"]}"#,
    ]);
    assert_eq!(code(&refused), 1);
    let v = stdout_json(&refused);
    assert_eq!(v["allowed"], false);
    assert_eq!(v["code"], "denied");
    let args = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "process")
        .unwrap();
    assert_eq!(
        args["rule"],
        "ARGS_NOT_ALLOWED: echo --force-with-lease refused by policy (the deny_args pattern `echo --force*`)"
    );
    let sandbox = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["capability"] == "process.sandbox")
        .unwrap();
    assert_eq!(sandbox["allowed"], true, "{sandbox}");
    assert!(
        sandbox["rule"].as_str().unwrap().contains("Landlock"),
        "{sandbox}"
    );
    assert!(!Path::new(&env.path("work/out/never.md")).exists());
    let write = env.toolcap(&[
        "explain",
        "--personality",
        &p,
        "write_file",
        &format!(
            r#"{{"path": "{}", "content": "x"}}"#,
            env.path("work/out/never.md")
        ),
    ]);
    assert_eq!(code(&write), 0);
    assert!(
        !Path::new(&env.path("work/out/never.md")).exists(),
        "explain has no side effects"
    );
    let not_in = env.toolcap(&[
        "explain",
        "--personality",
        &p,
        "fetch_url",
        r#"{"url": "https://api.github.com/"}"#,
    ]);
    assert_eq!(code(&not_in), 1);
}

#[test]
fn validate_reports_findings() {
    let env = Env::new();
    let ok = env.toolcap(&["validate", "--personality", &env.path("p.toml")]);
    // p.toml has no network list: fetch_url's `*` is reported.
    assert_eq!(code(&ok), 1, "{}", String::from_utf8_lossy(&ok.stdout));
    let text = String::from_utf8_lossy(&ok.stdout);
    assert!(
        text.contains("fetch_url: network: the personality allows no network hosts"),
        "{text}"
    );
    std::fs::write(
        env.root.join("tight.toml"),
        format!("id = \"tight\"\ntoolset = [\"read_file\", \"list_dir\"]\n[fs_reach]\nread = [\"{}\"]\n", env.path("work")),
    )
    .unwrap();
    let clean = env.toolcap(&["validate", "--personality", &env.path("tight.toml")]);
    assert_eq!(
        code(&clean),
        0,
        "{}",
        String::from_utf8_lossy(&clean.stdout)
    );
    assert!(String::from_utf8_lossy(&clean.stdout).starts_with("ok: 2 standard tool(s)"));

    // A tool name a typo away from a standard tool, in the toolset, in [constraints], in
    // [escalate] tools or in [after_untrusted]: the tool would be left out, its constraint
    // unapplied, its calls never asked about or it unpaused, without a word. Names far from every
    // standard tool (another registry's) and MCP names are not reported.
    std::fs::write(
        env.root.join("typo.toml"),
        format!(
            "id = \"typo\"\ntoolset = [\"read_file\", \"list_dirs\", \"shell\", \"mcp__gh__*\"]\n\
             [fs_reach]\nread = [\"{}\"]\n[constraints.read_fiel]\nmax_invocations = 1\n\
             [constraints.summarize]\nmax_invocations = 1\nonly_after = [\"list_dri\"]\n\
             [escalate]\ntools = [\"write_fil\", \"deploy\"]\n\
             [after_untrusted]\npause = [\"run_comand\", \"write_file\"]\nhold = [\"kv_sett\"]\n",
            env.path("work")
        ),
    )
    .unwrap();
    let typo = env.toolcap(&["validate", "--personality", &env.path("typo.toml")]);
    assert_eq!(code(&typo), 1, "{}", String::from_utf8_lossy(&typo.stdout));
    assert_eq!(
        String::from_utf8_lossy(&typo.stdout),
        "toolset entry list_dirs names no tool; did you mean list_dir?\n\
         [constraints.read_fiel] names no tool; did you mean read_file?\n\
         [constraints.summarize] only_after entry list_dri names no tool; did you mean list_dir?\n\
         [escalate] tools entry write_fil names no tool; did you mean write_file?\n\
         [after_untrusted] pause entry run_comand names no tool; did you mean run_command?\n\
         [after_untrusted] hold entry kv_sett names no tool; did you mean kv_set?\n\
         6 finding(s) for personality typo\n"
    );
}

// guarantee: G-POL-07
/// A program the personality allows that lies in its write reach runs whatever a tool writes
/// there: the allowlist names a place, not a file. `toolcap validate` notes it, by absolute path
/// and, for a bare name, where the trusted search path lies in a write root; a denied place and a
/// program outside every write root are not noted.
#[test]
fn validate_notes_an_allowed_program_in_the_write_reach() {
    let env = Env::new();
    std::fs::write(
        env.root.join("programs.toml"),
        format!(
            "id = \"programs\"\ntoolset = [\"run_command\"]\n[fs_reach]\nread = [\"{w}\"]\n\
             write = [\"{w}/out\", \"/usr/local\"]\ndeny = [\"{w}/out/locked\"]\n\
             [safety.process]\nallow = [\"{w}/out/tool\", \"{w}/out/locked/tool\", \"/usr/bin/true\", \"git\"]\n",
            w = env.path("work")
        ),
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("programs.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(
        notes,
        [
            "note: fs_reach.write[1] is /usr/local, which holds /usr/local/bin, a directory of the trusted search path: a program a tool writes there is found before the system's, by children and by whoever else searches it",
            format!(
                "note: safety.process.allow[0] is {}/out/tool, beneath fs_reach.write[0]: what a tool writes there runs as that program",
                env.path("work")
            )
            .as_str(),
            "note: safety.process.allow[3] is git, looked up in /usr/local/bin, beneath fs_reach.write[1]: what a tool writes there runs as that program",
        ],
        "{text}"
    );
}

// guarantee: G-POL-07
/// `validate` tells a reviewer when a reach is the whole file system (`read = ["/"]` reads as
/// a short list) or every host (`allow = ["*"]`), and when a write root holds a directory of the trusted search path, where a
/// program a tool writes is found before the system's; a deny rule that covers the directory
/// leaves nothing to note.
#[test]
fn validate_notes_a_whole_file_system_reach_and_the_search_path_in_the_write_reach() {
    let env = Env::new();
    std::fs::write(
        env.root.join("wide.toml"),
        "id = \"wide\"\ntoolset = [\"read_file\"]\n[fs_reach]\nread = [\"/\"]\n\
         write = [\"/srv/../\", \"/usr\", \"/opt/tools\"]\ndeny = [\"/usr/local/bin\"]\n\
         [safety.network]\nallow = [\"api.github.com\", \"*\"]\n",
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("wide.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note:")).collect();
    assert_eq!(
        notes,
        [
            "note: fs_reach.read[0] is /, the whole file system: tools reach every place the deny rules and the floor leave",
            "note: fs_reach.write[0] is /, the whole file system: tools reach every place the deny rules and the floor leave",
            "note: fs_reach.write[0] is /, which holds /usr/bin, a directory of the trusted search path: a program a tool writes there is found before the system's, by children and by whoever else searches it",
            "note: fs_reach.write[0] is /, which holds /bin, a directory of the trusted search path: a program a tool writes there is found before the system's, by children and by whoever else searches it",
            "note: fs_reach.write[1] is /usr, which holds /usr/bin, a directory of the trusted search path: a program a tool writes there is found before the system's, by children and by whoever else searches it",
            "note: safety.network.allow[1] is *, every host: tools may fetch from any address the restricted classes (loopback, private, link-local, metadata) leave",
        ],
        "{text}"
    );
    assert_eq!(
        code(&out),
        0,
        "notes leave the exit code to the findings: {text}"
    );
}

// guarantee: G-POL-07
/// A personality that lifts the deny floor says so when validated, whatever the spelling: a
/// root written with `..` (`<work>/../../../proc`) lifts it for `/proc` as `/proc` itself does,
/// and a reviewer reading the file could take it for a place beneath the workspace. The notes
/// come after the summary and leave the exit code as the findings decide.
#[test]
fn validate_says_which_roots_lift_the_deny_floor() {
    let env = Env::new();
    let ups = env.root.components().count();
    let proc = format!("{}{}proc", env.path("work"), "/..".repeat(ups) + "/");
    std::fs::write(
        env.root.join("lifts.toml"),
        format!(
            "id = \"lifts\"\ntoolset = [\"read_file\", \"write_file\"]\n[fs_reach]\n\
             read = [\"{}\", \"{proc}\", \"/sys/\u{202e}fed\"]\nwrite = [\"{}\", \"~/.ssh/keys\"]\n",
            env.path("work"),
            env.path("work/out")
        ),
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("lifts.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 0, "{text}");
    let ssh = env.root.join(".ssh");
    assert_eq!(
        text.lines().collect::<Vec<_>>(),
        [
            "ok: 2 standard tool(s) in the toolset of lifts; every declaration is granted as declared",
            "note: fs_reach.read[1] is /proc, which lifts the deny floor for /proc",
            // Escaped as every review line is: an override must not reverse the note.
            "note: fs_reach.read[2] is /sys/\\u{202e}fed, which lifts the deny floor for /sys",
            &format!(
                "note: fs_reach.write[1] is {}/keys, which lifts the deny floor for {}",
                ssh.display(),
                ssh.display()
            ),
        ],
        "{text}"
    );
    // The same notes when a guard configuration is validated against it.
    std::fs::write(
        env.root.join("servers.toml"),
        format!(
            "[servers.files]\ncommand = \"/usr/bin/true\"\n[servers.files.reach]\nread = [\"{}\"]\n",
            env.path("work")
        ),
    )
    .unwrap();
    let guarded = env.validate_guard("lifts.toml", "servers.toml", &[]);
    let guarded_text = String::from_utf8_lossy(&guarded.stdout);
    assert_eq!(code(&guarded), 0, "{guarded_text}");
    // The same notes, then the guard's own: a server without pins.
    let mut expected: Vec<&str> = text.lines().skip(1).collect();
    expected.push(
        "note: servers.files has no pins: its tools are offered as it describes them when it \
         starts, a new version's descriptions too (`toolcap mcp pins` prints them to pin)",
    );
    assert_eq!(
        guarded_text.lines().skip(1).collect::<Vec<_>>(),
        expected,
        "{guarded_text}"
    );
    // A personality that lifts nothing has no note.
    let plain = env.toolcap(&["validate", "--personality", &env.path("p.toml")]);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("note:"));
}

// guarantee: G-MCP-06
/// `toolcap validate --guard-config` tells a reviewer which servers the guard would not start
/// for their code, as the guard says it when it starts: a server started by `python -m` in a
/// write root, a script named relative to the working directory (the guard's own when the
/// configuration sets none: the current directory, or `--workdir`), each a finding (exit 1)
/// naming the server and why; a server whose code lies elsewhere is none, and one not
/// installed where the review runs is a note.
#[test]
fn validate_reports_the_servers_the_guard_would_not_start_for_their_code() {
    let env = Env::new();
    let out_dir = env.path("work/out");
    std::fs::write(env.root.join("work/out/run.sh"), "echo hi\n").unwrap();
    std::fs::write(env.root.join("work/out/kube.yaml"), "apiVersion: v1\n").unwrap();
    std::fs::write(
        env.root.join("servers.toml"),
        format!(
            "[servers.module]\ncommand = \"/usr/bin/python3\"\nargs = [\"-m\", \"srv\"]\ncwd = \"{out_dir}\"\n\
             [servers.relative]\ncommand = \"/bin/sh\"\nargs = [\"-e\", \"out/run.sh\"]\n\
             [servers.fine]\ncommand = \"/usr/bin/true\"\n\
             [servers.bare]\ncommand = \"/usr/bin/python3\"\nargs = [\"-m\", \"srv\"]\n\
             [servers.elsewhere]\ncommand = \"/opt/not-installed-here/server\"\n\
             [servers.classes]\ncommand = \"/usr/bin/java\"\nargs = [\"-cp\", \"/usr/share/java:{out_dir}/classes\", \"srv.Main\"]\n\
             [servers.agent]\ncommand = \"/usr/bin/java\"\nargs = [\"-javaagent:{out_dir}/classes=verbose\", \"-jar\", \"/usr/share/java/x.jar\"]\n\
             [servers.project]\ncommand = \"/usr/bin/true\"\n[servers.project.env]\nUV_PROJECT = \"{out_dir}\"\n\
             [servers.index]\ncommand = \"/usr/bin/true\"\n[servers.index.env]\nUV_PROJECT_ENVIRONMENT = \"/opt/venvs/srv\"\n\
             [servers.jvm]\ncommand = \"/usr/bin/true\"\n[servers.jvm.env]\nJAVA_HOME = \"{out_dir}\"\n\
             [servers.toolchain]\ncommand = \"/usr/bin/true\"\n[servers.toolchain.env]\nCARGO_HOME = \"{out_dir}\"\n\
             [servers.cluster]\ncommand = \"/usr/bin/true\"\n[servers.cluster.env]\nKUBECONFIG = \"{out_dir}/kube.yaml\"\n\
             [servers.later]\ncommand = \"/usr/bin/true\"\n[servers.later.env]\nAWS_CONFIG_FILE = \"{out_dir}/not-yet/config\"\n"
        ),
    )
    .unwrap();
    std::fs::create_dir_all(env.root.join("work/out/classes")).unwrap();
    let out = env.validate_guard("p.toml", "servers.toml", &[]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 1, "{text}{}", stderr(&out));
    for (server, why) in [
        ("module", "`python3 -m` imports from it"),
        ("relative", "script argument"),
        ("classes", "`java -cp` takes code from it"),
        ("agent", "`java -javaagent:` takes code from it"),
        ("project", "`UV_PROJECT` in its env takes code from it"),
        ("jvm", "`JAVA_HOME` in its env takes code from it"),
        ("toolchain", "`CARGO_HOME` in its env takes code from it"),
        ("cluster", "`KUBECONFIG` in its env takes code from it"),
        // Named before it exists: a tool may write it before the server reads it.
        ("later", "`AWS_CONFIG_FILE` in its env takes code from it"),
    ] {
        let line = text
            .lines()
            .find(|l| l.starts_with(&format!("servers.{server}: ")))
            .unwrap_or_else(|| panic!("{server}: {text}"));
        assert!(
            line.contains("would not start") && line.contains(why) && line.contains(&out_dir),
            "{line}"
        );
    }
    assert!(!text.contains("servers.fine:"), "{text}");
    // A place that is not here (a virtual environment made where the guard runs) is not one.
    assert!(!text.contains("servers.index:"), "{text}");
    // Without a `cwd`, a server starts in the guard's working directory: here the current
    // one, which the personality reads only; `--workdir` names another, as the guard's does.
    assert!(!text.contains("servers.bare:"), "{text}");
    let out = env.validate_guard("p.toml", "servers.toml", &["--workdir", &out_dir]);
    let moved = String::from_utf8_lossy(&out.stdout);
    assert!(
        moved.lines().any(
            |l| l.starts_with("servers.bare: the guard would not start it")
                && l.contains("`python3 -m`")
        ),
        "{moved}"
    );
    // A server not installed where the review runs is a note, not a finding: its code is
    // examined where the guard starts it.
    assert!(!text.contains("servers.elsewhere:"), "{text}");
    assert!(
        text.lines().any(
            |l| l.starts_with("note: servers.elsewhere is not installed here")
                && l.contains("/opt/not-installed-here/server")
        ),
        "{text}"
    );
}

// guarantee: G-POL-07
/// A reach root at or beneath a deny rule reaches nothing (a deny rule wins), yet reads like a
/// grant; `toolcap validate` notes each one with the rule that takes it, so that a personality
/// whose working directory a rule covers (an Ethos personality run from `/root`, under Ethos's
/// own floor) is not reported as granted without a word.
#[test]
fn validate_says_which_roots_a_deny_rule_takes() {
    let env = Env::new();
    std::fs::write(
        env.root.join("taken.toml"),
        format!(
            "id = \"taken\"\ntoolset = [\"read_file\", \"write_file\"]\n[fs_reach]\n\
             read = [\"{work}\", \"{work}/secret/inner\"]\nwrite = [\"{work}/secret\"]\n\
             deny = [\"{work}/secret\"]\n",
            work = env.path("work")
        ),
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("taken.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(code(&out), 0, "{text}");
    let secret = env.root.join("work/secret");
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        [
            format!(
                "note: fs_reach.read[1] is {}/inner, which the deny rule {} takes whole: it reaches nothing",
                secret.display(),
                secret.display()
            ),
            format!(
                "note: fs_reach.write[0] is {}, which the deny rule {} takes whole: it reaches nothing",
                secret.display(),
                secret.display()
            ),
        ],
        "{text}"
    );
    let plain = env.toolcap(&["validate", "--personality", &env.path("p.toml")]);
    assert!(!String::from_utf8_lossy(&plain.stdout).contains("note:"));
}

// guarantee: G-POL-08
/// A host written in another script that looks like a familiar one (`аpi.github.com`, its
/// first letter Cyrillic) is a valid internationalized name, loaded as its ASCII form
/// (`xn--pi-6kc.github.com`), a host its owner is not GitHub. A reviewer reading the name as
/// written takes it for `api.github.com`: `toolcap diff` showed a declaration swapping one for
/// the other as a widening to `аpi.github.com`, and `validate` said nothing of a personality
/// allowing it. Both now show the ASCII form beside the name as written.
#[test]
fn a_host_in_another_script_is_shown_in_its_ascii_form() {
    let env = Env::new();
    let homograph = "\u{430}pi.github.com";
    let guard = |name: &str, host: &str| {
        std::fs::write(
            env.root.join(name),
            format!("[servers.files]\ncommand = \"/usr/bin/true\"\n[servers.files.reach]\nhosts = [\"{host}\"]\n"),
        )
        .unwrap();
        let out = env.toolcap(&["manifest", "--guard-config", &env.path(name)]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let manifest = format!("{name}.json");
        std::fs::write(env.root.join(&manifest), &out.stdout).unwrap();
        env.path(&manifest)
    };
    let (before, after) = (
        guard("g0.toml", "api.github.com"),
        guard("g1.toml", homograph),
    );
    let diff = env.toolcap(&["diff", &before, &after]);
    assert_eq!(code(&diff), 1, "{}", stderr(&diff));
    assert_eq!(
        String::from_utf8_lossy(&diff.stdout),
        format!(
            "network.widened: mcp__files__* (declaration): {homograph} (xn--pi-6kc.github.com)\n"
        )
    );
    std::fs::write(
        env.root.join("idn.toml"),
        format!(
            "id = \"idn\"\ntoolset = [\"fetch_url\"]\n[safety.network]\nallow = [\"api.github.com\", \"{homograph}\"]\ndeny = [\"M\u{fc}nchen.example\"]\n"
        ),
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("idn.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines().skip(1).collect::<Vec<_>>(),
        [
            format!("note: safety.network.allow[1] is {homograph}, the internationalized name xn--pi-6kc.github.com"),
            "note: safety.network.deny[0] is M\u{fc}nchen.example, the internationalized name xn--mnchen-3ya.example".to_owned(),
        ],
        "{text}"
    );
}

// guarantee: G-POL-09
/// A guarded server reads and executes its `runtime` paths and its `command` outside the
/// personality's reach, so they are part of what a review of a guard configuration must see.
/// `toolcap manifest` left them out, and `toolcap diff` said "no widenings" when `runtime`
/// went from the server's package to `/` (the whole file system but the deny floor, readable by
/// the server) or `command` to another program. And a path with `..` in a guard configuration
/// was taken, then read as beneath the place it starts with: it is refused when the
/// configuration loads, naming the field, as a relative path is.
#[test]
fn a_guard_configurations_code_paths_are_reviewed_and_spelled_plainly() {
    let env = Env::new();
    let config_with = |name: &str, command: &str, runtime: &str, extra: &str| {
        std::fs::write(
            env.root.join(name),
            format!(
                "[servers.files]\ncommand = \"{command}\"\nruntime = [{runtime}]\n{extra}\
                 [servers.files.reach]\nread = [\"{}\"]\n",
                env.path("work")
            ),
        )
        .unwrap();
        env.path(name)
    };
    let config = |name: &str, command: &str, runtime: &str| config_with(name, command, runtime, "");
    let manifest = |config: &str| {
        let out = env.toolcap(&["manifest", "--guard-config", config]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        let path = format!("{config}.json");
        std::fs::write(&path, &out.stdout).unwrap();
        (path, String::from_utf8_lossy(&out.stdout).into_owned())
    };
    let (narrow, text) = manifest(&config("narrow.toml", "/usr/bin/node", "\"/opt/mcp\""));
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        listed["tools"]["mcp__files__*"]["server"],
        serde_json::json!({"command": "/usr/bin/node", "runtime": ["/opt/mcp"]}),
        "{text}"
    );
    // The server's allow list of tools and the argument names the guard checks as paths are
    // restrictions: dropping them offers more tools, or checks fewer arguments.
    let (listing, text) = manifest(&config_with(
        "listing.toml",
        "/usr/bin/node",
        "\"/opt/mcp\"",
        "tools = [\"read\"]\npath_arguments = [\"target\", \"into\"]\n",
    ));
    let listed: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(
        listed["tools"]["mcp__files__*"]["server"],
        serde_json::json!({"command": "/usr/bin/node", "runtime": ["/opt/mcp"],
            "tools": ["read"], "path_arguments": ["target", "into"]}),
        "{text}"
    );
    let (more, _) = manifest(&config_with(
        "more.toml",
        "/usr/bin/node",
        "\"/opt/mcp\"",
        "tools = [\"read\", \"write\"]\npath_arguments = [\"into\"]\n",
    ));
    let (inside, _) = manifest(&config("inside.toml", "/usr/bin/node", "\"/opt/mcp/lib\""));
    let (wide, _) = manifest(&config("wide.toml", "/usr/bin/node", "\"/opt/mcp\", \"/\""));
    let (other, _) = manifest(&config("other.toml", "/usr/bin/python3", "\"/opt/mcp\""));
    let diff = |old: &str, new: &str| {
        let out = env.toolcap(&["diff", old, new]);
        (
            code(&out),
            String::from_utf8_lossy(&out.stdout).into_owned(),
        )
    };
    assert_eq!(diff(&narrow, &inside), (0, "no widenings\n".to_owned()));
    assert_eq!(diff(&narrow, &listing), (0, "no widenings\n".to_owned()));
    assert_eq!(
        diff(&listing, &more),
        (
            1,
            "tools.widened: mcp__files__* (server): write\n\
             restriction.removed: mcp__files__* (server): path_arguments no longer: target\n"
                .to_owned()
        )
    );
    assert_eq!(
        diff(&listing, &narrow),
        (
            1,
            "tools.widened: mcp__files__* (server): every tool the server lists (only read before)\n\
             restriction.removed: mcp__files__* (server): path_arguments no longer: target, into\n"
                .to_owned()
        )
    );
    assert_eq!(
        diff(&narrow, &wide),
        (1, "runtime.widened: mcp__files__* (server): /\n".to_owned())
    );
    assert_eq!(
        diff(&narrow, &other),
        (
            1,
            "command.changed: mcp__files__* (server): /usr/bin/node -> /usr/bin/python3\n"
                .to_owned()
        )
    );
    // `..` anywhere in the configuration's paths is refused, naming the field.
    for (name, command, runtime, field) in [
        ("up1.toml", "/usr/bin/node", "\"/opt/mcp/../..\"", "runtime"),
        ("up2.toml", "/opt/mcp/../bin/node", "", "command"),
    ] {
        let out = env.toolcap(&[
            "manifest",
            "--guard-config",
            &config(name, command, runtime),
        ]);
        assert_eq!(code(&out), 2, "{name}");
        assert!(
            stderr(&out).contains(&format!("servers.files.{field}"))
                && stderr(&out).contains("'..'"),
            "{name}: {}",
            stderr(&out)
        );
    }
    std::fs::write(
        env.root.join("up3.toml"),
        "[servers.files]\ncommand = \"/usr/bin/node\"\n[servers.files.reach]\nwrite = [\"/srv/data/../../etc\"]\n",
    )
    .unwrap();
    let out = env.toolcap(&["manifest", "--guard-config", &env.path("up3.toml")]);
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("servers.files.reach.write"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn the_example_personalities_validate() {
    let env = Env::new();
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/personalities");
    for name in ["researcher.toml", "coder.toml", "ops.toml"] {
        let out = env.toolcap(&[
            "validate",
            "--personality",
            examples.join(name).to_str().unwrap(),
        ]);
        assert_eq!(
            code(&out),
            0,
            "{name}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The example coding personality says force-pushes are refused, and a reader copies it as
/// the way to write that: so it refuses them in the spellings git takes, which its patterns,
/// matched token by token, once did not: a cluster of short options (`-fu`), a refspec that
/// forces (`+main`, `+HEAD:main`), a mirror push, and the ones that delete a branch (`--delete`,
/// `-d`, `:main`). An ordinary push and the rest of git still run.
#[test]
fn the_example_coder_refuses_force_pushes_in_every_spelling_git_takes() {
    let env = Env::new();
    let example =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/personalities/coder.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let coder = env.dir.path().join("coder.toml");
    std::fs::write(
        &coder,
        text.replace("/work/repo", &env.dir.path().display().to_string()),
    )
    .unwrap();
    let allowed = |args: &[&str]| {
        let call = serde_json::json!({"binary": "git", "args": args}).to_string();
        let out = env.toolcap(&[
            "explain",
            "--personality",
            coder.to_str().unwrap(),
            "run_command",
            &call,
        ]);
        let verdict: serde_json::Value = serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", stderr(&out)));
        verdict["allowed"].as_bool().unwrap()
    };
    for refused in [
        &["push", "--force"][..],
        &["push", "-f"],
        &["push", "--force-with-lease"],
        &["push", "-fu", "origin", "main"],
        &["push", "-uf", "origin", "main"],
        &["push", "origin", "+main"],
        &["push", "origin", "+HEAD:main"],
        &["push", "--mirror"],
        &["push", "--delete", "origin", "main"],
        &["push", "-d", "origin", "main"],
        &["push", "origin", ":main"],
    ] {
        assert!(!allowed(refused), "{refused:?} was allowed");
    }
    for fine in [
        &["push", "origin", "main"][..],
        &["push", "-u", "origin", "feature"],
        &["status"],
        &["commit", "-m", "+1: fix"],
    ] {
        assert!(allowed(fine), "{fine:?} was refused");
    }
}

#[test]
fn demo_runs_and_its_state_persists() {
    let env = Env::new();
    let first = env.toolcap(&["demo"]);
    assert_eq!(
        code(&first),
        0,
        "{}{}",
        String::from_utf8_lossy(&first.stdout),
        stderr(&first)
    );
    let text = String::from_utf8_lossy(&first.stdout);
    assert!(text.contains("demo run #1"), "{text}");
    assert!(!text.contains("UNEXPECTED"), "{text}");
    assert!(text.contains("capsule: read a denied path"), "{text}");
    assert!(
        text.contains("BINARY_NOT_ALLOWED")
            && text.contains("HOST_NOT_ALLOWED")
            && text.contains("PATH_NOT_REACHABLE")
    );
    assert!(
        !text.contains("\x1b["),
        "no colour when stdout is not a terminal"
    );
    let second = env.toolcap(&["demo"]);
    assert!(
        String::from_utf8_lossy(&second.stdout).contains("demo run #2"),
        "state persisted across runs"
    );
    // The files it names are there to read when it says so: without --keep it says they went,
    // and how to keep them; with --keep they are there.
    let named = |text: &str, label: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(label))
            .map(|rest| PathBuf::from(rest.split(" (").next().unwrap_or(rest).trim()))
            .unwrap_or_else(|| panic!("no {label:?} line in {text}"))
    };
    let audit = named(&text, "audit log: ");
    assert!(!audit.exists(), "{audit:?}");
    assert!(
        text.contains("removed") && text.contains("toolcap demo --keep"),
        "{text}"
    );
    let kept = env.toolcap(&["demo", "--keep"]);
    let kept = String::from_utf8_lossy(&kept.stdout);
    for label in ["audit log: ", "personality: "] {
        let path = named(&kept, label);
        assert!(path.exists(), "{label}{path:?}");
    }
    let dir = named(&kept, "scratch directory kept: ");
    std::fs::remove_dir_all(dir).unwrap();
}

#[test]
fn help_for_every_subcommand() {
    let env = Env::new();
    for sub in [
        &["--help"][..],
        &["call", "--help"],
        &["explain", "--help"],
        &["validate", "--help"],
        &["manifest", "--help"],
        &["diff", "--help"],
        &["demo", "--help"],
    ] {
        let out = env.toolcap(sub);
        assert_eq!(code(&out), 0, "{sub:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage: toolcap"),
            "{sub:?}"
        );
    }
    let _ = &env.dir;
}

// guarantee: G-MAN-01
/// A manifest records the deny rules as written: a rule on `/proc/self/environ` used to be
/// recorded also as where it led when the manifest was made, `/proc/<this process>/environ`,
/// so two runs gave two manifests and `toolcap diff` between them reported the rule removed.
#[test]
fn a_manifest_is_the_same_in_every_run() {
    let env = Env::new();
    std::fs::write(
        env.root.join("self.toml"),
        format!(
            "id = \"self\"\ntoolset = [\"read_file\"]\n[fs_reach]\nread = [\"{}\"]\n\
             deny = [\"/proc/self/environ\"]\n",
            env.path("work")
        ),
    )
    .unwrap();
    let made = |name: &str| {
        let out = env.toolcap(&["manifest", "--personality", &env.path("self.toml")]);
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        std::fs::write(env.root.join(name), &out.stdout).unwrap();
        String::from_utf8(out.stdout).unwrap()
    };
    let (one, two) = (made("one.json"), made("two.json"));
    assert_eq!(one, two);
    assert!(one.contains("/proc/self/environ"), "{one}");
    let diff = env.toolcap(&["diff", &env.path("one.json"), &env.path("two.json")]);
    assert_eq!(code(&diff), 0, "{}", String::from_utf8_lossy(&diff.stdout));
}

/// What `toolcap manifest` writes, `toolcap diff` reads, however large the personality made it:
/// a personality within its own 1 MiB limit that allows thousands of hosts repeats them in the
/// effective access of each tool that may use them, and the manifest passes 1 MiB. Read back,
/// it is the same manifest (no widenings against itself) and a host added is a widening.
// guarantee: G-MAN-01
#[test]
fn a_manifest_past_a_mebibyte_is_read_back_by_diff() {
    let env = Env::new();
    let hosts = |extra: &str| {
        let mut hosts: Vec<String> = (0..40_000)
            .map(|i| format!("\"h{i}.example.com\""))
            .collect();
        hosts.extend((!extra.is_empty()).then(|| format!("\"{extra}\"")));
        hosts.join(", ")
    };
    for (name, extra) in [("few.toml", ""), ("more.toml", "added.example.org")] {
        let text = format!(
            "id = \"big\"\ntoolset = [\"fetch_url\", \"run_command\", \"read_file\"]\n[safety.network]\nallow = [{}]\n",
            hosts(extra)
        );
        assert!(text.len() < 1 << 20, "the personality is within its limit");
        std::fs::write(env.root.join(name), text).unwrap();
    }
    let few = env.toolcap(&["manifest", "--personality", &env.path("few.toml")]);
    assert_eq!(code(&few), 0, "{}", stderr(&few));
    assert!(few.stdout.len() > 1 << 20, "{} bytes", few.stdout.len());
    std::fs::write(env.root.join("few.json"), &few.stdout).unwrap();
    let more = env.toolcap(&["manifest", "--personality", &env.path("more.toml")]);
    std::fs::write(env.root.join("more.json"), &more.stdout).unwrap();
    let same = env.toolcap(&["diff", &env.path("few.json"), &env.path("few.json")]);
    assert_eq!(
        (code(&same), String::from_utf8_lossy(&same.stdout).trim()),
        (0, "no widenings"),
        "{}",
        stderr(&same)
    );
    let widened = env.toolcap(&["diff", &env.path("few.json"), &env.path("more.json")]);
    assert_eq!(code(&widened), 1, "{}", stderr(&widened));
    assert!(
        String::from_utf8_lossy(&widened.stdout).contains("added.example.org"),
        "{}",
        String::from_utf8_lossy(&widened.stdout)
    );
}

#[test]
fn manifest_and_diff() {
    let env = Env::new();
    let plain = env.toolcap(&["manifest"]);
    assert_eq!(code(&plain), 0, "{}", stderr(&plain));
    let v = stdout_json(&plain);
    assert_eq!(v["format"], "toolcap-manifest/1");
    assert_eq!(v["tools"].as_object().unwrap().len(), 10);
    assert!(v["tools"]["read_file"].get("effective").is_none());
    assert_eq!(
        env.toolcap(&["manifest"]).stdout,
        plain.stdout,
        "deterministic"
    );
    let committed =
        std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../manifest.json")).unwrap();
    assert_eq!(
        committed, plain.stdout,
        "the committed manifest.json is current"
    );

    std::fs::write(
        env.root.join("narrow.toml"),
        format!(
            "id = \"m\"\ntoolset = [\"read_file\"]\n[fs_reach]\nread = [\"{}\"]\n",
            env.path("work/out")
        ),
    )
    .unwrap();
    std::fs::write(
        env.root.join("wide.toml"),
        format!(
            "id = \"m\"\ntoolset = [\"read_file\", \"run_command\"]\n[fs_reach]\nread = [\"{}\"]\n",
            env.path("work")
        ),
    )
    .unwrap();
    let old = env.toolcap(&["manifest", "--personality", &env.path("narrow.toml")]);
    let new = env.toolcap(&["manifest", "--personality", &env.path("wide.toml")]);
    assert_eq!(
        stdout_json(&old)["tools"]["read_file"]["effective"]["fs_read"][0],
        env.path("work/out")
    );
    std::fs::write(env.root.join("old.json"), &old.stdout).unwrap();
    std::fs::write(env.root.join("new.json"), &new.stdout).unwrap();

    let same = env.toolcap(&["diff", &env.path("old.json"), &env.path("old.json")]);
    assert_eq!(
        (code(&same), String::from_utf8_lossy(&same.stdout).trim()),
        (0, "no widenings")
    );
    let narrowed = env.toolcap(&["diff", &env.path("new.json"), &env.path("old.json")]);
    assert_eq!(
        code(&narrowed),
        0,
        "narrowing is not widening: {}",
        String::from_utf8_lossy(&narrowed.stdout)
    );
    let widened = env.toolcap(&["diff", &env.path("old.json"), &env.path("new.json")]);
    assert_eq!(code(&widened), 1);
    let text = String::from_utf8_lossy(&widened.stdout).into_owned();
    assert!(
        text.contains("toolset.widened: admits run_command"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "fs.read.widened: read_file (effective): {}",
            env.path("work")
        )),
        "{text}"
    );
    let json = env.toolcap(&[
        "diff",
        "--json",
        &env.path("old.json"),
        &env.path("new.json"),
    ]);
    let list = stdout_json(&json);
    assert!(
        list.as_array()
            .unwrap()
            .iter()
            .any(|w| w["code"] == "toolset.widened")
    );

    let tampered = String::from_utf8(old.stdout.clone())
        .unwrap()
        .replace("\"m\"", "\"other\"");
    std::fs::write(env.root.join("tampered.json"), tampered).unwrap();
    let refused = env.toolcap(&["diff", &env.path("tampered.json"), &env.path("new.json")]);
    assert_eq!(code(&refused), 2);
    assert!(
        stderr(&refused).contains("does not match its sha256"),
        "{}",
        stderr(&refused)
    );
}

/// A personality whose writes under `work/out/releases` are escalated (`extra`: more lines of
/// its `[escalate]`); its path.
/// `toolcap call --ask write_file ARGS` under `personality`, in `work/out`, with `stdin`.
fn asking(
    env: &Env,
    personality: &str,
    args: &str,
    stdin: std::process::Stdio,
) -> std::process::Child {
    env.spawn(
        &[
            "call",
            "--personality",
            personality,
            "--workdir",
            "out",
            "--ask",
            "write_file",
            args,
        ],
        stdin,
    )
}

fn escalating(env: &Env, extra: &str) -> String {
    std::fs::write(
        env.root.join("esc.toml"),
        format!(
            "id = \"esc\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}/out\"]\n[escalate]\nwrite_paths = [\"{w}/out/releases\"]\n{extra}",
            w = env.path("work")
        ),
    )
    .unwrap();
    std::fs::create_dir_all(env.root.join("work/out/releases")).unwrap();
    env.path("esc.toml")
}

#[test]
fn escalation_asks_on_the_terminal_and_is_refused_headless() {
    use std::io::Write;
    let env = Env::new();
    let p = escalating(&env, "");
    // The refused calls carry a credential-like argument, to show it is masked in the prompt;
    // write_file itself would refuse it as unknown, so the approved call does without.
    let with_answer = |answer: &str, ask: bool| {
        let mut args = vec!["call", "--personality", p.as_str(), "--workdir", "out"];
        if ask {
            args.push("--ask");
        }
        let call_args = if answer.starts_with('y') && ask {
            r#"{"path": "releases/v1.txt", "content": "v1"}"#
        } else {
            r#"{"path": "releases/v1.txt", "content": "v1", "token": "sk-live-x"}"#
        };
        args.extend(["write_file", call_args]);
        let mut child = env.spawn(&args, std::process::Stdio::piped());
        child
            .stdin
            .take()
            .unwrap()
            .write_all(answer.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let headless = with_answer("y\n", false);
    assert_eq!(code(&headless), 1);
    assert_eq!(
        stdout_json(&headless)["error"],
        format!(
            "ESCALATION_REFUSED: fs_reach.write {}: no approval handler is configured (headless)",
            env.path("work/out/releases/v1.txt")
        )
    );
    let refused = with_answer("n\n", true);
    assert_eq!(code(&refused), 1);
    assert!(
        stdout_json(&refused)["error"]
            .as_str()
            .unwrap()
            .ends_with("the approver denied it")
    );
    let prompt = stderr(&refused);
    assert!(
        prompt.contains("needs approval for") && prompt.contains("approve? [y/N]"),
        "{prompt}"
    );
    assert!(
        !prompt.contains("sk-live-x") && prompt.contains("\"token\":\"***\""),
        "credentials masked: {prompt}"
    );
    assert!(!env.root.join("work/out/releases/v1.txt").exists());
    let approved = with_answer("y\n", true);
    assert_eq!(code(&approved), 0, "{}", stderr(&approved));
    assert_eq!(
        std::fs::read_to_string(env.root.join("work/out/releases/v1.txt")).unwrap(),
        "v1"
    );
}

/// An exact-file entry through the command line, in process mode, in the capsule and for a
/// confined child: that file is read; its sibling is refused by the argument gate and, with
/// the gate off, by the kernel (docs/semantics.md, "Paths").
// guarantee: G-FS-06
#[test]
fn an_exact_file_entry_reaches_that_file_for_tools_and_children() {
    let env = Env::new();
    std::fs::write(env.root.join("work/sibling.txt"), "sibling-canary").unwrap();
    let notes = env.path("work/notes.md");
    let sibling = env.path("work/sibling.txt");
    std::fs::write(
        env.root.join("file.toml"),
        format!(
            "id = \"file\"\n[fs_reach]\nread = [\"{notes}\"]\n[safety.process]\nallow = [\"cat\"]\n\
             [constraints.run_command]\npath_gate = false\n"
        ),
    )
    .unwrap();
    let p = env.path("file.toml");
    for mode in [&[][..], &["--capsule"][..]] {
        let mut args = vec!["call"];
        args.extend_from_slice(mode);
        args.extend_from_slice(&["--personality", &p, "read_file"]);
        let read = |path: &str| {
            let mut a = args.clone();
            let json = serde_json::json!({"path": path}).to_string();
            a.push(&json);
            stdout_json(&env.toolcap(&a))
        };
        assert_eq!(read(&notes)["value"], "hello notes", "{mode:?}");
        let refused = read(&sibling);
        assert_eq!(refused["ok"], false, "{mode:?}: {refused}");
        assert!(!refused.to_string().contains("sibling-canary"));
    }
    let cat = |path: &str| {
        let json = serde_json::json!({"binary": "cat", "args": [path]}).to_string();
        stdout_json(&env.toolcap(&["call", "--personality", &p, "run_command", &json]))
    };
    let ok = cat(&notes);
    assert_eq!(ok["value"]["stdout"], "hello notes", "{ok}");
    let kernel = cat(&sibling);
    assert_ne!(kernel["value"]["exit_code"], 0, "{kernel}");
    assert!(!kernel.to_string().contains("sibling-canary"), "{kernel}");
}

// guarantee: G-REG-12
#[test]
fn call_with_a_tool_filter_refuses_what_it_leaves_out_and_audits_it() {
    let env = Env::new();
    let p = env.path("p.toml");
    let audit = env.path("audit.jsonl");
    let filtered = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--audit",
        &audit,
        "--allowed-tools",
        "list_*,write_*",
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&filtered), 1, "{}", stderr(&filtered));
    assert_eq!(
        stdout_json(&filtered),
        serde_json::json!({"ok": false, "code": "denied",
            "error": "TOOL_FILTERED_OUT: read_file is not matched by allowedTools [\"list_*\", \"write_*\"]"})
    );
    let record = std::fs::read_to_string(&audit).unwrap();
    assert!(
        record.contains(r#""denial_code":"TOOL_FILTERED_OUT""#)
            && record.contains(r#""tool_filter":[{"allowedTools":["list_*","write_*"]}]"#),
        "{record}"
    );
    let allowed = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--allowed-tools",
        "read_*",
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&allowed), 0, "{}", stderr(&allowed));
    // Hostile flags: a usage error (exit 2, one line), never a filter that lets all through.
    for flags in [
        &["--allowed-tools", "read file"][..],
        &["--allowed-tools", ""],
        &["--allowed-mcp-tools", "github"],
        &["--allowed-mcp-tools", "bad server=x"],
        &["--allowed-mcp-servers", "a/b"],
    ] {
        let mut args = vec!["call", "--personality", &p];
        args.extend_from_slice(flags);
        args.extend_from_slice(&["read_file", r#"{"path": "notes.md"}"#]);
        let out = env.toolcap(&args);
        assert_eq!(code(&out), 2, "{flags:?}: {}", stderr(&out));
        assert!(out.stdout.is_empty(), "{flags:?}");
        assert_eq!(
            stderr(&out).trim().lines().count(),
            1,
            "{flags:?}: {}",
            stderr(&out)
        );
    }
}

// guarantee: G-ATT-01
#[test]
fn attachments_through_call_in_process_and_in_the_capsule() {
    let env = Env::new();
    let dir = env.root.join("private-uploads-dir");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("note.txt"), "hello attached").unwrap();
    std::fs::write(dir.join("cat.png"), b"\x89PNG\r\n").unwrap();
    std::fs::write(dir.join("blob.bin"), [0u8, 1, 2]).unwrap();
    let p = env.root.join("att.toml");
    std::fs::write(
        &p,
        "id = \"att\"\ntoolset = [\"read_attachment\"]\n[attachments]\nkinds = [\"text/*\", \"image/png\"]\n",
    )
    .unwrap();
    let p = p.display().to_string();
    let file = |n: &str| dir.join(n).display().to_string();
    let (note, cat, blob) = (
        file("note.txt"),
        file("cat.png"),
        format!("{}:application/octet-stream", file("blob.bin")),
    );
    let audit = env.path("att-audit.jsonl");
    for capsule in [false, true] {
        let mut base = vec!["call", "--personality", &p, "--audit", &audit];
        if capsule {
            base.push("--capsule");
        }
        let run = |extra: &[&str]| {
            let mut args = base.clone();
            args.extend_from_slice(extra);
            env.toolcap(&args)
        };
        let listed = run(&[
            "--attach",
            &note,
            "--attach",
            &cat,
            "--attach",
            &blob,
            "read_attachment",
            "{}",
        ]);
        assert_eq!(code(&listed), 0, "capsule={capsule}: {}", stderr(&listed));
        assert_eq!(
            stdout_json(&listed)["value"],
            serde_json::json!([
                {"id": "att-1", "kind": "text/plain", "name": "note.txt", "size": 14},
                {"id": "att-2", "kind": "image/png", "name": "cat.png", "size": 6}
            ]),
            "capsule={capsule}"
        );
        assert!(
            !String::from_utf8_lossy(&listed.stdout).contains("private-uploads-dir"),
            "no host path is handed out"
        );
        let read = run(&[
            "--attach",
            &note,
            "read_attachment",
            r#"{"id": "att-1", "offset": 6}"#,
        ]);
        assert_eq!(
            stdout_json(&read)["value"]["text"],
            "attached",
            "capsule={capsule}"
        );
        let png = run(&[
            "--attach",
            &note,
            "--attach",
            &cat,
            "read_attachment",
            r#"{"id": "att-2"}"#,
        ]);
        assert_eq!(stdout_json(&png)["value"]["base64"], "iVBORw0K");
        // A kind the personality leaves out is not there at all; neither is another call's.
        for (attach, id) in [(&blob, "att-1"), (&note, "att-2")] {
            let hidden = run(&[
                "--attach",
                attach,
                "read_attachment",
                &format!(r#"{{"id": "{id}"}}"#),
            ]);
            assert_eq!(code(&hidden), 1);
            assert_eq!(
                stdout_json(&hidden)["code"],
                "not_found",
                "capsule={capsule}"
            );
        }
        let nothing = run(&["read_attachment", "{}"]);
        assert_eq!(stdout_json(&nothing)["value"], serde_json::json!([]));
    }
    let record = std::fs::read_to_string(&audit).unwrap();
    assert!(
        record.contains(r#""attachments":["att-1","att-2"]"#),
        "{record}"
    );
    // Hostile flags: a usage error, nothing runs.
    for attach in [
        "/nonexistent/file.txt".to_owned(),
        format!("{note}:image/"),
        format!("{note}:text/plain plain"),
    ] {
        let out = env.toolcap(&[
            "call",
            "--personality",
            &p,
            "--attach",
            &attach,
            "read_attachment",
            "{}",
        ]);
        assert_eq!(code(&out), 2, "{attach}: {}", stderr(&out));
        assert!(out.stdout.is_empty());
    }
}

/// Every file the command line parses is read only up to its limit: an endless file
/// (`/dev/zero` behind a name with the right extension) is refused with one line and exit 2
/// instead of filling memory, as a personality, an Ethos file, a manifest, a guard
/// configuration, a client's configuration, a token file and an attachment.
#[test]
fn endless_files_are_refused_not_read_into_memory() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let p = env.path("p.toml");
    let endless = |name: &str| {
        let path = env.root.join(name);
        symlink("/dev/zero", &path).unwrap();
        path.display().to_string()
    };
    let ethos = env.root.join("ethos");
    std::fs::create_dir(&ethos).unwrap();
    symlink("/dev/zero", ethos.join("config.yaml")).unwrap();
    // A client's configuration is not read through a link at all; it is named as it is.
    let (zero_toml, zero_guard, zero_manifest, zero_token, zero_bin) = (
        endless("zero.toml"),
        endless("guard.toml"),
        endless("manifest.json"),
        endless("token"),
        endless("zero.bin"),
    );
    let ethos = ethos.display().to_string();
    let cases: Vec<Vec<&str>> = vec![
        vec!["validate", "--personality", &zero_toml],
        vec!["validate", "--personality", &ethos],
        vec!["diff", &zero_manifest, &zero_manifest],
        vec![
            "mcp",
            "config",
            "--client",
            "cursor",
            "--personality",
            &p,
            "--guard-config",
            &zero_guard,
        ],
        vec![
            "mcp",
            "serve",
            "--personality",
            &p,
            "--http",
            "0.0.0.0:0",
            "--allow-remote",
            "--token-file",
            &zero_token,
        ],
        vec![
            "call",
            "--personality",
            &p,
            "--attach",
            &zero_bin,
            "read_attachment",
            "{}",
        ],
    ];
    for args in cases {
        let out = env.toolcap(&args);
        let said = stderr(&out);
        assert_eq!(code(&out), 2, "{args:?}: {said}");
        assert!(
            said.contains("larger than") && said.lines().count() == 1,
            "{args:?}: {said}"
        );
    }
    // A client's configuration that is a device is not read at all: it is not a file the
    // merge could replace (`mcp_config_write_refuses_what_is_not_a_regular_file`).
    let out = env.toolcap(&[
        "mcp",
        "config",
        "--client",
        "cursor",
        "--personality",
        &p,
        "--write",
        "--file",
        "/dev/zero",
    ]);
    let said = stderr(&out);
    assert_eq!(code(&out), 2, "{said}");
    assert!(
        said.contains("a character device") && said.lines().count() == 1,
        "{said}"
    );
}

/// `--ask` with no answer in time: the refusal is printed at the personality's timeout and the
/// process ends with it, though stdin is still open (a terminal nobody answers). An answer that
/// never ends its line (`/dev/zero`) is read only so far and refuses.
#[test]
fn an_unanswered_prompt_ends_with_its_timeout_and_an_endless_answer_refuses() {
    let env = Env::new();
    let p = escalating(&env, "timeout_seconds = 1\n");
    let ask = |stdin: std::process::Stdio| {
        let args = [
            "call",
            "--personality",
            &p,
            "--workdir",
            "out",
            "--ask",
            "write_file",
            r#"{"path": "releases/v1.txt", "content": "v1"}"#,
        ];
        env.spawn(&args, stdin)
    };

    // Stdin held open and never written: the process ends with the timeout.
    let started = std::time::Instant::now();
    let mut child = ask(std::process::Stdio::piped());
    let held = child.stdin.take();
    let ended = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if started.elapsed() > std::time::Duration::from_secs(20) {
            let _ = child.kill();
            break None;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    let out = child.wait_with_output().unwrap();
    drop(held);
    assert!(ended.is_some(), "still running 20 s after a 1 s timeout");
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stdout_json(&out)["error"]
            .as_str()
            .unwrap()
            .ends_with("no answer within 1s"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );

    // An answer with no end: its first bytes are the answer (not "y"), read at once, and the
    // approver refuses (before, the whole of /dev/zero was read for a line's end).
    let out = ask(std::fs::File::open("/dev/zero").unwrap().into())
        .wait_with_output()
        .unwrap();
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stdout_json(&out)["error"]
            .as_str()
            .unwrap()
            .ends_with("the approver denied it"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(!env.root.join("work/out/releases/v1.txt").exists());
}

// guarantee: G-MCP-02
/// What an agent puts in a call cannot dress up the approval prompt: a path with a terminal
/// escape sequence, a newline, a bidirectional override and characters a terminal draws as
/// nothing (Unicode tags spelling words a model reads, a soft hyphen, a variation selector, a
/// Hangul filler) is shown with those characters escaped, on the one line of its subject, and
/// the answer is still asked for.
#[test]
fn an_approval_prompt_shows_control_characters_escaped() {
    let env = Env::new();
    let p = escalating(&env, "");
    let hidden = [
        "\u{e0049}\u{e0067}\u{e006e}",
        "\u{ad}",
        "\u{fe0f}",
        "\u{3164}",
    ];
    let path = format!(
        "releases/a\u{1b}[2J\u{1b}[1;1H.txt\n  fs_reach.write /tmp/nothing-to-see\u{202e}txt.exe{}",
        hidden.concat()
    );
    let args = serde_json::json!({"path": path, "content": "x"}).to_string();
    let mut child = asking(&env, &p, &args, std::process::Stdio::piped());
    use std::io::Write as _;
    child.stdin.take().unwrap().write_all(b"n\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let prompt = stderr(&out);
    assert!(
        !prompt.contains('\u{1b}'),
        "a raw escape reached the terminal: {prompt:?}"
    );
    assert!(
        !prompt.contains('\u{202e}'),
        "a raw override reached the terminal: {prompt:?}"
    );
    let subject = prompt
        .lines()
        .find(|l| l.trim_start().starts_with("fs_reach.write"))
        .unwrap_or_else(|| panic!("{prompt:?}"));
    assert!(
        subject.contains("\\u{1b}[2J")
            && subject.contains("\\n  fs_reach.write /tmp/nothing-to-see\\u{202e}txt.exe")
            && subject.contains("\\u{e0049}\\u{e0067}\\u{e006e}\\u{ad}\\u{fe0f}\\u{3164}"),
        "{subject:?}"
    );
    for c in hidden.concat().chars() {
        assert!(
            !prompt.contains(c),
            "a raw {c:?} reached the terminal: {prompt:?}"
        );
    }
    assert_eq!(
        prompt
            .lines()
            .filter(|l| l.trim_start().starts_with("fs_reach.write"))
            .count(),
        1,
        "the subject stays on its line: {prompt:?}"
    );
    assert_eq!(code(&out), 1);
}

/// The default store shared by processes: a running `toolcap mcp serve` (an MCP client's
/// server, holding nothing between calls) leaves `toolcap call`, a second server and parallel
/// key-value writers working on the same file (docs/semantics.md, "Storage scopes").
// guarantee: G-KV-03
#[test]
fn processes_share_the_default_store() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let p = env.path("p.toml");
    let initialize = concat!(
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","#,
        r#""capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        "\n"
    );
    let serve = || {
        let mut server = env.spawn(
            &["mcp", "serve", "--personality", &p],
            std::process::Stdio::piped(),
        );
        server
            .stdin
            .as_mut()
            .unwrap()
            .write_all(initialize.as_bytes())
            .unwrap();
        let mut line = String::new();
        BufReader::new(server.stdout.as_mut().unwrap())
            .read_line(&mut line)
            .unwrap();
        (server, line)
    };
    let (mut first, answer) = serve();
    assert!(answer.contains("\"result\""), "the first server: {answer}");

    // Another tool, while the server runs.
    let read = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&read), 0, "{}", String::from_utf8_lossy(&read.stdout));
    // A second server of the same user (a second client), on the same default store.
    let (mut second, answer) = serve();
    assert!(answer.contains("\"result\""), "the second server: {answer}");

    // Writers in parallel processes, while both servers run: every write lands.
    std::thread::scope(|scope| {
        for w in 0..3 {
            let (env, p) = (&env, &p);
            scope.spawn(move || {
                for i in 0..8 {
                    let set = env.toolcap(&[
                        "call",
                        "--personality",
                        p,
                        "kv_set",
                        &format!(r#"{{"key": "w{w}-{i}", "value": {i}}}"#),
                    ]);
                    assert_eq!(
                        code(&set),
                        0,
                        "writer {w}, write {i}: {}",
                        String::from_utf8_lossy(&set.stdout)
                    );
                }
            });
        }
    });
    let list = env.toolcap(&["call", "--personality", &p, "kv_list", "{}"]);
    let keys = stdout_json(&list)["value"].as_array().unwrap().len();
    assert_eq!(keys, 24, "{}", String::from_utf8_lossy(&list.stdout));
    for server in [&mut first, &mut second] {
        server.kill().unwrap();
        server.wait().unwrap();
    }
}

/// `--session` names a storage namespace and shows in every audit event: an empty one, one with
/// a control character or one over 256 bytes is a usage error, and nothing runs.
#[test]
fn session_ids_are_checked() {
    let env = Env::new();
    let p = env.path("p.toml");
    let long = "s".repeat(257);
    for (session, expected) in [
        ("", "cannot be empty"),
        ("a\nb", "control characters"),
        ("a\u{1b}[2J", "control characters"),
        (long.as_str(), "at most 256 bytes"),
    ] {
        let out = env.toolcap(&[
            "call",
            "--personality",
            &p,
            "--session",
            session,
            "kv_set",
            r#"{"key": "k", "value": 1}"#,
        ]);
        assert_eq!(code(&out), 2, "{session:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(expected),
            "{session:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty());
    }
    let ok = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--session",
        "agent-7 ü",
        "kv_set",
        r#"{"key": "k", "value": 1}"#,
    ]);
    assert_eq!(code(&ok), 0, "{}", stderr(&ok));
}

// guarantee: G-REG-08
/// Processes share an audit file: a line torn by a writer killed mid-line while another process
/// keeps the file open is trimmed before that process appends, so its events are not glued to
/// the fragment; and parallel `toolcap call`s appending to one file leave only whole lines
/// (docs/policy.md, "Audit").
#[test]
fn an_audit_file_shared_by_processes_stays_whole_lines() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let p = env.path("p.toml");
    let audit = env.path("shared-audit.jsonl");
    let mut server = env.spawn(
        &["mcp", "serve", "--personality", &p, "--audit", &audit],
        std::process::Stdio::piped(),
    );
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    assert!(lines.next().unwrap().unwrap().contains("\"id\":1"));
    // Another writer of the file, killed in the middle of a line.
    std::fs::OpenOptions::new()
        .append(true)
        .open(&audit)
        .unwrap()
        .write_all(br#"{"timestamp_ms":1795789424397,"event":"tool_ca"#)
        .unwrap();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{{"name":"read_file","arguments":{{"path":"notes.md"}}}}}}"#
    )
    .unwrap();
    assert!(lines.next().unwrap().unwrap().contains("hello notes"));
    // Parallel one-shot writers of the same file.
    std::thread::scope(|scope| {
        for _ in 0..4 {
            scope.spawn(|| {
                for _ in 0..5 {
                    let out = env.toolcap(&[
                        "call",
                        "--personality",
                        &p,
                        "--store",
                        &env.path("audit-test.redb"),
                        "--audit",
                        &audit,
                        "read_file",
                        r#"{"path": "notes.md"}"#,
                    ]);
                    assert_eq!(code(&out), 0, "{}", stderr(&out));
                }
            });
        }
    });
    drop(stdin);
    server.wait().unwrap();
    let record = std::fs::read_to_string(&audit).unwrap();
    assert!(record.ends_with('\n'));
    let events: Vec<Value> = record
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: a torn line {line:?}"))
        })
        .collect();
    let completed = events
        .iter()
        .filter(|e| e["event"] == "tool_completed" && e["tool"] == "read_file")
        .count();
    assert_eq!(completed, 21, "{record}");
}

/// `--audit` may name a stream rather than a file (`/dev/stderr`, a FIFO read by a log
/// shipper): its events are written there; there is no tail to trim and nothing to sync, where
/// the sync of a pipe failed and every call was refused as not auditable.
#[test]
fn audit_events_can_go_to_a_stream() {
    let env = Env::new();
    let out = env.toolcap(&[
        "call",
        "--personality",
        &env.path("p.toml"),
        "--store",
        &env.path("stream.redb"),
        "--audit",
        "/dev/stderr",
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let events: Vec<Value> = stderr(&out)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let kinds: Vec<&str> = events.iter().filter_map(|e| e["event"].as_str()).collect();
    assert_eq!(kinds, ["tool_called", "tool_completed"]);
}

/// An audit path another account could have planted in a shared directory (`/tmp`) is refused
/// before anything runs, what it names untouched: a symbolic link of another user's (events
/// would be appended to, and a torn last line trimmed from, whatever file it names: the user's
/// `~/.bashrc`, say), and a file or FIFO owned by another user (the events, arguments and all,
/// would be theirs to read). The user's own links and root's are followed: `/dev/stderr`, also
/// when stderr is a file, and a link of the user's own to a log file.
// guarantee: G-REG-08
#[test]
fn an_audit_path_planted_by_another_account_is_refused() {
    use std::os::unix::fs::symlink;
    let env = Env::new();
    let call = |audit: &Path| {
        env.toolcap(&[
            "call",
            "--personality",
            &env.path("p.toml"),
            "--store",
            &env.path("planted.redb"),
            "--audit",
            audit.to_str().unwrap(),
            "read_file",
            r#"{"path": "notes.md"}"#,
        ])
    };

    // The user's own: a file, a link to a stream, a device, their own link to their own file,
    // and /dev/stderr when stderr is a file.
    let own = env.root.join("own.jsonl");
    assert_eq!(code(&call(&own)), 0);
    assert_eq!(std::fs::read_to_string(&own).unwrap().lines().count(), 2);
    let to_null = env.root.join("to-null");
    symlink("/dev/null", &to_null).unwrap();
    let own_link = env.root.join("own-link.jsonl");
    symlink(&own, &own_link).unwrap();
    for usable in [
        Path::new("/dev/stderr"),
        Path::new("/dev/null"),
        to_null.as_path(),
        own_link.as_path(),
    ] {
        let out = call(usable);
        assert_eq!(code(&out), 0, "{usable:?}: {}", stderr(&out));
    }
    assert_eq!(std::fs::read_to_string(&own).unwrap().lines().count(), 4);
    let log = env.root.join("stderr.log");
    let out = Command::new(env!("CARGO_BIN_EXE_toolcap"))
        .args([
            "call",
            "--personality",
            &env.path("p.toml"),
            "--store",
            &env.path("planted.redb"),
            "--audit",
            "/dev/stderr",
            "read_file",
            r#"{"path": "notes.md"}"#,
        ])
        .env("XDG_DATA_HOME", env.root.join("data"))
        .current_dir(env.root.join("work"))
        .stderr(std::fs::File::create(&log).unwrap())
        .output()
        .unwrap();
    assert_eq!(code(&out), 0, "{}", std::fs::read_to_string(&log).unwrap());
    assert_eq!(std::fs::read_to_string(&log).unwrap().lines().count(), 2);

    // A file of the user's in a directory inside one anyone may write without the sticky bit:
    // whoever can write the outer one can rename or delete the record. Refused, nothing made.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let open = env.root.join("shared");
        std::fs::create_dir_all(open.join("me")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let exposed = open.join("me/audit.jsonl");
        let out = call(&exposed);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("lies in {}", open.display())),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "the call ran");
        assert!(!exposed.exists(), "nothing made there");
        std::fs::write(&exposed, "").unwrap();
        assert_eq!(code(&call(&exposed)), 2, "an existing file there too");

        // The user's own file that anyone may write: whoever can write it can forge events or
        // truncate the record. Refused, the file left as it was.
        // Its last line has no end, so a trim before the refusal would show.
        let forgeable = env.root.join("forgeable.jsonl");
        std::fs::write(&forgeable, "{\"timestamp_ms\":17").unwrap();
        std::fs::set_permissions(&forgeable, std::fs::Permissions::from_mode(0o666)).unwrap();
        let out = call(&forgeable);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("has mode 666: other users can change it")
                && stderr(&out).contains("chmod o-w"),
            "{}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "the call ran");
        assert_eq!(
            std::fs::read_to_string(&forgeable).unwrap(),
            "{\"timestamp_ms\":17"
        );
        std::fs::set_permissions(&forgeable, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(code(&call(&forgeable)), 0);
    }

    // Another user's (needs root to arrange; CI runs as root): their link to the victim's file,
    // whose last line has no end (so a trim would cut it), their file and their FIFO.
    let victim = env.root.join("bashrc");
    std::fs::write(&victim, "export A=1\nalias ll='ls -l'").unwrap();
    let link = env.root.join("audit-link.jsonl");
    symlink(&victim, &link).unwrap();
    let theirs = env.root.join("theirs.jsonl");
    std::fs::write(&theirs, "").unwrap();
    let fifo = env.root.join("theirs.fifo");
    mkfifo(&fifo);
    if given_to_nobody(&link, true)
        && given_to_nobody(&theirs, false)
        && given_to_nobody(&fifo, false)
    {
        for (planted, said) in [
            (&link, "symbolic link of another user"),
            (&theirs, "owned by another user"),
            (&fifo, "owned by another user"),
        ] {
            let out = call(planted);
            assert_eq!(code(&out), 2, "{planted:?}: {}", stderr(&out));
            assert!(stderr(&out).contains(said), "{planted:?}: {}", stderr(&out));
            assert!(out.stdout.is_empty(), "{planted:?}: the call ran");
        }
        assert_eq!(
            std::fs::read_to_string(&victim).unwrap(),
            "export A=1\nalias ll='ls -l'"
        );
        assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "");
    }
}

/// A capsule worker is the running program re-executed, not whatever file its path names now:
/// upgrading toolcap (`cargo install` replaces the file) under a running `toolcap mcp serve
/// --capsule` leaves its new workers the same program as the host, where they were the new
/// file, which may not even speak the same protocol (docs/isolation-model.md).
#[test]
fn capsule_workers_are_the_running_program_after_an_upgrade() {
    use std::io::{BufRead, BufReader, Write};
    let env = Env::new();
    let installed = env.root.join("bin/toolcap");
    std::fs::create_dir_all(installed.parent().unwrap()).unwrap();
    copy_program(Path::new(env!("CARGO_BIN_EXE_toolcap")), &installed);
    let mut server = Command::new(&installed)
        .args([
            "mcp",
            "serve",
            "--capsule",
            "--personality",
            &env.path("p.toml"),
        ])
        .args(["--store", &env.path("upgrade.redb")])
        .current_dir(env.root.join("work"))
        .env("HOME", &env.root)
        .env_remove("RUST_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","id":0,"method":"initialize","params":{{"protocolVersion":"2025-06-18","capabilities":{{}},"clientInfo":{{"name":"t","version":"1"}}}}}}"#
    )
    .unwrap();
    assert!(lines.next().unwrap().unwrap().contains("\"id\":0"));
    writeln!(
        stdin,
        r#"{{"jsonrpc":"2.0","method":"notifications/initialized"}}"#
    )
    .unwrap();
    let mut call = |id: u32, tool: &str, args: &str| -> Value {
        writeln!(
            stdin,
            r#"{{"jsonrpc":"2.0","id":{id},"method":"tools/call","params":{{"name":"{tool}","arguments":{args}}}}}"#
        )
        .unwrap();
        serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap()
    };
    let before = call(1, "read_file", r#"{"path": "notes.md"}"#);
    assert_eq!(before["result"]["isError"], false, "{before}");
    // The upgrade: a new file renamed over the old one (here a program that is no worker).
    let new = env.root.join("bin/toolcap.new");
    std::fs::copy("/bin/true", &new).unwrap();
    std::fs::rename(&new, &installed).unwrap();
    // A tool with no warm worker yet: a new worker starts.
    let after = call(2, "list_dir", r#"{"path": "."}"#);
    assert_eq!(after["result"]["isError"], false, "{after}");
    assert!(after.to_string().contains("notes.md"), "{after}");
    drop(stdin);
    assert!(server.wait().unwrap().success());
}

/// A text file that starts with a UTF-8 byte-order mark (what Windows editors write) means
/// what it means without it: a personality in each format, and a client's configuration that
/// `mcp config --write` merges into.
#[test]
fn a_byte_order_mark_at_the_start_of_a_file_is_read_past() {
    let env = Env::new();
    let work = env.path("work");
    let bom = "\u{feff}";
    for (name, text) in [
        (
            "bom.toml",
            format!(
                "{bom}id = \"bom\"\r\ntoolset = [\"read_file\"]\r\n[fs_reach]\r\nread = [\"{work}\"]\r\n"
            ),
        ),
        (
            "bom.yaml",
            format!(
                "{bom}id: bom\r\ntoolset: [read_file]\r\nfs_reach:\r\n  read: [\"{work}\"]\r\n"
            ),
        ),
        (
            "bom.json",
            format!(
                "{bom}{{\"id\": \"bom\", \"toolset\": [\"read_file\"], \"fs_reach\": {{\"read\": [\"{work}\"]}}}}"
            ),
        ),
    ] {
        std::fs::write(env.root.join(name), text).unwrap();
        let out = env.toolcap(&["validate", "--personality", &env.path(name)]);
        assert_eq!(
            code(&out),
            0,
            "{name}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            stderr(&out)
        );
    }
    let config = env.root.join("claude_desktop_config.json");
    std::fs::write(
        &config,
        format!("{bom}{{\"mcpServers\": {{\"other\": {{\"command\": \"x\"}}}}}}"),
    )
    .unwrap();
    let out = env.toolcap(&[
        "mcp",
        "config",
        "--client",
        "claude-desktop",
        "--personality",
        &env.path("bom.toml"),
        "--write",
        "--file",
        config.to_str().unwrap(),
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&config).unwrap()).unwrap();
    assert_eq!(merged["mcpServers"]["other"]["command"], "x");
    assert!(merged["mcpServers"]["toolcap"].is_object(), "{merged}");
}

/// Gives `path` (the link itself when `link`) to user and group 65534, as another account's; false
/// when this user may not (only root may), and the caller's check of another account is skipped.
fn given_to_nobody(path: &Path, link: bool) -> bool {
    let mut chown = Command::new("chown");
    if link {
        chown.arg("-h");
    }
    chown
        .arg("65534:65534")
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// Waits at most 20 s for `child` to end.
fn ended_within(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let started = std::time::Instant::now();
    while started.elapsed() < std::time::Duration::from_secs(20) {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let _ = child.kill();
    None
}

/// Whether a process whose command line is `command` (its words joined by spaces) is running.
fn running(command: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
        std::fs::read(e.path().join("cmdline")).is_ok_and(|c| {
            String::from_utf8_lossy(&c)
                .trim_end_matches('\0')
                .replace('\0', " ")
                == command
        })
    })
}

/// An error that quotes what a file said is written without its control characters raw: a
/// personality or a guard configuration reviewed with `toolcap validate` in a terminal (a
/// teammate's, a downloaded one, one a change proposes) can carry terminal escapes, a carriage
/// return or a line break in a key or a value, and the parser's message quotes them. Each is
/// shown escaped, a line break begins no line of its own (what follows it is indented, as a
/// parser's excerpt of the file is), and the exit code is still 2.
// guarantee: G-CLI-06
#[test]
fn an_error_quoting_a_crafted_file_is_shown_with_its_control_characters_escaped() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    let files = [
        (
            "key.toml",
            "id = \"p\"\n\"k\\u001b]0;owned\\u0007\\rok: nothing to report\\nok\" = 1\n",
        ),
        (
            "key.json",
            "{\"id\": \"p\", \"k\\u001b]0;owned\\u0007\\rok: nothing to report\\nok\": 1}",
        ),
        (
            "key.yaml",
            "id: p\n\"k\\e]0;owned\\a\\rok: nothing to report\\nok\": 1\n",
        ),
        (
            "value.toml",
            "id = \"p\"\ntoolset = [\"x\\u001b]0;owned\\u0007\\rok: nothing to report\\nok\"]\n",
        ),
    ];
    for (name, text) in files {
        let path = env.path(name);
        std::fs::write(&path, text).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let refused = env.toolcap(&["validate", "--personality", &path]);
        assert_eq!(refused.status.code(), Some(2), "{name}: {refused:?}");
        let said = &refused.stderr;
        assert!(
            !said.iter().any(|&b| b == 0x1b || b == 0x07 || b == b'\r'),
            "{name}: {:?}",
            String::from_utf8_lossy(said)
        );
        let said = String::from_utf8_lossy(said);
        assert!(said.starts_with("toolcap: "), "{name}: {said}");
        assert!(
            said.lines().skip(1).all(|line| line.starts_with("  ")),
            "{name}: a line of the file's own: {said}"
        );
        assert!(said.contains("\\u{1b}]0;owned\\u{7}"), "{name}: {said}");
    }
}

/// A command line the parser refuses is answered without writing what it was given raw: an
/// agent or a script that builds `toolcap` command lines can put terminal escapes in an
/// argument (a session id, a server name, an unknown flag), and the parser's message quotes it.
/// Control characters are shown escaped; the answer is still the parser's, with its exit code 2.
// guarantee: G-CLI-06
#[test]
fn a_refused_command_line_is_shown_with_its_control_characters_escaped() {
    let env = Env::new();
    let p = env.path("p.toml");
    std::fs::write(&p, "id = \"p\"\n").unwrap();
    let clear = "a\u{1b}[2J\u{1b}]0;owned\u{7}b";
    for args in [
        vec![
            "call",
            "--session",
            clear,
            "--personality",
            &p,
            "read_file",
            "{}",
        ],
        vec![
            "mcp",
            "config",
            "--client",
            "cursor",
            "--personality",
            &p,
            "--name",
            clear,
        ],
        vec!["call", "--personality", &p, "read_file", "{}", clear],
        vec![clear],
    ] {
        let refused = env.toolcap(&args);
        assert_eq!(refused.status.code(), Some(2), "{args:?}: {refused:?}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            !said.contains('\u{1b}') && !said.contains('\u{7}'),
            "{args:?}: {said:?}"
        );
        assert!(said.contains("a\\u{1b}[2J"), "{args:?}: {said}");
    }
    // Help still reads as it is written.
    let help = env.toolcap(&["call", "--help"]);
    assert_eq!(help.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&help.stdout).contains("--session"));
}

/// A `toolcap call` stopped from the terminal (`SIGINT`) or by a service manager (`SIGTERM`),
/// and an MCP server stopped by its client (`SIGTERM`), stop their calls' children and remove
/// the children's scratch homes before they end, with 128 + the signal's number. Before, the
/// process died where it stood: the children went (they die with their parent), but every
/// `HOME` a child had written stayed in the temporary directory.
// guarantee: G-CLI-02
#[test]
fn a_stopped_call_or_server_leaves_no_scratch_home_behind() {
    use std::io::{BufRead as _, BufReader, Write as _};
    use std::os::unix::process::ExitStatusExt as _;
    let env = Env::new();
    let personality = env.root.join("sh.toml");
    std::fs::write(
        &personality,
        format!(
            "id = \"sh\"\n[fs_reach]\nread = [\"{w}\"]\n[safety.process]\nallow = [\"sh\", \"sleep\"]\n",
            w = env.root.join("work").display()
        ),
    )
    .unwrap();
    let personality = personality.display().to_string();
    // The scratch homes are made in TMPDIR: a directory of the test's own, to look into.
    let tmp = env.root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let start = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_toolcap"))
            .args(args)
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env("HOME", &env.root)
            .env("TMPDIR", &tmp)
            .current_dir(env.root.join("work"))
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    // A child that writes to its HOME, then sleeps until it is stopped.
    let run = |marker: &str| {
        serde_json::json!({
            "binary": "sh",
            "args": ["-c", format!("echo kept > \"$HOME/note\" && exec sleep {marker}")],
            "timeout_ms": 60_000,
        })
    };
    let homes = || std::fs::read_dir(&tmp).unwrap().count();
    let sleeping = |marker: &str| {
        let started = std::time::Instant::now();
        while !running(&format!("sleep {marker}")) {
            assert!(started.elapsed().as_secs() < 20, "the child never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };
    let stop = |child: &std::process::Child, signal: &str| {
        let sent = Command::new("kill")
            .arg(format!("-{signal}"))
            .arg(child.id().to_string())
            .status()
            .unwrap();
        assert!(sent.success());
    };

    // In process mode and in the capsule (the tool's code in a confined worker).
    for (signal, number, marker, capsule) in [
        ("INT", 2, "71.25", false),
        ("TERM", 15, "71.5", false),
        ("TERM", 15, "71.625", true),
    ] {
        let args = run(marker).to_string();
        let mut call = vec!["call", "--personality", &personality];
        if capsule {
            call.push("--capsule");
        }
        call.extend(["run_command", &args]);
        let mut child = start(&call);
        sleeping(marker);
        assert_eq!(homes(), 1, "{signal}: the tool's directory of homes");
        stop(&child, signal);
        let status = ended_within(&mut child).expect("still running 20 s after the signal");
        assert_eq!(
            (status.code(), status.signal()),
            (Some(128 + number), None),
            "{signal}"
        );
        assert!(
            !running(&format!("sleep {marker}")),
            "{signal}: the child lives on"
        );
        assert_eq!(homes(), 0, "{signal}: a scratch home was left behind");
    }

    let mut server = start(&[
        "mcp",
        "serve",
        "--personality",
        &personality,
        "--store",
        "s.redb",
    ]);
    let mut stdin = server.stdin.take().unwrap();
    let mut answers = BufReader::new(server.stdout.take().unwrap());
    for message in [
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "cli-test", "version": "1"}}}),
        serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run_command", "arguments": run("71.75")}}),
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    stdin.flush().unwrap();
    let mut line = String::new();
    answers.read_line(&mut line).unwrap();
    assert!(line.contains("\"id\":0"), "{line}");
    sleeping("71.75");
    assert_eq!(homes(), 1);
    stop(&server, "TERM");
    let status = ended_within(&mut server).expect("the server still runs 20 s after SIGTERM");
    assert_eq!((status.code(), status.signal()), (Some(143), None));
    assert!(!running("sleep 71.75"), "the server's child lives on");
    assert_eq!(homes(), 0, "a scratch home was left behind");
    drop(stdin);
}

/// `SIGKILL` cannot be handled, so a killed `toolcap call` leaves its tool's directory of homes
/// (and what its child wrote there) behind; the next toolcap to make one in the same place
/// removes it. A directory of a live toolcap's is left alone.
// guarantee: G-CLI-02
#[test]
fn a_killed_call_leaves_its_scratch_home_only_until_the_next_call() {
    let env = Env::new();
    let personality = env.root.join("sh.toml");
    std::fs::write(
        &personality,
        "id = \"sh\"\n[safety.process]\nallow = [\"sh\", \"sleep\"]\n",
    )
    .unwrap();
    let personality = personality.display().to_string();
    let tmp = env.root.join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let call = |script: &str| {
        let args =
            serde_json::json!({"binary": "sh", "args": ["-c", script], "timeout_ms": 60_000});
        Command::new(env!("CARGO_BIN_EXE_toolcap"))
            .args(["call", "--personality", &personality, "run_command"])
            .arg(args.to_string())
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env("HOME", &env.root)
            .env("TMPDIR", &tmp)
            .current_dir(env.root.join("work"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let homes = || -> Vec<std::path::PathBuf> {
        let mut homes: Vec<_> = std::fs::read_dir(&tmp)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        homes.sort();
        homes
    };
    let sleeping = |marker: &str| {
        let started = std::time::Instant::now();
        while !running(&format!("sleep {marker}")) {
            assert!(started.elapsed().as_secs() < 20, "the child never started");
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
    };

    let mut killed = call("echo secret > \"$HOME/token\" && exec sleep 72.25");
    sleeping("72.25");
    let left = homes();
    assert_eq!(left.len(), 1, "the tool's directory of homes");
    // A second call while the first runs: the first's directory is left alone.
    let mut live = call("exec sleep 72.5");
    sleeping("72.5");
    let both = homes();
    assert_eq!(both.len(), 2);
    assert!(both.contains(&left[0]), "a live call's directory is kept");
    let kept: Vec<_> = both.into_iter().filter(|h| *h != left[0]).collect();

    killed.kill().unwrap();
    killed.wait().unwrap();
    let started = std::time::Instant::now();
    while running("sleep 72.25") {
        assert!(
            started.elapsed().as_secs() < 20,
            "the child outlived its call"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(homes().len(), 2, "SIGKILL runs no clean-up");

    // The next call makes its own (and removes it when it ends) and removes the killed one's.
    let next = call("true").wait().unwrap();
    assert!(next.success());
    assert_eq!(homes(), kept, "only the live call's directory is left");
    live.kill().unwrap();
    live.wait().unwrap();
}

/// Ctrl-C at an `--ask` prompt nobody answers ends the call at once, with 130, though the
/// prompt's thread is still blocked reading stdin (before, the thread held stderr while it read,
/// so the last line could not be written until someone pressed Enter).
// guarantee: G-CLI-02
#[test]
fn ctrl_c_at_an_unanswered_prompt_ends_the_call_at_once() {
    use std::os::unix::process::ExitStatusExt as _;
    let env = Env::new();
    let p = escalating(&env, "timeout_seconds = 120\n");
    let mut child = asking(
        &env,
        &p,
        r#"{"path": "releases/v1.txt", "content": "v1"}"#,
        std::process::Stdio::piped(),
    );
    let held = child.stdin.take();
    let mut stderr = child.stderr.take().unwrap();
    // Wait for the prompt (it ends without a line end), then press Ctrl-C.
    let mut seen = Vec::new();
    let mut byte = [0u8; 1];
    while !String::from_utf8_lossy(&seen).ends_with("approve? [y/N] ") {
        use std::io::Read as _;
        assert_eq!(stderr.read(&mut byte).unwrap(), 1, "no prompt: {seen:?}");
        seen.push(byte[0]);
    }
    let sent = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = std::time::Instant::now();
    let status = ended_within(&mut child).expect("still running 20 s after Ctrl-C");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(5),
        "ended only after {:?}",
        started.elapsed()
    );
    assert_eq!((status.code(), status.signal()), (Some(130), None));
    assert!(!env.root.join("work/out/releases/v1.txt").exists());
    drop(held);
}

/// A personality or guard configuration another account can change is refused before it is
/// used, with its mode or owner named: whoever can write it can widen what the agent may do.
/// World-writable (mode `o+w`), or owned by another user than this one or root: refused; the
/// user's own and root's files, readable by all or not, are used.
// guarantee: G-POL-02
#[test]
fn a_policy_another_account_can_change_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    let p = env.root.join("p.toml");
    let validate =
        |path: &Path| env.toolcap(&["validate", "--personality", path.to_str().unwrap()]);
    let explain = |path: &Path| {
        env.toolcap(&[
            "explain",
            "--personality",
            path.to_str().unwrap(),
            "read_file",
            r#"{"path": "notes.md"}"#,
        ])
    };
    for mode in [0o666, 0o646, 0o602] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        for out in [validate(&p), explain(&p)] {
            assert_eq!(code(&out), 2, "{mode:o}: {}", stderr(&out));
            assert!(
                stderr(&out).contains("other users can change it")
                    && stderr(&out).contains(&format!("{mode:o}")),
                "{mode:o}: {}",
                stderr(&out)
            );
        }
    }
    for mode in [0o644, 0o600, 0o664, 0o444] {
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        assert_eq!(code(&explain(&p)), 0, "{mode:o}: {}", stderr(&explain(&p)));
    }
    // A policy of the user's own, in a directory of theirs, inside one anyone may write (no
    // sticky bit): whoever can write the outer one can rename the inner one away and put their
    // own policy in its place.
    let open = env.root.join("shared");
    std::fs::create_dir_all(open.join("team")).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let nested = open.join("team/p.toml");
    std::fs::copy(&p, &nested).unwrap();
    std::fs::set_permissions(&nested, std::fs::Permissions::from_mode(0o644)).unwrap();
    let out = explain(&nested);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("lies in {}", open.display()))
            && stderr(&out).contains("777")
            && stderr(&out).contains("other users can replace"),
        "{}",
        stderr(&out)
    );
    // A link to a policy of the user's own, the link in a directory anyone may write: whoever
    // can write it can point the link elsewhere (before, only the file's directories counted).
    let link = open.join("p.toml");
    std::os::unix::fs::symlink(&p, &link).unwrap();
    let out = explain(&link);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!("lies in {}", open.display())),
        "{}",
        stderr(&out)
    );
    // With the sticky bit (as on /tmp), only an entry's owner can rename it: accepted.
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
    assert_eq!(code(&explain(&nested)), 0, "{}", stderr(&explain(&nested)));
    assert_eq!(code(&explain(&link)), 0, "{}", stderr(&explain(&link)));

    // Another user's file, and a guard configuration (needs root to arrange; CI runs as root).
    let theirs = env.root.join("theirs.toml");
    std::fs::copy(&p, &theirs).unwrap();
    let guard = env.root.join("guard.toml");
    std::fs::write(&guard, "[servers.x]\ncommand = \"/bin/true\"\n").unwrap();
    std::fs::set_permissions(&guard, std::fs::Permissions::from_mode(0o666)).unwrap();
    let out = env.guard(&p, &guard);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("other users can change it"),
        "{}",
        stderr(&out)
    );
    if given_to_nobody(&theirs, false) {
        let out = explain(&theirs);
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        assert!(
            stderr(&out).contains("owned by another user"),
            "{}",
            stderr(&out)
        );
    }
}

/// A personality or guard configuration its group may write, where somebody besides the user
/// (and root) is in that group, is refused as one anyone may write is: every member can widen
/// what the agent may do. The user's own group (a user-private group, root's) is theirs.
// guarantee: G-POL-02
#[test]
fn a_policy_a_group_with_other_members_can_change_is_refused() {
    use std::os::unix::fs::PermissionsExt as _;
    let env = Env::new();
    let p = env.root.join("p.toml");
    let explain = |path: &Path| {
        env.toolcap(&[
            "explain",
            "--personality",
            path.to_str().unwrap(),
            "read_file",
            r#"{"path": "notes.md"}"#,
        ])
    };
    let chgrp = |path: &Path, gid: u32| {
        Command::new("chgrp")
            .arg(gid.to_string())
            .arg(path)
            .status()
            .is_ok_and(|s| s.success())
    };
    let mode = |path: &Path, mode: u32| {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    };
    mode(&p, 0o664);
    // The group `nobody` is in (65534), which only root can give: as CI runs.
    if !chgrp(&p, 65534) {
        return;
    }
    for out in [
        explain(&p),
        env.toolcap(&["validate", "--personality", p.to_str().unwrap()]),
    ] {
        assert_eq!(code(&out), 2, "{}", stderr(&out));
        let said = stderr(&out);
        assert!(
            said.contains("664")
                && said.contains("gid 65534")
                && said.contains("they can change it")
                && said.contains("chmod go-w"),
            "{said}"
        );
    }
    // Not writable by its group: used.
    mode(&p, 0o644);
    assert_eq!(code(&explain(&p)), 0, "{}", stderr(&explain(&p)));
    // An access control list that lets `nobody` write it (what `setfacl -m u:nobody:rw` writes;
    // the mode then reads 664): refused, naming the list.
    let mut acl = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in [
        (0x01u16, 6u16, u32::MAX),
        (0x02, 6, 65534),
        (0x04, 4, u32::MAX),
        (0x10, 6, u32::MAX),
        (0x20, 4, u32::MAX),
    ] {
        acl.extend(tag.to_le_bytes());
        acl.extend(perm.to_le_bytes());
        acl.extend(id.to_le_bytes());
    }
    let listed = env.root.join("listed.toml");
    std::fs::copy(&p, &listed).unwrap();
    rustix::fs::setxattr(
        &listed,
        "system.posix_acl_access",
        &acl,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
    let out = explain(&listed);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("access control list that lets uid 65534 write"),
        "{}",
        stderr(&out)
    );
    // In a directory the group may write (no sticky bit): its members can replace it.
    let team = env.root.join("team");
    std::fs::create_dir(&team).unwrap();
    std::fs::copy(&p, team.join("p.toml")).unwrap();
    mode(&team, 0o775);
    assert!(chgrp(&team, 65534));
    let out = explain(&team.join("p.toml"));
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains(&format!(
            "lies in {}",
            team.canonicalize().unwrap().display()
        )) && stderr(&out).contains("gid 65534"),
        "{}",
        stderr(&out)
    );
    mode(&team, 0o1775);
    assert_eq!(code(&explain(&team.join("p.toml"))), 0);
    // A guard configuration the group may write.
    let guard = env.root.join("guard.toml");
    std::fs::write(&guard, "[servers.x]\ncommand = \"/bin/true\"\n").unwrap();
    mode(&guard, 0o664);
    assert!(chgrp(&guard, 65534));
    let out = env.guard(&p, &guard);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("gid 65534"), "{}", stderr(&out));
}

/// `toolcap diff` reads manifests a change proposes, so what it prints from them is shown
/// escaped: a tool name or a host with terminal controls in it (a cursor moved up and a line
/// erased) would otherwise hide a widening from the reviewer reading the output, and a
/// bidirectional override could make a host read as another.
// guarantee: G-MAN-01
#[test]
fn diff_shows_what_a_manifest_says_escaped() {
    use capability_core::build_manifest;
    use capability_types::ToolCapabilities;
    let env = Env::new();
    let plain = ToolCapabilities::none()
        .with_network(["api.github.com"])
        .with_process(["git"]);
    let hostile = ToolCapabilities::none()
        .with_network(["api.github.com", "evil.com\u{1b}[1A\u{1b}[2Kfine"])
        .with_process(["git", "sh\u{202e}hs"]);
    let old = build_manifest([("fetcher", &plain)], None);
    let new = build_manifest([("fetcher", &hostile), ("new\u{1b}[2Ktool", &plain)], None);
    std::fs::write(env.root.join("old.json"), old.to_pretty_json()).unwrap();
    std::fs::write(env.root.join("new.json"), new.to_pretty_json()).unwrap();
    let out = env.toolcap(&["diff", &env.path("old.json"), &env.path("new.json")]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}'),
        "{text:?}"
    );
    assert!(
        text.contains("evil.com\\u{1b}[1A\\u{1b}[2Kfine")
            && text.contains("new\\u{1b}[2Ktool")
            && text.contains("sh\\u{202e}hs"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 3, "one line a widening: {text}");
}

/// A personality whose reach holds toolcap's own files (kept beside the project, as a user
/// might: `./agent.toml`, `--audit ./audit.jsonl`, `--store ./state.redb`): a tool that could
/// write the personality would widen every later run, one that could write the audit file would
/// rewrite the record of this one, and one that could read the store would take every
/// session's values past their namespaces. They are out of every tool's reach, in process mode
/// and in the capsule, whatever the personality says; the rest of its reach is as it says.
// guarantee: G-POL-06
#[test]
fn toolcaps_own_files_are_out_of_every_tools_reach() {
    let env = Env::new();
    let w = env.root.join("work");
    let personality = w.join("agent.toml");
    let text = format!(
        "id = \"own\"\n[fs_reach]\nread = [\"{w}\"]\nwrite = [\"{w}\"]\n[safety.process]\nallow = [\"cat\"]\n",
        w = w.display()
    );
    std::fs::write(&personality, &text).unwrap();
    let (audit, store) = (w.join("audit.jsonl"), w.join("state.redb"));
    let call = |mode: &[&str], tool: &str, args: Value| {
        let mut argv = vec!["call"];
        argv.extend_from_slice(mode);
        let (p, a, s) = (
            personality.display().to_string(),
            audit.display().to_string(),
            store.display().to_string(),
        );
        let args = args.to_string();
        argv.extend([
            "--personality",
            &p,
            "--audit",
            &a,
            "--store",
            &s,
            tool,
            &args,
        ]);
        stdout_json(&env.toolcap(&argv))
    };
    for mode in [&[][..], &["--capsule"][..]] {
        for target in [&personality, &audit, &store] {
            let written = call(
                mode,
                "write_file",
                serde_json::json!({"path": target, "content": "id = \"wide\"\n"}),
            );
            assert!(
                written["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("PATH_NOT_REACHABLE")),
                "{mode:?} {target:?}: {written}"
            );
            let read = call(mode, "read_file", serde_json::json!({"path": target}));
            assert!(
                read["error"]
                    .as_str()
                    .is_some_and(|e| e.starts_with("PATH_NOT_REACHABLE")),
                "{mode:?} {target:?}: {read}"
            );
            // On their own side: nothing of the personality came back, and nothing the tool
            // wrote is in the personality or the store (the audit file is checked whole below).
            assert!(!read.to_string().contains("[safety.process]"), "{read}");
            for kept in [&personality, &store] {
                let bytes = std::fs::read(kept).unwrap_or_default();
                assert!(
                    !bytes.windows(4).any(|w| w == b"wide"),
                    "{mode:?}: {kept:?} holds what the tool wrote"
                );
            }
        }
        assert_eq!(std::fs::read_to_string(&personality).unwrap(), text);
        // The rest of the reach is as the personality says.
        let fine = call(
            mode,
            "write_file",
            serde_json::json!({"path": w.join("notes.md"), "content": "mine"}),
        );
        assert_eq!(fine["ok"], true, "{mode:?}: {fine}");
        // A confined child finds them covered: empty, unreadable.
        let cat = call(
            mode,
            "run_command",
            serde_json::json!({"binary": "cat", "args": [personality, store]}),
        );
        assert!(
            !cat.to_string().contains("[safety.process]") && cat["value"]["exit_code"] != 0,
            "{mode:?}: {cat}"
        );
    }
    // The audit file holds the events of those calls and nothing a tool wrote.
    let events = std::fs::read_to_string(&audit).unwrap();
    assert!(
        events
            .lines()
            .all(|l| serde_json::from_str::<Value>(l).is_ok()),
        "{events}"
    );
}

/// Toolcap's data directory (`$XDG_DATA_HOME/toolcap`, `~/.local/share/toolcap`) holds every
/// store a run of it made there, not only this run's: the demo's, one another personality's
/// `mcp serve` keeps with `--store`, with every session's values. A personality that reaches
/// the home directory read them (watched failing: another store's canary in `read_file`'s
/// answer, and listed); the whole directory is kept out of every tool's reach now, in process
/// mode and in the capsule, and a child finds it covered.
// guarantee: G-POL-06
#[test]
fn toolcaps_data_directory_is_out_of_a_reach_of_the_home_directory() {
    let env = Env::new();
    let data = env.root.join("data/toolcap");
    std::fs::create_dir_all(&data).unwrap();
    let other = data.join("ops-agent.redb");
    std::fs::write(&other, "canary-of-another-store\n").unwrap();
    let personality = env.root.join("homely.toml");
    std::fs::write(
        &personality,
        "id = \"homely\"\n[fs_reach]\nread = [\"~\"]\n[safety.process]\nallow = [\"cat\"]\n",
    )
    .unwrap();
    let p = personality.display().to_string();
    for mode in [&[][..], &["--capsule"][..]] {
        let call = |tool: &str, args: Value| {
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            let args = args.to_string();
            argv.extend(["--personality", &p, tool, &args]);
            stdout_json(&env.toolcap(&argv))
        };
        let read = call("read_file", serde_json::json!({"path": other}));
        assert!(
            !read.to_string().contains("canary-of-another-store"),
            "{mode:?}: {read}"
        );
        assert_eq!(read["code"], "denied", "{mode:?}: {read}");
        let listed = call("list_dir", serde_json::json!({"path": data}));
        assert_eq!(listed["code"], "denied", "{mode:?}: {listed}");
        let cat = call(
            "run_command",
            serde_json::json!({"binary": "cat", "args": [other]}),
        );
        assert!(
            !cat.to_string().contains("canary-of-another-store"),
            "{mode:?}: {cat}"
        );
        // The rest of the home directory is as the personality says.
        let notes = call(
            "read_file",
            serde_json::json!({"path": env.root.join("work/notes.md")}),
        );
        assert_eq!(notes["ok"], true, "{mode:?}: {notes}");
    }
}

// guarantee: G-REG-13
/// What a tool writes, sends or feeds a child is data, not a path: `write_file` writes a C file
/// that opens with a `/* ... */` comment or a note that names `/etc/passwd`, in process and in
/// the capsule, while the gate still reads the arguments that name places (`//etc/passwd` is
/// `/etc/passwd` to the kernel, and is refused as a path).
#[test]
fn what_a_tool_writes_is_data_and_the_places_it_names_are_still_gated() {
    let env = Env::new();
    for mode in [&[][..], &["--capsule"]] {
        for (name, content) in [
            ("a.c", "/* SPDX-License-Identifier: MIT */\nint x;\n"),
            ("b.md", "/etc/passwd is where accounts are listed\n"),
            ("c.txt", "/etc/passwd"),
        ] {
            let args = serde_json::json!({"path": format!("out/{name}"), "content": content});
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            let args_text = args.to_string();
            argv.extend([
                "--personality",
                "../p.toml",
                "write_file",
                args_text.as_str(),
            ]);
            let out = env.toolcap(&argv);
            assert_eq!(code(&out), 0, "{mode:?} {name}: {}", stdout_json(&out));
            let written = std::fs::read_to_string(env.root.join("work/out").join(name)).unwrap();
            assert_eq!(written, content, "{mode:?} {name}");
        }
        for (tool, args) in [
            ("read_file", serde_json::json!({"path": "//etc/passwd"})),
            (
                "write_file",
                serde_json::json!({"path": "//etc/x", "content": "x"}),
            ),
            (
                "run_command",
                serde_json::json!({"binary": "echo", "args": ["//etc/passwd"]}),
            ),
            // A file URL as URL parsers read it: tabs inside, control characters before.
            (
                "run_command",
                serde_json::json!({"binary": "echo", "args": ["fi\tle:///etc/passwd"]}),
            ),
            (
                "run_command",
                serde_json::json!({"binary": "echo", "args": ["\u{1}FILE:/etc/passwd"]}),
            ),
        ] {
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            let args_text = args.to_string();
            argv.extend(["--personality", "../p.toml", tool, args_text.as_str()]);
            let out = env.toolcap(&argv);
            let result = stdout_json(&out);
            assert_eq!(code(&out), 1, "{mode:?} {tool}: {result}");
            assert!(
                result["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("PATH_NOT_REACHABLE"),
                "{mode:?} {tool}: {result}"
            );
            // On the forbidden side: the tool never ran (no value, so no child output), and
            // nothing of the file came back.
            assert!(result.get("value").is_none(), "{mode:?} {tool}: {result}");
            assert!(
                !String::from_utf8_lossy(&out.stdout).contains("root:"),
                "{mode:?} {tool}: {result}"
            );
        }
    }
    assert!(!Path::new("/etc/x").exists());
}

// guarantee: G-FS-13
/// `write_file` over an existing file replaces it whole (a new file renamed over it), and the
/// file it leaves is the one that was there in everything but its content: its owner, group
/// and mode, whatever the process's umask, in both modes. A root host that rewrote a user's
/// group-shared file (`0660`, alice:devs) left it root's, `0640` under umask 022: the user and
/// the group lost their own file. A set-ID bit is not kept (the content it vouched for is
/// gone), and a file that did not exist follows the umask as any new file does.
#[test]
fn a_rewritten_file_keeps_its_owner_group_and_mode() {
    use std::os::unix::fs::{MetadataExt, PermissionsExt, chown};
    let env = Env::new();
    let out = env.root.join("work/out");
    let p = env.path("p.toml");
    let set_mode = |name: &str, mode: u32| {
        std::fs::set_permissions(out.join(name), std::fs::Permissions::from_mode(mode)).unwrap();
    };
    let meta = |name: &str| std::fs::metadata(out.join(name)).unwrap();
    for mode in [&[][..], &["--capsule"][..]] {
        let _ = std::fs::remove_file(out.join("new.txt"));
        std::fs::write(out.join("mine.txt"), "old").unwrap();
        set_mode("mine.txt", 0o664);
        std::fs::write(out.join("setid"), "old").unwrap();
        set_mode("setid", 0o6755);
        std::fs::write(out.join("shared.txt"), "old").unwrap();
        set_mode("shared.txt", 0o660);
        // Another account's file: only a root host can make one (CI runs as root).
        let theirs =
            std::os::unix::fs::chown(out.join("shared.txt"), Some(1000), Some(1001)).is_ok();
        let write = |name: &str| {
            let call = serde_json::json!({"path": out.join(name), "content": "new"}).to_string();
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", &p, "write_file", &call]);
            let done = Command::new("sh")
                .arg("-c")
                .arg("umask 077 && exec \"$@\"")
                .arg("sh")
                .arg(env!("CARGO_BIN_EXE_toolcap"))
                .args(&argv)
                .env("XDG_DATA_HOME", env.root.join("data"))
                .env("HOME", &env.root)
                .env_remove("RUST_LOG")
                .current_dir(env.root.join("work"))
                .output()
                .unwrap();
            assert_eq!(code(&done), 0, "{mode:?} {name}: {}", stderr(&done));
            assert_eq!(std::fs::read_to_string(out.join(name)).unwrap(), "new");
        };
        for name in ["mine.txt", "setid", "shared.txt", "new.txt"] {
            write(name);
        }
        assert_eq!(
            meta("mine.txt").mode() & 0o7777,
            0o664,
            "{mode:?}: the mode, not the umask"
        );
        assert_eq!(
            meta("setid").mode() & 0o7777,
            0o755,
            "{mode:?}: set-ID bits dropped"
        );
        assert_eq!(
            meta("new.txt").mode() & 0o7777,
            0o600,
            "{mode:?}: a new file follows the umask"
        );
        let shared = meta("shared.txt");
        assert_eq!(shared.mode() & 0o7777, 0o660, "{mode:?}");
        if theirs {
            assert_eq!(
                (shared.uid(), shared.gid()),
                (1000, 1001),
                "{mode:?}: owner and group kept"
            );
        }
    }
    // A host that is not root, rewriting another account's file in a directory it may write:
    // the file becomes its own, and the old group's bits are not handed to its own group.
    if chown(out.join("shared.txt"), Some(1000), Some(1001)).is_err() {
        return;
    }
    let bin = env.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    copy_program(
        Path::new(env!("CARGO_BIN_EXE_toolcap")),
        &bin.join("toolcap"),
    );
    let nobody = env.root.join("nobody");
    std::fs::create_dir(&nobody).unwrap();
    chown(&nobody, Some(65534), Some(65534)).unwrap();
    chown(&out, Some(65534), Some(65534)).unwrap();
    for dir in [&env.root, &env.root.join("work"), &bin] {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    std::fs::set_permissions(
        env.root.join("p.toml"),
        std::fs::Permissions::from_mode(0o644),
    )
    .unwrap();
    // `write_file` of `content` to `name` by `nobody` (setpriv, util-linux).
    let as_nobody = |name: &str, content: &str| {
        let call = serde_json::json!({"path": out.join(name), "content": content});
        Command::new("setpriv")
            .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
            .arg(bin.join("toolcap"))
            .args(["call", "--personality", &p, "write_file", &call.to_string()])
            .env("XDG_DATA_HOME", nobody.join("data"))
            .env("HOME", &nobody)
            .env_remove("RUST_LOG")
            .current_dir(&nobody)
            .output()
            .unwrap_or_else(|e| panic!("setpriv (util-linux) is needed here: {e}"))
    };
    // Writable by every account (an in-place write by `nobody` would succeed), another's.
    set_mode("shared.txt", 0o666);
    let done = as_nobody("shared.txt", "by nobody");
    assert_eq!(code(&done), 0, "as nobody: {}", stderr(&done));
    let shared = meta("shared.txt");
    assert_eq!(
        (shared.uid(), shared.gid(), shared.mode() & 0o7777),
        (65534, 65534, 0o606),
        "the writer's file, without the group's bits"
    );
    // A file its owner made read-only is not replaced from around its permission bits: an
    // in-place write would fail, and so does this one, leaving it as it was. Root may write
    // it, as root may write any file, and it stays read-only.
    std::fs::write(out.join("locked.txt"), "kept").unwrap();
    chown(out.join("locked.txt"), Some(65534), Some(65534)).unwrap();
    set_mode("locked.txt", 0o444);
    let refused = as_nobody("locked.txt", "lost");
    assert_eq!(code(&refused), 1, "{}", stderr(&refused));
    assert!(
        stdout_json(&refused)["error"]
            .as_str()
            .unwrap()
            .contains("permission denied"),
        "{}",
        String::from_utf8_lossy(&refused.stdout)
    );
    assert_eq!(
        std::fs::read_to_string(out.join("locked.txt")).unwrap(),
        "kept"
    );
    let call = serde_json::json!({"path": out.join("locked.txt"), "content": "lost"});
    let by_root = env.toolcap(&["call", "--personality", &p, "write_file", &call.to_string()]);
    assert_eq!(code(&by_root), 0, "{}", stderr(&by_root));
    assert_eq!(
        std::fs::read_to_string(out.join("locked.txt")).unwrap(),
        "lost"
    );
    assert_eq!(meta("locked.txt").mode() & 0o7777, 0o444);
}

// guarantee: G-CLI-03
/// `--audit` given a file that is not an audit file (a slip of the path: `--audit notes.md`)
/// is refused before anything is written to it or cut from it. Before, toolcap took a last
/// line without a newline for an event torn by a kill and cut it off, then appended its events
/// to the notes. A foreign partial line appended to a real audit file is not cut either: the
/// event that would follow it fails, and with it the call, the file as it was. A torn event is
/// still trimmed.
#[test]
fn an_audit_path_that_is_not_an_audit_file_loses_nothing() {
    let env = Env::new();
    let p = env.path("p.toml");
    let call = |audit: &str| {
        env.toolcap(&[
            "call",
            "--personality",
            &p,
            "--audit",
            audit,
            "read_file",
            r#"{"path":"notes.md"}"#,
        ])
    };
    let private = |path: &str, text: &str| {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
    };
    for text in [
        "my notes\nthe last line, without a newline",
        "my notes\n",
        "{\"a\":1}\n",
    ] {
        let notes = env.path("work/out/notes.txt");
        private(&notes, text);
        let out = call(&notes);
        assert_eq!(code(&out), 2, "{text:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("is not an audit file"),
            "{}",
            stderr(&out)
        );
        assert_eq!(std::fs::read_to_string(&notes).unwrap(), text, "untouched");
    }
    // A real audit file: a torn event is trimmed, a foreign tail is not.
    let audit = env.path("work/out/audit.jsonl");
    let first = call(&audit);
    assert_eq!(code(&first), 0, "{}", stderr(&first));
    let whole = std::fs::read_to_string(&audit).unwrap();
    private(&audit, &format!("{whole}{{\"timestamp_ms\":17"));
    assert_eq!(code(&call(&audit)), 0);
    let after = std::fs::read_to_string(&audit).unwrap();
    assert!(
        after.starts_with(&whole) && !after.contains("\"timestamp_ms\":17\n"),
        "{after}"
    );
    assert!(
        after.lines().all(|l| l.starts_with("{\"timestamp_ms\":")),
        "{after}"
    );
    let foreign = format!("{after}a note typed at the end");
    private(&audit, &foreign);
    let out = call(&audit);
    assert_ne!(code(&out), 0, "{}", String::from_utf8_lossy(&out.stdout));
    assert_eq!(
        std::fs::read_to_string(&audit).unwrap(),
        foreign,
        "nothing cut, nothing glued"
    );
}

#[path = "../../capability-kv/tests/support/mod.rs"]
mod redis_support;

// guarantee: G-KV-04
/// A Redis store's password need not be on the command line, where every local account reads
/// it in the process list (`/proc/<pid>/cmdline`): `--store-env VAR` reads the store from an
/// environment variable, as `--token-env` reads a token. A password given in `--store` still
/// works, with a warning that says where it can be read and what to do instead.
#[test]
fn a_store_url_with_a_password_can_come_from_the_environment() {
    let env = Env::new();
    let p = env.path("p.toml");
    let server = redis_support::RedisServer::start_with(&["--requirepass", "pa@ss"]);
    let url = server.url.replace("redis://", "redis://:pa@ss@");
    let with_env = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_toolcap"))
            .args(args)
            .env("TOOLCAP_TEST_STORE", &url)
            .env("XDG_DATA_HOME", env.root.join("data"))
            .env("HOME", &env.root)
            .env_remove("RUST_LOG")
            .current_dir(env.root.join("work"))
            .output()
            .unwrap()
    };
    let set = with_env(&[
        "call",
        "--personality",
        &p,
        "--store-env",
        "TOOLCAP_TEST_STORE",
        "kv_set",
        r#"{"key": "k", "value": 7}"#,
    ]);
    assert_eq!(
        code(&set),
        0,
        "{}{}",
        String::from_utf8_lossy(&set.stdout),
        stderr(&set)
    );
    assert!(stderr(&set).is_empty(), "no warning: {}", stderr(&set));
    // The same store named on the command line: it works, and says so.
    let get = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--store",
        &url,
        "kv_get",
        r#"{"key": "k"}"#,
    ]);
    assert_eq!(
        stdout_json(&get),
        serde_json::json!({"ok": true, "value": 7})
    );
    let warning = stderr(&get);
    assert!(
        warning.contains("process list")
            && warning.contains("--store-env")
            && !warning.contains("pa@ss"),
        "{warning}"
    );
    // A variable that is not set, or both at once: usage errors.
    let unset = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "--store-env",
        "TOOLCAP_TEST_UNSET",
        "kv_get",
        r#"{"key": "k"}"#,
    ]);
    assert_eq!(code(&unset), 2, "{}", stderr(&unset));
    assert!(
        stderr(&unset).contains("TOOLCAP_TEST_UNSET"),
        "{}",
        stderr(&unset)
    );
    let both = with_env(&[
        "call",
        "--personality",
        &p,
        "--store",
        &url,
        "--store-env",
        "TOOLCAP_TEST_STORE",
        "kv_get",
        r#"{"key": "k"}"#,
    ]);
    assert_eq!(code(&both), 2, "{}", stderr(&both));
    assert!(!stderr(&both).contains("pa@ss"), "{}", stderr(&both));
    let help = env.toolcap(&["mcp", "serve", "--help"]);
    assert!(String::from_utf8_lossy(&help.stdout).contains("--store-env"));
}

// guarantee: G-MCP-02
/// An approval prompt cannot be flooded: a call whose arguments run to a megabyte (written by a
/// model steered to hide what it asks for) once printed them whole after the subjects, so the
/// terminal scrolled the subjects out of sight and the user saw a wall of text ending in
/// `approve? [y/N]`. The arguments are now cut short, saying how much was left out, and come
/// before the subjects, which are always the last thing above the question; a request with more
/// subjects than a screen holds is refused without asking.
#[test]
fn an_approval_prompt_cannot_be_flooded() {
    use std::io::Write as _;
    let env = Env::new();
    let p = escalating(&env, "");
    let answer = |args: &str| {
        let mut child = asking(&env, &p, args, std::process::Stdio::piped());
        child.stdin.take().unwrap().write_all(b"n\n").unwrap();
        child.wait_with_output().unwrap()
    };
    // As long as one argument of a command line may be (128 KiB), less its JSON.
    let flood = "x".repeat(100_000);
    let out = answer(&serde_json::json!({"path": "releases/v1.txt", "content": flood}).to_string());
    let prompt = stderr(&out);
    assert!(prompt.len() < 8 * 1024, "{} bytes of prompt", prompt.len());
    assert!(prompt.contains("more bytes not shown"), "{prompt}");
    let lines: Vec<&str> = prompt.lines().collect();
    let question = lines
        .iter()
        .position(|l| l.contains("approve? [y/N]"))
        .unwrap_or_else(|| panic!("{prompt}"));
    assert!(
        lines[question - 1]
            .trim_start()
            .starts_with("fs_reach.write")
            && lines[question - 1].contains("releases/v1.txt"),
        "the subject is right above the question: {prompt}"
    );
    assert_eq!(code(&out), 1);
    assert!(!env.root.join("work/out/releases/v1.txt").exists());
    // Two hundred subjects: more than a screen shows, so nobody is asked.
    let releases = env.path("work/out/releases");
    let many: Vec<String> = (0..200).map(|i| format!("{releases}/f{i}.txt")).collect();
    let out = answer(
        &serde_json::json!({"path": "releases/v1.txt", "content": "x", "also": many}).to_string(),
    );
    let prompt = stderr(&out);
    assert!(!prompt.contains("approve? [y/N]"), "{prompt}");
    let error = stdout_json(&out)["error"].as_str().unwrap().to_owned();
    assert!(error.contains("too many to show"), "{error}");
    assert_eq!(code(&out), 1);
}

/// `--audit` naming a FIFO hands the events to whatever reads it (a log shipper), and only to
/// that: toolcap opened it for reading too, so a FIFO nobody read took the events into its
/// buffer and lost them, and the call ran as audited; past the buffer, every later call would
/// have hung. A FIFO nobody reads is refused with exit 2 before anything runs; one that is read
/// gets every event.
// guarantee: G-CLI-03
#[test]
fn an_audit_fifo_nobody_reads_is_refused_and_one_that_is_read_gets_the_events() {
    let env = Env::new();
    let fifo = env.root.join("audit.fifo");
    mkfifo(&fifo);
    let p = env.path("p.toml");
    let args = [
        "call",
        "--personality",
        &p,
        "--audit",
        fifo.to_str().unwrap(),
        "read_file",
        r#"{"path": "notes.md"}"#,
    ];
    let call = || env.toolcap(&args);
    let refused = call();
    assert_eq!(code(&refused), 2, "{}", stderr(&refused));
    assert!(
        stderr(&refused).contains("nobody reads"),
        "{}",
        stderr(&refused)
    );
    assert!(refused.stdout.is_empty(), "nothing ran");
    // Read by another process: the events arrive, in order. The reader is `cat`, which stops
    // at its first end of file, as many log shippers do; on the same processor as toolcap, and
    // with a real-time priority where it may have one (root, as CI runs), it runs the moment a
    // writer lets go of the FIFO. Toolcap used to open it for reading and writing to look at
    // it, and close that before opening it to write: an end of file before any event, which
    // ended such a reader, and then the call found nobody reading.
    let mut reader = if is_root() {
        Command::new("chrt")
            .args(["-f", "10", "taskset", "-c", "0", "cat"])
            .arg(&fifo)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    } else {
        Command::new("taskset")
            .args(["-c", "0", "cat"])
            .arg(&fifo)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap()
    };
    // `cat` counts as reading once it waits in `open` for a writer.
    let waits = format!("/proc/{}/wchan", reader.id());
    for _ in 0..500 {
        if std::fs::read_to_string(&waits).is_ok_and(|w| w.contains("partner")) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let done = env.toolcap_under(&["taskset", "-c", "0"], &args);
    if code(&done) != 0 {
        let _ = reader.kill();
    }
    assert_eq!(code(&done), 0, "{}", stderr(&done));
    assert!(String::from_utf8_lossy(&done.stdout).contains("\"ok\":true"));
    let read = reader.wait_with_output().unwrap();
    let events: Vec<serde_json::Value> = String::from_utf8_lossy(&read.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(
        events
            .iter()
            .map(|e| e["event"].as_str().unwrap())
            .collect::<Vec<_>>(),
        ["tool_called", "tool_completed"]
    );
}

// guarantee: G-CLI-04
/// A file the command line reads that is a FIFO nobody writes to, or a device, ends the command
/// at once with a clear error, for a personality (`validate`, `call`, `manifest`) and for a
/// crate's `Cargo.toml` (`lint`, which reviewers run on plugins they do not trust). Before, a
/// FIFO hung `toolcap` in `open` for ever, deaf to `SIGTERM`, and `lint` read a `Cargo.toml`
/// that is a link to `/dev/zero` until memory ran out.
#[test]
fn a_file_that_is_a_fifo_or_a_device_ends_the_command_at_once() {
    use std::process::Stdio;
    let env = Env::new();
    let fifo = env.root.join("fifo.toml");
    mkfifo(&fifo);
    let fifo = fifo.display().to_string();
    let crates = env.root.join("crates");
    for (name, cargo) in [("piped", None), ("zeroes", Some("/dev/zero"))] {
        let dir = crates.join(name);
        std::fs::create_dir_all(dir.join("src")).unwrap();
        match cargo {
            None => mkfifo(&dir.join("Cargo.toml")),
            Some(device) => std::os::unix::fs::symlink(device, dir.join("Cargo.toml")).unwrap(),
        }
    }
    let piped = crates.join("piped").display().to_string();
    let zeroes = crates.join("zeroes").display().to_string();
    let p = env.path("p.toml");
    // What it says names the FIFO, not what an empty text fails to be.
    let nobody = "FIFO or pipe nobody wrote to";
    for (args, said) in [
        (&["validate", "--personality", &fifo][..], nobody),
        (&["manifest", "--personality", &fifo][..], nobody),
        (
            &[
                "call",
                "--personality",
                &fifo,
                "read_file",
                r#"{"path":"notes.md"}"#,
            ][..],
            nobody,
        ),
        (
            &["validate", "--personality", &p, "--guard-config", &fifo][..],
            nobody,
        ),
        (
            &["mcp", "guard", "--personality", &p, "--config", &fifo][..],
            nobody,
        ),
        (&["lint", &piped][..], ""),
        (&["lint", &zeroes][..], ""),
    ] {
        let mut child = env.spawn(args, Stdio::null());
        let status =
            ended_within(&mut child).unwrap_or_else(|| panic!("{args:?} still ran after 20 s"));
        let out = child.wait_with_output().unwrap();
        assert_eq!(status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).starts_with("toolcap: ") && stderr(&out).contains(said),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}

/// A stop signal ends a command whatever it is waiting on: `validate` reading a personality
/// from a pipe whose writer never writes (process substitution, `<(…)`, behaves so) is ended by
/// `SIGTERM` within moments, with 128 + 15. Before, a command blocked in a read never saw the
/// signal, and only `SIGKILL` ended it.
// guarantee: G-CLI-02
#[test]
fn a_stop_signal_ends_a_command_blocked_on_a_pipe() {
    use std::os::unix::process::ExitStatusExt as _;
    use std::process::Stdio;
    let env = Env::new();
    let fifo = env.root.join("held.toml");
    mkfifo(&fifo);
    // A writer that holds the pipe open and never writes (read and write: no wait for a reader).
    let _writer = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(&fifo)
        .unwrap();
    let mut child = env.spawn(
        &["validate", "--personality", &fifo.display().to_string()],
        Stdio::null(),
    );
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(child.try_wait().unwrap().is_none(), "it waits for the pipe");
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    let started = std::time::Instant::now();
    let status = ended_within(&mut child).expect("still running 20 s after SIGTERM");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((status.code(), status.signal()), (Some(143), None));
    let out = child.wait_with_output().unwrap();
    assert!(
        stderr(&out).contains("stopped by SIGTERM"),
        "{}",
        stderr(&out)
    );
}

// guarantee: G-POL-07
/// A program that runs whatever it is asked to (a shell, an interpreter, `env`, `xargs`, and
/// `watch`, `strace`, `time`, `sudo` or `npx`, a project runner (`npm exec`, `uv run`), or a
/// client whose commands run a program, as sqlite3's `.shell`, psql's `\!` and dc's `!` do,
/// which it once did not say) makes
/// an allowlist of one a grant of every program a child may execute: `validate` says so for
/// each, by its name or its path, so the review does not read `allow = ["python3"]` as one
/// program.
#[test]
fn validate_notes_an_allowed_program_that_runs_other_programs() {
    let env = Env::new();
    std::fs::write(
        env.root.join("launchers.toml"),
        "id = \"launchers\"\ntoolset = [\"run_command\"]\n[fs_reach]\nread = [\"/srv\"]\n\
         [safety.process]\nallow = [\"git\", \"sh\", \"/usr/bin/python3\", \"env\", \"echo\", \
         \"watch\", \"strace\", \"time\", \"sudo\", \"npx\", \"sqlite3\", \"psql\", \"dc\", \"npm\", \"uv\", \"java\", \"go\", \"ccache\", \"ssh-agent\", \"run-parts\", \"hyperfine\", \"ninja\", \"tox\", \"pre-commit\", \"pip\", \"cargo\", \"rustc\", \"jrunscript\", \"jdb\", \"corepack\", \"pytest\", \"jest\", \"eslint\", \"sphinx-build\", \"bundle\", \"composer\", \"lli\", \"prove\", \"pdb3\", \"pydoc3\", \"dpkg-buildpackage\", \"m4\", \"pandoc\", \"setarch\", \"heaptrack\", \"msgexec\", \"scriptlive\", \"cpan\", \"terraform\", \"ansible-playbook\", \"latexmk\", \"gdbtui\", \"dpkg-architecture\", \"llvm-rtdyld\", \"erb\", \"clippy-driver\"]\n",
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("launchers.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let notes: Vec<&str> = text.lines().filter(|l| l.starts_with("note:")).collect();
    let runs = |i: usize, name: &str| {
        format!(
            "note: safety.process.allow[{i}] is {name}, which runs whatever program it is asked \
             to: a child may run any program the sandbox lets it execute (the system directories)"
        )
    };
    assert_eq!(
        notes,
        [
            runs(1, "sh"),
            runs(2, "/usr/bin/python3"),
            runs(3, "env"),
            runs(5, "watch"),
            runs(6, "strace"),
            runs(7, "time"),
            runs(8, "sudo"),
            runs(9, "npx"),
            runs(10, "sqlite3"),
            runs(11, "psql"),
            runs(12, "dc"),
            runs(13, "npm"),
            runs(14, "uv"),
            runs(15, "java"),
            runs(16, "go"),
            runs(17, "ccache"),
            runs(18, "ssh-agent"),
            runs(19, "run-parts"),
            runs(20, "hyperfine"),
            runs(21, "ninja"),
            runs(22, "tox"),
            runs(23, "pre-commit"),
            runs(24, "pip"),
            runs(25, "cargo"),
            runs(26, "rustc"),
            runs(27, "jrunscript"),
            runs(28, "jdb"),
            runs(29, "corepack"),
            runs(30, "pytest"),
            runs(31, "jest"),
            runs(32, "eslint"),
            runs(33, "sphinx-build"),
            runs(34, "bundle"),
            runs(35, "composer"),
            runs(36, "lli"),
            runs(37, "prove"),
            runs(38, "pdb3"),
            runs(39, "pydoc3"),
            runs(40, "dpkg-buildpackage"),
            runs(41, "m4"),
            runs(42, "pandoc"),
            runs(43, "setarch"),
            runs(44, "heaptrack"),
            runs(45, "msgexec"),
            runs(46, "scriptlive"),
            runs(47, "cpan"),
            runs(48, "terraform"),
            runs(49, "ansible-playbook"),
            runs(50, "latexmk"),
            runs(51, "gdbtui"),
            runs(52, "dpkg-architecture"),
            runs(53, "llvm-rtdyld"),
            runs(54, "erb"),
            runs(55, "clippy-driver"),
        ],
        "{text}"
    );
}

// guarantee: G-POL-07
/// A program that runs whatever it is asked to is noted under any name the personality gives
/// it: a link of its own that leads to the interpreter (a name no list holds), a versioned
/// name, or a name that is the program under a suffix (`vim.basic`, `perl5.36.0`), as the
/// canonical file is what a child runs.
#[test]
fn validate_notes_a_program_that_runs_others_under_another_name() {
    let env = Env::new();
    let bin = env.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    std::os::unix::fs::symlink("/usr/bin/python3", bin.join("tool")).unwrap();
    std::fs::write(
        env.root.join("aliases.toml"),
        format!(
            "id = \"aliases\"\ntoolset = [\"run_command\"]\n[fs_reach]\nread = [\"/srv\"]\n\
             [safety.process]\nallow = [\"git\", \"{}\", \"perl5.36.0\", \"vim.basic\", \"ld.bfd\"]\n",
            bin.join("tool").display()
        ),
    )
    .unwrap();
    let out = env.toolcap(&["validate", "--personality", &env.path("aliases.toml")]);
    let text = String::from_utf8_lossy(&out.stdout);
    let notes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("note:") && l.contains("runs whatever program"))
        .collect();
    for i in [1, 2, 3] {
        assert!(
            notes
                .iter()
                .any(|n| n.starts_with(&format!("note: safety.process.allow[{i}] is "))),
            "allow[{i}]: {text}"
        );
    }
    assert_eq!(notes.len(), 3, "{text}");
}

// guarantee: G-CLI-05
/// A call's arguments say exactly what they look like: `ARGS_JSON` with a key given twice is
/// refused (exit 2), as a personality with one is. Before, the last `path` won, so a command
/// line (or a script's log of it) that showed `notes.md` first read another file.
#[test]
fn call_arguments_with_a_key_given_twice_are_refused() {
    let env = Env::new();
    std::fs::write(env.root.join("work/other.md"), "other").unwrap();
    let p = env.path("p.toml");
    for args in [
        r#"{"path": "notes.md", "path": "other.md"}"#,
        r#"{"path": "notes.md", "p\u0061th": "other.md"}"#,
    ] {
        for command in ["call", "explain"] {
            let out = env.toolcap(&[command, "--personality", &p, "read_file", args]);
            assert_eq!(
                code(&out),
                2,
                "{command} {args}: {}",
                String::from_utf8_lossy(&out.stdout)
            );
            assert!(
                stderr(&out).contains("duplicate key \"path\""),
                "{}",
                stderr(&out)
            );
            assert!(out.stdout.is_empty());
        }
    }
    // The same key in two objects is two keys.
    let out = env.toolcap(&[
        "call",
        "--personality",
        &p,
        "read_file",
        r#"{"path": "notes.md"}"#,
    ]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
}

// guarantee: G-PROC-01
/// A binary the personality allows can be named by its path: an absolute entry of
/// `safety.process.allow` called as written, and a bare entry called by the file it resolves to
/// on the trusted search path, in both modes. The argument gate used to take the path for a
/// file to read and refused it outside the read reach (`PATH_NOT_REACHABLE: read not permitted
/// for /usr/bin/echo`), though the policy names exactly that file; the binary is checked where
/// it runs, by canonical file, so a path that is no allowed binary is refused as one
/// (`BINARY_NOT_ALLOWED`), whether it exists or not, and nothing of it comes back.
#[test]
fn an_allowed_binary_can_be_named_by_its_path() {
    let env = Env::new();
    let echo = std::fs::canonicalize("/usr/bin/echo")
        .or_else(|_| std::fs::canonicalize("/bin/echo"))
        .unwrap();
    let echo = echo.to_str().unwrap();
    let by_path = env.root.join("by-path.toml");
    std::fs::write(
        &by_path,
        format!(
            "id = \"by-path\"\n[fs_reach]\nread = [\"{w}\"]\n[safety.process]\nallow = [\"{echo}\"]\n",
            w = env.root.join("work").display()
        ),
    )
    .unwrap();
    let by_path = by_path.to_str().unwrap();
    for mode in [&[][..], &["--capsule"]] {
        let run = |personality: &str, binary: &str| {
            let args = serde_json::json!({"binary": binary, "args": ["named"]}).to_string();
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", personality, "run_command", args.as_str()]);
            let out = env.toolcap(&argv);
            (code(&out), stdout_json(&out))
        };
        // Allowed by path, called by that path; allowed by name, called by its file.
        for (personality, binary) in [(by_path, echo), ("../p.toml", echo)] {
            let (code, result) = run(personality, binary);
            assert_eq!(code, 0, "{mode:?} {personality} {binary}: {result}");
            assert_eq!(result["value"]["stdout"], "named\n", "{mode:?}: {result}");
        }
        // Paths that are no allowed binary: refused as binaries, the same whether they exist,
        // and never run (the script would leave its mark).
        let script = env.root.join("work/mark.sh");
        let mark = env.root.join("work/out/ran");
        std::fs::write(
            &script,
            format!("#!/bin/sh\necho ran > {}\n", mark.display()),
        )
        .unwrap();
        std::fs::set_permissions(&script, std::os::unix::fs::PermissionsExt::from_mode(0o755))
            .unwrap();
        let script = script.display().to_string();
        for binary in [
            "/bin/sh",
            "/etc/passwd",
            "/nonexistent/echo",
            "//usr/bin/env",
            script.as_str(),
        ] {
            let (code, result) = run("../p.toml", binary);
            assert_eq!(code, 1, "{mode:?} {binary}: {result}");
            assert_eq!(
                result["error"],
                format!("BINARY_NOT_ALLOWED: {binary} is not in the declared allowedBinaries"),
                "{mode:?} {binary}"
            );
            assert!(result.get("value").is_none(), "{mode:?} {binary}: {result}");
            assert!(!mark.exists(), "{mode:?} {binary} ran");
        }
        // The other places a call names stay gated: its arguments and its working directory.
        for args in [
            serde_json::json!({"binary": echo, "args": ["/etc/passwd"]}),
            serde_json::json!({"binary": "echo", "args": [], "cwd": "/etc"}),
        ] {
            let text = args.to_string();
            let mut argv = vec!["call"];
            argv.extend_from_slice(mode);
            argv.extend(["--personality", "../p.toml", "run_command", text.as_str()]);
            let out = env.toolcap(&argv);
            let result = stdout_json(&out);
            assert!(
                result["error"]
                    .as_str()
                    .unwrap()
                    .starts_with("PATH_NOT_REACHABLE"),
                "{mode:?} {args}: {result}"
            );
        }
    }
}

/// `toolcap call` and `explain` run with `(args, stdin)`, `stdin` written whole and then closed.
fn with_stdin(env: &Env, args: &[&str], stdin: &[u8]) -> Output {
    use std::io::Write as _;
    let mut child = env.spawn(args, std::process::Stdio::piped());
    let mut pipe = child.stdin.take().unwrap();
    // A refusal may come before everything is read; the pipe then breaks, which is the answer.
    let _ = pipe.write_all(stdin);
    drop(pipe);
    child.wait_with_output().unwrap()
}

/// Arguments longer than a command line holds (Linux takes at most 128 KiB in one argument:
/// `toolcap call write_file` of a 300 KiB file failed in the shell with "Argument list too
/// long") are read from standard input when ARGS_JSON is `-`, for `call` and `explain`. What
/// stdin gives is checked as ARGS_JSON is (JSON, an object, no key twice), and read no further
/// than its limit; `--ask`, which reads its answer from stdin, cannot be used with it.
#[test]
fn arguments_can_come_from_standard_input() {
    let env = Env::new();
    let content = "line of a large file\n".repeat(15_000);
    assert!(content.len() > 128 * 1024);
    let args = serde_json::json!({"path": "out/large.txt", "content": content}).to_string();
    let out = with_stdin(
        &env,
        &["call", "--personality", "../p.toml", "write_file", "-"],
        args.as_bytes(),
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["value"], content.len());
    assert_eq!(
        std::fs::read_to_string(env.root.join("work/out/large.txt")).unwrap(),
        content
    );
    let out = with_stdin(
        &env,
        &["explain", "--personality", "../p.toml", "read_file", "-"],
        br#"{"path": "/etc/passwd"}"#,
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert_eq!(stdout_json(&out)["denial"], "PATH_NOT_REACHABLE");

    // Hostile input: each a usage error of one line, nothing written.
    for (args, stdin, said) in [
        (
            &["call", "--personality", "../p.toml", "write_file", "-"][..],
            &b"{\"path\": \"out/x\", \"path\": \"out/y\", \"content\": \"\"}"[..],
            "duplicate key \"path\"",
        ),
        (
            &["call", "--personality", "../p.toml", "write_file", "-"],
            b"[1, 2]",
            "must be a JSON object",
        ),
        (
            &["call", "--personality", "../p.toml", "write_file", "-"],
            b"\xff\xfe{}",
            "not valid JSON",
        ),
        (
            &["call", "--personality", "../p.toml", "write_file", "-"],
            b"",
            "not valid JSON",
        ),
        (
            &[
                "call",
                "--ask",
                "--personality",
                "../p.toml",
                "write_file",
                "-",
            ],
            b"{}",
            "--ask",
        ),
    ] {
        let out = with_stdin(&env, args, stdin);
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        let message = stderr(&out);
        assert!(message.contains(said), "{args:?}: {message}");
        assert_eq!(message.trim_end().lines().count(), 1, "{message}");
    }
    assert!(!env.root.join("work/out/x").exists());
    assert!(!env.root.join("work/out/y").exists());

    // Standard input that does not end is read no further than the limit.
    let zero = std::fs::File::open("/dev/zero").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_toolcap"))
        .args(["call", "--personality", "../p.toml", "read_file", "-"])
        .env("HOME", &env.root)
        .current_dir(env.root.join("work"))
        .stdin(zero)
        .output()
        .unwrap();
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("longer than"), "{}", stderr(&out));
}

// guarantee: G-REG-15
/// `-v` logs toolcap's decisions, not every MCP message whole: an MCP client keeps the server's
/// stderr as its log, and the SDK's debug events quote each request and answer, credentials in
/// arguments (a header, a URL's query) and a file's contents among them. Before, both reached
/// the log; the decisions are still there.
#[test]
fn verbose_logs_keep_no_credential_of_an_mcp_call() {
    use std::io::{BufRead, BufReader, Read, Write};
    let env = Env::new();
    std::fs::write(
        env.root.join("work/notes.md"),
        "hello notes sk-FILE-CONTENT",
    )
    .unwrap();
    let p = env.path("f.toml");
    std::fs::write(
        &p,
        format!(
            "id = \"f\"\ntoolset = [\"fetch_url\", \"read_file\"]\n[fs_reach]\nread = [\"{w}\"]\n[safety.network]\nallow = [\"127.0.0.1:1\"]\n",
            w = env.root.join("work").display()
        ),
    )
    .unwrap();
    let mut server = env.spawn(
        &["mcp", "serve", "-v", "--personality", &p],
        std::process::Stdio::piped(),
    );
    let mut stdin = server.stdin.take().unwrap();
    let mut lines = BufReader::new(server.stdout.take().unwrap()).lines();
    for message in [
        r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
        r#"{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"fetch_url","arguments":{"url":"http://127.0.0.1:1/x?token=sk-QUERY","headers":{"Authorization":"Bearer sk-HEADER"}}}}"#,
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"notes.md"}}}"#,
    ] {
        writeln!(stdin, "{message}").unwrap();
    }
    let answers: Vec<String> = (0..3).map(|_| lines.next().unwrap().unwrap()).collect();
    // The answers come as the calls end, in either order.
    assert!(
        answers.iter().any(|a| a.contains("sk-FILE-CONTENT")),
        "{answers:?}"
    );
    drop(stdin);
    let mut log = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut log)
        .unwrap();
    server.wait().unwrap();
    for secret in ["sk-QUERY", "sk-HEADER", "sk-FILE-CONTENT"] {
        assert!(!log.contains(secret), "{secret} in the log:\n{log}");
    }
    assert!(
        log.contains("fetch_url") && log.contains("read_file"),
        "the decisions are logged:\n{log}"
    );
}
