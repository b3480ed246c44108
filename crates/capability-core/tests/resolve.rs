//! Registration validation and call-time resolution: the intersection, `from-personality`,
//! deny rules and floor, storage namespaces, and the policy objects backends receive.

mod support;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability_core::{
    CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall, resolve, validate_declaration,
};
use capability_core::{PersonalityPolicy, PolicyFormat};
use capability_types::backend::{FsAccess, HostMatch, HostPolicy, PathPolicy, ProcessPolicy};
use capability_types::{
    CapabilityError, DenialCode, ErrorCode, FsPaths, StorageScope, ToolCapabilities,
};
use serde_json::json;
use support::{Behaviour, TestTool, policy, recording_backends};

const RESEARCHER: &str = r#"
id = "researcher"
[fs_reach]
read = ["/srv/data", "/srv/shared", "/proc/cpuinfo"]
write = ["/srv/out"]
deny = ["/srv/data/private"]
[safety.network]
allow = ["api.github.com", "*.example.com", "127.0.0.1:8080"]
deny = ["bad.example.com"]
[safety.process]
allow = ["git", "/usr/bin/ls"]
deny_args = ["git push --force*"]
[safety.env]
allow = ["LANG"]
"#;

fn denial(result: Result<impl std::fmt::Debug, CapabilityError>) -> (DenialCode, String) {
    match result {
        Err(CapabilityError::Denied { code, message }) => (code, message),
        other => panic!("expected a denial, got {other:?}"),
    }
}

#[test]
fn host_policy_from_wildcard_declaration() {
    let p = policy(RESEARCHER);
    let caps = ToolCapabilities::none().with_network(["*"]);
    let hosts = resolve("fetch_url", &caps, &p, "s", Path::new("/w"))
        .network
        .unwrap();
    assert_eq!(
        hosts.check("API.GitHub.com.", 443).unwrap(),
        HostMatch::Explicit
    );
    assert_eq!(
        hosts.check("docs.example.com", 443).unwrap(),
        HostMatch::Wildcard
    );
    assert_eq!(
        hosts.check("0x7f.1", 8080).unwrap(),
        HostMatch::Explicit,
        "IPv4 in hex is the same address"
    );
    assert_eq!(
        hosts.check("[::ffff:127.0.0.1]", 8080).unwrap(),
        HostMatch::Explicit,
        "IPv4-mapped IPv6"
    );
    assert_eq!(
        hosts.check("2130706433", 8080).unwrap(),
        HostMatch::Explicit,
        "IPv4 as an integer"
    );
    assert_eq!(
        hosts.check("0177.0.0.1", 8080).unwrap(),
        HostMatch::Explicit,
        "IPv4 in octal"
    );
    assert_eq!(
        denial(hosts.check("127.0.0.1", 8081)),
        (
            DenialCode::HostNotAllowed,
            "127.0.0.1 is not in the declared allowedHosts".into()
        )
    );
    assert_eq!(
        denial(hosts.check("example.com", 443)).0,
        DenialCode::HostNotAllowed,
        "apex"
    );
    assert_eq!(
        denial(hosts.check("evilexample.com", 443)).0,
        DenialCode::HostNotAllowed
    );
    assert_eq!(
        denial(hosts.check("BAD.example.com", 443)),
        (
            DenialCode::HostNotAllowed,
            "bad.example.com is refused by policy".into()
        ),
        "deny wins over *.example.com"
    );
    assert_eq!(
        denial(hosts.check("api.stripe.com", 443)).1,
        "api.stripe.com is not in the declared allowedHosts"
    );
    assert_eq!(denial(hosts.check("", 443)).0, DenialCode::HostNotAllowed);
}

// guarantee: G-REG-03
#[test]
fn explicit_declaration_is_intersected() {
    let p = policy(RESEARCHER);
    let caps = ToolCapabilities::none().with_network([
        "api.github.com",
        "a.example.com",
        "api.stripe.com",
    ]);
    let hosts = resolve("t", &caps, &p, "s", Path::new("/w"))
        .network
        .unwrap();
    assert_eq!(hosts.patterns(), ["a.example.com", "api.github.com"]);
    assert!(
        hosts.check("b.example.com", 443).is_err(),
        "declared narrower than the personality"
    );
    assert!(
        hosts.check("api.stripe.com", 443).is_err(),
        "declared but not allowed"
    );
}

