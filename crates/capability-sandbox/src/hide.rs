//! What a child must not see even beneath a directory it may read: planned in the parent, once
//! per prepared sandbox, from the file system as it is then.
//!
//! Landlock only grants, so a place inside a granted directory cannot be subtracted from the
//! grant. Two ways are used instead (docs/isolation-model.md, "Children"):
//!
//! - **The system directories** (`/etc`) are granted entry by entry where needed: a subtree whose
//!   files are all world-readable is granted whole; a directory that holds something else is
//!   granted for listing only, and its entries one by one, leaving out the files and directories
//!   no unprivileged user could read (`/etc/shadow`, `/etc/sudoers`, SSH host keys, ...) and the
//!   entries of [`SYSTEM_HIDDEN`](crate::SYSTEM_HIDDEN). A child of a root host has no
//!   capabilities, but still owns root's files: this is what keeps those out of its reach.
//! - **Places inside the tool's own roots** (deny rules, the deny floor) are covered in the
//!   child's own mount namespace: a directory by an empty read-only `tmpfs` with mode `000`, a file
//!   by a bind mount of an empty mode-`000` file. Neither can be removed, renamed or written by a
//!   child without capabilities.

#![allow(
    clippy::disallowed_methods,
    reason = "the sandbox plans its rules from the file system in the parent, before any child runs"
)]

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The most entries the walk of a system directory looks at before it refuses (fail closed).
const SCAN_BUDGET: usize = 50_000;

/// Landlock rules for one system directory: paths granted whole, and directories granted for
/// listing only.
#[derive(Debug, Default, Clone)]
pub(crate) struct SystemRules {
    pub(crate) whole: Vec<PathBuf>,
    pub(crate) list_only: Vec<PathBuf>,
}

enum Scan {
    /// Everything beneath may be read.
    Whole,
    /// Some of it: these rules.
    Parts(SystemRules),
    /// Nothing of it.
    Nothing,
}

/// Whether `path` matches an entry of `hidden` (a last component ending in `*` matches every
/// name with that prefix).
fn is_hidden(path: &Path, hidden: &[&str]) -> bool {
    let p = path.as_os_str().as_bytes();
    hidden.iter().any(|h| match h.strip_suffix('*') {
        Some(prefix) => p.starts_with(prefix.as_bytes()) && !p[prefix.len()..].contains(&b'/'),
        None => p == h.as_bytes(),
    })
}

