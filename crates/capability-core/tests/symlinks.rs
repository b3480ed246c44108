//! Symbolic links in a policy (issue 13, class 2): roots, deny rules and the deny floor are
//! matched where they really lead, under either spelling, and a root that leads into the floor
//! is a load error.
#![allow(
    clippy::disallowed_methods,
    reason = "the tests build real directories and symbolic links"
)]

use std::path::{Path, PathBuf};

use capability_core::{CompiledPolicy, resolve};
use capability_core::{PolicyError, PolicyFormat};
use capability_types::backend::{FsAccess, PathPolicy};
use capability_types::{DenialCode, FsPaths, ToolCapabilities};

struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

/// `real/` with `secret.txt` and `notes.md`, `home/.ssh/id`, and links to them.
fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("real")).unwrap();
    std::fs::write(root.join("real/secret.txt"), "canary").unwrap();
    std::fs::write(root.join("real/notes.md"), "notes").unwrap();
    std::fs::create_dir_all(root.join("home/.ssh")).unwrap();
    std::os::unix::fs::symlink(root.join("real"), root.join("link")).unwrap();
    std::os::unix::fs::symlink(root.join("home"), root.join("home-link")).unwrap();
    std::os::unix::fs::symlink("/proc", root.join("proc-link")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("etc-link")).unwrap();
    Tree { _dir: dir, root }
}

fn load(toml: &str, home: &Path) -> Result<CompiledPolicy, PolicyError> {
    CompiledPolicy::load(toml, PolicyFormat::Toml, Some(home))
}

fn paths(policy: &CompiledPolicy, wd: &Path) -> std::sync::Arc<dyn PathPolicy> {
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
    resolve("read_file", &caps, policy, "s", wd).fs.unwrap()
}

fn refused(paths: &dyn PathPolicy, path: &Path) -> bool {
    matches!(
        paths.check(path, FsAccess::Read),
        Err(e) if e.denial_code() == Some(DenialCode::PathNotReachable)
    )
}

#[test]
fn a_root_named_through_a_link_is_matched_where_it_leads() {
    let t = tree();
    let r = &t.root;
    let policy = load(
        &format!(
            "id = \"x\"\n[fs_reach]\nread = [\"{l}\"]\ndeny = [\"{s}\"]\n",
            l = r.join("link").display(),
            s = r.join("real/secret.txt").display()
        ),
        &r.join("home"),
    )
    .unwrap();
    let p = paths(&policy, r);
    // Both spellings of an allowed file are allowed, and resolve to the real place.
    for spelled in [r.join("link/notes.md"), r.join("real/notes.md")] {
        let access = p.check(&spelled, FsAccess::Read).unwrap();
        assert_eq!(
            access.path,
            r.join("real/notes.md"),
            "{}",
            spelled.display()
        );
    }
    // The deny rule names the real spelling; the root's spelling does not get around it.
    for spelled in [r.join("link/secret.txt"), r.join("real/secret.txt")] {
        assert!(refused(&*p, &spelled), "{}", spelled.display());
    }
    // The kernel layer hides it under its real name.
    assert!(p.hidden().contains(&r.join("real/secret.txt")));
}

#[test]
fn a_deny_rule_named_through_a_link_binds_both_names() {
    let t = tree();
    let r = &t.root;
    let policy = load(
        &format!(
            "id = \"x\"\n[fs_reach]\nread = [\"{real}\"]\ndeny = [\"{s}\"]\n",
            real = r.join("real").display(),
            s = r.join("link/secret.txt").display()
        ),
        &r.join("home"),
    )
    .unwrap();
    let p = paths(&policy, r);
    assert!(refused(&*p, &r.join("real/secret.txt")));
    assert!(p.check(&r.join("real/notes.md"), FsAccess::Read).is_ok());
}

// guarantee: G-POL-03
#[test]
fn the_floor_holds_where_a_root_really_leads() {
    let t = tree();
    let r = &t.root;
    // A root that is a link to the home directory: its .ssh is the floor's.
    let policy = load(
        &format!(
            "id = \"x\"\n[fs_reach]\nread = [\"{}\"]\n",
            r.join("home-link").display()
        ),
        &r.join("home"),
    )
    .unwrap();
    let p = paths(&policy, r);
    assert!(refused(&*p, &r.join("home-link/.ssh/id")));
    // A home directory that is itself a link: the floor protects where it leads too.
    let policy = load(
        &format!(
            "id = \"x\"\n[fs_reach]\nread = [\"{}\"]\n",
            r.join("home").display()
        ),
        &r.join("home-link"),
    )
    .unwrap();
    assert!(refused(&*paths(&policy, r), &r.join("home/.ssh/id")));
    // A link to /etc: /etc/shadow under its other name.
    let policy = load(
        &format!(
            "id = \"x\"\n[fs_reach]\nread = [\"{}\"]\n",
            r.join("etc-link").display()
        ),
        &r.join("home"),
    )
    .unwrap();
    assert!(refused(&*paths(&policy, r), &r.join("etc-link/shadow")));
    assert!(
        paths(&policy, r)
            .check(&r.join("etc-link/hostname"), FsAccess::Read)
            .is_ok()
    );
}

