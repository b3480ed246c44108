//! `ScopedSecrets` and the three backends against real files, real permissions and real
//! symlinks.
#![allow(
    clippy::disallowed_methods,
    reason = "tests create secrets files and read the environment"
)]

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use capability_secrets::{
    BackendError, EnvSecrets, FileSecrets, MemorySecrets, ScopedSecrets, SecretsBackend,
    SecretsFileFormat, SecretsResolverFactory,
};
use capability_types::backend::{SecretsFactory, SecretsGrant};
use capability_types::{
    CapabilityError, DenialCode, ExposeSecret, ScopedSecretsResolver, SecretRef, SecretString,
    SpawnOptions,
};

const VALUE: &str = "sk-live-DO-NOT-PRINT";

fn refs(list: &[&str]) -> Vec<SecretRef> {
    list.iter().map(|r| SecretRef::parse(r).unwrap()).collect()
}

/// Counts how often it is asked, and has every secret.
#[derive(Debug, Default)]
struct Counting(AtomicUsize);
#[async_trait]
impl SecretsBackend for Counting {
    async fn lookup(&self, _: &str) -> Result<Option<SecretString>, BackendError> {
        self.0.fetch_add(1, Ordering::SeqCst);
        Ok(Some(SecretString::from(VALUE.to_owned())))
    }
}

fn scoped(declared: &[&str], backend: Arc<dyn SecretsBackend>) -> Arc<dyn ScopedSecretsResolver> {
    SecretsResolverFactory::new(vec![backend])
        .secrets_resolver(SecretsGrant::new("tool", refs(declared)))
        .unwrap()
}

// guarantee: G-SEC-01
#[tokio::test]
async fn undeclared_names_never_reach_a_backend() {
    let counting = Arc::new(Counting::default());
    let secrets = scoped(&["GITHUB_TOKEN", "providers/exa/*"], counting.clone());
    assert_eq!(
        secrets
            .resolve("GITHUB_TOKEN")
            .await
            .unwrap()
            .expose_secret(),
        VALUE
    );
    assert_eq!(
        secrets
            .resolve("providers/exa/key")
            .await
            .unwrap()
            .expose_secret(),
        VALUE
    );
    assert_eq!(
        secrets
            .resolve("providers/exa/v2/key")
            .await
            .unwrap()
            .expose_secret(),
        VALUE
    );
    assert_eq!(counting.0.load(Ordering::SeqCst), 3);
    let refused = [
        "STRIPE_KEY",
        "github_token",
        "GITHUB_TOKEN/x",
        "providers/exa",
        "providers/exa/",
        "providers/exa/../openai/key",
        "providers/exa/./key",
        "providers/exa//key",
        "providers/exa-evil/key",
        "providers/exa/*",
        "providers/exa/key\0",
        "../GITHUB_TOKEN",
        "",
        "*",
    ];
    for name in refused {
        match secrets.resolve(name).await {
            Err(CapabilityError::Denied {
                code: DenialCode::SecretNotDeclared,
                message,
            }) => {
                assert!(
                    message.ends_with("is not in the tool's declared secrets"),
                    "{message}"
                );
            }
            other => panic!("{name:?}: {:?}", other.map(|_| "a value")),
        }
    }
    assert_eq!(
        counting.0.load(Ordering::SeqCst),
        3,
        "no refused name reached the backend"
    );
    assert_eq!(
        secrets.resolve("STRIPE_KEY").await.unwrap_err().to_string(),
        "SECRET_NOT_DECLARED: STRIPE_KEY is not in the tool's declared secrets"
    );
}

#[tokio::test]
async fn backends_chain_in_order_and_missing_is_not_found() {
    let first = Arc::new(MemorySecrets::new().with("A", "from-first"));
    let second = Arc::new(MemorySecrets::new().with("A", "from-second").with("B", "b"));
    let secrets = ScopedSecrets::new("t", refs(&["A", "B", "C"]), vec![first, second]);
    assert_eq!(
        secrets.resolve("A").await.unwrap().expose_secret(),
        "from-first"
    );
    assert_eq!(secrets.resolve("B").await.unwrap().expose_secret(), "b");
    let err = secrets.resolve("C").await.unwrap_err();
    assert_eq!(
        err,
        CapabilityError::not_found("secret C is not set in any configured secrets backend")
    );
    assert_eq!(secrets.declared(), &refs(&["A", "B", "C"])[..]);
}