fn scan(path: &Path, hidden: &[&str], budget: &mut usize) -> io::Result<Scan> {
    if *budget == 0 {
        return Err(io::Error::other(format!(
            "more than {SCAN_BUDGET} entries beneath the system directories"
        )));
    }
    *budget -= 1;
    if is_hidden(path, hidden) {
        return Ok(Scan::Nothing);
    }
    let Ok(meta) = std::fs::symlink_metadata(path) else {
        return Ok(Scan::Nothing);
    };
    let mode = meta.permissions().mode();
    let kind = meta.file_type();
    if kind.is_symlink() {
        // A link is followed to its target, which is checked where it lies.
        return Ok(Scan::Nothing);
    }
    if !kind.is_dir() {
        return Ok(if mode & 0o004 != 0 {
            Scan::Whole
        } else {
            Scan::Nothing
        });
    }
    if mode & 0o005 != 0o005 {
        return Ok(Scan::Nothing);
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(path)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    entries.sort();
    let mut parts = SystemRules::default();
    let mut whole = true;
    let mut grants = Vec::new();
    for entry in entries {
        match scan(&entry, hidden, budget)? {
            Scan::Whole => grants.push(entry),
            Scan::Parts(inner) => {
                whole = false;
                parts.whole.extend(inner.whole);
                parts.list_only.extend(inner.list_only);
            }
            Scan::Nothing => {
                // A symlink is not a reason to split its directory: the link itself grants
                // nothing, its target is checked where it lies.
                let link = std::fs::symlink_metadata(&entry)
                    .map(|m| m.file_type().is_symlink())
                    .unwrap_or(false);
                if !link || is_hidden(&entry, hidden) {
                    whole = false;
                }
            }
        }
    }
    if whole {
        return Ok(Scan::Whole);
    }
    parts.whole.extend(grants);
    parts.list_only.push(path.to_path_buf());
    Ok(Scan::Parts(parts))
}

/// The rules for the system read directories `dirs`, leaving out `hidden` and whatever an
/// unprivileged user could not read. Computed once per process (the system directories are the
/// host's, not a tool's): a file added to `/etc` later is not readable by children until the
/// host restarts.
pub(crate) fn system_rules(dirs: &[&str], hidden: &[&str]) -> Result<SystemRules, String> {
    static CACHE: OnceLock<Result<SystemRules, String>> = OnceLock::new();
    CACHE
        .get_or_init(|| {
            let mut out = SystemRules::default();
            let mut budget = SCAN_BUDGET;
            for dir in dirs {
                match scan(Path::new(dir), hidden, &mut budget).map_err(|e| e.to_string())? {
                    Scan::Whole => out.whole.push(PathBuf::from(dir)),
                    Scan::Parts(parts) => {
                        out.whole.extend(parts.whole);
                        out.list_only.extend(parts.list_only);
                    }
                    Scan::Nothing => {}
                }
            }
            Ok(out)
        })
        .clone()
}

/// How one hidden place is covered in the child's mount namespace.
#[derive(Debug, Clone)]
pub(crate) enum Mask {
    /// A directory: an empty read-only tmpfs, mode `000` — or, when `keep` is not empty, mode
    /// `755` with these device files of the sandbox's own bound back in (`/dev` with `/dev/null`).
    Dir { path: CString, keep: Vec<CString> },
    /// Anything else: an empty mode-`000` file bound over it, read-only.
    File { path: CString },
    /// A place bound onto itself, so that it cannot be renamed or removed; what is in it keeps
    /// its permissions (a git directory, `git.rs`).
    Pin { path: CString },
    /// A place bound onto itself read-only, keeping `flags` of the mount it lies on (a git
    /// directory's hooks and configuration, `git.rs`).
    ReadOnly { path: CString, flags: libc::c_ulong },
    /// A place inside a read-only one bound onto itself writable again, keeping `flags` of the
    /// mount it lies on (what the caller lets children write in a read-only git directory,
    /// `git.rs`). A bind takes the flags of the mount it is made from, so it is remounted.
    Writable { path: CString, flags: libc::c_ulong },
}

impl Mask {
    /// Whether this covers `/proc` itself (done last: the stage lives there for a moment).
    pub(crate) fn is_proc(&self) -> bool {
        matches!(self, Mask::Dir { path, .. } if path.as_bytes() == b"/proc")
    }
}

fn c_path(path: &Path) -> Result<CString, String> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| format!("{} contains a NUL byte", path.display()))
}

/// `dir/prefix*` becomes every entry of `dir` whose name starts with `prefix`, as it is now, but
/// an entry that holds one of `own`: the child's own scratch space, which the sandbox grants it
/// (the floor's `toolcap-home-*` names the directory its home lies in too, and another
/// process's beside it; docs/isolation-model.md, "Scratch directories").
fn expand_prefixes(hidden: &[PathBuf], own: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::with_capacity(hidden.len());
    for path in hidden {
        let Some((dir, prefix)) = crate::name_prefix(path) else {
            out.push(path.clone());
            continue;
        };
        if let Ok(entries) = std::fs::read_dir(dir) {
            out.extend(
                entries
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().as_bytes().starts_with(prefix))
                    .map(|e| e.path())
                    .filter(|place| !own.iter().any(|o| o.starts_with(place))),
            );
        }
    }
    out
}

/// The directories above `places` that a child could rename, and so move a place that is a
/// mount in its namespace away with them (a mount moves with the directory it lies in): those
/// beneath the outermost write root above a place, the root itself not included (its parent is
/// not the child's to change). Each is pinned ([`Mask::Pin`], bound onto itself), since a
/// directory a mount lies on cannot be renamed or removed; a new one made in its place would
/// otherwise put what the child likes at a kept place's path (docs/isolation-model.md, "Kept
/// places stay where they are").
pub(crate) fn pins_above<'a>(
    places: impl IntoIterator<Item = &'a Path>,
    write: &[PathBuf],
) -> Result<Vec<Mask>, String> {
    let mut above: Vec<&Path> = Vec::new();
    for place in places {
        let Some(root) = write
            .iter()
            .filter(|w| place.starts_with(w))
            .min_by_key(|w| w.as_os_str().len())
        else {
            continue;
        };
        above.extend(
            place
                .ancestors()
                .skip(1)
                .take_while(|a| a.starts_with(root) && *a != root.as_path()),
        );
    }
    above.sort();
    above.dedup();
    // Only a directory there now (a place a rule names that does not exist has none to pin).
    above
        .into_iter()
        .filter(|a| std::fs::symlink_metadata(a).is_ok_and(|m| m.is_dir()))
        .map(|path| {
            Ok(Mask::Pin {
                path: c_path(path)?,
            })
        })
        .collect()
}

