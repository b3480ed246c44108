//! Who is in a group, as the system's account files say: whether a file or a directory its
//! group may write is open to accounts other than this user and root (docs/policy.md, "Who
//! else can change a file").
//!
//! A group's members are the accounts `/etc/group` lists for it and the accounts whose entry in
//! `/etc/passwd` names it as their group. A group is this user's alone when every member is
//! this user or root (root can change anything anyway) and it has at least one: a group
//! nobody is in is typically a set-group-ID program's (`mail`, `staff`), and whoever runs that
//! program writes as the group. This is the rule Debian's OpenSSH applies to the files its
//! `StrictModes` examines, so that the user-private groups Debian and Ubuntu give every account
//! (with `umask 002`, directories `775` and files `664`) pass, and shared groups do not.
//!
//! The files are read, not the name service: a group or an account only a directory service
//! (LDAP, SSSD) knows cannot be told apart from one that hides members, so it counts as open
//! (fail closed). A line that cannot be read (a NIS `+` entry, a field missing, an id that is
//! not a number) makes the group's membership unknown, and it counts as open too.

use std::fmt;

/// The most of an account file read: past it, who is in a group cannot be told.
const MAX_ACCOUNT_FILE: u64 = 16 << 20;

/// Why a group's members are not only this user and root: the reason a file or a directory it
/// may write counts as writable by others.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum GroupOpen {
    /// Another account is a member.
    Member {
        /// The group's id.
        gid: u32,
        /// Its name.
        name: String,
        /// The other account's name.
        account: String,
        /// Its user id, when `/etc/passwd` lists it.
        uid: Option<u32>,
    },
    /// Nobody is a member: a set-group-ID program of the group writes as it for whoever runs it.
    Empty {
        /// The group's id.
        gid: u32,
        /// Its name.
        name: String,
    },
    /// The account files do not say who is in it: not listed, a line that cannot be read, or
    /// a file that cannot be read.
    Unknown {
        /// The group's id.
        gid: u32,
        /// Why not.
        why: String,
    },
}

impl GroupOpen {
    /// The group's id.
    pub fn gid(&self) -> u32 {
        match self {
            GroupOpen::Member { gid, .. }
            | GroupOpen::Empty { gid, .. }
            | GroupOpen::Unknown { gid, .. } => *gid,
        }
    }
}

impl fmt::Display for GroupOpen {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GroupOpen::Member {
                gid,
                name,
                account,
                uid: Some(uid),
            } => write!(
                f,
                "group {name} (gid {gid}), which {account} (uid {uid}) is a member of too"
            ),
            GroupOpen::Member {
                gid, name, account, ..
            } => write!(
                f,
                "group {name} (gid {gid}), which {account} is a member of too"
            ),
            GroupOpen::Empty { gid, name } => write!(
                f,
                "group {name} (gid {gid}), which has no members: whoever runs a program set to \
                 run as that group writes as it"
            ),
            GroupOpen::Unknown { gid, why } => {
                write!(f, "group {gid}, whose members cannot be told ({why})")
            }
        }
    }
}

/// Why group `gid` is open to accounts other than this process's user and root, or `None` when
/// it is theirs alone.
///
/// # Ambient Authority
///
/// Reads `/etc/passwd` and `/etc/group`.
pub fn group_open(gid: u32) -> Option<GroupOpen> {
    AccountFiles::read().open(gid, rustix::process::geteuid().as_raw())
}

/// The two account files, read once for the groups of a walk.
pub(crate) struct AccountFiles {
    files: Result<(String, String), String>,
}

impl AccountFiles {
    /// Reads `/etc/passwd` and `/etc/group`; a failure is kept, and every group is then open.
    pub(crate) fn read() -> Self {
        AccountFiles {
            files: read_capped("/etc/passwd", ACCOUNT_FIELDS)
                .and_then(|p| Ok((p, read_capped("/etc/group", GROUP_FIELDS)?))),
        }
    }