#[tokio::test]
async fn env_backend_maps_and_prefix_rule() {
    let env = EnvSecrets::from_vars([
        ("GH_TOKEN", "ghp"),
        ("TOOLCAP_SECRET_PROVIDERS__EXA__API_KEY", "exa"),
        ("TOOLCAP_SECRET_DEPLOY_KEY", "deploy"),
        ("TOOLCAP_SECRET_PROVIDERS_EXA_API_KEY", "alias"),
        ("SECRET_TOKEN", "never"),
    ])
    .map("GITHUB_TOKEN", "GH_TOKEN")
    .with_prefix_rule("TOOLCAP_SECRET_");
    let secrets = ScopedSecrets::new(
        "t",
        refs(&["GITHUB_TOKEN", "providers/*", "DEPLOY_KEY", "SECRET_TOKEN"]),
        vec![Arc::new(env)],
    );
    assert_eq!(
        secrets
            .resolve("GITHUB_TOKEN")
            .await
            .unwrap()
            .expose_secret(),
        "ghp"
    );
    assert_eq!(
        secrets
            .resolve("providers/exa/api-key")
            .await
            .unwrap()
            .expose_secret(),
        "exa"
    );
    assert_eq!(
        secrets.resolve("DEPLOY_KEY").await.unwrap().expose_secret(),
        "deploy"
    );
    // Other spellings of the same words are not mapped, so none of them reaches the variable
    // above or the look-alike TOOLCAP_SECRET_PROVIDERS_EXA_API_KEY.
    for alias in [
        "providers/exa/api_key",
        "providers/exa/api.key",
        "providers/EXA/api-key",
        "providers/exa/-api-key",
        "providers/exa/api--key",
        "providers/exa_api-key",
    ] {
        assert_eq!(
            secrets.resolve(alias).await.unwrap_err().result_code(),
            capability_types::ErrorCode::NotFound,
            "{alias}"
        );
    }
    // Declared, but the prefix rule maps it to TOOLCAP_SECRET_SECRET_TOKEN: ordinary variables
    // are unreachable without an explicit mapping.
    assert_eq!(
        secrets
            .resolve("SECRET_TOKEN")
            .await
            .unwrap_err()
            .result_code(),
        capability_types::ErrorCode::NotFound
    );

    let home = std::env::var("HOME").unwrap();
    let process = EnvSecrets::from_process_env().map("HOME_DIR", "HOME");
    assert_eq!(
        process
            .lookup("HOME_DIR")
            .await
            .unwrap()
            .unwrap()
            .expose_secret(),
        home
    );
    assert!(
        process.lookup("PATH").await.unwrap().is_none(),
        "unmapped variables are not secrets"
    );
}

fn write_file(
    dir: &tempfile::TempDir,
    name: &str,
    contents: &str,
    mode: u32,
) -> std::path::PathBuf {
    let path = dir.path().join(name);
    std::fs::write(&path, contents).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
    path
}

