//! A repository a child made in its own run: what in it git would run outside any sandbox
//! (docs/policy.md, "A repository a child makes").
//!
//! The repositories that exist as a child starts are kept from it by mounts; one it makes
//! (`git init`, `git clone`, or by hand) no mount can keep, since it did not exist. So when the
//! child has ended, each git directory in its project directories that was not kept is looked
//! at, and one whose configuration or hooks would make the user's own git run a program is set
//! aside. What git writes itself when it makes, clones and fetches into a repository names no
//! program; everything else is refused, so the rule reads the configuration towards a refusal:
//! a setting outside the short list of those that name none ([`named_none`]), a line git would
//! read that this reading cannot, a file too large to read whole, a link where a file should be,
//! a hook that is not one of `git init`'s samples.

#![allow(
    clippy::disallowed_methods,
    reason = "a repository a child made is looked at when it has ended"
)]

use std::path::{Path, PathBuf};

use crate::gitconfig::Entry;
use crate::hooks::small_file;

/// The most of a configuration file read; one larger is refused (git writes a few hundred
/// bytes).
const CONFIG_LIMIT: u64 = 64 * 1024;

/// The most entries of a repository's `hooks`, `worktrees` and `modules` directories looked
/// at; past it the repository is refused.
const MAX_ENTRIES: usize = 1024;

/// How deep `commondir`, `worktrees` and `modules` are followed from the repository found.
const MAX_DEPTH: usize = 4;

/// What in the git directory `dir` would make git run a program, as a refusal says it, or
/// `None` when nothing would. `roots`: the child's write roots (a git directory elsewhere, which
/// a `commondir` may name, was not the child's to write); `kept`: the git directories kept from
/// the child as it started, which it could not change.
pub(crate) fn runs_a_program(dir: &Path, roots: &[PathBuf], kept: &[PathBuf]) -> Option<String> {
    let mut budget = MAX_ENTRIES;
    look(dir, roots, kept, 0, &mut budget, &mut Vec::new())
}

