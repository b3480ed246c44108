//! Who else can change a file (docs/policy.md, "Who else can change a file"): through a
//! directory its path is looked up in, the directories of the links on the way included, and
//! through the groups that may write one; real directories, links and groups.
#![allow(
    clippy::disallowed_methods,
    reason = "the tests make directories, links and groups of their own to examine"
)]

use std::os::unix::fs::PermissionsExt as _;

/// A link is an entry of the directory it lies in: whoever can write that directory can
/// replace the link, and with it the file every reader reaches through it. So a path is
/// swappable through every directory its resolution walks, not only those of the file it ends
/// at: the directory of a final link, of a linked directory on the way, and of a link a link
/// names. Before, only the resolved file's directories were looked at, and a policy or token
/// reached through a link in a directory anyone may write passed.
// guarantee: G-POL-02
#[test]
fn a_path_is_swappable_through_every_directory_its_links_lie_in() {
    use capability_sandbox::{Swappable, Writer, swappable_through};
    use std::os::unix::fs::symlink;
    let root = tempfile::tempdir().unwrap();
    let safe = root.path().join("safe");
    let open = root.path().join("open");
    std::fs::create_dir(&safe).unwrap();
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let open = open.canonicalize().unwrap();
    let file = safe.join("policy.toml");
    std::fs::write(&file, "").unwrap();
    let through_open = |path: &std::path::Path| match swappable_through(path).unwrap() {
        Some(Swappable::WritableBy {
            dir,
            writer: Writer::Anyone,
            ..
        }) => assert_eq!(dir, open, "{}", path.display()),
        other => panic!("{}: {other:?}", path.display()),
    };

    // The file itself, reached directly: nothing to say.
    assert_eq!(swappable_through(&file).unwrap(), None);
    // A final link in the open directory.
    symlink(&file, open.join("policy.toml")).unwrap();
    through_open(&open.join("policy.toml"));
    // A linked directory on the way.
    symlink(&safe, open.join("dir")).unwrap();
    through_open(&open.join("dir/policy.toml"));
    // A link in a safe directory that names a link in the open one.
    symlink(open.join("policy.toml"), safe.join("hop")).unwrap();
    through_open(&safe.join("hop"));
    // A relative link, resolved from the directory it lies in, and `..` after a linked
    // directory, resolved from where the link leads.
    symlink("../safe/policy.toml", open.join("relative")).unwrap();
    through_open(&open.join("relative"));
    through_open(&open.join("dir/../safe/policy.toml"));
    // A file still to be made behind a linked directory.
    through_open(&open.join("dir/new.toml"));
    assert_eq!(swappable_through(&safe.join("new.toml")).unwrap(), None);
    // A loop is an error, not an endless walk.
    symlink("loop", safe.join("loop")).unwrap();
    assert!(swappable_through(&safe.join("loop")).is_err());
}

/// A directory `team` (its real path) holding an empty `policy.toml`, in a scratch directory
/// that lives as long as the first value.
fn team_with_policy() -> (tempfile::TempDir, std::path::PathBuf, std::path::PathBuf) {
    let root = tempfile::tempdir().unwrap();
    let team = root.path().join("team");
    std::fs::create_dir(&team).unwrap();
    let team = team.canonicalize().unwrap();
    let file = team.join("policy.toml");
    std::fs::write(&file, "").unwrap();
    (root, team, file)
}

/// The first account in `/etc/passwd` that is neither this process's user nor root, with the
/// group it is in by its entry: a group with a member other than this user.
fn another_accounts_group() -> Option<u32> {
    let me = rustix::process::geteuid().as_raw();
    std::fs::read_to_string("/etc/passwd")
        .ok()?
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let uid: u32 = fields.get(2)?.parse().ok()?;
            let gid: u32 = fields.get(3)?.parse().ok()?;
            (uid != me && uid != 0 && gid != 0).then_some(gid)
        })
        .next()
}

