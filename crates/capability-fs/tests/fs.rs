//! `ScopedFiles` against real directories, real symlinks, hard links and FIFOs, in both modes:
//! `openat2(RESOLVE_BENEATH)` and the forced `O_NOFOLLOW` component walk.
#![allow(
    clippy::disallowed_methods,
    reason = "tests build fixture trees and inspect them directly"
)]

#[path = "../../../tests/shared/mounted.rs"]
mod mounted;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use capability_core::PolicyFormat;
use capability_core::{CompiledPolicy, resolve};
use capability_fs::{FsBackend, FsConfig};
use capability_types::backend::{FsFactory, FsGrant, PathPolicy};
use capability_types::{
    CapabilityError, DenialCode, FileKind, FsPaths, ScopedFs, ToolCapabilities,
};

/// `base/root` is the tool's reach (`base/root/out` writable, `base/root/private` denied);
/// `base/outside` is not.
struct Tree {
    _dir: tempfile::TempDir,
    root: PathBuf,
    outside: PathBuf,
}

fn tree() -> Tree {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let root = base.join("root");
    let outside = base.join("outside");
    for d in [
        &root,
        &root.join("out"),
        &root.join("docs"),
        &root.join("private"),
        &outside,
        &base.join("uploads"),
    ] {
        std::fs::create_dir_all(d).unwrap();
    }
    std::fs::write(root.join("docs/a.txt"), "inside").unwrap();
    std::fs::write(root.join("private/key"), "private-key").unwrap();
    std::fs::write(outside.join("secret.txt"), "outside-secret").unwrap();
    std::fs::write(base.join("uploads/x"), "uploads").unwrap();
    Tree {
        _dir: dir,
        root,
        outside,
    }
}

fn scoped(t: &Tree, config: FsConfig, extra_read: &str) -> Arc<dyn ScopedFs> {
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{r}\"{extra_read}]\nwrite = [\"{r}/out\"]\ndeny = [\"{r}/private\"]\n",
        r = t.root.display()
    );
    let policy =
        CompiledPolicy::load(&toml, PolicyFormat::Toml, Some(Path::new("/home/nobody"))).unwrap();
    let caps = ToolCapabilities::none()
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let resolved = resolve("t", &caps, &policy, "s", &t.root.join("docs"));
    FsBackend::new(config)
        .scoped_fs(FsGrant::new(
            "t",
            resolved.fs.unwrap() as Arc<dyn PathPolicy>,
        ))
        .unwrap()
}

fn modes() -> [(&'static str, FsConfig); 2] {
    [
        ("openat2", FsConfig::default()),
        ("walk", FsConfig::default().force_component_walk(true)),
    ]
}

fn refused<T: std::fmt::Debug>(r: Result<T, CapabilityError>) -> String {
    match r {
        Err(CapabilityError::Denied {
            code: DenialCode::PathNotReachable,
            message,
        }) => message,
        other => panic!("expected PATH_NOT_REACHABLE, got {other:?}"),
    }
}

#[tokio::test]
async fn reads_inside_and_relative_paths() {
    let t = tree();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        assert_eq!(
            fs.read(&t.root.join("docs/a.txt")).await.unwrap(),
            "inside",
            "{mode}"
        );
        assert_eq!(
            fs.read(Path::new("a.txt")).await.unwrap(),
            "inside",
            "{mode}: relative to the working dir"
        );
        assert_eq!(
            fs.read(Path::new("./../docs/./a.txt")).await.unwrap(),
            "inside",
            "{mode}"
        );
        assert_eq!(fs.read_bytes(Path::new("a.txt")).await.unwrap(), b"inside");
        assert!(fs.exists(Path::new("a.txt")).await.unwrap());
        assert!(!fs.exists(Path::new("missing.txt")).await.unwrap());
    }
}

#[tokio::test]
async fn dotdot_and_prefix_confusion_are_refused() {
    let t = tree();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        let up = t.outside.join("secret.txt");
        assert_eq!(
            refused(fs.read(Path::new("../../outside/secret.txt")).await),
            format!("read not permitted for {}", up.display()),
            "{mode}"
        );
        assert_eq!(
            refused(fs.read(&t.root.join("docs/../../outside/secret.txt")).await),
            format!("read not permitted for {}", up.display())
        );
        assert!(refused(fs.read(Path::new("/etc/passwd")).await).ends_with("/etc/passwd"));
        // `root` must not cover `root-sibling`; `up` must not cover `uploads`.
        let sibling = t.root.with_file_name("rootx");
        std::fs::create_dir_all(&sibling).unwrap();
        std::fs::write(sibling.join("f"), "x").unwrap();
        refused(fs.read(&sibling.join("f")).await);
        refused(fs.read(&t.root.with_file_name("uploads").join("x")).await);
        // Deny list inside the root.
        refused(fs.read(&t.root.join("private/key")).await);
        refused(fs.list(&t.root.join("private")).await);
    }
}