#[test]
fn no_personality_network_means_nothing() {
    for p in [
        Arc::new(CompiledPolicy::none(None)),
        policy("id = \"x\"\n"),
        policy("id = \"x\"\n[safety.network]\nallow = []\n"),
    ] {
        let hosts = resolve(
            "t",
            &ToolCapabilities::none().with_network(["*"]),
            &p,
            "s",
            Path::new("/w"),
        )
        .network
        .unwrap();
        assert!(hosts.check("api.github.com", 443).is_err());
        assert!(hosts.patterns().is_empty());
    }
}

// guarantee: G-FS-01
#[test]
fn path_policy_semantics() {
    let p = policy(RESEARCHER);
    let caps = ToolCapabilities::none()
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let paths = resolve("t", &caps, &p, "s", Path::new("/srv/data/work"))
        .fs
        .unwrap();
    let ok = paths.check(Path::new("notes.txt"), FsAccess::Read).unwrap();
    assert_eq!(
        ok.path,
        Path::new("/srv/data/work/notes.txt"),
        "relative to the context's working dir"
    );
    assert_eq!(ok.root, Path::new("/srv/data"));
    assert_eq!(ok.relative, Path::new("work/notes.txt"));
    let refused = [
        (
            "../../shared/../../etc/passwd",
            FsAccess::Read,
            "read not permitted for /etc/passwd",
        ),
        (
            "/srv/data/private/key",
            FsAccess::Read,
            "read not permitted for /srv/data/private/key",
        ),
        (
            "/srv/data/x/../private",
            FsAccess::Read,
            "read not permitted for /srv/data/private",
        ),
        (
            "/srv/dataset",
            FsAccess::Read,
            "read not permitted for /srv/dataset",
        ),
        (
            "/srv/data/a.txt",
            FsAccess::Write,
            "write not permitted for /srv/data/a.txt",
        ),
        (
            "/srv/outside",
            FsAccess::Write,
            "write not permitted for /srv/outside",
        ),
        (
            "/proc/self/environ",
            FsAccess::Read,
            "read not permitted for /proc/self/environ",
        ),
    ];
    for (path, access, message) in refused {
        assert_eq!(
            denial(paths.check(Path::new(path), access)),
            (DenialCode::PathNotReachable, message.into()),
            "{path}"
        );
    }
    assert!(
        paths
            .check(Path::new("/srv/out/report.md"), FsAccess::Write)
            .is_ok()
    );
    assert!(
        paths
            .check(Path::new("/proc/cpuinfo"), FsAccess::Read)
            .is_ok(),
        "the floor is lifted by an exact personality path"
    );
    assert!(matches!(
        paths.check(Path::new("a\0b"), FsAccess::Read),
        Err(CapabilityError::InvalidInput(_))
    ));
}

// guarantee: G-FS-03
#[test]
fn deny_floor_applies_under_broad_roots() {
    let p = policy("id = \"wide\"\n[fs_reach]\nread = [\"/\"]\n");
    let paths = resolve(
        "t",
        &ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
        &p,
        "s",
        Path::new("/"),
    )
    .fs
    .unwrap();
    for blocked in [
        "/home/ada/.ssh/id_ed25519",
        "/etc/shadow",
        "/etc/shadow-",
        "/etc/gshadow-",
        "/etc/sudoers.d/90",
        "/etc/ssh/ssh_host_ed25519_key",
        "/etc/ssl/private/server.key",
        "/proc/1/environ",
        "/sys/x",
        "/dev/mem",
    ] {
        assert_eq!(
            denial(paths.check(Path::new(blocked), FsAccess::Read)).0,
            DenialCode::PathNotReachable,
            "{blocked}"
        );
    }
    for open in [
        "/dev/null",
        "/etc/hostname",
        "/etc/ssh/ssh_config",
        "/etc/ssl/certs/ca-certificates.crt",
        "/home/ada/code/main.rs",
    ] {
        assert!(
            paths.check(Path::new(open), FsAccess::Read).is_ok(),
            "{open}"
        );
    }
}