/// [`runs_a_program`] of `dir`, reached `depth` steps from the first, with what is left of the
/// entries' budget and the git directories already looked at (a linked worktree's `commondir`
/// leads back to the one that holds it).
fn look(
    dir: &Path,
    roots: &[PathBuf],
    kept: &[PathBuf],
    depth: usize,
    budget: &mut usize,
    seen: &mut Vec<PathBuf>,
) -> Option<String> {
    let here = |what: String| Some(format!("{}: {what}", dir.display()));
    let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    if seen.contains(&real) {
        return None;
    }
    seen.push(real);
    if depth > MAX_DEPTH {
        return here(format!("git directories nested more than {MAX_DEPTH} deep"));
    }
    // Anything but a name that is not there is looked at, or refuses: a child may take a
    // directory's permissions away, which stops toolcap's user and not root's git.
    let absent = |e: &std::io::Error| e.kind() == std::io::ErrorKind::NotFound;
    for name in ["config", "config.worktree"] {
        let path = dir.join(name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(meta) => meta,
            Err(e) if absent(&e) => continue,
            Err(e) => return here(format!("its `{name}` cannot be looked at ({e})")),
        };
        if !meta.is_file() {
            return here(format!("its `{name}` is not a plain file"));
        }
        if meta.len() > CONFIG_LIMIT {
            return here(format!("its `{name}` is larger than {CONFIG_LIMIT} bytes"));
        }
        let Some(text) = small_file(&path, CONFIG_LIMIT) else {
            return here(format!("its `{name}` cannot be read"));
        };
        let within = |value: &str| {
            std::fs::canonicalize(dir.join(value))
                .is_ok_and(|place| roots.iter().any(|r| place.starts_with(r)))
        };
        if let Some(what) = first_unsafe_setting(&text, &within) {
            return here(format!("its `{name}` {what}"));
        }
    }
    let entries = |sub: &str, budget: &mut usize| -> Result<Vec<(String, PathBuf)>, String> {
        let path = dir.join(sub);
        match std::fs::symlink_metadata(&path) {
            Err(e) if absent(&e) => return Ok(Vec::new()),
            Err(e) => return Err(format!("its `{sub}` cannot be looked at ({e})")),
            Ok(meta) if !meta.is_dir() => return Err(format!("its `{sub}` is not a directory")),
            Ok(_) => {}
        }
        let mut out = Vec::new();
        for entry in std::fs::read_dir(&path).map_err(|e| format!("its `{sub}`: {e}"))? {
            let entry = entry.map_err(|e| format!("its `{sub}`: {e}"))?;
            *budget = budget
                .checked_sub(1)
                .ok_or_else(|| format!("more than {MAX_ENTRIES} entries to look at"))?;
            out.push((
                entry.file_name().to_string_lossy().into_owned(),
                entry.path(),
            ));
        }
        Ok(out)
    };
    // A hook is run by its exact name; `git init` copies only samples.
    match entries("hooks", budget) {
        Err(what) => return here(what),
        Ok(hooks) => {
            if let Some((name, _)) = hooks.iter().find(|(name, _)| !name.ends_with(".sample")) {
                return here(format!("a hook `hooks/{name}`"));
            }
        }
    }
    // `commondir` makes another git directory's hooks and configuration this one's.
    let common = std::fs::symlink_metadata(dir.join("commondir"));
    if let Err(e) = &common
        && !absent(e)
    {
        return here(format!("its `commondir` cannot be looked at ({e})"));
    }
    if let Ok(meta) = common {
        let common = meta
            .is_file()
            .then(|| small_file(&dir.join("commondir"), 4096))
            .flatten()
            .and_then(|text| std::fs::canonicalize(dir.join(text.trim())).ok());
        match common {
            None => return here("a `commondir` that cannot be read".to_owned()),
            Some(common)
                if common != dir
                    && !kept.contains(&common)
                    && roots.iter().any(|r| common.starts_with(r)) =>
            {
                if let Some(what) = look(&common, roots, kept, depth + 1, budget, seen) {
                    return Some(what);
                }
            }
            Some(_) => {}
        }
    }
    // Linked worktrees' and submodules' git directories, which git uses in their working trees
    // (a submodule's name may hold `/`: a directory without a `HEAD` is looked into).
    for sub in ["worktrees", "modules"] {
        let mut pending = match entries(sub, budget) {
            Err(what) => return here(what),
            Ok(found) => found,
        };
        while let Some((_, path)) = pending.pop() {
            if !std::fs::symlink_metadata(&path).is_ok_and(|m| m.is_dir()) {
                continue;
            }
            let head = std::fs::symlink_metadata(path.join("HEAD"));
            if let Err(e) = &head
                && !absent(e)
            {
                return here(format!("{} cannot be looked at ({e})", path.display()));
            }
            if head.is_ok() {
                if let Some(what) = look(&path, roots, kept, depth + 1, budget, seen) {
                    return Some(what);
                }
                continue;
            }
            if path.strip_prefix(dir).map_or(0, |p| p.components().count()) > MAX_DEPTH {
                return here(format!("its `{sub}` nests more than {MAX_DEPTH} deep"));
            }
            let listing = match std::fs::read_dir(&path) {
                Ok(listing) => listing,
                Err(e) => return here(format!("{} cannot be read ({e})", path.display())),
            };
            for entry in listing {
                let Ok(entry) = entry else {
                    return here(format!("{} cannot be read", path.display()));
                };
                *budget = match budget.checked_sub(1) {
                    Some(left) => left,
                    None => return here(format!("more than {MAX_ENTRIES} entries to look at")),
                };
                pending.push((String::new(), entry.path()));
            }
        }
    }
    None
}