// guarantee: G-FS-02
#[tokio::test]
async fn symlinks_leading_out_are_refused_by_the_kernel() {
    let t = tree();
    let links = t.root.join("docs");
    std::os::unix::fs::symlink(t.outside.join("secret.txt"), links.join("abs-file")).unwrap();
    std::os::unix::fs::symlink("../../outside/secret.txt", links.join("rel-file")).unwrap();
    std::os::unix::fs::symlink(&t.outside, links.join("abs-dir")).unwrap();
    std::os::unix::fs::symlink("../../outside", links.join("rel-dir")).unwrap();
    std::os::unix::fs::symlink("../private/key", links.join("to-denied")).unwrap();
    std::os::unix::fs::symlink("../private", links.join("to-denied-dir")).unwrap();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        for name in ["abs-file", "rel-file", "to-denied"] {
            let message = refused(fs.read(Path::new(name)).await);
            assert_eq!(
                message,
                format!("read not permitted for {}", links.join(name).display()),
                "{mode}: {name}"
            );
        }
        for name in [
            "abs-dir/secret.txt",
            "rel-dir/secret.txt",
            "to-denied-dir/key",
        ] {
            refused(fs.read(Path::new(name)).await);
        }
        refused(fs.list(Path::new("abs-dir")).await);
        refused(fs.list(Path::new("to-denied-dir")).await);
        // `exists` answers neither true nor false through a link that leads out, so it tells
        // nothing about what lies outside.
        refused(fs.exists(Path::new("abs-file")).await);
        refused(fs.exists(Path::new("abs-dir/secret.txt")).await);
        refused(fs.exists(Path::new("abs-dir/no-such-file")).await);
    }
}

// guarantee: G-FS-07
/// docs/policy.md, "Symbolic links inside the reach": an absolute link is followed when its
/// target is inside the same root (re-resolved beneath the held root handle, then checked
/// again where it lands), and refused when the target is outside the reach, in a denied
/// place, or in another root of the reach. The walk refuses every link.
#[tokio::test]
async fn absolute_symlinks_are_followed_only_when_they_lead_inside_their_root() {
    let t = tree();
    let docs = t.root.join("docs");
    std::fs::create_dir_all(t.root.join("out/deep")).unwrap();
    std::fs::write(t.root.join("out/deep/b.txt"), "deep").unwrap();
    let base = t.root.parent().unwrap().to_path_buf();
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, docs.join(name)).unwrap();
    link(&docs.join("a.txt"), "abs-in-file");
    link(&t.root.join("out/deep"), "abs-in-dir");
    link(&docs.join("abs-in-file"), "abs-chain");
    link(&t.root.join("out/deep/../deep/b.txt"), "abs-in-dotdot");
    link(&t.outside.join("secret.txt"), "abs-out-file");
    link(&t.root.join("private/key"), "abs-denied");
    link(&base.join("uploads/x"), "abs-other-root");
    link(
        &t.root.join("docs/../../outside/secret.txt"),
        "abs-climbs-out",
    );
    link(&docs.join("loop-b"), "loop-a");
    link(&docs.join("loop-a"), "loop-b");
    std::os::unix::fs::symlink(t.root.join("out/deep/b.txt"), t.root.join("out/abs-link")).unwrap();
    let uploads = format!(", \"{}\"", base.join("uploads").display());
    for (mode, config) in modes() {
        let fs = scoped(&t, config, &uploads);
        let walk = mode.contains("walk");
        for (name, content) in [
            ("abs-in-file", "inside"),
            ("abs-in-dir/b.txt", "deep"),
            ("abs-chain", "inside"),
            ("abs-in-dotdot", "deep"),
        ] {
            let read = fs.read(Path::new(name)).await;
            if walk {
                refused(read);
            } else {
                assert_eq!(read.unwrap(), content, "{mode}: {name}");
            }
        }
        if !walk {
            let names: Vec<_> = fs
                .list(Path::new("abs-in-dir"))
                .await
                .unwrap()
                .into_iter()
                .map(|e| e.name)
                .collect();
            assert_eq!(names, ["b.txt"]);
            assert!(fs.exists(Path::new("abs-in-file")).await.unwrap());
        }
        for name in [
            "abs-out-file",
            "abs-denied",
            "abs-other-root",
            "abs-climbs-out",
            "loop-a",
        ] {
            assert_eq!(
                refused(fs.read(Path::new(name)).await),
                format!("read not permitted for {}", docs.join(name).display()),
                "{mode}: {name}"
            );
        }
        // A write never goes through a final link, even one that leads inside the root.
        refused(fs.write(&t.root.join("out/abs-link"), b"x").await);
        assert_eq!(
            std::fs::read_to_string(t.root.join("out/deep/b.txt")).unwrap(),
            "deep"
        );
    }
}