#[test]
fn from_personality_with_no_personality_list() {
    let p = policy("id = \"bare\"\n");
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
    let paths = resolve("t", &caps, &p, "s", Path::new("/w")).fs.unwrap();
    assert!(paths.roots(FsAccess::Read).is_empty());
    assert!(paths.check(Path::new("/w/x"), FsAccess::Read).is_err());
    let errors = validate_declaration("t", &caps, &p);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].capability, "fs_reach.read");
    assert_eq!(
        errors[0].message,
        "declares from-personality but the personality grants no fs_reach.read"
    );
}

#[test]
fn explicit_paths_are_intersected_and_reported() {
    let p = policy(RESEARCHER);
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::Paths(vec![
        "/srv/data/reports".into(),
        "/etc".into(),
        "/srv".into(),
    ]));
    let paths = resolve("t", &caps, &p, "s", Path::new("/w")).fs.unwrap();
    assert_eq!(
        paths.roots(FsAccess::Read),
        [PathBuf::from("/srv/data"), PathBuf::from("/srv/shared")]
    );
    let messages: Vec<String> = validate_declaration("t", &caps, &p)
        .into_iter()
        .map(|e| e.message)
        .collect();
    assert_eq!(
        messages,
        [
            "/etc is outside every path of the personality's fs_reach.read",
            "/srv is wider than the personality's fs_reach.read; narrowed to /srv/data, /srv/shared",
        ]
    );
}

// guarantee: G-PROC-02
#[test]
fn process_policy_binaries_args_env() {
    let p = policy(RESEARCHER);
    let caps = ToolCapabilities::none().with_process(["*"]);
    let resolved = resolve("run_command", &caps, &p, "s", Path::new("/w"));
    let process = resolved.process.unwrap();
    assert_eq!(process.allowed_binaries(), ["/usr/bin/ls", "git"]);
    let argv = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
    assert_eq!(
        denial(process.check_args(
            "git",
            "git",
            Path::new("/usr/bin/git"),
            &argv(&["push", "--force"])
        )),
        (
            DenialCode::ArgsNotAllowed,
            "git push --force refused by policy (the deny_args pattern `git push --force*`)".into()
        )
    );
    assert!(
        process
            .check_args("git", "git", Path::new("/usr/bin/git"), &argv(&["status"]))
            .is_ok()
    );
    assert_eq!(
        denial(process.check_env("LD_PRELOAD")),
        (
            DenialCode::EnvNotAllowed,
            "LD_PRELOAD may not be passed to a child".into()
        )
    );
    assert_eq!(
        denial(process.check_env("GIT_SSH_COMMAND")).0,
        DenialCode::EnvNotAllowed
    );
    assert_eq!(
        denial(process.check_env("A=B")).0,
        DenialCode::EnvNotAllowed
    );
    assert_eq!(
        denial(process.check_env("PATH")),
        (
            DenialCode::EnvNotAllowed,
            "PATH is set by toolcap and may not be passed to a child".into()
        )
    );
    assert_eq!(
        denial(process.check_env("HOME")).0,
        DenialCode::EnvNotAllowed
    );
    // An allow list (issue 13, class 6): a variable that is neither safe for every child nor
    // in safety.env.allow is refused, whatever its name.
    assert_eq!(
        denial(process.check_env("MY_FLAG")).0,
        DenialCode::EnvNotAllowed
    );
    for steering in [
        "XDG_CONFIG_HOME",
        "PAGER",
        "EDITOR",
        "GIT_DIR",
        "npm_config_script_shell",
    ] {
        assert_eq!(
            denial(process.check_env(steering)).0,
            DenialCode::EnvNotAllowed,
            "{steering}"
        );
    }
    for safe in ["LANG", "LC_ALL", "TZ", "GIT_AUTHOR_NAME", "NO_COLOR"] {
        assert!(process.check_env(safe).is_ok(), "{safe}");
    }
    assert_eq!(process.env_allow(), ["LANG"]);
    assert!(
        resolved.fs.is_none(),
        "a tool that declared no fs_reach gets no ScopedFs"
    );

    let narrow = resolve(
        "t",
        &ToolCapabilities::none().with_process(["git", "rm"]),
        &p,
        "s",
        Path::new("/w"),
    );
    assert_eq!(narrow.process.unwrap().allowed_binaries(), ["git"]);
    let errors = validate_declaration(
        "t",
        &ToolCapabilities::none().with_process(["git", "rm"]),
        &p,
    );
    assert_eq!(
        errors[0].message,
        "rm is not in the personality's safety.process.allow"
    );
}

