//! What a write may not change although the policy reaches it: the places git runs code from
//! that a path's spelling cannot tell (docs/policy.md, "Git's hooks and configuration"), and
//! the places a write reaches through a symbolic link (docs/policy.md, "Reached by another
//! name").

use std::ffi::OsStr;
use std::path::Path;

use capability_sandbox::GitPlace;
use capability_types::backend::{FsAccess, PathAccess, PathPolicy};
use capability_types::{CapabilityError, DenialCode};

use crate::scoped::refuse;

/// The refusal of a write the policy allowed (`a`, as its check answered) into a place git runs
/// code from that the policy's rule, decided from a path's spelling, cannot know (docs/policy.md,
/// "Git's hooks and configuration"): the hooks directory the enclosing repository's
/// configuration names (`core.hooksPath = .githooks`), whose scripts git runs at the user's next
/// commit, outside any sandbox, as it runs `.git/hooks`; and the hooks and configuration of a
/// git directory not called `.git` (a bare repository, one kept apart from its working tree),
/// told by what is in it. Allowed where the write root covering the path lies at or inside
/// that directory or file (the personality lists it). Every write of [`ScopedFiles`](crate::ScopedFiles) asks it;
/// `toolcap explain` asks it too, to answer as a call would.
///
/// # Ambient Authority
///
/// Reads the enclosing repository's configuration files, and asks the directories above the
/// path that it would be a git directory's hooks or configuration of whether they are one.
pub fn refuse_what_git_runs(a: &PathAccess) -> Result<(), CapabilityError> {
    let Some(place) = capability_sandbox::git_place_of(&a.path, &a.root) else {
        return Ok(());
    };
    let why = match &place {
        GitPlace::ConfiguredHooks(hooks) => format!(
            "git runs the hooks of a repository outside any sandbox, when the user next runs git \
             there, and this repository's core.hooksPath leads it to {}",
            hooks.display()
        ),
        GitPlace::UserHooks(hooks) => format!(
            "git runs the hooks the user's own git configuration points it at outside any \
             sandbox, when the user next runs git, and its core.hooksPath leads it to {}",
            hooks.display()
        ),
        GitPlace::IncludedConfig(file) => format!(
            "git reads {} as part of its configuration (the user's or the repository's includes \
             it), and runs the commands a configuration names outside any sandbox, when the \
             user next runs git",
            file.display()
        ),
        GitPlace::OtherGitDir { git_dir, .. } => format!(
            "{} is a git directory, and git runs its hooks and configuration outside any \
             sandbox, when the user next runs git with it",
            git_dir.display()
        ),
        GitPlace::NewGitDir(dir) => format!(
            "it would make {} a git directory, and git runs the hooks and configuration of one \
             outside any sandbox, when the user next runs git there or beneath",
            dir.display()
        ),
        other => format!(
            "git runs what is at {} outside any sandbox",
            other.area().display()
        ),
    };
    let allow = match &place {
        GitPlace::NewGitDir(_) => {
            "no tool's write makes a git directory; a child's `git init` does".to_owned()
        }
        _ => format!(
            "a personality that means to allow it lists {} among its write roots",
            place.area().display()
        ),
    };
    Err(CapabilityError::denied(
        DenialCode::PathNotReachable,
        format!(
            "write not permitted for {}: {why} ({allow})",
            a.path.display()
        ),
    ))
}

/// The refusal of `requested`, which a symbolic link on its way led to `real` (for a write,
/// `below` is the name to be made beneath `real`, its directory). A place out of `root`, the
/// lexical root it was opened beneath, is refused; the policy must allow `real`; and a write
/// there, and at `below`, is refused as its own name would be where git, a shell or an agent's
/// client runs it later (docs/policy.md, "Reached by another name"). Where the policy refuses
/// `real` itself, the refusal names only the path the tool gave (where the link led stays
/// unsaid); a refusal of the name beneath it, or of a place kept for what runs there, gives
/// the reason and where the link led. The file system backend asks it where the
/// kernel landed; `toolcap explain` asks it where the path resolves now, to answer as a call
/// would.
///
/// # Ambient Authority
///
/// For a write, as [`refuse_what_git_runs`]: reads the configuration of the repository that
/// holds the place and the user's.
pub fn refuse_where_it_lands(
    paths: &dyn PathPolicy,
    root: &Path,
    real: &Path,
    access: FsAccess,
    requested: &Path,
    below: Option<&OsStr>,
) -> Result<(), CapabilityError> {
    // The kernel never follows a link out of the root it opens beneath.
    if !real.starts_with(root) {
        return Err(refuse(access, requested));
    }
    let reached = match paths.check(real, access) {
        Ok(reached) => reached,
        Err(CapabilityError::Denied { .. }) => return Err(refuse(access, requested)),
        Err(e) => return Err(e),
    };
    if access != FsAccess::Write {
        return Ok(());
    }
    let reached = match below {
        None => reached,
        Some(name) => paths
            .check(&reached.path.join(name), access)
            .map_err(|e| led_to(e, requested))?,
    };
    refuse_what_git_runs(&reached).map_err(|e| led_to(e, requested))
}

/// `e`, the refusal of a place a link led a write to, naming the path the tool gave first.
fn led_to(e: CapabilityError, requested: &Path) -> CapabilityError {
    match e {
        CapabilityError::Denied { code, message } => {
            let message = match message.strip_prefix("write not permitted for ") {
                Some(rest) => format!(
                    "write not permitted for {}, which leads to {rest}",
                    requested.display()
                ),
                None => format!("{}: {message}", requested.display()),
            };
            CapabilityError::denied(code, message)
        }
        other => other,
    }
}