#[tokio::test]
async fn symlinks_inside_the_root_work_with_openat2_and_are_refused_by_the_walk() {
    let t = tree();
    std::os::unix::fs::symlink("a.txt", t.root.join("docs/alias")).unwrap();
    let fs = scoped(&t, FsConfig::default(), "");
    assert_eq!(fs.read(Path::new("alias")).await.unwrap(), "inside");
    let walk = scoped(&t, FsConfig::default().force_component_walk(true), "");
    refused(walk.read(Path::new("alias")).await);
}

#[tokio::test]
async fn writes_are_atomic_and_confined() {
    let t = tree();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        let target = t.root.join("out/report.md");
        assert_eq!(fs.write(&target, b"v1").await.unwrap(), 2, "{mode}");
        assert_eq!(fs.write(&target, b"version two").await.unwrap(), 11);
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "version two");
        let leftovers: Vec<_> = std::fs::read_dir(t.root.join("out"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers, ["report.md"], "{mode}: no temporary files left");
        // Read-only areas and the outside.
        assert_eq!(
            refused(fs.write(&t.root.join("docs/a.txt"), b"x").await),
            format!(
                "write not permitted for {}",
                t.root.join("docs/a.txt").display()
            )
        );
        refused(fs.write(&t.outside.join("new.txt"), b"x").await);
        refused(
            fs.write(Path::new("../out/../../outside/new.txt"), b"x")
                .await,
        );
        assert!(!t.outside.join("new.txt").exists());
        // A failed write leaves the old contents.
        std::fs::create_dir_all(t.root.join("out/dir")).unwrap();
        let err = fs.write(&t.root.join("out/dir"), b"x").await.unwrap_err();
        assert_eq!(
            err,
            CapabilityError::failed(format!(
                "{} is a directory",
                t.root.join("out/dir").display()
            ))
        );
        let capped = scoped(&t, FsConfig::default().max_write(4), "");
        assert!(matches!(
            capped.write(&target, b"too long").await,
            Err(CapabilityError::InvalidInput(_))
        ));
        assert_eq!(std::fs::read_to_string(&target).unwrap(), "version two");
        std::fs::remove_dir(t.root.join("out/dir")).unwrap();
        std::fs::remove_file(&target).unwrap();
    }
}

// guarantee: G-FS-05
#[tokio::test]
async fn appends_create_extend_and_stay_confined() {
    let t = tree();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        let log = t.root.join("out/log.txt");
        assert_eq!(fs.append(&log, b"one\n").await.unwrap(), 4, "{mode}");
        assert_eq!(
            fs.append(Path::new("../out/log.txt"), b"two\n")
                .await
                .unwrap(),
            4
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "one\ntwo\n");
        // Read-only areas, deny rules and the outside.
        refused(fs.append(&t.root.join("docs/a.txt"), b"x").await);
        refused(fs.append(&t.root.join("private/key"), b"x").await);
        refused(fs.append(&t.outside.join("secret.txt"), b"x").await);
        assert_eq!(
            std::fs::read_to_string(t.root.join("docs/a.txt")).unwrap(),
            "inside"
        );
        assert_eq!(
            std::fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
            "outside-secret"
        );
        // A link (dangling or not) is never appended through; a directory is not a file.
        let link = t.root.join("out/to-secret");
        std::os::unix::fs::symlink(t.outside.join("secret.txt"), &link).unwrap();
        assert_eq!(
            refused(fs.append(&link, b"x").await),
            format!(
                "write not permitted for {}: it is a symbolic link",
                link.display()
            )
        );
        assert_eq!(
            std::fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
            "outside-secret"
        );
        std::fs::create_dir_all(t.root.join("out/dir")).unwrap();
        assert!(fs.append(&t.root.join("out/dir"), b"x").await.is_err());
        // A FIFO is refused at once: an append never blocks on a reader that never comes.
        let fifo = t.root.join("out/fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let started = std::time::Instant::now();
        assert!(fs.append(&fifo, b"x").await.is_err(), "{mode}");
        assert!(started.elapsed() < std::time::Duration::from_secs(5));
        // The write limit holds for appends too.
        let capped = scoped(&t, FsConfig::default().max_write(4), "");
        assert!(matches!(
            capped.append(&log, b"too long").await,
            Err(CapabilityError::InvalidInput(_))
        ));
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "one\ntwo\n");
        for p in [&log, &link, &fifo] {
            std::fs::remove_file(p).unwrap();
        }
        std::fs::remove_dir(t.root.join("out/dir")).unwrap();
    }
}