#[test]
fn storage_namespaces() {
    let p = policy("id = \"ops\"\n");
    let none = CompiledPolicy::none(None);
    let ns = |scope, policy: &CompiledPolicy| {
        let caps = ToolCapabilities::none().with_storage(scope, std::num::NonZeroU64::new(60));
        resolve("kv_set", &caps, policy, "sess-1", Path::new("/w"))
            .storage
            .unwrap()
    };
    assert_eq!(ns(StorageScope::ToolPrivate, &p).namespace, "tool:kv_set");
    assert_eq!(ns(StorageScope::Session, &p).namespace, "session:sess-1");
    assert_eq!(
        ns(StorageScope::Personality, &p).namespace,
        "personality:ops"
    );
    assert_eq!(
        ns(StorageScope::Personality, &none).namespace,
        "session:sess-1"
    );
    assert_eq!(
        ns(StorageScope::Session, &p).ttl_default,
        Some(std::time::Duration::from_secs(60))
    );
}

#[test]
fn validation_reports_network_findings() {
    let p = policy(RESEARCHER);
    let caps = ToolCapabilities::none().with_network([
        "api.github.com",
        "evil.com",
        "bad.example.com",
        "*.com",
    ]);
    let errors = validate_declaration("fetcher", &caps, &p);
    let shown: Vec<String> = errors.iter().map(ToString::to_string).collect();
    assert_eq!(
        shown,
        [
            "fetcher: network: evil.com is not covered by the personality's safety.network.allow",
            "fetcher: network: bad.example.com is refused by safety.network.deny",
            "fetcher: network: \"*.com\" is a single-label suffix wildcard; name at least two labels (*.example.com)",
        ]
    );
    let errors = validate_declaration(
        "f",
        &ToolCapabilities::none().with_network(["*"]),
        &policy("id = \"x\"\n"),
    );
    assert_eq!(
        errors[0].message,
        "the personality allows no network hosts (safety.network.allow is empty)"
    );
}

#[test]
fn validation_reports_a_sandbox_opt_out_for_tools_that_spawn() {
    let caps = ToolCapabilities::none().with_process(["git"]);
    let required = policy("id = \"x\"\n[safety.process]\nallow = [\"git\"]\n");
    assert!(validate_declaration("runner", &caps, &required).is_empty());
    let off = policy("id = \"x\"\n[safety.process]\nallow = [\"git\"]\nsandbox = \"off\"\n");
    let shown: Vec<String> = validate_declaration("runner", &caps, &off)
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        shown,
        [
            "runner: process.sandbox: children run without kernel confinement: the personality \
          sets safety.process.sandbox = \"off\""
        ]
    );
    // Tools that spawn nothing are not affected.
    assert!(validate_declaration("reader", &ToolCapabilities::none(), &off).is_empty());
    // Anything but the two modes is refused when the personality loads.
    let err = CompiledPolicy::load(
        "id = \"x\"\n[safety.process]\nsandbox = \"best-effort\"\n",
        PolicyFormat::Toml,
        None,
    )
    .unwrap_err();
    assert!(err.to_string().contains("safety.process.sandbox"), "{err}");
}

