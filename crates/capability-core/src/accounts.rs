//! The home directories of the machine's accounts, for the deny floor: the keys and credential
//! files of every account `/etc/passwd` lists are protected where they are when a policy loads,
//! not only those of the home toolcap runs with (docs/semantics.md, "Paths").

use std::io::Read;
use std::path::{Path, PathBuf};

use capability_policy::normalize_lexically;

use crate::matching::path::{HOME_ENTRIES, SNAP_ENTRIES, is_within};

/// The most of `/etc/passwd` read; an account listed past it is not looked at.
const MAX_PASSWD: u64 = 16 << 20;

/// The places of the deny floor's home entries ([`HOME_ENTRIES`]) that are there now in the
/// homes `/etc/passwd` lists and that some of `roots` (a policy's reach, absolute and
/// normalised) could reach: none when it cannot be read. A home no root lies above or inside is
/// not looked at, so a personality that reaches no home costs one read of `/etc/passwd`. Each
/// home is listed once (one directory read, not a look-up per entry), or, where it cannot be
/// listed (a home of mode `711`) or holds more than [`MAX_LISTED`] entries, each entry is looked
/// up; homes in the system's program directories are passed over.
pub(crate) fn account_places(roots: &[PathBuf]) -> Vec<PathBuf> {
    if roots.is_empty() {
        return Vec::new();
    }
    places_in(&account_homes(), roots)
}

/// [`account_places`] of the homes `homes`.
fn places_in(homes: &[PathBuf], roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut places = Vec::new();
    for home in homes {
        let reached = roots
            .iter()
            .any(|root| is_within(home, root) || is_within(root, home));
        if !reached
            || SYSTEM_DIRS
                .iter()
                .any(|dir| is_within(home, Path::new(dir)))
        {
            continue;
        }
        let names = dot_names_in(home);
        for entry in HOME_ENTRIES.iter().chain(&SNAP_ENTRIES) {
            let (first, rest) = entry.split_once('/').unwrap_or((entry, ""));
            let there = match &names {
                Some(names) => {
                    names.iter().any(|n| n == first)
                        && (rest.is_empty() || exists(&home.join(entry)))
                }
                None => exists(&home.join(entry)),
            };
            if there {
                places.push(home.join(entry));
            }
        }
    }
    places
}

/// Directories whose contents are the system's programs and the kernel's, never an account's
/// keys: an account whose home is `/bin` or `/dev` (Debian's `bin`, `sys`) keeps none there.
const SYSTEM_DIRS: [&str; 8] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/proc", "/sys",
];

/// The home directories `/etc/passwd` lists, or none when it cannot be read.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading reads the machine's account list; no tool reaches this"
)]
fn account_homes() -> Vec<PathBuf> {
    homes_in_file(Path::new("/etc/passwd"))
}

/// The home directories the account file `path` lists, or none when it cannot be read.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading reads the machine's account list; no tool reaches this"
)]
fn homes_in_file(path: &Path) -> Vec<PathBuf> {
    // Bytes, not text: a comment field in another encoding is no reason to protect nobody.
    let mut bytes = Vec::new();
    let read =
        // toolcap: allow(std::fs::File::open, reason = "policy loading reads the machine's account list for the deny floor")
        std::fs::File::open(path).and_then(|file| file.take(MAX_PASSWD).read_to_end(&mut bytes));
    match read {
        Ok(_) => homes_in(&bytes),
        Err(_) => Vec::new(),
    }
}

/// The most entries of a home listed; past it, each place is looked up instead.
const MAX_LISTED: usize = 4096;

/// The names beginning with a dot in directory `dir` (every entry of [`HOME_ENTRIES`] does),
/// and `snap` (where [`SNAP_ENTRIES`] lie), if it can be listed whole within [`MAX_LISTED`]
/// entries.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading looks for the places of the deny floor; no tool reaches this"
)]
fn dot_names_in(dir: &Path) -> Option<Vec<std::ffi::OsString>> {
    // toolcap: allow(std::fs::read_dir, reason = "policy loading looks for the places of the deny floor")
    let entries = std::fs::read_dir(dir).ok()?;
    let mut names = Vec::new();
    for (n, entry) in entries.enumerate() {
        if n == MAX_LISTED {
            return None;
        }
        let name = entry.ok()?.file_name();
        if name.as_encoded_bytes().first() == Some(&b'.') || name == "snap" {
            names.push(name);
        }
    }
    Some(names)
}

/// Whether something (a file, a directory, a link) is at `path`.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading looks for the places of the deny floor; no tool reaches this"
)]
fn exists(path: &Path) -> bool {
    // toolcap: allow(std::fs::symlink_metadata, reason = "policy loading looks for the places of the deny floor")
    std::fs::symlink_metadata(path).is_ok()
}

/// The home directories of the account lines of `passwd` (the sixth field), each absolute and
/// normalised, `/` and duplicates left out. Lines that are not an account (a NIS `+` or `-`
/// entry, a comment, a line without its fields) are passed over.
fn homes_in(passwd: &[u8]) -> Vec<PathBuf> {
    use std::os::unix::ffi::OsStrExt as _;
    let mut homes: Vec<PathBuf> = passwd
        .split(|b| *b == b'\n')
        .filter(|line| {
            !line.starts_with(b"+") && !line.starts_with(b"-") && !line.starts_with(b"#")
        })
        .filter_map(|line| line.split(|b| *b == b':').nth(5))
        .map(|home| Path::new(std::ffi::OsStr::from_bytes(home)))
        .filter(|home| home.is_absolute())
        .map(normalize_lexically)
        .filter(|home| home.as_os_str() != "/")
        .collect();
    homes.sort();
    homes.dedup();
    homes
}

