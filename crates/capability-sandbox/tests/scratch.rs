//! Scratch directories (a confined child's `HOME`, a guarded server's home) are removed when
//! their owner drops them; one left behind by a process killed with `SIGKILL` is removed by the
//! next one made beside it, and nothing else is: not a live process's, not one without toolcap's
//! lock (an older toolcap's, someone's own), not a symlink, not another user's.
#![allow(
    missing_docs,
    clippy::unwrap_used,
    clippy::disallowed_methods,
    unsafe_code,
    reason = "tests: real files, real child processes, the effective user"
)]

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use capability_sandbox::ScratchDir;

/// Set in the child this test starts: the root to make its scratch directory in.
const CHILD_ROOT: &str = "TOOLCAP_SCRATCH_TEST_ROOT";
const PREFIX: &str = "toolcap-home-";

/// This test binary started again as a process that makes a scratch directory under `root`,
/// writes a file into it as a child would (a token), says where it is, and waits to be killed.
fn owner_in(root: &Path, test: &str) -> (std::process::Child, PathBuf) {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ROOT, root)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let made = lines
        .map(Result::unwrap)
        // The harness may have begun the line with the test's name.
        .find_map(|line| {
            line.split_once("made ")
                .map(|(_, path)| PathBuf::from(path))
        })
        .expect("the child says where its directory is");
    (child, made)
}

/// In the child: make the directory and wait.
fn be_the_owner() {
    let Ok(root) = std::env::var(CHILD_ROOT) else {
        return;
    };
    let dir = ScratchDir::new_in(Path::new(&root), PREFIX).unwrap();
    std::fs::write(dir.path().join("token"), "secret").unwrap();
    let mut out = std::io::stdout();
    writeln!(out, "made {}", dir.path().display()).unwrap();
    out.flush().unwrap();
    // Killed long before; a child whose test failed first does not linger past a minute.
    std::thread::sleep(std::time::Duration::from_secs(60));
    std::process::exit(1);
}

// guarantee: G-CLI-02
#[test]
fn a_directory_left_by_a_killed_process_is_removed_by_the_next_one_and_nothing_else_is() {
    be_the_owner();
    let root = tempfile::tempdir().unwrap();
    let (mut child, handed) = owner_in(
        root.path(),
        "a_directory_left_by_a_killed_process_is_removed_by_the_next_one_and_nothing_else_is",
    );
    assert!(handed.join("token").is_file());
    let left = handed.parent().unwrap().to_owned();
    assert_eq!(left.parent(), Some(root.path()));

    // While its owner lives, a directory is left alone.
    let live = ScratchDir::new_in(root.path(), PREFIX).unwrap();
    assert!(handed.join("token").is_file(), "a live process's directory");

    // What the next one must not touch: one without toolcap's lock (an older toolcap's, or
    // someone's own), a symlink to a directory with a lock nobody holds, a lock that is itself a
    // symlink, and a directory of another name.
    let unlocked = root.path().join(format!("{PREFIX}unlocked"));
    std::fs::create_dir(&unlocked).unwrap();
    std::fs::write(unlocked.join("keep"), "").unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    std::fs::write(elsewhere.path().join(ScratchDir::LOCK), "").unwrap();
    std::fs::write(elsewhere.path().join("keep"), "").unwrap();
    let link = root.path().join(format!("{PREFIX}link"));
    symlink(elsewhere.path(), &link).unwrap();
    let linked_lock = root.path().join(format!("{PREFIX}linked-lock"));
    std::fs::create_dir(&linked_lock).unwrap();
    symlink(
        elsewhere.path().join(ScratchDir::LOCK),
        linked_lock.join(ScratchDir::LOCK),
    )
    .unwrap();
    let other = root.path().join("toolcap-guard-abandoned");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join(ScratchDir::LOCK), "").unwrap();
    // As root (the way containers run), another user's directory, and a directory holding
    // another user's lock file, each lock held by nobody.
    let theirs = root.path().join(format!("{PREFIX}theirs"));
    let their_lock = root.path().join(format!("{PREFIX}their-lock"));
    for dir in [&theirs, &their_lock] {
        std::fs::create_dir(dir).unwrap();
        std::fs::write(dir.join(ScratchDir::LOCK), "").unwrap();
    }
    // SAFETY: geteuid has no preconditions.
    let root_user = unsafe { libc::geteuid() } == 0;
    if root_user {
        for path in [theirs.clone(), their_lock.join(ScratchDir::LOCK)] {
            std::os::unix::fs::chown(path, Some(65534), Some(65534)).unwrap();
        }
    }

    // Killed: SIGKILL runs no destructor, so its directory (and the token in it) stays.
    child.kill().unwrap();
    child.wait().unwrap();
    assert!(handed.join("token").is_file());

    let next = ScratchDir::new_in(root.path(), PREFIX).unwrap();
    assert!(!left.exists(), "the killed process's directory is gone");
    // (Not root, the two "of another user's" are this user's, and go.)
    assert_eq!(
        theirs.exists(),
        root_user,
        "another user's directory is not touched"
    );
    assert_eq!(
        their_lock.exists(),
        root_user,
        "nor one with another user's lock"
    );
    for kept in [live.path(), next.path(), &unlocked, &linked_lock, &other] {
        assert!(kept.is_dir(), "{} kept", kept.display());
    }
    assert!(unlocked.join("keep").exists());
    assert!(
        std::fs::symlink_metadata(&link)
            .unwrap()
            .file_type()
            .is_symlink()
    );
    assert!(
        elsewhere.path().join("keep").exists(),
        "nothing through a link"
    );

    // Dropped, a directory is removed by its owner.
    let named = |dir: &ScratchDir| dir.path().parent().unwrap().to_owned();
    let (live_path, next_path) = (named(&live), named(&next));
    drop(live);
    drop(next);
    assert!(!live_path.exists() && !next_path.exists());
}

#[test]
fn a_scratch_directory_is_its_users_alone() {
    use std::os::unix::fs::PermissionsExt;
    let root = tempfile::tempdir().unwrap();
    let dir = ScratchDir::new_in(root.path(), PREFIX).unwrap();
    let named = dir.path().parent().unwrap();
    for path in [dir.path(), named] {
        let mode = std::fs::metadata(path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{}", path.display());
    }
    assert_eq!(named.parent(), Some(root.path()));
    assert!(
        named
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .starts_with(PREFIX)
    );
    // The lock is beside what is handed out, not in it.
    assert!(named.join(ScratchDir::LOCK).is_file());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // A root that does not exist is an error, not a directory made somewhere else.
    assert!(ScratchDir::new_in(&root.path().join("missing"), PREFIX).is_err());
}