#[tokio::test]
async fn end_to_end_through_the_registry() {
    let (backends, grants) = recording_backends();
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry
        .register(TestTool::new(
            "reader",
            ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
            Behaviour::ReadFile,
        ))
        .unwrap();
    registry
        .register(TestTool::new(
            "fetcher",
            ToolCapabilities::none().with_network(["*"]),
            Behaviour::Fetch,
        ))
        .unwrap();
    let ctx = ExecutionContext::new("s", policy(RESEARCHER), "/srv/data");
    let calls = vec![
        ToolCall::new("1", "reader", json!({"path": "a.txt"})),
        ToolCall::new("2", "reader", json!({"path": "/etc/passwd"})),
        ToolCall::new(
            "3",
            "fetcher",
            json!({"url": "https://api.github.com/repos"}),
        ),
        ToolCall::new("4", "fetcher", json!({"url": "https://api.stripe.com/v1"})),
    ];
    let r = registry.execute_parallel(calls, &ctx).await;
    assert_eq!(
        r[0].result.value(),
        Some(&json!("contents of /srv/data/a.txt"))
    );
    assert_eq!(
        serde_json::to_value(&r[1].result).unwrap(),
        json!({"ok": false, "code": "denied", "error": "PATH_NOT_REACHABLE: read not permitted for /etc/passwd"})
    );
    assert_eq!(r[2].result.value(), Some(&json!(200)));
    assert_eq!(r[3].result.code(), Some(ErrorCode::Denied));
    assert_eq!(
        r[3].result.error_message(),
        Some("HOST_NOT_ALLOWED: api.stripe.com is not in the declared allowedHosts")
    );
    assert_eq!(
        grants.fs.lock().unwrap().len(),
        1,
        "resolved once per tool per batch"
    );
}

#[test]
fn policy_formats_share_one_structure() {
    let toml = PersonalityPolicy::parse(RESEARCHER, PolicyFormat::Toml, None).unwrap();
    let yaml = PersonalityPolicy::parse(
        r#"
id: researcher
fs_reach:
  read: [/srv/data, /srv/shared, /proc/cpuinfo]
  write: [/srv/out]
  deny: [/srv/data/private]
safety:
  network:
    allow: [api.github.com, "*.example.com", "127.0.0.1:8080"]
    deny: [bad.example.com]
  process:
    allow: [git, /usr/bin/ls]
    deny_args: ["git push --force*"]
  env:
    allow: [LANG]
"#,
        PolicyFormat::Yaml,
        None,
    )
    .unwrap();
    let json = PersonalityPolicy::parse(
        &serde_json::to_string(&toml).unwrap(),
        PolicyFormat::Json,
        None,
    )
    .unwrap();
    assert_eq!(toml, yaml);
    assert_eq!(toml, json);
}

// guarantee: G-POL-01
#[test]
fn hostile_policy_files_are_refused_naming_the_field() {
    let cases: &[(&str, PolicyFormat, Option<&str>, &str)] = &[
        (
            "id = \"x\"\n[safety.network]\nalow = [\"a\"]\n",
            PolicyFormat::Toml,
            Some("safety.network.alow"),
            "unknown field",
        ),
        (
            "id = \"x\"\n[safety.network]\nallow = [\"*.com\"]\n",
            PolicyFormat::Toml,
            Some("safety.network.allow[0]"),
            "single-label",
        ),
        (
            "id = \"x\"\n[safety.network]\ndeny = [\"a\", \"https://b\"]\n",
            PolicyFormat::Toml,
            Some("safety.network.deny[1]"),
            "scheme",
        ),
        (
            "id = \"x\"\n[safety.process]\ndeny_args = [\"bin/git push\"]\n",
            PolicyFormat::Toml,
            Some("safety.process.deny_args[0]"),
            "bare name",
        ),
        (
            "id = \"x\"\n[fs_reach]\nread = \"/srv\"\n",
            PolicyFormat::Toml,
            Some("fs_reach.read"),
            "invalid type",
        ),
        (
            "id = \"x\"\nid = \"y\"\n",
            PolicyFormat::Toml,
            None,
            "duplicate key",
        ),
        ("id = \"x\"\n[fs_reach\n", PolicyFormat::Toml, None, ""),
        (
            "id: x\nsafety: {network: {allow: [\"a\"], extra: 1}}\n",
            PolicyFormat::Yaml,
            Some("safety.network.extra"),
            "unknown field",
        ),
        ("- id: x\n", PolicyFormat::Yaml, None, "expected a map"),
        (
            "{\"id\": \"x\", \"toolset\": \"read_file\"}",
            PolicyFormat::Json,
            Some("toolset"),
            "invalid type",
        ),
    ];
    for (text, format, field, needle) in cases {
        let err = CompiledPolicy::load(text, *format, None).unwrap_err();
        assert_eq!(err.field(), *field, "{text:?}: {err}");
        assert!(err.to_string().contains(needle), "{text:?}: {err}");
    }
}