/// Whether git's setting `section.subsection.key` (section and key lower case) names no
/// program: what `git init`, `git clone`, `git fetch`, `git branch -u`, `git submodule` and
/// `git config` of a user's name write, and settings of the same sections that only change
/// how git itself behaves. Not `core.fsmonitor`, `core.hooksPath`, `core.pager`,
/// `core.editor`, `core.sshCommand`, aliases, filters, diff and merge drivers, credential
/// helpers, includes, `remote.*.uploadpack` and their kin.
fn named_none(section: &str, subsection: Option<&str>, key: &str) -> bool {
    match (section, subsection.is_some()) {
        ("core", false) => matches!(
            key,
            "repositoryformatversion"
                | "filemode"
                | "bare"
                | "logallrefupdates"
                | "ignorecase"
                | "precomposeunicode"
                | "symlinks"
                | "worktree"
                | "sparsecheckout"
                | "sparsecheckoutcone"
                | "autocrlf"
                | "eol"
                | "safecrlf"
                | "untrackedcache"
                | "splitindex"
                | "sharedrepository"
                | "quotepath"
                | "commitgraph"
                | "multipackindex"
                | "preloadindex"
                | "abbrev"
                | "compression"
                | "loosecompression"
        ),
        ("extensions" | "user" | "author" | "committer" | "branch" | "status" | "gc", _)
        | ("maintenance" | "index" | "pack" | "feature" | "color" | "advice" | "column", _) => true,
        // `vcs` runs `git-remote-<vcs>`; `uploadpack` and `receivepack` run programs at a fetch
        // or push from a path on this machine.
        ("remote", true) => !matches!(key, "uploadpack" | "receivepack" | "vcs"),
        ("submodule", _) => matches!(
            key,
            "url"
                | "active"
                | "branch"
                | "shallow"
                | "fetchrecursesubmodules"
                | "ignore"
                | "update"
                | "recurse"
                | "fetchjobs"
        ),
        ("init", false) => key == "defaultbranch",
        ("pull", false) => matches!(key, "rebase" | "ff"),
        ("push", false) => matches!(key, "default" | "autosetupremote" | "followtags"),
        ("fetch", false) => matches!(
            key,
            "prune" | "prunetags" | "recursesubmodules" | "writecommitgraph" | "parallel"
        ),
        ("merge", false) => matches!(
            key,
            "ff" | "conflictstyle" | "log" | "renames" | "autostash" | "stat"
        ),
        ("rebase", false) => matches!(
            key,
            "autosquash" | "autostash" | "updaterefs" | "stat" | "missingcommitscheck"
        ),
        ("diff", false) => matches!(
            key,
            "algorithm"
                | "renames"
                | "colormoved"
                | "context"
                | "submodule"
                | "mnemonicprefix"
                | "noprefix"
                | "indentheuristic"
        ),
        ("commit" | "tag", false) => matches!(key, "gpgsign" | "verbose" | "cleanup" | "sort"),
        // Not `http.cookieFile` with `http.saveCookies`: git writes a server's cookies there.
        ("http", false) => matches!(
            key,
            "postbuffer" | "version" | "lowspeedlimit" | "lowspeedtime" | "maxrequests"
        ),
        ("lfs", false) => key == "repositoryformatversion",
        ("protocol", false) => key == "version",
        ("rerere", false) => matches!(key, "enabled" | "autoupdate"),
        _ => false,
    }
}