#[tokio::test]
async fn a_dangling_symlink_is_never_written_through() {
    let t = tree();
    let link = t.root.join("out/dangling");
    std::os::unix::fs::symlink(t.outside.join("created-by-attack"), &link).unwrap();
    std::os::unix::fs::symlink(&t.outside, t.root.join("out/dirlink")).unwrap();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        assert_eq!(
            refused(fs.write(&link, b"x").await),
            format!(
                "write not permitted for {}: it is a symbolic link",
                link.display()
            ),
            "{mode}"
        );
        refused(fs.write(&t.root.join("out/dirlink/new.txt"), b"x").await);
        refused(fs.mkdir(&t.root.join("out/dirlink/newdir")).await);
        assert!(!t.outside.join("created-by-attack").exists());
        assert!(!t.outside.join("new.txt").exists());
        assert!(!t.outside.join("newdir").exists());
    }
}

#[tokio::test]
async fn hard_links_cannot_carry_a_write_outside() {
    // A hard link is the file itself: path confinement cannot tell it from any other entry in
    // the root, so reading through one reads the linked file (see docs/decisions.md). Writes
    // replace the directory entry (rename), so the linked file outside is never modified.
    let t = tree();
    let link = t.root.join("out/hardlink");
    std::fs::hard_link(t.outside.join("secret.txt"), &link).unwrap();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        fs.write(&link, b"overwritten").await.unwrap();
        assert_eq!(
            std::fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
            "outside-secret",
            "{mode}"
        );
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "overwritten");
        std::fs::remove_file(&link).unwrap();
        std::fs::hard_link(t.outside.join("secret.txt"), &link).unwrap();
        // An append cannot replace the entry, so it refuses a file with other names: the
        // outside file is never extended through a link planted in the write root.
        assert_eq!(
            refused(fs.append(&link, b"appended").await),
            format!(
                "write not permitted for {}: it has other names (hard links)",
                link.display()
            ),
            "{mode}"
        );
        assert_eq!(
            std::fs::read_to_string(t.outside.join("secret.txt")).unwrap(),
            "outside-secret",
            "{mode}"
        );
    }
}

// guarantee: G-FS-03
#[tokio::test]
async fn proc_magic_links_nul_bytes_and_fifos() {
    let t = tree();
    let fs = scoped(&t, FsConfig::default(), "");
    refused(fs.read(Path::new("/proc/self/root/etc/passwd")).await);
    // Even with /proc listed explicitly (lifting the floor), the kernel refuses magic links.
    let with_proc = scoped(&t, FsConfig::default(), ", \"/proc\"");
    refused(
        with_proc
            .read(Path::new("/proc/self/root/etc/passwd"))
            .await,
    );
    refused(with_proc.read(Path::new("/proc/self/cwd/Cargo.toml")).await);
    assert!(
        with_proc
            .read(Path::new("/proc/self/status"))
            .await
            .unwrap()
            .contains("Pid:")
    );

    assert!(matches!(
        fs.read(Path::new("a\0.txt")).await,
        Err(CapabilityError::InvalidInput(_))
    ));
    assert!(matches!(
        fs.write(&t.root.join("out/a\0b"), b"x").await,
        Err(CapabilityError::InvalidInput(_))
    ));

    let fifo = t.root.join("docs/fifo");
    rustix::fs::mknodat(
        rustix::fs::CWD,
        &fifo,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o600),
        0,
    )
    .unwrap();
    let err = fs.read(&fifo).await.unwrap_err();
    assert_eq!(
        err,
        CapabilityError::failed(format!("{} is not a regular file", fifo.display())),
        "no blocking open of a FIFO"
    );
}

/// A read limit of `u64::MAX` (an operator's "no limit") reads the whole file, in a build with
/// overflow checks and without.
#[tokio::test]
async fn a_read_limit_of_the_largest_number_reads_the_whole_file() {
    let t = tree();
    std::fs::write(t.root.join("docs/some"), "all of it").unwrap();
    let fs = scoped(&t, FsConfig::default().max_read(u64::MAX), "");
    assert_eq!(fs.read(Path::new("some")).await.unwrap(), "all of it");
    assert_eq!(
        fs.read_bytes(Path::new("some")).await.unwrap(),
        b"all of it"
    );
}