// guarantee: G-SEC-01
#[tokio::test]
async fn secrets_file_permissions_links_and_formats() {
    let dir = tempfile::tempdir().unwrap();
    let ok = write_file(
        &dir,
        "secrets.env",
        &format!("GITHUB_TOKEN={VALUE}\n"),
        0o600,
    );
    let file = FileSecrets::open(&ok).unwrap();
    assert_eq!(
        file.lookup("GITHUB_TOKEN")
            .await
            .unwrap()
            .unwrap()
            .expose_secret(),
        VALUE
    );
    let toml = write_file(
        &dir,
        "secrets.toml",
        "[providers.exa]\nkey = \"k\"\n",
        0o400,
    );
    assert_eq!(
        FileSecrets::open(&toml).unwrap().names(),
        ["providers/exa/key"]
    );

    for mode in [0o644, 0o640, 0o604, 0o660, 0o606, 0o610, 0o601, 0o777] {
        let path = write_file(
            &dir,
            &format!("exposed-{mode:o}.env"),
            &format!("A={VALUE}\n"),
            mode,
        );
        let err = FileSecrets::open(&path).unwrap_err().to_string();
        assert!(
            err.contains(&format!("accessible by group or others (mode {mode:04o})")),
            "{err}"
        );
        assert!(err.contains("chmod 600"), "{err}");
        assert!(!err.contains(VALUE));
    }

    // A private file of another user's (readable here only as root, as in a container): its
    // owner chooses the values tools are given. Refused (needs root to arrange; CI runs as root).
    let theirs = write_file(&dir, "theirs.env", &format!("A={VALUE}\n"), 0o600);
    let given = std::process::Command::new("chown")
        .arg("65534:65534")
        .arg(&theirs)
        .status()
        .is_ok_and(|s| s.success());
    if given {
        let err = FileSecrets::open(&theirs).unwrap_err().to_string();
        assert!(err.contains("owned by another user (uid 65534)"), "{err}");
        assert!(!err.contains(VALUE));
    }
    // A private file of the user's in a directory inside one anyone may write without the
    // sticky bit: whoever can write the outer one can swap it for theirs.
    {
        use std::os::unix::fs::PermissionsExt as _;
        let open = dir.path().join("shared");
        std::fs::create_dir_all(open.join("me")).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let swappable = open.join("me/secrets.env");
        std::fs::write(&swappable, format!("A={VALUE}\n")).unwrap();
        std::fs::set_permissions(&swappable, std::fs::Permissions::from_mode(0o600)).unwrap();
        let err = FileSecrets::open(&swappable).unwrap_err().to_string();
        assert!(
            err.contains(&format!("lies in {}", open.display())) && err.contains("777"),
            "{err}"
        );
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o1777)).unwrap();
        assert!(
            FileSecrets::open(&swappable).is_ok(),
            "a sticky directory is safe"
        );
    }

    let link = dir.path().join("link.env");
    std::os::unix::fs::symlink(&ok, &link).unwrap();
    let err = FileSecrets::open(&link).unwrap_err().to_string();
    assert!(
        err.starts_with(&format!("cannot open secrets file {}", link.display())),
        "a final symlink is not followed: {err}"
    );

    let err = FileSecrets::open(dir.path()).unwrap_err().to_string();
    assert!(
        err.contains("is not a regular file") || err.contains("accessible by group"),
        "{err}"
    );
    let err = FileSecrets::open(dir.path().join("missing.env"))
        .unwrap_err()
        .to_string();
    assert!(err.contains("No such file"), "{err}");

    let bad = write_file(&dir, "bad.toml", &format!("A = {VALUE}\n"), 0o600);
    let err = FileSecrets::open_as(&bad, SecretsFileFormat::Toml)
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        format!("secrets file {}: not valid TOML (line 1)", bad.display())
    );
}

#[test]
fn debug_never_shows_a_value() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(&dir, "s.env", &format!("A={VALUE}\n"), 0o600);
    let secret = SecretString::from(VALUE.to_owned());
    let shown = [
        format!("{:?}", MemorySecrets::new().with("A", VALUE)),
        format!("{:?}", EnvSecrets::from_vars([("A", VALUE)]).map("A", "A")),
        format!("{:?}", FileSecrets::open(&path).unwrap()),
        format!(
            "{:?}",
            ScopedSecrets::new(
                "t",
                refs(&["A"]),
                vec![Arc::new(MemorySecrets::new().with("A", VALUE))]
            )
        ),
        format!("{secret:?}"),
        format!("{:?}", SpawnOptions::default().env("TOKEN", VALUE)),
        format!("{:?}", Some(secret.clone())),
    ];
    for s in shown {
        assert!(!s.contains(VALUE), "{s}");
    }
}

#[test]
fn prefix_rule_never_maps_two_refs_to_one_variable() {
    let env = EnvSecrets::from_vars::<_, &str, &str>([]).with_prefix_rule("P_");
    // Every ref of up to four characters over an alphabet that includes both conventions'
    // separators and both cases.
    let alphabet = ['a', 'A', '1', '-', '_', '/', '.'];
    let mut refs = vec![String::new()];
    let mut frontier = vec![String::new()];
    for _ in 0..4 {
        frontier = frontier
            .iter()
            .flat_map(|r| alphabet.iter().map(move |c| format!("{r}{c}")))
            .collect();
        refs.extend(frontier.iter().cloned());
    }
    let mut seen = std::collections::HashMap::new();
    let mut mapped = 0;
    for r in &refs {
        if let Some(var) = env.variable_for(r) {
            mapped += 1;
            assert!(var.starts_with("P_"), "{r} -> {var}");
            assert!(
                var[2..]
                    .bytes()
                    .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_'),
                "{r} -> {var}"
            );
            if let Some(other) = seen.insert(var.clone(), r.clone()) {
                panic!("{other:?} and {r:?} both map to {var}");
            }
        }
    }
    assert!(mapped > 50, "the rule maps ordinary refs: {mapped}");
    assert_eq!(env.variable_for("a/b-1").as_deref(), Some("P_A__B_1"));
    assert_eq!(env.variable_for("A_1").as_deref(), Some("P_A_1"));
}