/// Whether `path` could be given group `gid` (root can give any group; a user only their own).
fn given_group(path: &std::path::Path, gid: u32) -> bool {
    std::process::Command::new("chgrp")
        .arg(gid.to_string())
        .arg(path)
        .status()
        .is_ok_and(|s| s.success())
}

/// A directory its group may write is as open as one anyone may write when somebody besides
/// the user (and root) is in that group: they can rename what is in it away and put theirs in
/// its place. One whose group is the user's own (a user-private group, as Debian and Ubuntu
/// give every account, with `umask 002` making directories `775`) is not; nor is a sticky one.
// guarantee: G-POL-02
#[test]
fn a_directory_a_group_with_other_members_may_write_is_swappable() {
    use capability_sandbox::{Swappable, Writer, swappable_through};
    use std::os::unix::fs::MetadataExt as _;
    let (_root, team, file) = team_with_policy();
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o775)).unwrap();
    // Made by this user, the directory has their primary group: theirs alone here (CI's root,
    // or a user-private group), so writable by its group is nothing to say.
    let mine = std::fs::metadata(&team).unwrap().gid();
    let private = std::fs::read_to_string("/etc/passwd")
        .unwrap()
        .lines()
        .filter(|line| line.split(':').nth(3) == Some(&mine.to_string()))
        .count()
        == 1;
    if private {
        assert_eq!(swappable_through(&file).unwrap(), None);
    }
    // Another account's group, where this user may give it (root).
    let Some(theirs) = another_accounts_group() else {
        return;
    };
    if !given_group(&team, theirs) {
        return;
    }
    let swap = swappable_through(&file)
        .unwrap()
        .expect("writable by another's group");
    let Swappable::WritableBy {
        dir,
        writer: Writer::Group(group),
        ..
    } = &swap
    else {
        panic!("{swap:?}")
    };
    assert_eq!((dir, group.gid()), (&team, theirs));
    let said = swap.to_string();
    assert!(
        said.contains(&format!("gid {theirs}")) && said.contains("replace"),
        "{said}"
    );
    // Not writable by the group: nothing to say; sticky: only an entry's owner can rename it.
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(swappable_through(&file).unwrap(), None);
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o1775)).unwrap();
    assert_eq!(swappable_through(&file).unwrap(), None);
    // A group nobody is in: whoever runs a program set to run as that group writes as it.
    let empty = std::fs::read_to_string("/etc/group")
        .unwrap()
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split(':').collect();
            let gid: u32 = fields.get(2)?.parse().ok()?;
            let listed = fields.get(3).is_some_and(|m| !m.trim().is_empty());
            let primary = std::fs::read_to_string("/etc/passwd")
                .unwrap()
                .lines()
                .any(|l| l.split(':').nth(3) == Some(&gid.to_string()));
            (!listed && !primary && gid != 0).then_some(gid)
        })
        .next();
    if let Some(empty) = empty {
        assert!(given_group(&team, empty));
        std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o775)).unwrap();
        let swap = swappable_through(&file).unwrap();
        assert!(
            matches!(&swap, Some(Swappable::WritableBy { writer: Writer::Group(g), .. }) if g.gid() == empty),
            "{swap:?}"
        );
        assert!(swap.unwrap().to_string().contains("no members"));
    }
}

/// A POSIX access control list of `entries` (tag, permissions, id), written as the kernel keeps
/// it in `system.posix_acl_access` (what `setfacl` writes): the group bits of the mode become
/// its mask.
fn set_acl(path: &std::path::Path, entries: &[(u16, u16, u32)]) {
    // The kernel takes the entries in the order of their tags, then ids.
    let mut entries = entries.to_vec();
    entries.sort_by_key(|&(tag, _, id)| (tag, id));
    let mut blob = 2u32.to_le_bytes().to_vec();
    for (tag, perm, id) in entries {
        blob.extend(tag.to_le_bytes());
        blob.extend(perm.to_le_bytes());
        blob.extend(id.to_le_bytes());
    }
    rustix::fs::setxattr(
        path,
        "system.posix_acl_access",
        &blob,
        rustix::fs::XattrFlags::empty(),
    )
    .unwrap();
}