/// The temporary directories toolcap's processes make their scratch directories in: `/tmp`,
/// and `TMPDIR` when it is an absolute path, as `capability_sandbox::temp_root` takes it
/// (docs/isolation-model.md, "Scratch directories"); another toolcap process may have been
/// started with either.
#[allow(
    clippy::disallowed_methods,
    reason = "policy loading places the deny floor's scratch directories where this process makes them"
)]
pub(crate) fn temp_dirs() -> Vec<PathBuf> {
    let mut dirs = vec![PathBuf::from("/tmp")];
    // toolcap: allow(std::env::var_os, reason = "policy loading places the deny floor's scratch directories where this process makes them")
    if let Some(tmpdir) = std::env::var_os("TMPDIR").map(PathBuf::from)
        && tmpdir.is_absolute()
    {
        dirs.push(tmpdir);
    }
    dirs
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Makes `path`: a directory, or (`file`) an empty file in a directory made for it.
    #[allow(clippy::disallowed_methods, reason = "the test builds homes on disk")]
    fn make(path: &Path, file: bool) {
        let dir = if file { path.parent().unwrap() } else { path };
        // toolcap: allow(std::fs::create_dir_all, reason = "the test builds homes on disk")
        std::fs::create_dir_all(dir).unwrap();
        if file {
            // toolcap: allow(std::fs::write, reason = "the test builds homes on disk")
            std::fs::write(path, "").unwrap();
        }
    }

    #[test]
    fn the_places_there_in_the_homes_the_reach_spans() {
        // toolcap: allow(tempfile, reason = "the test's own scratch directory")
        let dir = tempfile::tempdir().unwrap();
        let root = normalize_lexically(dir.path());
        let (ada, bob, eve) = (
            root.join("ada"),
            root.join("bob"),
            root.join("elsewhere/eve"),
        );
        for made in [".ssh", ".config/gh", ".config/other"] {
            make(&ada.join(made), false);
        }
        // More entries than are listed: each place is looked up instead.
        for n in 0..MAX_LISTED + 10 {
            make(&bob.join(format!("f{n}")), true);
        }
        make(&bob.join(".npmrc"), true);
        // A snap's profile, beneath a name without a dot, whether the home is listed or not.
        make(&ada.join("snap/chromium/common/chromium"), false);
        make(&ada.join("snap/other/common"), false);
        make(&bob.join("snap/firefox/common/.mozilla"), false);
        make(&eve.join(".ssh"), false);
        let homes = [ada.clone(), bob.clone(), eve.clone(), root.join("missing")];
        let mut places = places_in(&homes, &[root.join("ada"), root.join("bob")]);
        places.sort();
        assert_eq!(
            places,
            [
                ada.join(".config/gh"),
                ada.join(".ssh"),
                ada.join("snap/chromium/common/chromium"),
                bob.join(".npmrc"),
                bob.join("snap/firefox/common/.mozilla"),
            ]
        );
        // A root inside a home reaches its places; no root, no home looked at.
        assert_eq!(places_in(&homes, &[ada.join(".config")]).len(), 3);
        assert!(places_in(&homes, &[root.join("other")]).is_empty());
    }

    // guarantee: G-FS-03
    /// An account file is bytes: a name written in Latin-1 in one account's comment field
    /// (`José`, as older systems wrote it) is no UTF-8, and reading the file as text failed, so
    /// no account's home was protected at all. Every home is read whatever the other fields
    /// hold, a home of bytes that are no UTF-8 too.
    #[test]
    #[allow(clippy::disallowed_methods, reason = "the test writes an account file")]
    fn an_account_file_that_is_no_utf8_still_gives_every_home() {
        use std::os::unix::ffi::OsStrExt as _;
        // toolcap: allow(tempfile, reason = "the test's own scratch directory")
        let dir = tempfile::tempdir().unwrap();
        let passwd = dir.path().join("passwd");
        // toolcap: allow(std::fs::write, reason = "the test writes an account file")
        std::fs::write(
            &passwd,
            b"root:x:0:0:root:/root:/bin/bash\n\
              jose:x:1001:1001:Jos\xe9 Garc\xeda,,,:/home/jose:/bin/bash\n\
              ana:x:1002:1002::/home/an\xe4:/bin/sh\n",
        )
        .unwrap();
        assert_eq!(
            homes_in_file(&passwd),
            [
                PathBuf::from(std::ffi::OsStr::from_bytes(b"/home/an\xe4")),
                PathBuf::from("/home/jose"),
                PathBuf::from("/root"),
            ]
        );
    }

    #[test]
    fn the_homes_of_the_account_lines() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\n\
                      nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n\
                      ada:x:1000:1000:Ada,,,:/home/ada/:/bin/sh\n\
                      again:x:1001:1001::/home/ada:/bin/sh\n\
                      svc:x:999:999::/:/bin/false\n\
                      rel:x:998:998::relative/home:/bin/false\n\
                      +nis::::::\n\
                      # a comment:a:b:c:d:/commented\n\
                      short:x:1\n";
        assert_eq!(
            homes_in(passwd.as_bytes()),
            ["/home/ada", "/nonexistent", "/root"].map(PathBuf::from)
        );
    }
}