/// The first thing in a git configuration's text that could make git run a program, as a
/// refusal says it (`sets core.fsmonitor`), or `None`. Read as git reads it (sections in any
/// case, `[section "subsection"]` and `[section.subsection]`, a setting after a section's
/// header on the same line, quotes, escapes and comments), and towards a refusal: a line it
/// cannot read, or a value continued on the next line, is one.
/// `core.worktree` is taken only where `worktree_within` says its value leads beneath the
/// child's write roots: git writes the working tree there at the user's next `checkout` or
/// `pull`, and one that led to the home directory would have git write the repository's
/// `.bashrc` there.
pub(crate) fn first_unsafe_setting(
    text: &str,
    worktree_within: &dyn Fn(&str) -> bool,
) -> Option<String> {
    for entry in crate::gitconfig::entries(text) {
        let Entry {
            section,
            subsection,
            key,
            value,
        } = match entry {
            Ok(entry) => entry,
            Err(line) => {
                return Some(format!(
                    "has a line git reads and toolcap cannot (line {line})"
                ));
            }
        };
        let name = match &subsection {
            Some(sub) => format!("{section}.{sub}.{key}"),
            None => format!("{section}.{key}"),
        };
        let refused = !named_none(&section, subsection.as_deref(), &key)
            // `!command` runs the command at `git submodule update`.
            || (section == "submodule" && key == "update" && value.trim_start().starts_with('!'))
            // A transport that runs a command (refused by git's defaults, kept out all the same).
            || (matches!(section.as_str(), "remote" | "submodule")
                && matches!(key.as_str(), "url" | "pushurl")
                && value.trim_start().to_ascii_lowercase().starts_with("ext::"))
            || (section == "core" && key == "worktree" && !worktree_within(&value));
        if refused {
            return Some(format!("sets `{name}`"));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What git writes itself, when it makes, clones and fetches into a repository and sets a
    /// user's name, names no program.
    #[test]
    fn what_git_writes_itself_is_no_refusal() {
        let cloned = "[core]\n\trepositoryformatversion = 0\n\tfilemode = true\n\tbare = false\n\
                      \tworktree = ../../lib\n\
                      \tlogallrefupdates = true\n[remote \"origin\"]\n\turl = https://example.com/r\n\
                      \tfetch = +refs/heads/*:refs/remotes/origin/*\n[branch \"main\"]\n\
                      \tremote = origin\n\tmerge = refs/heads/main\n[user]\n\tname = me\n\
                      [submodule \"lib\"]\n\turl = ../lib\n\tactive = true\n\
                      [extensions]\n\tobjectformat = sha256\n; a comment\n# another\n\
                      [http]\n\tpostBuffer = 524288000\n";
        assert_eq!(first_unsafe_setting(cloned, &|v| v == "../../lib"), None);
        assert_eq!(
            first_unsafe_setting("\u{feff}[core]\nbare\n", &|_| true),
            None
        );
        assert_eq!(first_unsafe_setting("", &|_| true), None);
    }

    /// Every way of spelling a setting that runs a program is found: any case, the old
    /// subsection form, a setting on its header's line, quotes, comments, and a line that
    /// cannot be read or a value continued over lines is a refusal.
    #[test]
    fn a_setting_that_runs_a_program_is_found_in_every_spelling() {
        for (text, found) in [
            ("[core]\n\tfsmonitor = touch /tmp/x\n", "core.fsmonitor"),
            ("[CORE]\nFsMonitor=x", "core.fsmonitor"),
            ("[core] hooksPath = .githooks", "core.hookspath"),
            ("[core]\n\tpager = \"less; sh\"", "core.pager"),
            ("[alias]\n\tx = !sh", "alias.x"),
            (
                "[filter \"lfs\"]\n\tclean = git-lfs clean",
                "filter.lfs.clean",
            ),
            ("[diff.X]\ntextconv = cat", "diff.x.textconv"),
            ("[include]\npath = ../evil", "include.path"),
            (
                "[includeIf \"gitdir:/\"]\npath = x",
                "includeif.gitdir:/.path",
            ),
            ("[remote \"o\"]\nuploadpack = sh", "remote.o.uploadpack"),
            ("[remote \"o\"]\nurl = ext::sh -c x", "remote.o.url"),
            ("[submodule \"s\"]\nupdate = !sh", "submodule.s.update"),
            ("[credential]\nhelper = x", "credential.helper"),
            ("[core]\n\teditor = vim\n", "core.editor"),
            ("[sequence]\n\teditor = x\n", "sequence.editor"),
            ("[gpg]\n\tprogram = x\n", "gpg.program"),
            ("[user] name = a\n[core] sshCommand = x", "core.sshcommand"),
            ("[core]\n\tworktree = /home/user\n", "core.worktree"),
            ("[http]\n\tcookieFile = ~/.bashrc\n", "http.cookiefile"),
            ("[submodule \"s\"]\nurl = ext::sh", "submodule.s.url"),
        ] {
            let said = first_unsafe_setting(text, &|v| v == "../../lib").unwrap_or_default();
            assert!(said.contains(found), "{text:?}: {said:?}");
        }
        for unreadable in [
            "fsmonitor = x",
            "[core\nfsmonitor = x",
            "[core]\nfsmonitor = \"x\\\ny\"",
            "[core]\nbare = \"unterminated",
            "[core]\n=x",
            "[core]\nbare = x\\q",
            "[a \"b]\nx=1",
        ] {
            assert!(
                first_unsafe_setting(unreadable, &|_| true).is_some_and(|s| s.contains("cannot")),
                "{unreadable:?}"
            );
        }
    }

    /// Whatever a child writes before it, a setting that runs a program is found: thousands of
    /// texts made of what git's configuration syntax is made of (sections, quotes, escapes,
    /// comments, continuations, keys git knows), each read with `[core] fsmonitor` after it,
    /// never reads as naming no program, and no text makes the reader panic.
    #[test]
    fn nothing_before_a_setting_hides_it() {
        const PIECES: [&str; 24] = [
            "[",
            "]",
            "\"",
            "\\",
            "=",
            "#",
            ";",
            ".",
            " ",
            "\t",
            "\n",
            "\r\n",
            "core",
            "remote",
            "url",
            "fsmonitor",
            "bare",
            "true",
            "[core]",
            "[remote \"o",
            "\\\n",
            "\u{feff}",
            "é",
            "[branch.Main]",
        ];
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let len = next() % 24;
            let text: String = (0..len)
                .map(|_| PIECES[(next() % PIECES.len() as u64) as usize])
                .collect();
            let _ = first_unsafe_setting(&text, &|_| true);
            let with = format!("{text}\n[core]\nfsmonitor = touch x\n");
            assert!(
                first_unsafe_setting(&with, &|_| true).is_some(),
                "{text:?} hid the setting after it"
            );
        }
    }

    /// What real git makes of a repository with a linked worktree and a submodule (whose
    /// `commondir` leads back to the repository, and whose git directory lies in `modules`)
    /// names no program; a hook put in the worktree's or the submodule's git directory is
    /// refused (git runs the submodule's; the worktree's it does not, refused all the same).
    #[test]
    fn real_gits_worktrees_and_submodules_name_no_program() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let git = |args: &[&str]| {
            let out = std::process::Command::new("git")
                .args(["-c", "user.name=a", "-c", "user.email=b"])
                .args(["-c", "protocol.file.allow=always"])
                .args(args)
                .current_dir(&root)
                .env("HOME", &root)
                .env("GIT_CONFIG_NOSYSTEM", "1")
                .output()
                .unwrap();
            assert!(out.status.success(), "{args:?}: {out:?}");
        };
        git(&["init", "-q", "lib"]);
        git(&["-C", "lib", "commit", "-q", "--allow-empty", "-m", "x"]);
        git(&["init", "-q", "app"]);
        git(&["-C", "app", "commit", "-q", "--allow-empty", "-m", "x"]);
        git(&["-C", "app", "worktree", "add", "-q", "../wt"]);
        git(&["-C", "app", "submodule", "add", "-q", "../lib", "lib"]);
        let roots = [root.clone()];
        let app = root.join("app/.git");
        assert_eq!(runs_a_program(&app, &roots, &[]), None);
        assert!(app.join("modules/lib/HEAD").is_file());
        for hooks in ["worktrees/wt/hooks", "modules/lib/hooks"] {
            std::fs::create_dir_all(app.join(hooks)).unwrap();
            std::fs::write(app.join(hooks).join("post-checkout"), "#!/bin/sh\n").unwrap();
            let said = runs_a_program(&app, &roots, &[]).unwrap_or_default();
            assert!(said.contains("hooks/post-checkout"), "{hooks}: {said}");
            std::fs::remove_file(app.join(hooks).join("post-checkout")).unwrap();
        }
    }

    /// A git directory, or a submodule's directory in it, whose permissions were taken away is
    /// refused, whether toolcap can still look into it (root) or not: a child may `chmod 000`
    /// what it made, which stops toolcap's user and not root's git.
    #[test]
    fn a_repository_closed_to_its_owner_is_refused() {
        use std::os::unix::fs::PermissionsExt as _;
        // As root the closed directories are read all the same; the same test again as an
        // account that cannot read them.
        if rustix::process::geteuid().is_root()
            && std::env::var_os("TOOLCAP_TEST_AS_NOBODY").is_none()
        {
            let bin = tempfile::tempdir().unwrap();
            std::fs::set_permissions(bin.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
            let exe = bin.path().join("sandbox-test");
            std::fs::copy(std::env::current_exe().unwrap(), &exe).unwrap();
            std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).unwrap();
            let out = std::process::Command::new("setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups", "--"])
                .arg(&exe)
                .args([
                    "--exact",
                    "child_repo::tests::a_repository_closed_to_its_owner_is_refused",
                ])
                .env("TOOLCAP_TEST_AS_NOBODY", "1")
                .env("TMPDIR", "/tmp")
                .current_dir(bin.path())
                .output()
                .unwrap();
            let said = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success() && said.contains("1 passed"), "{said}");
        }
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("modules/a/b")).unwrap();
        std::fs::write(git.join("modules/a/b/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(git.join("modules/a/b/config"), "[core]\nfsmonitor = x\n").unwrap();
        let closed = |p: &Path, mode: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
        };
        closed(&git.join("modules/a"), 0o000);
        assert!(runs_a_program(&git, std::slice::from_ref(&root), &[]).is_some());
        closed(&git.join("modules/a"), 0o755);
        std::fs::remove_dir_all(git.join("modules")).unwrap();
        std::fs::write(git.join("config"), "[core]\nfsmonitor = x\n").unwrap();
        closed(&git, 0o000);
        let said = runs_a_program(&git, std::slice::from_ref(&root), &[]);
        closed(&git, 0o755);
        assert!(said.is_some());
    }

    /// A git directory is looked at whole: its hooks (samples aside), a `commondir` it names
    /// beneath the write roots, its worktrees' and submodules' git directories.
    #[test]
    fn a_repository_is_looked_at_whole() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let roots = [root.clone()];
        let git = root.join(".git");
        std::fs::create_dir_all(git.join("hooks")).unwrap();
        std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
        std::fs::write(git.join("hooks/pre-commit.sample"), "").unwrap();
        assert_eq!(runs_a_program(&git, &roots, &[]), None);
        std::fs::write(git.join("hooks/pre-commit"), "#!/bin/sh\n").unwrap();
        let said = runs_a_program(&git, &roots, &[]).unwrap();
        assert!(said.contains("hooks/pre-commit"), "{said}");
        std::fs::remove_file(git.join("hooks/pre-commit")).unwrap();
        // A submodule's git directory, two names down.
        let module = git.join("modules/a/b");
        std::fs::create_dir_all(&module).unwrap();
        std::fs::write(module.join("HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(module.join("config"), "[core]\npager = x\n").unwrap();
        let said = runs_a_program(&git, &roots, &[]).unwrap();
        assert!(said.contains("core.pager"), "{said}");
        std::fs::remove_dir_all(git.join("modules")).unwrap();
        // A `commondir` naming another git directory beneath the roots, unless it was kept.
        let other = root.join("other");
        std::fs::create_dir_all(&other).unwrap();
        std::fs::write(other.join("config"), "[alias]\nx = !sh\n").unwrap();
        std::fs::write(git.join("commondir"), "../other\n").unwrap();
        assert!(runs_a_program(&git, &roots, &[]).is_some());
        assert_eq!(
            runs_a_program(&git, &roots, std::slice::from_ref(&other)),
            None
        );
        // A configuration that is a link is refused, not followed.
        std::fs::remove_file(git.join("commondir")).unwrap();
        std::fs::remove_file(git.join("config")).unwrap();
        std::os::unix::fs::symlink(other.join("config"), git.join("config")).unwrap();
        let said = runs_a_program(&git, &roots, &[]).unwrap();
        assert!(said.contains("not a plain file"), "{said}");
    }
}