#[tokio::test]
async fn read_cap_and_text() {
    let t = tree();
    std::fs::write(t.root.join("docs/big"), vec![b'x'; 4096]).unwrap();
    std::fs::write(t.root.join("docs/binary"), [0xff, 0xfe]).unwrap();
    let fs = scoped(&t, FsConfig::default().max_read(1024), "");
    assert_eq!(
        fs.read(Path::new("big")).await.unwrap_err(),
        CapabilityError::failed(format!(
            "{} is larger than the read limit of 1024 bytes",
            t.root.join("docs/big").display()
        ))
    );
    assert_eq!(
        fs.read(Path::new("binary")).await.unwrap_err(),
        CapabilityError::failed(format!(
            "{} is not valid UTF-8 text",
            t.root.join("docs/binary").display()
        ))
    );
    assert_eq!(
        fs.read_bytes(Path::new("binary")).await.unwrap(),
        [0xff, 0xfe]
    );
    assert_eq!(
        fs.read(Path::new("nope")).await.unwrap_err(),
        CapabilityError::not_found(format!(
            "no such file or directory: {}",
            t.root.join("docs/nope").display()
        ))
    );
}

// guarantee: G-FS-08
#[tokio::test]
async fn a_listing_past_its_limit_fails_without_reading_the_rest() {
    // A directory holds as many entries as anyone made in it; a listing is read into memory
    // whole, as a file is, and is bounded as a file read is.
    let t = tree();
    let dir = t.root.join("docs/many");
    std::fs::create_dir(&dir).unwrap();
    for i in 0..10 {
        std::fs::write(dir.join(format!("f{i}")), "").unwrap();
    }
    for (mode, config) in modes() {
        let fs = scoped(&t, config.max_entries(10), "");
        let listed = fs.list(Path::new("many")).await.unwrap();
        assert_eq!(listed.len(), 10, "{mode}");
    }
    std::fs::write(dir.join("f10"), "").unwrap();
    for (mode, config) in modes() {
        let fs = scoped(&t, config.max_entries(10), "");
        assert_eq!(
            fs.list(Path::new("many")).await.unwrap_err(),
            CapabilityError::failed(format!(
                "{} has more than 10 entries, the listing limit",
                dir.display()
            )),
            "{mode}"
        );
    }
    assert_eq!(FsConfig::default().max_entries, 100_000);
}

#[tokio::test]
async fn list_mkdir_metadata_remove() {
    let t = tree();
    std::os::unix::fs::symlink("a.txt", t.root.join("docs/link")).unwrap();
    std::fs::create_dir(t.root.join("docs/sub")).unwrap();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        let names: Vec<(String, FileKind)> = fs
            .list(&t.root.join("docs"))
            .await
            .unwrap()
            .into_iter()
            .map(|e| (e.name, e.kind))
            .collect();
        assert_eq!(
            names,
            [
                ("a.txt".into(), FileKind::File),
                ("link".into(), FileKind::Symlink),
                ("sub".into(), FileKind::Dir)
            ],
            "{mode}"
        );
        let meta = fs.metadata(Path::new("link")).await.unwrap();
        assert_eq!(
            meta.kind,
            FileKind::Symlink,
            "metadata does not follow a final symlink"
        );
        assert_eq!(fs.metadata(Path::new("a.txt")).await.unwrap().len, 6);
        assert_eq!(fs.metadata(&t.root).await.unwrap().kind, FileKind::Dir);

        let deep = t.root.join("out/a/b/c");
        fs.mkdir(&deep).await.unwrap();
        fs.mkdir(&deep).await.unwrap();
        assert!(deep.is_dir());
        refused(fs.mkdir(&t.root.join("docs/newdir")).await);
        fs.write(&deep.join("f"), b"1").await.unwrap();
        assert_eq!(
            fs.remove(&t.root.join("out/a/b")).await.unwrap_err(),
            CapabilityError::failed(format!(
                "directory not empty: {}",
                t.root.join("out/a/b").display()
            ))
        );
        fs.remove(&deep.join("f")).await.unwrap();
        fs.remove(&deep).await.unwrap();
        fs.remove(&t.root.join("out/a/b")).await.unwrap();
        fs.remove(&t.root.join("out/a")).await.unwrap();
        assert!(!t.root.join("out/a").exists());
        refused(fs.remove(&t.root.join("docs/a.txt")).await);
        assert!(
            matches!(
                fs.remove(&t.root.join("out")).await,
                Err(CapabilityError::InvalidInput(_))
            ),
            "a root itself"
        );
    }
}

// guarantee: G-FS-09
/// The directory a `HEAD` lies in becomes a git directory when an `objects` directory is made
/// beside it, also as a part of a longer `mkdir` (`objects/pack`), and the write root itself as
/// well: refused, in both modes, while an `objects` directory where no `HEAD` is is made.
#[tokio::test]
async fn making_the_objects_that_would_make_a_git_directory_is_refused() {
    let t = tree();
    for (mode, config) in modes() {
        let fs = scoped(&t, config, "");
        let dir = t.root.join(format!("out/{mode}"));
        fs.mkdir(&dir).await.unwrap();
        fs.write(&dir.join("config"), b"[core]\n\tfsmonitor = evil\n")
            .await
            .unwrap();
        fs.write(&dir.join("HEAD"), b"ref: refs/heads/main\n")
            .await
            .unwrap();
        for made in ["objects", "objects/pack"] {
            let message = refused(fs.mkdir(&dir.join(made)).await);
            assert!(message.contains("would make"), "{mode} {made}: {message}");
        }
        assert!(!dir.join("objects").exists(), "{mode}");
        // The write root itself is no exception.
        let root = t.root.join("out");
        fs.write(&root.join("HEAD"), b"ref: refs/heads/main\n")
            .await
            .unwrap();
        let message = refused(fs.mkdir(&root.join("objects")).await);
        assert!(message.contains("would make"), "{mode}: {message}");
        std::fs::remove_file(root.join("HEAD")).unwrap();
        fs.mkdir(&t.root.join(format!("out/{mode}-plain/objects/pack")))
            .await
            .unwrap();
    }
}