    /// Why group `gid` is open to accounts other than `me` and root, or `None`.
    pub(crate) fn open(&self, gid: u32, me: u32) -> Option<GroupOpen> {
        match &self.files {
            Ok((passwd, group)) => open_in(gid, me, passwd, group),
            Err(why) => Some(GroupOpen::Unknown {
                gid,
                why: why.clone(),
            }),
        }
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "reads the system's account files to tell who may write a user's policy, not a tool's reach"
)]
fn read_capped(path: &str, used: &[usize]) -> Result<String, String> {
    use std::io::Read as _;
    // toolcap: allow(std::fs::File::open, reason = "the system's account files, read to tell who may write a user's policy, not a tool's reach")
    let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
    let mut bytes = Vec::new();
    file.take(MAX_ACCOUNT_FILE + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{path}: {e}"))?;
    if bytes.len() as u64 > MAX_ACCOUNT_FILE {
        return Err(format!("{path} is over {MAX_ACCOUNT_FILE} bytes"));
    }
    as_text(&bytes, path, used)
}

/// The fields of `/etc/passwd` the decision reads: the name, the user id and the group id.
const ACCOUNT_FIELDS: &[usize] = &[0, 2, 3];

/// The fields of `/etc/group` it reads: the name, the group id and the members.
const GROUP_FIELDS: &[usize] = &[0, 2, 3];

/// An account file's bytes as text: the `used` fields of each line must be UTF-8 (a name that
/// is not could not be compared with another), the others (a comment field in Latin-1, a home)
/// are read as whatever they are, since nothing here reads them.
fn as_text(bytes: &[u8], path: &str, used: &[usize]) -> Result<String, String> {
    let mut text = String::with_capacity(bytes.len());
    for (n, line) in bytes.split(|b| *b == b'\n').enumerate() {
        if n > 0 {
            text.push('\n');
        }
        for (i, field) in line.split(|b| *b == b':').enumerate() {
            if i > 0 {
                text.push(':');
            }
            match std::str::from_utf8(field) {
                Ok(field) => text.push_str(field),
                Err(_) if used.contains(&i) => {
                    return Err(format!("line {} of {path} is not text", n + 1));
                }
                Err(_) => text.push_str(&String::from_utf8_lossy(field)),
            }
        }
    }
    Ok(text)
}

/// One account of `/etc/passwd`: its name, user id and group.
struct Account<'a> {
    name: &'a str,
    uid: u32,
    gid: u32,
}

/// The accounts of a passwd text, or why it cannot be read whole. Blank lines and comments are
/// skipped; anything else must be `name:password:uid:gid:…`.
fn accounts(passwd: &str) -> Result<Vec<Account<'_>>, String> {
    entries(passwd, "/etc/passwd", 7, |fields| {
        Some(Account {
            name: fields[0],
            uid: fields[2].parse().ok()?,
            gid: fields[3].parse().ok()?,
        })
    })
}

/// The lines of an account file, each split into at least `fields` fields and read by `read`;
/// a line it cannot read is an error naming the line.
fn entries<'a, T>(
    text: &'a str,
    file: &str,
    fields: usize,
    read: impl Fn(&[&'a str]) -> Option<T>,
) -> Result<Vec<T>, String> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let split: Vec<&str> = line.split(':').collect();
        let entry = (split.len() >= fields && !split[0].is_empty())
            .then(|| read(&split))
            .flatten()
            .ok_or_else(|| format!("line {} of {file} cannot be read", n + 1))?;
        out.push(entry);
    }
    Ok(out)
}