// guarantee: G-POL-03
#[test]
fn a_root_that_leads_into_the_floor_is_a_load_error() {
    let t = tree();
    let r = &t.root;
    for (link, area) in [("proc-link", "/proc"), ("home-link/.ssh", ".ssh")] {
        let err = load(
            &format!(
                "id = \"x\"\n[fs_reach]\nread = [\"{}\"]\n",
                r.join(link).display()
            ),
            &r.join("home"),
        )
        .unwrap_err();
        assert_eq!(err.field(), Some("fs_reach.read[0]"), "{err}");
        let text = err.to_string();
        assert!(
            text.contains("inside the deny floor") && text.contains(area),
            "{text}"
        );
    }
    // Naming the floor's place itself is how a personality lifts it, as before.
    assert!(
        load(
            "id = \"x\"\n[fs_reach]\nread = [\"/proc\"]\n",
            &r.join("home")
        )
        .is_ok()
    );
}

// guarantee: G-FS-10
/// A home whose startup files and client configuration are links into a dotfiles repository
/// the personality writes: one through a link above it (`.config`), one leading nowhere yet,
/// one a loop, one into `/`. Each is kept where it leads (a write there refused, saying which
/// name it is, and handed to the kernel layer), the loop without failing; a place that is no
/// link is not; `/` is a place every write root lies in, as a root listed inside an area lifts
/// it; and a personality that lists one by its link's name may write it.
#[test]
fn a_homes_places_are_kept_where_their_links_lead() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().canonicalize().unwrap();
    let dots = home.join("dotfiles");
    std::fs::create_dir_all(dots.join("config/git")).unwrap();
    std::fs::create_dir_all(dots.join("claude")).unwrap();
    std::fs::write(dots.join("bashrc"), "").unwrap();
    std::fs::write(home.join(".profile"), "").unwrap();
    let link = |target: &str, name: &str| {
        std::os::unix::fs::symlink(target, home.join(name)).unwrap();
    };
    link("dotfiles/bashrc", ".bashrc");
    link("dotfiles/claude", ".claude");
    link("dotfiles/config", ".config");
    link("dotfiles/zshrc", ".zshrc");
    link(".zlogin", ".zlogin");
    link("/", ".vscode");
    let write = |extra: &str| {
        let policy = load(
            &format!(
                "id = \"d\"\n[fs_reach]\nwrite = [\"{d}\"{extra}]\n",
                d = dots.display()
            ),
            &home,
        )
        .unwrap();
        let caps = ToolCapabilities::none().with_fs_write(FsPaths::FromPersonality);
        resolve("write_file", &caps, &policy, "s", &dots)
            .fs
            .unwrap()
    };
    let paths = write("");
    let kept = paths.runs_later_places();
    for (place, name) in [
        ("bashrc", ".bashrc"),
        ("claude/settings.json", ".claude"),
        ("config/git/config", ".config/git/config"),
        ("config/fish/config.fish", ".config/fish"),
        ("zshrc", ".zshrc"),
    ] {
        let err = paths.check(&dots.join(place), FsAccess::Write).unwrap_err();
        assert_eq!(err.denial_code(), Some(DenialCode::PathNotReachable));
        assert!(
            err.to_string().contains(&format!(
                "it is {} by another name",
                home.join(name).display()
            )),
            "{place}: {err}"
        );
    }
    for place in [
        "bashrc",
        "claude",
        "config/git/config",
        "config/fish",
        "zshrc",
    ] {
        assert!(kept.contains(&dots.join(place)), "{place}: {kept:?}");
    }
    assert!(paths.check(&dots.join("profile"), FsAccess::Write).is_ok());
    assert!(paths.check(&dots.join("notes.md"), FsAccess::Write).is_ok());
    // Listed by the name its link has: that one is the personality's to allow.
    let listed = write(&format!(", \"{}\"", home.join(".bashrc").display()));
    assert!(listed.check(&dots.join("bashrc"), FsAccess::Write).is_ok());
    assert!(
        listed
            .check(&dots.join("claude/settings.json"), FsAccess::Write)
            .is_err()
    );
}