#[test]
fn the_host_policy_is_shared_across_batches_unless_a_call_was_approved() {
    // The fetch backend keys its connection pool by the host policy object: rebuilding it per
    // batch would throw the pool away on every batch.
    let p = policy(RESEARCHER);
    let cache = capability_core::ResolutionCache::new();
    let caps = ToolCapabilities::none().with_network(["*"]);
    let first = cache
        .intersect("fetch_url", &caps, &p)
        .for_call("s1", Path::new("/w"))
        .network
        .unwrap();
    let second = cache
        .intersect("fetch_url", &caps, &p)
        .for_call("s2", Path::new("/x"))
        .network
        .unwrap();
    assert!(Arc::ptr_eq(&first, &second));
    let approvals = capability_core::Approvals {
        hosts: vec!["api.github.com".into()],
        ..Default::default()
    };
    let approved = cache.intersect("fetch_url", &caps, &p).for_call_approved(
        "s1",
        Path::new("/w"),
        Arc::new(approvals),
    );
    assert!(
        !Arc::ptr_eq(&first, &approved.network.unwrap()),
        "an approved call gets its own"
    );
}

// guarantee: G-REG-04
#[test]
fn building_without_backends_refuses_every_declared_category() {
    let p = policy(RESEARCHER);
    let none = ToolCapabilities::none();
    let nothing =
        capability_core::build_scoped(&resolve("noop", &none, &p, "s", Path::new("/w")), None)
            .unwrap();
    assert!(nothing.fetch.is_none() && nothing.fs.is_none() && nothing.kv.is_none());

    let declared = [
        (ToolCapabilities::none().with_network(["*"]), "network"),
        (
            ToolCapabilities::none()
                .with_secrets([capability_types::SecretRef::parse("A").unwrap()]),
            "secrets",
        ),
    ];
    for (caps, category) in declared {
        let resolved = resolve("t", &caps, &p, "s", Path::new("/w"));
        let Err(err) = capability_core::build_scoped(&resolved, None) else {
            panic!("{category}: a declared category without a backend must refuse");
        };
        assert_eq!(err.result_code(), ErrorCode::NotAvailable, "{category}");
        assert!(err.to_string().contains(category), "{category}: {err}");
    }
}

// guarantee: G-REG-11
#[tokio::test]
async fn registries_on_one_thread_never_hand_out_each_others_plans() {
    // A thread remembers the plans it was last handed (docs/decisions.md, "The per-call path"):
    // two registries, with a tool of the same name declared differently and the same backends,
    // called in turn in the same context, each get their own tool's scoped objects.
    let (backends, _) = recording_backends();
    let mut reads = DefaultToolRegistry::new(Some(backends.clone()));
    reads
        .register(TestTool::new(
            "tool",
            ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality),
            Behaviour::ReportIdentity,
        ))
        .unwrap();
    let mut fetches = DefaultToolRegistry::new(Some(backends));
    fetches
        .register(TestTool::new(
            "tool",
            ToolCapabilities::none().with_network(["api.github.com"]),
            Behaviour::ReportIdentity,
        ))
        .unwrap();
    let ctx = ExecutionContext::new("s", policy(RESEARCHER), "/srv/data");
    for round in 0..3 {
        for (registry, fs) in [
            (&reads, true),
            (&fetches, false),
            (&fetches, false),
            (&reads, true),
        ] {
            let r = registry
                .execute(ToolCall::new("1", "tool", json!({})), &ctx)
                .await;
            let seen = r
                .result
                .value()
                .cloned()
                .unwrap_or_else(|| panic!("{:?}", r.result));
            assert_eq!(seen["fs"], json!(fs), "round {round}");
        }
    }
}