// guarantee: G-FS-02
#[test]
fn a_directory_swapped_for_a_symlink_during_writes_never_leaks_a_file() {
    // A real race: one thread keeps replacing `out/d` with a symlink to the outside and back,
    // while writes to `out/d/f` run. Each write holds the directory it opened beneath the root;
    // no write may ever land outside.
    let t = tree();
    let fs = scoped(&t, FsConfig::default(), "");
    let d = t.root.join("out/d");
    std::fs::create_dir(&d).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let swapper = {
        let (d, outside, stop) = (d.clone(), t.outside.clone(), Arc::clone(&stop));
        std::thread::spawn(move || {
            let parked = d.with_file_name("d-parked");
            let mut swaps = 0u32;
            while !stop.load(Ordering::Relaxed) && swaps < 20_000 {
                if std::fs::rename(&d, &parked).is_ok() {
                    let _ = std::os::unix::fs::symlink(&outside, &d);
                    let _ = std::fs::remove_file(&d);
                    let _ = std::fs::rename(&parked, &d);
                }
                swaps += 1;
            }
        })
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    for _ in 0..2_000 {
        // Each write either lands inside or is refused; which one depends on scheduling.
        let _ = rt.block_on(fs.write(&d.join("f"), b"payload"));
    }
    stop.store(true, Ordering::Relaxed);
    swapper.join().unwrap();
    assert!(
        !t.outside.join("f").exists(),
        "a write escaped through the swapped symlink"
    );
    // With the directory back in place, the same write goes through (asserting that some racing
    // write succeeded made the test flaky on a loaded machine, where the swapper can win them
    // all).
    rt.block_on(fs.write(&d.join("f"), b"payload")).unwrap();
    assert_eq!(std::fs::read(d.join("f")).unwrap(), b"payload");
}

#[tokio::test]
async fn a_root_reached_through_a_symlink_works_and_keeps_its_deny_rules() {
    let t = tree();
    let alias = t.root.with_file_name("alias-root");
    std::os::unix::fs::symlink(&t.root, &alias).unwrap();
    std::os::unix::fs::symlink("../private/key", t.root.join("docs/to-denied")).unwrap();
    std::os::unix::fs::symlink("a.txt", t.root.join("docs/inner")).unwrap();
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [\"{a}\"]\ndeny = [\"{a}/private\"]\n",
        a = alias.display()
    );
    let policy = CompiledPolicy::load(&toml, PolicyFormat::Toml, None).unwrap();
    let caps = ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality);
    let resolved = resolve("t", &caps, &policy, "s", &alias.join("docs"));
    let fs = FsBackend::new(FsConfig::default())
        .scoped_fs(FsGrant::new(
            "t",
            resolved.fs.unwrap() as Arc<dyn PathPolicy>,
        ))
        .unwrap();
    assert_eq!(fs.read(Path::new("a.txt")).await.unwrap(), "inside");
    assert_eq!(
        fs.read(Path::new("inner")).await.unwrap(),
        "inside",
        "an in-root symlink under a symlinked root"
    );
    refused(fs.read(Path::new("to-denied")).await);
    refused(fs.read(&alias.join("private/key")).await);
}

#[tokio::test]
async fn a_root_swapped_for_a_symlink_after_first_use_keeps_confining() {
    let t = tree();
    let fs = scoped(&t, FsConfig::default(), "");
    assert_eq!(fs.read(&t.root.join("docs/a.txt")).await.unwrap(), "inside");
    // The root is moved away and replaced by a symlink to the outside.
    let moved = t.root.with_file_name("root-moved");
    std::fs::rename(&t.root, &moved).unwrap();
    std::os::unix::fs::symlink(&t.outside, &t.root).unwrap();
    std::fs::write(t.outside.join("docs-secret"), "outside").unwrap();
    let err = fs.read(&t.root.join("secret.txt")).await.unwrap_err();
    assert_eq!(
        err,
        CapabilityError::not_found(format!(
            "no such file or directory: {}",
            t.root.join("secret.txt").display()
        ))
    );
    assert_eq!(
        fs.read(&t.root.join("docs/a.txt")).await.unwrap(),
        "inside",
        "still the directory first opened"
    );
}