/// The decision of [`group_open`] over the files' texts.
fn open_in(gid: u32, me: u32, passwd: &str, group: &str) -> Option<GroupOpen> {
    let unknown = |why: String| Some(GroupOpen::Unknown { gid, why });
    let accounts = match accounts(passwd) {
        Ok(accounts) => accounts,
        Err(why) => return unknown(why),
    };
    // Every entry of the group, by id (a group may be listed twice, under two names).
    let groups = match entries(group, "/etc/group", 4, |fields| {
        let id: u32 = fields[2].parse().ok()?;
        Some((fields[0], id, fields[3]))
    }) {
        Ok(groups) => groups,
        Err(why) => return unknown(why),
    };
    let mut listed = groups.iter().filter(|(_, id, _)| *id == gid).peekable();
    let Some(name) = listed.peek().map(|(name, _, _)| *name) else {
        return unknown("not listed in /etc/group".to_owned());
    };
    let ours = |uid: u32| uid == me || uid == 0;
    let mut members = 0usize;
    for account in listed
        .flat_map(|(_, _, names)| names.split(','))
        .map(str::trim)
        .filter(|n| !n.is_empty())
    {
        members += 1;
        let uid = accounts.iter().find(|a| a.name == account).map(|a| a.uid);
        if !uid.is_some_and(ours) {
            return Some(GroupOpen::Member {
                gid,
                name: name.to_owned(),
                account: account.to_owned(),
                uid,
            });
        }
    }
    for account in accounts.iter().filter(|a| a.gid == gid) {
        members += 1;
        if !ours(account.uid) {
            return Some(GroupOpen::Member {
                gid,
                name: name.to_owned(),
                account: account.name.to_owned(),
                uid: Some(account.uid),
            });
        }
    }
    (members == 0).then(|| GroupOpen::Empty {
        gid,
        name: name.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const PASSWD: &str = "\
root:x:0:0:root:/root:/bin/bash
# a comment

alice:x:1000:1000:Alice:/home/alice:/bin/bash
bob:x:1001:1001::/home/bob:/bin/sh
carol:x:1002:1003::/home/carol:/bin/sh
";
    const GROUP: &str = "\
root:x:0:
alice:x:1000:
bob:x:1001:
dev:x:1003:alice
team:x:1004:alice,bob
mail:x:8:
solo:x:1005:alice
ghost:x:1006:dave
";

    /// An account file is bytes: a name written in Latin-1 in an account's comment field
    /// (`José`) is no UTF-8, and reading the files as text failed, so every group counted as
    /// open and every group-writable policy was refused. The fields the decision reads (names,
    /// ids, members) are still required to be text; the others may hold anything.
    #[test]
    #[allow(clippy::disallowed_methods, reason = "the test writes account files")]
    fn account_files_are_read_whatever_the_fields_not_used_hold() {
        let dir = tempfile::tempdir().unwrap();
        let passwd = dir.path().join("passwd");
        std::fs::write(
            &passwd,
            b"root:x:0:0:root:/root:/bin/bash\nalice:x:1000:1000:Jos\xe9,,,:/home/al\xefce:/bin/sh\n",
        )
        .unwrap();
        let text = read_capped(passwd.to_str().unwrap(), ACCOUNT_FIELDS).unwrap();
        let accounts = accounts(&text).unwrap();
        assert_eq!(
            accounts.iter().map(|a| (a.name, a.uid)).collect::<Vec<_>>(),
            [("root", 0), ("alice", 1000)]
        );
        // A name that is no text cannot be compared with a group's members: refused.
        std::fs::write(&passwd, b"al\xefce:x:1000:1000::/home/a:/bin/sh\n").unwrap();
        let err = read_capped(passwd.to_str().unwrap(), ACCOUNT_FIELDS).unwrap_err();
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn a_private_group_is_its_users_alone_and_root_counts_as_ours() {
        assert_eq!(open_in(1000, 1000, PASSWD, GROUP), None);
        assert_eq!(open_in(0, 0, PASSWD, GROUP), None);
        // Root's group from alice's side: root is its only member.
        assert_eq!(open_in(0, 1000, PASSWD, GROUP), None);
        // A group that lists only alice, and nobody's group by their entry.
        assert_eq!(open_in(1005, 1000, PASSWD, GROUP), None);
    }

    #[test]
    fn another_member_listed_or_by_their_entry_opens_the_group() {
        let bob = open_in(1004, 1000, PASSWD, GROUP).unwrap();
        assert!(
            matches!(&bob, GroupOpen::Member { account, uid: Some(1001), .. } if account == "bob")
        );
        assert!(bob.to_string().contains("team (gid 1004)"), "{bob}");
        // carol's entry names group 1003, which lists only alice.
        let carol = open_in(1003, 1000, PASSWD, GROUP).unwrap();
        assert!(matches!(&carol, GroupOpen::Member { account, .. } if account == "carol"));
        // From bob's side, alice's private group is alice's.
        assert!(open_in(1000, 1001, PASSWD, GROUP).is_some());
        // A member no account file knows (a directory service's): counted as another.
        let ghost = open_in(1006, 1000, PASSWD, GROUP).unwrap();
        assert!(
            matches!(&ghost, GroupOpen::Member { uid: None, .. }),
            "{ghost:?}"
        );
    }

    #[test]
    fn an_empty_or_unlisted_group_is_open() {
        assert!(matches!(
            open_in(8, 0, PASSWD, GROUP),
            Some(GroupOpen::Empty { gid: 8, .. })
        ));
        assert!(matches!(
            open_in(4242, 0, PASSWD, GROUP),
            Some(GroupOpen::Unknown { gid: 4242, .. })
        ));
    }

    #[test]
    fn account_files_that_cannot_be_read_whole_leave_every_group_open() {
        let hostile_passwd = [
            "+::::::",                     // a NIS entry: who it brings in is not here
            "alice:x:1000",                // fields missing
            "alice:x:one:1000:::",         // an id that is not a number
            "alice:x:1000:99999999999:::", // an id past u32
            ":x:1000:1000:::",             // no name
        ];
        for line in hostile_passwd {
            let passwd = format!("root:x:0:0:root:/root:/bin/sh\n{line}\n");
            let open = open_in(0, 0, &passwd, GROUP);
            assert!(
                matches!(&open, Some(GroupOpen::Unknown { why, .. }) if why.contains("line 2 of /etc/passwd")),
                "{line}: {open:?}"
            );
        }
        for line in ["+:::", "root:x:0", "root:x:zero:", "\u{0}:x:"] {
            let group = format!("{line}\nalice:x:1000:\n");
            assert!(
                matches!(
                    open_in(1000, 1000, PASSWD, &group),
                    Some(GroupOpen::Unknown { .. })
                ),
                "{line:?}"
            );
        }
        // A group listed twice: members of both entries count.
        let twice = "alice:x:1000:\nalias:x:1000:bob\n";
        assert!(matches!(
            open_in(1000, 1000, PASSWD, twice),
            Some(GroupOpen::Member { .. })
        ));
        // Long and odd input reads without trouble.
        let long = format!("{}\n", "a".repeat(1 << 20));
        assert!(open_in(0, 0, &long, GROUP).is_some());
        let files = AccountFiles {
            files: Err("/etc/group: permission denied".to_owned()),
        };
        assert!(
            files
                .open(0, 0)
                .unwrap()
                .to_string()
                .contains("permission denied")
        );
    }
}
