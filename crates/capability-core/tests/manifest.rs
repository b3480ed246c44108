//! The permission manifest (deterministic, hash-verified) and the diff's coverage rules.

use std::path::Path;

use capability_core::PolicyFormat;
use capability_core::manifest::ManifestError;
use capability_core::{CompiledPolicy, Manifest, WideningCode, build_manifest, diff};
use capability_types::ToolCapabilities;

fn caps(json: &str) -> ToolCapabilities {
    serde_json::from_str(json).unwrap()
}

fn manifest(tools: &[(&str, &str)], policy: Option<&CompiledPolicy>) -> Manifest {
    let parsed: Vec<(String, ToolCapabilities)> = tools
        .iter()
        .map(|(n, j)| ((*n).to_owned(), caps(j)))
        .collect();
    build_manifest(parsed.iter().map(|(n, c)| (n.as_str(), c)), policy)
}

fn codes(old: &[(&str, &str)], new: &[(&str, &str)]) -> Vec<&'static str> {
    diff(&manifest(old, None), &manifest(new, None))
        .into_iter()
        .map(|w| w.code.as_str())
        .collect()
}

#[test]
fn manifests_are_deterministic_and_verified() {
    let tools = [
        ("b", r#"{"network":{"allowedHosts":["*"]}}"#),
        ("a", r#"{"secrets":["GITHUB_TOKEN"]}"#),
    ];
    let one = manifest(&tools, None).to_pretty_json();
    let two = manifest(&[tools[1], tools[0]], None).to_pretty_json();
    assert_eq!(one, two, "order of registration does not matter");
    let parsed = Manifest::parse(&one).unwrap();
    assert_eq!(parsed.to_pretty_json(), one, "round trip");
    assert!(one.contains("\"GITHUB_TOKEN\""), "secrets appear by ref");
    assert_eq!(
        Manifest::parse(&one.replace("GITHUB_TOKEN", "AWS_KEY")).unwrap_err(),
        ManifestError::Tampered
    );
    assert!(matches!(
        Manifest::parse(&one.replace("\"tools\"", "\"tools\": {}, \"extra\"")),
        Err(ManifestError::Invalid(_))
    ));
    assert!(matches!(
        Manifest::parse(&one.replace("toolcap-manifest/1", "toolcap-manifest/9")),
        Err(ManifestError::Format(_))
    ));
    assert!(matches!(
        Manifest::parse("[]"),
        Err(ManifestError::Invalid(_))
    ));
}

// guarantee: G-MAN-01
#[test]
fn coverage_rules_table() {
    let table: &[(&str, &str, &[&str])] = &[
        // fs: replacing a path with its parent widens; with a child does not.
        (
            r#"{"fs_reach":{"read":["/srv/uploads"]}}"#,
            r#"{"fs_reach":{"read":["/srv"]}}"#,
            &["fs.read.widened"],
        ),
        (
            r#"{"fs_reach":{"read":["/srv"]}}"#,
            r#"{"fs_reach":{"read":["/srv/uploads"]}}"#,
            &[],
        ),
        (
            r#"{"fs_reach":{"write":["/srv/up"]}}"#,
            r#"{"fs_reach":{"write":["/srv/uploads"]}}"#,
            &["fs.write.widened"],
        ),
        (
            r#"{"fs_reach":{"read":["/srv"]}}"#,
            r#"{"fs_reach":{"read":"from-personality"}}"#,
            &["fs.read.widened"],
        ),
        (
            r#"{"fs_reach":{"read":"from-personality"}}"#,
            r#"{"fs_reach":{"read":["/srv"]}}"#,
            &[],
        ),
        (
            r#"{}"#,
            r#"{"fs_reach":{"write":["/tmp/x"]}}"#,
            &["fs.write.widened"],
        ),
        // A path with `..` is not beneath the place it starts with: `/srv/data/../../etc` is
        // `/etc` to the kernel, and a manifest made by hand can hold one.
        (
            r#"{"fs_reach":{"read":["/srv/data"]}}"#,
            r#"{"fs_reach":{"read":["/srv/data/../../etc"]}}"#,
            &["fs.read.widened"],
        ),
        (
            r#"{"fs_reach":{"write":["/srv/data"]}}"#,
            r#"{"fs_reach":{"write":["/srv/data/x/.."]}}"#,
            &["fs.write.widened"],
        ),
        // ...but the very same text in both manifests is no widening (found by the `manifest`
        // fuzz target: a manifest diffed against itself reported one), nor is the same
        // unparsable host pattern.
        (
            r#"{"fs_reach":{"read":["/srv/data/../../etc"]}}"#,
            r#"{"fs_reach":{"read":["/srv/data/../../etc"]}}"#,
            &[],
        ),
        (
            r#"{"network":{"allowedHosts":["*.<<x.com"]}}"#,
            r#"{"network":{"allowedHosts":["*.<<x.com"]}}"#,
            &[],
        ),
        (
            r#"{"network":{"allowedHosts":["*.<<x.com"]}}"#,
            r#"{"network":{"allowedHosts":["*.<<x.com", "*.<<y.com"]}}"#,
            &["network.widened"],
        ),
        // network: coverage, not strings.
        (
            r#"{"network":{"allowedHosts":["*.github.com"]}}"#,
            r#"{"network":{"allowedHosts":["*.github.com","api.github.com"]}}"#,
            &[],
        ),
        (
            r#"{"network":{"allowedHosts":["api.github.com"]}}"#,
            r#"{"network":{"allowedHosts":["*.github.com"]}}"#,
            &["network.widened"],
        ),
        (
            r#"{"network":{"allowedHosts":["api.x.com"]}}"#,
            r#"{"network":{"allowedHosts":["*"]}}"#,
            &["network.widened"],
        ),
        (
            r#"{"network":{"allowedHosts":["h.x.com:443"]}}"#,
            r#"{"network":{"allowedHosts":["h.x.com"]}}"#,
            &["network.widened"],
        ),
        (
            r#"{"network":{"allowedHosts":["h.x.com"]}}"#,
            r#"{"network":{"allowedHosts":["H.X.COM.:443"]}}"#,
            &[],
        ),
        (
            r#"{"network":{"allowedHosts":["*"]}}"#,
            r#"{"network":{"allowedHosts":["anything.example"]}}"#,
            &[],
        ),
        // secrets: globs by segment.
        (
            r#"{"secrets":["a/b"]}"#,
            r#"{"secrets":["a/*"]}"#,
            &["secrets.widened"],
        ),
        (
            r#"{"secrets":["a/*"]}"#,
            r#"{"secrets":["a/b","a/c/*"]}"#,
            &[],
        ),
        (r#"{}"#, r#"{"secrets":[]}"#, &["secrets.widened"]),
        // process.
        (
            r#"{"process":{"allowedBinaries":["git"]}}"#,
            r#"{"process":{"allowedBinaries":["git","rm"]}}"#,
            &["process.widened"],
        ),
        (
            r#"{"process":{"allowedBinaries":["git"]}}"#,
            r#"{"process":{"allowedBinaries":["*"]}}"#,
            &["process.widened"],
        ),
        (
            r#"{"process":{"allowedBinaries":["*"]}}"#,
            r#"{"process":{"allowedBinaries":["git"]}}"#,
            &[],
        ),
        // storage: scope order tool-private < session < personality.
        (
            r#"{"storage":{"scope":"tool-private","kind":"kv"}}"#,
            r#"{"storage":{"scope":"personality","kind":"kv"}}"#,
            &["storage.widened"],
        ),
        (
            r#"{"storage":{"scope":"personality","kind":"kv"}}"#,
            r#"{"storage":{"scope":"session","kind":"kv"}}"#,
            &[],
        ),
        (
            r#"{}"#,
            r#"{"storage":{"scope":"session","kind":"kv"}}"#,
            &["storage.widened"],
        ),
        // Removing things is never a widening.
        (
            r#"{"network":{"allowedHosts":["a.x.com"]},"secrets":["S"]}"#,
            r#"{}"#,
            &[],
        ),
    ];
    for (old, new, expected) in table {
        assert_eq!(
            codes(&[("t", old)], &[("t", new)]),
            *expected,
            "{old} -> {new}"
        );
    }
    assert_eq!(codes(&[], &[("new_tool", "{}")]), ["tool.added"]);
    assert!(codes(&[("gone", "{}")], &[]).is_empty());
}

// guarantee: G-MAN-01
#[test]
fn effective_access_and_toolset_widen_with_the_personality() {
    let load = |toml: &str| {
        CompiledPolicy::load(toml, PolicyFormat::Toml, Some(Path::new("/home/u"))).unwrap()
    };
    let narrow = load(
        "id = \"p\"\ntoolset = [\"fetch\"]\n[fs_reach]\nread = [\"/srv/a\"]\n[safety.network]\nallow = [\"api.x.com\"]\n",
    );
    let wide = load(
        "id = \"p\"\ntoolset = [\"fetch\", \"reader\"]\n[fs_reach]\nread = [\"/srv\"]\n[safety.network]\nallow = [\"*.x.com\"]\n",
    );
    let tools = [
        ("fetch", r#"{"network":{"allowedHosts":["*"]}}"#),
        ("reader", r#"{"fs_reach":{"read":"from-personality"}}"#),
    ];
    let old = manifest(&tools, Some(&narrow));
    let new = manifest(&tools, Some(&wide));
    assert_eq!(
        old.tools["fetch"]
            .effective
            .as_ref()
            .unwrap()
            .network
            .as_deref(),
        Some(&["api.x.com".to_owned()][..])
    );
    let found: Vec<(WideningCode, String, String)> = diff(&old, &new)
        .into_iter()
        .map(|w| (w.code, w.tool, w.layer))
        .collect();
    assert_eq!(
        found,
        [
            (WideningCode::Toolset, String::new(), "toolset".to_owned()),
            (
                WideningCode::Network,
                "fetch".to_owned(),
                "effective".to_owned()
            ),
            (
                WideningCode::Toolset,
                "reader".to_owned(),
                "effective".to_owned()
            ),
            (
                WideningCode::FsRead,
                "reader".to_owned(),
                "effective".to_owned()
            ),
        ]
    );
    assert!(
        diff(&new, &old).is_empty(),
        "narrowing the personality is not a widening"
    );
}

// guarantee: G-MAN-01
/// Loosening what the personality takes from a tool's reach is a widening in the effective layer:
/// a deny path or host no longer in force, a `deny_args` pattern, an escalation, a constraint
/// relaxed, a child variable allowed, the sandbox turned off. Tightening any of them is not, and a
/// manifest made before the rules were recorded gives no loosening to report. Before, each of
/// these changes gave "no widenings".
#[test]
fn loosening_the_personality_s_restrictions_is_a_widening() {
    let load = |toml: &str| {
        CompiledPolicy::load(toml, PolicyFormat::Toml, Some(Path::new("/home/u"))).unwrap()
    };
    let base = "id = \"p\"\n[fs_reach]\nread = [\"/srv\"]\nwrite = [\"/srv/out\"]\ndeny = [\"/srv/keys\"]\napart = [\"/srv/state\"]\n\
         [safety.network]\nallow = [\"*.x.com\"]\ndeny = [\"admin.x.com\"]\n\
         [safety.process]\nallow = [\"git\"]\ndeny_args = [\"git push*\"]\n\
         [safety.env]\nallow = [\"TZ\"]\n\
         [escalate]\nwrite_paths = [\"/srv/out/releases\"]\nhosts = [\"uploads.x.com\"]\n\
         tools = [\"shell\"]\ncalls = [\"rm -rf\"]\n\
         [constraints.shell]\nmax_invocations = 2\nreject_args = { mode = [\"force\", \"hard\"] }\n\
         [after_untrusted]\npause = [\"shell\"]\nbatches = 2\nhold = [\"fetch\"]\n\
         hold_writes = [\"/srv/out/state\"]\n[refuse]\ncalls = [\"--force\"]\n";
    let tools = [
        (
            "shell",
            r#"{"process":{"allowedBinaries":["git"]},"fs_reach":{"read":"from-personality","write":"from-personality"}}"#,
        ),
        ("fetch", r#"{"network":{"allowedHosts":["*"]}}"#),
    ];
    let old = manifest(&tools, Some(&load(base)));
    let found = |from: &str, to: &str| -> Vec<(WideningCode, String)> {
        assert!(base.contains(from), "{from}");
        let new = manifest(&tools, Some(&load(&base.replace(from, to))));
        diff(&old, &new)
            .into_iter()
            .map(|w| (w.code, w.tool))
            .collect()
    };
    let shell = |code| vec![(code, "shell".to_owned())];
    let fetch = |code| vec![(code, "fetch".to_owned())];
    assert_eq!(
        found("deny = [\"/srv/keys\"]", "deny = []"),
        shell(WideningCode::Restriction)
    );
    // A place kept apart dropped, or replaced by a larger one (whose roots between the two would
    // reach into the smaller): no longer in force.
    assert_eq!(
        found("apart = [\"/srv/state\"]", "apart = []"),
        shell(WideningCode::Restriction)
    );
    assert_eq!(
        found("apart = [\"/srv/state\"]", "apart = [\"/srv\"]"),
        shell(WideningCode::Restriction)
    );
    assert_eq!(
        found("deny = [\"admin.x.com\"]", "deny = []"),
        fetch(WideningCode::Restriction)
    );
    assert_eq!(
        found("deny_args = [\"git push*\"]", "deny_args = []"),
        shell(WideningCode::Restriction)
    );
    assert_eq!(
        found("write_paths = [\"/srv/out/releases\"]", "write_paths = []"),
        shell(WideningCode::Escalation)
    );
    assert_eq!(
        found("hosts = [\"uploads.x.com\"]", "hosts = []"),
        fetch(WideningCode::Escalation)
    );
    assert_eq!(
        found("tools = [\"shell\"]", "tools = []"),
        shell(WideningCode::Escalation)
    );
    // Call text is asked about for every tool.
    let both: Vec<(WideningCode, String)> = found("calls = [\"rm -rf\"]", "calls = []");
    assert_eq!(
        both,
        [
            (WideningCode::Escalation, "fetch".to_owned()),
            (WideningCode::Escalation, "shell".to_owned())
        ]
    );
    assert_eq!(
        found("max_invocations = 2", "max_invocations = 3"),
        shell(WideningCode::Constraints)
    );
    // A shorter pause after untrusted output, none, or no hold.
    assert_eq!(
        found("batches = 2", "batches = 1"),
        shell(WideningCode::Constraints)
    );
    assert_eq!(
        found("pause = [\"shell\"]", "pause = []"),
        shell(WideningCode::Constraints)
    );
    assert_eq!(
        found("hold = [\"fetch\"]", "hold = []"),
        fetch(WideningCode::Constraints)
    );
    assert_eq!(
        found("hold_writes = [\"/srv/out/state\"]", "hold_writes = []"),
        shell(WideningCode::Constraints)
    );
    // A call text no longer refused, for every tool.
    assert_eq!(
        found("calls = [\"--force\"]", "calls = []"),
        [
            (WideningCode::Restriction, "fetch".to_owned()),
            (WideningCode::Restriction, "shell".to_owned())
        ]
    );
    assert_eq!(
        found("max_invocations = 2\n", "\n"),
        shell(WideningCode::Constraints)
    );
    // An argument value no longer refused.
    for to in [
        "reject_args = { mode = [\"force\"] }",
        "reject_args = {}",
        "",
    ] {
        assert_eq!(
            found("reject_args = { mode = [\"force\", \"hard\"] }", to),
            shell(WideningCode::Constraints),
            "{to}"
        );
    }
    assert_eq!(
        found(
            "allow = [\"TZ\"]",
            "allow = [\"TZ\", \"AWS_SECRET_ACCESS_KEY\"]"
        ),
        shell(WideningCode::Environment)
    );
    assert_eq!(
        found(
            "deny_args = [\"git push*\"]",
            "deny_args = [\"git push*\"]\nsandbox = \"off\""
        ),
        shell(WideningCode::Sandbox)
    );
    // From `restricted_addresses = "never"` back to the default: a host named exactly reaches
    // loopback and private addresses again.
    {
        let never = base.replace(
            "deny = [\"admin.x.com\"]",
            "deny = [\"admin.x.com\"]\nrestricted_addresses = \"never\"",
        );
        let strict = manifest(&tools, Some(&load(&never)));
        let loosened: Vec<(WideningCode, String)> = diff(&strict, &old)
            .into_iter()
            .map(|w| (w.code, w.tool))
            .collect();
        assert_eq!(loosened, fetch(WideningCode::Restriction));
        assert!(diff(&old, &strict).is_empty(), "tightening is no widening");
    }
    // A tool with no `[constraints]` entry has the defaults in force: giving it one that turns
    // its path gate off loosens it.
    assert_eq!(
        found(
            "[constraints.shell]\n",
            "[constraints.fetch]\npath_gate = false\n[constraints.shell]\n"
        ),
        fetch(WideningCode::Constraints)
    );
    // Tightening is not a widening.
    for (from, to) in [
        (
            "deny = [\"/srv/keys\"]",
            "deny = [\"/srv/keys\", \"/srv/more\"]",
        ),
        ("deny = [\"/srv/keys\"]", "deny = [\"/srv\"]"),
        ("deny = [\"admin.x.com\"]", "deny = [\"*.x.com\"]"),
        ("max_invocations = 2", "max_invocations = 1"),
        ("batches = 2", "batches = 3"),
        ("calls = [\"--force\"]", "calls = [\"--force\", \"-f\"]"),
        (
            "hold_writes = [\"/srv/out/state\"]",
            "hold_writes = [\"/srv/out\"]",
        ),
        ("hold = [\"fetch\"]", "hold = [\"fetch\", \"shell\"]"),
        (
            "max_invocations = 2",
            "max_invocations = 2\nforbidden = true",
        ),
        ("allow = [\"TZ\"]", "allow = []"),
        (
            "reject_args = { mode = [\"force\", \"hard\"] }",
            "reject_args = { mode = [\"hard\", \"force\", \"soft\"], other = [\"x\"] }",
        ),
        ("tools = [\"shell\"]", "tools = [\"shell\", \"fetch\"]"),
        ("calls = [\"rm -rf\"]", "calls = [\"rm -rf\", \"DROP\"]"),
    ] {
        assert_eq!(found(from, to), [], "{from} -> {to}");
    }
    // A manifest from before the rules were recorded: nothing to compare them with.
    let mut older = old.clone();
    for entry in older.tools.values_mut() {
        if let Some(effective) = entry.effective.as_mut() {
            effective.restrictions = None;
        }
    }
    let loosened = manifest(
        &tools,
        Some(&load(&base.replace("deny = [\"/srv/keys\"]", "deny = []"))),
    );
    assert_eq!(diff(&older, &loosened), []);
}