/// A scoped object over exactly `read` and `write` (each a file or a directory).
fn scoped_over(read: &[&Path], write: &[&Path], config: FsConfig, wd: &Path) -> Arc<dyn ScopedFs> {
    let list = |paths: &[&Path]| {
        paths
            .iter()
            .map(|p| format!("\"{}\"", p.display()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let toml = format!(
        "id = \"p\"\n[fs_reach]\nread = [{}]\nwrite = [{}]\n",
        list(read),
        list(write)
    );
    let policy =
        CompiledPolicy::load(&toml, PolicyFormat::Toml, Some(Path::new("/home/nobody"))).unwrap();
    let caps = ToolCapabilities::none()
        .with_fs_read(FsPaths::FromPersonality)
        .with_fs_write(FsPaths::FromPersonality);
    let resolved = resolve("t", &caps, &policy, "s", wd);
    FsBackend::new(config)
        .scoped_fs(FsGrant::new(
            "t",
            resolved.fs.unwrap() as Arc<dyn PathPolicy>,
        ))
        .unwrap()
}

/// An entry that names a file reaches exactly that file (docs/semantics.md, "Paths"): its
/// siblings, its directory and anything "below" it are refused; a write entry rewrites it.
// guarantee: G-FS-06
#[tokio::test]
async fn an_exact_file_entry_reaches_that_file_only() {
    let t = tree();
    let docs = t.root.join("docs");
    let a = docs.join("a.txt");
    std::fs::write(docs.join("b.txt"), "sibling").unwrap();
    let config_file = t.root.join("out/config.txt");
    std::fs::write(&config_file, "old").unwrap();
    for (mode, config) in modes() {
        let fs = scoped_over(&[a.as_path()], &[config_file.as_path()], config, &docs);
        assert_eq!(fs.read(&a).await.unwrap(), "inside", "{mode}");
        assert_eq!(
            fs.read(Path::new("a.txt")).await.unwrap(),
            "inside",
            "{mode}: relative"
        );
        assert!(fs.exists(&a).await.unwrap(), "{mode}");
        assert_eq!(
            fs.metadata(&a).await.unwrap().kind,
            FileKind::File,
            "{mode}"
        );
        refused(fs.read(&docs.join("b.txt")).await);
        refused(fs.list(&docs).await);
        // Below a file there is nothing (the system's "Not a directory", or a refusal when the
        // component walk meets the file).
        let below = fs.read(&a.join("x")).await.unwrap_err().to_string();
        assert!(
            below.contains("Not a directory") || below.starts_with("PATH_NOT_REACHABLE"),
            "{mode}: {below}"
        );
        refused(fs.read(&t.outside.join("secret.txt")).await);
        refused(fs.write(&docs.join("new.txt"), b"x").await);

        assert_eq!(fs.write(&config_file, b"new").await.unwrap(), 3, "{mode}");
        assert_eq!(std::fs::read_to_string(&config_file).unwrap(), "new");
        refused(fs.write(&t.root.join("out/other.txt"), b"x").await);
        assert!(!t.root.join("out/other.txt").exists());
    }
    // A file entry that is a symbolic link reaches where it leads, and nothing beside it.
    let link = t.root.join("docs/link.txt");
    std::os::unix::fs::symlink(&a, &link).unwrap();
    for (mode, config) in modes() {
        let fs = scoped_over(&[link.as_path()], &[], config, &docs);
        assert_eq!(fs.read(&link).await.unwrap(), "inside", "{mode}");
        refused(fs.read(&docs.join("b.txt")).await);
    }
}

// guarantee: G-FS-12
/// A procfs mounted inside the reach, in the read root and in the write root, is out of reach
/// for every operation, in both walk modes: its `self/environ` would be this process's own
/// environment, its `sys` the kernel's settings. A root named inside it (a personality that
/// lists a place on that file system) still reaches what lies there. Mounting needs root (CI
/// runs as root).
#[tokio::test]
async fn a_procfs_mounted_inside_the_reach_is_out_of_it() {
    let t = tree();
    let Some(_read) = mounted::Mounted::new("proc", &t.root.join("docs/proc")) else {
        // Not root: nothing to mount (and nothing this test can show).
        return;
    };
    let Some(_write) = mounted::Mounted::new("proc", &t.root.join("out/proc")) else {
        panic!("one procfs mounted, the second not");
    };
    let read = t.root.join("docs/proc");
    let write = t.root.join("out/proc");
    for (mode, config) in modes() {
        let fs = scoped(&t, config.clone(), "");
        refused(fs.read(&read.join("self/environ")).await);
        let message = refused(fs.read(&read.join("1/cmdline")).await);
        assert!(
            message.contains("kernel file system (procfs)"),
            "{mode}: {message}"
        );
        refused(fs.list(&read).await);
        refused(fs.list(&read.join("self")).await);
        refused(fs.exists(&read.join("self/environ")).await);
        refused(fs.metadata(&read.join("self/environ")).await);
        refused(fs.read(&write.join("sys/kernel/printk_ratelimit")).await);
        // Refused before anything is written: the value would be the kernel's setting.
        refused(
            fs.append(&write.join("sys/kernel/printk_ratelimit"), b"5")
                .await,
        );
        refused(
            fs.write(&write.join("sys/kernel/printk_ratelimit"), b"5")
                .await,
        );
        refused(fs.mkdir(&write.join("sys/made")).await);
        refused(fs.remove(&write.join("sys/kernel/printk_ratelimit")).await);
        // One kernel setting bound over a file of the write root: its directory is the root's,
        // the file is the kernel's. Appended to, refused before anything is written.
        let setting = std::fs::read_to_string("/proc/sys/kernel/printk_ratelimit").unwrap();
        std::fs::write(t.root.join("out/setting"), "").unwrap();
        let bound = mounted::Mounted::bind(
            Path::new("/proc/sys/kernel/printk_ratelimit"),
            &t.root.join("out/setting"),
        )
        .expect("root binds a file");
        refused(
            fs.append(&t.root.join("out/setting"), setting.as_bytes())
                .await,
        );
        refused(fs.read(&t.root.join("out/setting")).await);
        drop(bound);
        // The mount point's own name is listed with its directory, as any entry is.
        let names: Vec<String> = fs
            .list(&t.root.join("docs"))
            .await
            .unwrap()
            .into_iter()
            .map(|e| e.name)
            .collect();
        assert!(names.contains(&"proc".to_owned()), "{mode}: {names:?}");
        // Named as a root, a place on the procfs is read.
        let named = scoped_over(&[&read.join("self/status")], &[], config, &t.root);
        let status = named.read(&read.join("self/status")).await.unwrap();
        assert!(status.starts_with("Name:"), "{mode}: {status}");
    }
}

// guarantee: G-FS-01
/// A root is opened where the policy resolved it, never through a symbolic link that lies on
/// its way now: a tool that declares a root narrower than the personality's (`…/b/c` beneath
/// a personality's `…`), where a child of another tool, which may write the personality's root,
/// has since put a link (`b` → a directory outside), had its reads and writes land outside
/// the personality's reach. Refused (`PATH_NOT_REACHABLE`, naming the link), in both modes;
/// nothing is written outside; the root works again once it is a directory.
#[tokio::test]
async fn a_root_is_never_opened_through_a_link_on_its_way() {
    for (mode, config) in modes() {
        let t = tree();
        std::fs::create_dir_all(t.root.join("b/c")).unwrap();
        std::fs::create_dir_all(t.outside.join("c")).unwrap();
        std::fs::write(t.outside.join("c/s.txt"), "outside").unwrap();
        let toml = format!(
            "id = \"p\"\n[fs_reach]\nread = [\"{r}\"]\nwrite = [\"{r}\"]\n",
            r = t.root.display()
        );
        let policy =
            CompiledPolicy::load(&toml, PolicyFormat::Toml, Some(Path::new("/home/nobody")))
                .unwrap();
        let declared = FsPaths::Paths(vec![t.root.join("b/c")]);
        let caps = ToolCapabilities::none()
            .with_fs_read(declared.clone())
            .with_fs_write(declared);
        let resolved = resolve("t", &caps, &policy, "s", &t.root);
        let fs = FsBackend::new(config)
            .scoped_fs(FsGrant::new(
                "t",
                resolved.fs.unwrap() as Arc<dyn PathPolicy>,
            ))
            .unwrap();
        std::fs::remove_dir_all(t.root.join("b")).unwrap();
        std::os::unix::fs::symlink(&t.outside, t.root.join("b")).unwrap();
        let wrote = fs.write(&t.root.join("b/c/x.txt"), b"pwned").await;
        assert!(
            refused(wrote).contains(&t.root.join("b").display().to_string()),
            "{mode}"
        );
        assert!(
            !t.outside.join("c/x.txt").exists(),
            "{mode}: written outside"
        );
        assert!(
            fs.read(&t.root.join("b/c/s.txt")).await.is_err(),
            "{mode}: read outside"
        );
        std::fs::remove_file(t.root.join("b")).unwrap();
        std::fs::create_dir_all(t.root.join("b/c")).unwrap();
        assert_eq!(
            fs.write(&t.root.join("b/c/x.txt"), b"fine").await.unwrap(),
            4
        );
    }
}