const USER_OBJ: u16 = 1;
const USER: u16 = 2;
const GROUP_OBJ: u16 = 4;
const GROUP: u16 = 8;
const MASK: u16 = 0x10;
const OTHER: u16 = 0x20;
const NOBODY: u32 = u32::MAX;

/// An access control list can let a named user or group write a file or a directory whose mode
/// says only its owner and group may: `ls -l` shows `775` and a `+`, and the group bits are the
/// list's mask. Whoever it lets write can change the file, or replace what the directory
/// holds; a list that names only this user, or whose mask takes writing away, is nothing to say.
// guarantee: G-POL-02
#[test]
fn an_access_control_list_that_lets_another_account_write_is_found() {
    use capability_sandbox::{Changeable, Swappable, changeable_by_others, swappable_through};
    use std::os::unix::fs::MetadataExt as _;
    let (_root, team, file) = team_with_policy();
    let me = rustix::process::geteuid().as_raw();
    let other = if me == 65534 { 65533 } else { 65534 };
    let base = |extra: &[(u16, u16, u32)], mask: u16| {
        let mut entries = vec![(USER_OBJ, 7, NOBODY)];
        entries.extend_from_slice(extra);
        entries.extend([
            (GROUP_OBJ, 5, NOBODY),
            (MASK, mask, NOBODY),
            (OTHER, 5, NOBODY),
        ]);
        entries
    };
    let examine = |path: &std::path::Path| {
        let meta = std::fs::metadata(path).unwrap();
        changeable_by_others(path, meta.mode(), meta.uid(), meta.gid())
    };
    // Another user named, with writing in the mask: the directory, and the file.
    set_acl(&team, &base(&[(USER, 7, other)], 7));
    let swap = swappable_through(&file)
        .unwrap()
        .expect("an ACL lets another user write");
    let Swappable::WritableBy { dir, .. } = &swap else {
        panic!("{swap:?}")
    };
    assert_eq!(dir, &team);
    assert!(
        swap.to_string()
            .contains(&format!("lets uid {other} write"))
            && swap.to_string().contains("they can replace"),
        "{swap}"
    );
    std::fs::set_permissions(&team, std::fs::Permissions::from_mode(0o755)).unwrap();
    assert_eq!(
        swappable_through(&file).unwrap(),
        None,
        "the mask takes writing away"
    );
    set_acl(&file, &base(&[(USER, 6, other)], 6));
    let how = examine(&file).expect("an ACL lets another user write the file");
    assert!(matches!(how, Changeable::WritableBy { .. }), "{how:?}");
    assert!(how.to_string().contains("they can change it"), "{how}");
    // This user named: theirs alone.
    set_acl(&file, &base(&[(USER, 6, me)], 6));
    assert_eq!(examine(&file), None);
    // A group named that another account is in (`nobody`'s own group, 65534 on Debian).
    set_acl(&file, &base(&[(GROUP, 6, 65534)], 6));
    let how = examine(&file);
    assert!(
        how.as_ref()
            .is_some_and(|h| h.to_string().contains("gid 65534")),
        "{how:?}"
    );
    // The owning group's own entry grants writing, and the mask lets it: the group's rule.
    set_acl(
        &file,
        &[
            (USER_OBJ, 6, NOBODY),
            (GROUP_OBJ, 6, NOBODY),
            (MASK, 6, NOBODY),
            (OTHER, 4, NOBODY),
        ],
    );
    let gid = std::fs::metadata(&file).unwrap().gid();
    assert_eq!(
        examine(&file).is_some(),
        capability_sandbox::group_open(gid).is_some()
    );
}