// guarantee: G-SEC-01
/// A FIFO where the secrets file should be is refused at once, as any file that is not a
/// regular one is: opening it does not wait for a writer that may never come (which would hang
/// the program that reads its secrets at start).
#[test]
fn a_fifo_secrets_file_is_refused_without_waiting() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("secrets.env");
    assert!(
        std::process::Command::new("mkfifo")
            .arg("-m")
            .arg("600")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let (sent, received) = std::sync::mpsc::channel();
    let path = fifo.clone();
    std::thread::spawn(move || {
        let _ = sent.send(
            FileSecrets::open(&path)
                .map(|_| ())
                .map_err(|e| e.to_string()),
        );
    });
    let err = received
        .recv_timeout(std::time::Duration::from_secs(20))
        .expect("opening a FIFO as the secrets file waited for a writer")
        .unwrap_err();
    assert!(err.contains("is not a regular file"), "{err}");
}

// guarantee: G-SEC-01
/// TOML can spell one secret's name twice, as a dotted key and as a key with `/` in it
/// (`"providers/exa/key"` beside `[providers.exa] key`): which value a tool would be given was
/// the table's iteration order. Refused, naming the secret, as a dotenv file that defines a
/// name twice is; no value is quoted.
#[test]
fn a_secret_named_twice_in_a_toml_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in [
        (
            "quoted-then-table.toml",
            format!(
                "\"providers/exa/key\" = \"{VALUE}-a\"\n[providers.exa]\nkey = \"{VALUE}-b\"\n"
            ),
        ),
        (
            "dotted.toml",
            format!("[providers]\n\"exa/key\" = \"{VALUE}-a\"\nexa.key = \"{VALUE}-b\"\n"),
        ),
    ] {
        let path = write_file(&dir, name, &text, 0o600);
        let err = FileSecrets::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("\"providers/exa/key\" is defined twice"),
            "{name}: {err}"
        );
        assert!(!err.contains(VALUE), "{err}");
    }
}

/// A comment after a value, as the dotenv readers of Node, Python and Rust (`dotenv`,
/// `python-dotenv`, `dotenvy`) read one: after an unquoted value, a `#` that follows a space
/// or a tab starts it (`sk#4` is one value, as Python's and Rust's readers take it); after a quoted value, anything but a comment is an error. Before, the comment
/// was part of the secret (`sk-1 # production` was sent as the key) and a quoted value with a
/// comment after it was refused as unterminated.
#[tokio::test]
async fn a_comment_after_a_dotenv_value_is_not_part_of_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_file(
        &dir,
        "commented.env",
        "A=sk-1 # production\nB=\"sk-2\" # staging\nC='sk-3'\t# old\nD=sk#4\nE=\"a # b\"\n",
        0o600,
    );
    let file = FileSecrets::open(&path).unwrap();
    for (name, want) in [
        ("A", "sk-1"),
        ("B", "sk-2"),
        ("C", "sk-3"),
        ("D", "sk#4"),
        ("E", "a # b"),
    ] {
        let got = file.lookup(name).await.unwrap().unwrap();
        assert_eq!(got.expose_secret(), want, "{name}");
    }
    for text in [
        format!("A=\"{VALUE}\" trailing\n"),
        format!("A='{VALUE}'x\n"),
    ] {
        let path = write_file(&dir, "after-quote.env", &text, 0o600);
        let err = FileSecrets::open(&path).unwrap_err().to_string();
        assert!(
            err.contains("line 1: only a comment may follow a quoted value"),
            "{err}"
        );
        assert!(!err.contains(VALUE), "{err}");
    }
}