/// The masks for `hidden` places that lie beneath one of `granted` (a place outside every grant
/// is out of reach already). A place that does not exist is not covered: there is nothing to
/// read there. `devices` are kept inside a hidden directory that holds them. A name prefix's
/// entry that holds one of `own` (the child's scratch space) is not covered.
pub(crate) fn masks(
    hidden: &[PathBuf],
    granted: &[&Path],
    devices: &[&str],
    own: &[PathBuf],
) -> Result<Vec<Mask>, String> {
    let hidden = expand_prefixes(hidden, own);
    let mut places: Vec<&PathBuf> = hidden
        .iter()
        .filter(|h| granted.iter().any(|g| h.starts_with(g)))
        .collect();
    places.sort();
    places.dedup();
    // A place inside another hidden place is covered by it.
    let mut kept: Vec<&PathBuf> = Vec::new();
    for place in places {
        if !kept.iter().any(|k| place.starts_with(k)) {
            kept.push(place);
        }
    }
    let mut out = Vec::new();
    for place in kept {
        if place.as_os_str().as_bytes() == b"/" {
            return Err("the deny rules hide the whole file system".to_owned());
        }
        let Ok(meta) = std::fs::symlink_metadata(place) else {
            continue;
        };
        // A hidden place that is a link is covered where it leads: covering the link's own
        // path would leave its target reachable through it (fail closed for callers of
        // `SandboxPolicy::hide` that did not resolve it themselves).
        let (place, meta) = if meta.file_type().is_symlink() {
            let real = std::fs::canonicalize(place)
                .map_err(|e| format!("{} cannot be resolved: {e}", place.display()))?;
            let meta = std::fs::metadata(&real)
                .map_err(|e| format!("{} cannot be read: {e}", real.display()))?;
            (real, meta)
        } else {
            (place.clone(), meta)
        };
        let place = &place;
        let path = c_path(place)?;
        if meta.is_dir() {
            let keep = devices
                .iter()
                .map(Path::new)
                .filter(|d| d.parent() == Some(place.as_path()) && d.exists())
                .map(c_path)
                .collect::<Result<_, _>>()?;
            out.push(Mask::Dir { path, keep });
        } else {
            out.push(Mask::File { path });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_names_and_prefixes() {
        let hidden = ["/etc/shadow", "/etc/sudoers*"];
        assert!(is_hidden(Path::new("/etc/shadow"), &hidden));
        assert!(!is_hidden(Path::new("/etc/shadow-"), &hidden));
        assert!(is_hidden(Path::new("/etc/sudoers"), &hidden));
        assert!(is_hidden(Path::new("/etc/sudoers.d"), &hidden));
        assert!(!is_hidden(Path::new("/etc/sudoers.d/x"), &hidden));
        assert!(!is_hidden(Path::new("/etc/passwd"), &hidden));
    }

    #[test]
    fn a_tree_with_one_private_file_is_split_around_it() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("a/b")).unwrap();
        std::fs::write(root.join("a/b/public"), "x").unwrap();
        std::fs::write(root.join("a/private"), "x").unwrap();
        std::fs::write(root.join("open"), "x").unwrap();
        for (p, mode) in [
            ("", 0o755),
            ("a", 0o755),
            ("a/b", 0o755),
            ("a/b/public", 0o644),
            ("a/private", 0o600),
            ("open", 0o644),
        ] {
            std::fs::set_permissions(root.join(p), std::fs::Permissions::from_mode(mode)).unwrap();
        }
        let mut budget = 100;
        let Scan::Parts(parts) = scan(root, &[], &mut budget).unwrap() else {
            panic!("not split");
        };
        assert_eq!(parts.list_only, [root.join("a"), root.to_path_buf()]);
        assert_eq!(parts.whole, [root.join("a/b"), root.join("open")]);
        let mut budget = 2;
        assert!(scan(root, &[], &mut budget).is_err(), "the budget holds");
    }
}
