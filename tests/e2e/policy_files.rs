//! The example personalities and a corpus of hostile policy files, loaded from disk through the
//! same path the command line uses.

use std::path::{Path, PathBuf};

use capability_core::{CompiledPolicy, validate_declaration};
use capability_core::{PolicyError, PolicyFormat};
use capability_types::ToolCapabilities;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// Reads and compiles a policy file the way the CLI does: format from the extension, bytes
/// that are not UTF-8 refused, `~` expanded against `home`.
fn load(path: &Path, home: &Path) -> Result<CompiledPolicy, PolicyError> {
    let format = PolicyFormat::from_path(path)?;
    let bytes = std::fs::read(path).unwrap();
    let text = String::from_utf8(bytes).map_err(|_| PolicyError::Syntax {
        field: None,
        message: format!("{} is not UTF-8", path.display()),
    })?;
    CompiledPolicy::load(&text, format, Some(home))
}

/// The declarations of the standard tools (docs/reference.md, "Standard tools"), as plugin authors write them.
fn standard_declarations() -> Vec<(&'static str, ToolCapabilities)> {
    let parse = |json: &str| serde_json::from_str::<ToolCapabilities>(json).unwrap();
    vec![
        (
            "read_file",
            parse(r#"{"fs_reach":{"read":"from-personality"}}"#),
        ),
        (
            "write_file",
            parse(r#"{"fs_reach":{"write":"from-personality"}}"#),
        ),
        (
            "list_dir",
            parse(r#"{"fs_reach":{"read":"from-personality"}}"#),
        ),
        ("fetch_url", parse(r#"{"network":{"allowedHosts":["*"]}}"#)),
        (
            "run_command",
            parse(
                r#"{"process":{"allowedBinaries":["*"]},"fs_reach":{"read":"from-personality"}}"#,
            ),
        ),
        (
            "kv_get",
            parse(r#"{"storage":{"scope":"personality","kind":"kv"}}"#),
        ),
    ]
}

#[test]
fn example_personalities_load_and_validate() {
    let dir = repo().join("examples/personalities");
    let mut names: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    names.sort();
    assert_eq!(names.len(), 3, "{names:?}");
    for path in names {
        let policy = load(&path, Path::new("/home/agent"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let id = policy.id().unwrap().to_owned();
        for (tool, caps) in standard_declarations() {
            if !policy.allows_tool(tool) {
                continue;
            }
            let errors = validate_declaration(tool, &caps, &policy);
            assert!(errors.is_empty(), "{id}/{tool}: {errors:?}");
        }
    }
}

#[test]
fn researcher_expands_home_and_refuses_outside_roots() {
    let policy = load(
        &repo().join("examples/personalities/researcher.toml"),
        Path::new("/home/agent"),
    )
    .unwrap();
    assert_eq!(
        policy.policy().unwrap().fs_reach.read[1],
        Path::new("/home/agent/notes")
    );
    assert!(!policy.allows_tool("run_command"));
    let wider =
        serde_json::from_str::<ToolCapabilities>(r#"{"fs_reach":{"read":["/srv"]}}"#).unwrap();
    let errors = validate_declaration("custom", &wider, &policy);
    assert_eq!(errors.len(), 1);
    assert_eq!(
        errors[0].message,
        "/srv is wider than the personality's fs_reach.read; narrowed to /srv/research/data"
    );
}

// guarantee: G-POL-01
#[test]
fn hostile_policy_files_fail_whole_with_a_named_problem() {
    let expected: &[(&str, Option<&str>, &str)] = &[
        (
            "bidi_override.toml",
            Some("safety.network.deny[0]"),
            "not a valid host",
        ),
        ("duplicate_key.toml", None, "duplicate key"),
        ("empty.toml", None, "missing field `id`"),
        (
            "loader_hook.toml",
            Some("safety.env.allow[0]"),
            "may never be passed to a child",
        ),
        ("not_utf8.toml", None, "not UTF-8"),
        (
            "relative_path.toml",
            Some("fs_reach.read[0]"),
            "not absolute",
        ),
        (
            "single_label_wildcard.toml",
            Some("safety.network.allow[0]"),
            "single-label",
        ),
        (
            "star_binary.yaml",
            Some("safety.process.allow[0]"),
            "'*' is not accepted",
        ),
        (
            "typo_field.json",
            Some("fs_reach.writ"),
            "unknown field `writ`",
        ),
        (
            "unknown_table.toml",
            Some("safety.netwrok"),
            "unknown field `netwrok`",
        ),
        (
            "userinfo.toml",
            Some("safety.network.allow[0]"),
            "user-info",
        ),
    ];
    let dir = repo().join("tests/fixtures/policies/bad");
    let mut seen = 0;
    for (file, field, needle) in expected {
        let err = match load(&dir.join(file), Path::new("/home/agent")) {
            Ok(_) => panic!("{file} was accepted"),
            Err(e) => e,
        };
        assert_eq!(err.field(), *field, "{file}: {err}");
        assert!(err.to_string().contains(needle), "{file}: {err}");
        seen += 1;
    }
    assert_eq!(
        seen,
        std::fs::read_dir(&dir).unwrap().count(),
        "every fixture has an expectation"
    );
}
