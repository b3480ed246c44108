//! The policy objects of one resolved call: hosts, paths and processes. Every call-time check a
//! backend makes goes through them (docs/semantics.md, "Hosts", "Paths", "Binaries"); deny rules
//! win and escalation patterns refuse unless this call was approved.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability_policy::{is_fixed_env_name, is_refused_env_name, is_safe_env_name, valid_env_name};
use capability_types::backend::{
    FsAccess, HostMatch, HostPolicy, PathAccess, PathPolicy, ProcessPolicy, SandboxMode,
};
use capability_types::{CapabilityError, DenialCode};

use crate::matching::binary::ArgvPattern;
use crate::matching::exec_options;
use crate::matching::host::{HostSet, normalize_host};
use crate::matching::path::{
    DenyFloor, RunsLater, is_within, is_within_any_case, is_within_any_of_any_case,
    kept_from_writes, kept_places, resolve_path, runs_later,
};
use crate::realpath::{Aliases, LaterAlias};

use super::{Escalation, needs_approval};

/// A tool's resolved host set; deny patterns win.
#[derive(Debug)]
pub struct ResolvedHosts {
    pub(super) allow: Arc<HostSet>,
    pub(super) deny: Arc<HostSet>,
    pub(super) escalate: Escalation,
    /// `restricted_addresses = "never"`: no host reaches the restricted address classes, so
    /// every match is answered as a wildcard one (docs/semantics.md, "Fetch").
    pub(super) never_restricted: bool,
}

impl ResolvedHosts {
    /// The allowed set.
    pub fn allow(&self) -> &HostSet {
        &self.allow
    }
}

impl HostPolicy for ResolvedHosts {
    fn check(&self, host: &str, port: u16) -> Result<HostMatch, CapabilityError> {
        let host = normalize_host(host)
            .map_err(|why| CapabilityError::denied(DenialCode::HostNotAllowed, why))?;
        if self.deny.lookup(&host, port).is_some() {
            return Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                format!("{host} is refused by policy"),
            ));
        }
        if self.escalate.hosts.lookup(&host, port).is_some()
            && !self.escalate.approved.hosts.contains(&host)
        {
            return Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                needs_approval(host),
            ));
        }
        match self.allow.lookup(&host, port) {
            Some(true) if !self.never_restricted => Ok(HostMatch::Explicit),
            Some(_) => Ok(HostMatch::Wildcard),
            None => Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                format!("{host} is not in the declared allowedHosts"),
            )),
        }
    }

    fn patterns(&self) -> Vec<String> {
        self.allow
            .patterns()
            .iter()
            .map(ToString::to_string)
            .collect()
    }
}

/// A tool's resolved read and write reach for one call.
#[derive(Debug, Default)]
pub struct ResolvedPaths {
    pub(super) read: Arc<[PathBuf]>,
    pub(super) write: Arc<[PathBuf]>,
    pub(super) read_guarded: Arc<[bool]>,
    pub(super) write_guarded: Arc<[bool]>,
    pub(super) deny: Arc<[PathBuf]>,
    /// `[fs_reach] deny_write` (docs/policy.md, "Kept from writes").
    pub(super) deny_write: Arc<[PathBuf]>,
    /// `[fs_reach] apart` (docs/policy.md, "Kept apart").
    pub(super) apart: Arc<[PathBuf]>,
    pub(super) floor: Arc<DenyFloor>,
    pub(super) aliases: Arc<Aliases>,
    /// The places whose contents run later, reached by another name.
    pub(super) later_aliases: Arc<[LaterAlias]>,
    pub(super) personality_read: Arc<[PathBuf]>,
    pub(super) personality_write: Arc<[PathBuf]>,
    pub(super) working_dir: PathBuf,
    pub(super) escalate: Escalation,
}

impl ResolvedPaths {
    /// The places kept apart that lie strictly beneath a root, which a child's mount namespace
    /// covers (docs/policy.md, "Kept apart"): the kernel layer cannot tell the roots a path was
    /// reached through apart, so it keeps the whole place from a child.
    fn apart_covered(&self) -> Vec<PathBuf> {
        let above = |place: &PathBuf| {
            (self.read.iter().chain(self.write.iter()))
                .any(|root| root != place && is_within(place, root))
        };
        self.apart.iter().filter(|p| above(p)).cloned().collect()
    }

    /// Whether `path` lies within the read or the write reach: what the argument gate asks of a
    /// path named in a call's arguments, which may be read or written (docs/semantics.md,
    /// "Paths"). The read refusal when neither holds it.
    pub fn reaches(&self, path: &Path) -> Result<(), CapabilityError> {
        match self.check(path, FsAccess::Read) {
            Ok(_) => Ok(()),
            Err(read) => match self.check(path, FsAccess::Write) {
                Ok(_) => Ok(()),
                // Beneath a write root and still refused (a deny rule, git's hooks): that
                // refusal says why; otherwise the path is simply out of reach.
                Err(write) if self.beneath_a_root(path, FsAccess::Write) => Err(write),
                Err(_) => Err(read),
            },
        }
    }

    /// Where `path` lies beneath a write root in a place toolcap's own writes refuse for what
    /// would run it later, outside any sandbox (git's places, a shell's startup files, what
    /// agents and editors run), the personality not listing it among its write roots: `path`
    /// resolved, the area that keeps it and what runs it. What a process that writes wherever
    /// its kernel confinement lets it, and not through toolcap's scoped objects (a guarded MCP
    /// server), must not be handed to read or to write, since which of the two it will do
    /// cannot be told (docs/guard.md, "Argument checks").
    pub fn runs_later_beneath_write_root(
        &self,
        path: &Path,
    ) -> Option<(PathBuf, PathBuf, RunsLater)> {
        let full = self.full(path).ok()?;
        if !self.write.iter().any(|r| is_within(&full, r)) {
            return None;
        }
        let (area, runs, _) =
            runs_later_unlisted(&full, &self.personality_write, &self.later_aliases)?;
        Some((full, area, runs))
    }

    /// Where `path` lies beneath a write root in a place the policy keeps from writes
    /// (`[fs_reach] deny_write`, docs/policy.md, "Kept from writes"): `path` resolved, and the
    /// rule. What a process that writes wherever its kernel confinement lets it (a guarded MCP
    /// server) must not be handed, as for [`runs_later_beneath_write_root`](Self::runs_later_beneath_write_root).
    pub fn kept_from_writes_beneath_write_root(&self, path: &Path) -> Option<(PathBuf, PathBuf)> {
        let full = self.full(path).ok()?;
        if !self.write.iter().any(|r| is_within(&full, r)) {
            return None;
        }
        let rule = kept_from_writes(&full, &self.deny_write)?.clone();
        Some((full, rule))
    }

    /// Whether `path`, resolved as [`check`](PathPolicy::check) resolves it, lies beneath a
    /// root for `access` (whether or not a rule then refuses it there).
    fn beneath_a_root(&self, path: &Path, access: FsAccess) -> bool {
        let Ok(full) = self.full(path) else {
            return false;
        };
        let roots = match access {
            FsAccess::Read => &self.read,
            FsAccess::Write => &self.write,
        };
        roots.iter().any(|r| is_within(&full, r))
    }

    /// `path` as the checks match it: resolved against the working directory, and where it
    /// really leads when it names a root by a link's spelling.
    fn full(&self, path: &Path) -> Result<PathBuf, String> {
        let full = resolve_path(path, &self.working_dir)?;
        Ok(if self.aliases.is_empty() {
            full
        } else {
            self.aliases.rewrite(full)
        })
    }

    /// The same reach without `[escalate]` patterns: what the argument gate checks, since
    /// escalation is asked (and enforced by the scoped objects) after the gate.
    pub(crate) fn without_escalation(&self) -> Arc<ResolvedPaths> {
        Arc::new(ResolvedPaths {
            read: Arc::clone(&self.read),
            write: Arc::clone(&self.write),
            read_guarded: Arc::clone(&self.read_guarded),
            write_guarded: Arc::clone(&self.write_guarded),
            deny: Arc::clone(&self.deny),
            deny_write: Arc::clone(&self.deny_write),
            apart: Arc::clone(&self.apart),
            floor: Arc::clone(&self.floor),
            aliases: Arc::clone(&self.aliases),
            later_aliases: Arc::clone(&self.later_aliases),
            personality_read: Arc::clone(&self.personality_read),
            personality_write: Arc::clone(&self.personality_write),
            working_dir: self.working_dir.clone(),
            escalate: Escalation::default(),
        })
    }
}

impl PathPolicy for ResolvedPaths {
    fn check(&self, path: &Path, access: FsAccess) -> Result<PathAccess, CapabilityError> {
        let full = self.full(path).map_err(CapabilityError::invalid_input)?;
        let refuse = || {
            CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!("{access} not permitted for {}", full.display()),
            )
        };
        let (roots, guarded, personality) = match access {
            FsAccess::Read => (&self.read, &self.read_guarded, &self.personality_read),
            FsAccess::Write => (&self.write, &self.write_guarded, &self.personality_write),
        };
        let (index, root) = roots
            .iter()
            .enumerate()
            .filter(|(_, r)| is_within(&full, r))
            .max_by_key(|(_, r)| r.as_os_str().len())
            .ok_or_else(refuse)?;
        // Deny rules and the floor can only bite under a root they overlap (decided once per
        // intersection); a missing flag counts as overlapping.
        if guarded.get(index).copied().unwrap_or(true)
            && (is_within_any_of_any_case(&full, &self.deny)
                || self.floor.blocks(&full, personality))
        {
            return Err(refuse());
        }
        if let Some(place) = apart_above(&full, root, &self.apart) {
            return Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!(
                    "{access} not permitted for {}: the policy keeps {} apart, reached only \
                     through a root at or beneath it (fs_reach.apart)",
                    full.display(),
                    place.display()
                ),
            ));
        }
        if access == FsAccess::Write
            && let Some(rule) = kept_from_writes(&full, &self.deny_write)
        {
            return Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!(
                    "write not permitted for {}: the policy keeps {} from writes \
                     (fs_reach.deny_write)",
                    full.display(),
                    rule.display()
                ),
            ));
        }
        if access == FsAccess::Write
            && let Some(refusal) = runs_later_refusal(&full, personality, &self.later_aliases)
        {
            return Err(refusal);
        }
        if access == FsAccess::Write
            && self.escalate.write.iter().any(|e| is_within(&full, e))
            && !self.escalate.approved.write_paths.contains(&full)
        {
            return Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                needs_approval(format!("write to {}", full.display())),
            ));
        }
        // Both normalised and `full` within `root`: the remainder is a byte slice after `root/`.
        let (f, r) = (full.as_os_str().as_bytes(), root.as_os_str().as_bytes());
        let rest = if f.len() == r.len() {
            &f[f.len()..]
        } else if r == b"/" {
            &f[1..]
        } else {
            &f[r.len() + 1..]
        };
        let relative = PathBuf::from(OsStr::from_bytes(rest));
        Ok(PathAccess::new(full.clone(), root.clone(), relative))
    }

    fn roots(&self, access: FsAccess) -> Vec<PathBuf> {
        // A place kept apart beneath another root is covered in a child's mount namespace, so a
        // root inside it is not given to the child (docs/policy.md, "Kept apart").
        let covered = self.apart_covered();
        let open = |root: &&PathBuf| !covered.iter().any(|place| is_within(root, place));
        match access {
            FsAccess::Read => self.read.iter().filter(open).cloned().collect(),
            // A root kept from writes whole grants no write: a child's kernel layer is not given
            // it (it would bind it writable inside the place kept).
            FsAccess::Write => self
                .write
                .iter()
                .filter(|root| kept_from_writes(root, &self.deny_write).is_none())
                .filter(open)
                .cloned()
                .collect(),
        }
    }

    fn working_dir(&self) -> &Path {
        &self.working_dir
    }

    fn runs_later_names(&self) -> &'static [&'static str] {
        &crate::matching::path::RUNS_LATER_NAMES
    }

    fn runs_later_places(&self) -> Vec<PathBuf> {
        let mut places: Vec<PathBuf> = self.later_aliases.iter().map(|a| a.real.clone()).collect();
        places.extend(kept_places(&self.deny_write, &self.roots(FsAccess::Write)));
        places
    }

    fn hidden(&self) -> Vec<PathBuf> {
        let lifting: Vec<PathBuf> = self
            .personality_read
            .iter()
            .chain(self.personality_write.iter())
            .cloned()
            .collect();
        let mut out: Vec<PathBuf> = self.deny.to_vec();
        out.extend(self.floor.areas(&lifting));
        out.extend(self.apart_covered());
        out
    }
}

/// A tool's resolved process rules.
#[derive(Debug)]
pub struct ResolvedProcess {
    pub(super) binaries: Arc<[String]>,
    pub(super) deny_args: Arc<[ArgvPattern]>,
    pub(super) env_allow: Arc<[String]>,
    pub(super) sandbox: SandboxMode,
    /// The tool's reach (empty when it declared no `fs_reach`): a child's cwd must be readable.
    pub(super) paths: Arc<ResolvedPaths>,
    pub(super) escalate: Escalation,
}

impl ProcessPolicy for ResolvedProcess {
    fn allowed_binaries(&self) -> &[String] {
        &self.binaries
    }

    fn check_args(
        &self,
        binary: &str,
        allowed: &str,
        resolved: &Path,
        args: &[String],
    ) -> Result<(), CapabilityError> {
        // A call may name the allowed program otherwise (`x86_64-linux-gnu-gcc-12` for `gcc`):
        // every rule is read against the name it used and the allowed one (docs/semantics.md,
        // "Binaries"). Most calls use the allowed name itself: it is read once.
        let both = [binary, allowed];
        let names = if binary == allowed {
            &both[..1]
        } else {
            &both[..]
        };
        let shown = || {
            std::iter::once(binary)
                .chain(args.iter().map(String::as_str))
                .collect::<Vec<_>>()
                .join(" ")
        };
        // Before the personality's own patterns, and whatever they say: an option that makes
        // the program run another one (docs/policy.md, "Options that run programs").
        if let Some(why) = names
            .iter()
            .find_map(|name| exec_options::runs_a_program(name, resolved, args))
        {
            return Err(CapabilityError::denied(
                DenialCode::ArgsNotAllowed,
                format!("{} refused for every personality: {why}", shown()),
            ));
        }
        if let Some(pattern) = self
            .deny_args
            .iter()
            .find(|p| names.iter().any(|name| p.matches(name, resolved, args)))
        {
            // The one pattern that matched, so the refusal says which rule decided.
            return Err(CapabilityError::denied(
                DenialCode::ArgsNotAllowed,
                format!(
                    "{} refused by policy (the deny_args pattern `{}`)",
                    shown(),
                    pattern.as_str()
                ),
            ));
        }
        if self
            .escalate
            .args
            .iter()
            .any(|p| names.iter().any(|name| p.matches(name, resolved, args)))
        {
            let approved = names.iter().any(|name| {
                self.escalate.approved.argv.iter().any(|argv| {
                    argv.split_first()
                        .is_some_and(|(first, rest)| first == name && rest == args)
                })
            });
            if !approved {
                return Err(CapabilityError::denied(
                    DenialCode::ArgsNotAllowed,
                    needs_approval(shown()),
                ));
            }
        }
        Ok(())
    }

    fn check_env(&self, name: &str) -> Result<(), CapabilityError> {
        if is_fixed_env_name(name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!("{name} is set by toolcap and may not be passed to a child"),
            ));
        }
        if !valid_env_name(name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!(
                    "{name:?} cannot name a variable (a name is not empty and holds no = or \
                     NUL byte)"
                ),
            ));
        }
        if is_refused_env_name(name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!("{} may not be passed to a child", name.escape_debug()),
            ));
        }
        // An allow list, not a deny list: a variable that steers a program (where it reads its
        // configuration, what it runs) is unknown to any list of bad names.
        if !is_safe_env_name(name) && !self.env_allow.iter().any(|a| a == name) {
            return Err(CapabilityError::denied(
                DenialCode::EnvNotAllowed,
                format!(
                    "{} is neither a variable every child may get (locale, time zone, terminal, \
                     commit identity) nor in safety.env.allow",
                    name.escape_debug()
                ),
            ));
        }
        Ok(())
    }

    fn env_allow(&self) -> &[String] {
        &self.env_allow
    }

    fn sandbox(&self) -> SandboxMode {
        self.sandbox
    }
}

/// Where git, a shell, an agent's client or an editor finds code to run outside any sandbox
/// (`full`, resolved), by its name or by another (`aliases`: where a home's or a write root's
/// places lead when they are links), unless a personality write root (`personality`) lies
/// inside that very area (docs/policy.md, "Git's hooks and configuration", "Shell startup
/// files", "What agents and editors run", "Reached by another name"): the area, what runs it,
/// and the name it is read by when that is another, or `None`.
fn runs_later_unlisted<'a>(
    full: &Path,
    personality: &[PathBuf],
    aliases: &'a [LaterAlias],
) -> Option<(PathBuf, RunsLater, Option<&'a Path>)> {
    let listed = |area: &Path| {
        personality
            .iter()
            .any(|r| is_within(full, r) && is_within(r, area))
    };
    if let Some((area, runs)) = runs_later(full)
        && !listed(&area)
    {
        return Some((area, runs, None));
    }
    aliases
        .iter()
        .find(|a| is_within(full, &a.real) && !listed(&a.real))
        .map(|a| (a.real.clone(), a.runs, Some(a.named.as_path())))
}

/// The refusal of a write of `full` that [`runs_later_unlisted`] finds, or `None`.
fn runs_later_refusal(
    full: &Path,
    personality: &[PathBuf],
    aliases: &[LaterAlias],
) -> Option<CapabilityError> {
    let (area, runs, named) = runs_later_unlisted(full, personality, aliases)?;
    let (is, listed) = match named {
        Some(named) => (
            format!("it is {} by another name, and ", named.display()),
            named,
        ),
        None => (String::new(), area.as_path()),
    };
    Some(CapabilityError::denied(
        DenialCode::PathNotReachable,
        format!(
            "write not permitted for {}: {is}{} (a personality that means to allow it lists {} \
             among its write roots)",
            full.display(),
            runs.why(),
            listed.display()
        ),
    ))
}

/// The place of `apart` that holds `path` (in any case, as deny rules are matched) and lies
/// strictly beneath `root`, the root `path` was reached through: such a place is reached only
/// through a root at or beneath it (docs/policy.md, "Kept apart").
fn apart_above<'a>(path: &Path, root: &Path, apart: &'a [PathBuf]) -> Option<&'a PathBuf> {
    apart.iter().find(|place| {
        place.as_path() != root && is_within(place, root) && is_within_any_case(path, place)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_policy as policy;
    use capability_types::{FsPaths, ToolCapabilities};

    fn scope(toml: &str, caps: &ToolCapabilities) -> super::super::ResolvedCapabilities {
        super::super::resolve("t", caps, &policy(toml), "s", Path::new("/srv/work"))
    }

    #[test]
    fn hosts_deny_wins_and_escalated_hosts_need_approval() {
        let caps = ToolCapabilities::none().with_network(["*"]);
        let r = scope(
            "id = \"p\"\n[safety.network]\nallow = [\"*.example.com\"]\ndeny = [\"bad.example.com\"]\n[escalate]\nhosts = [\"pay.example.com\"]\n",
            &caps,
        );
        let hosts = r.network.unwrap();
        assert_eq!(
            hosts.check("api.example.com", 443).unwrap(),
            HostMatch::Wildcard
        );
        let denied = hosts.check("bad.example.com", 443).unwrap_err();
        assert_eq!(denied.denial_code(), Some(DenialCode::HostNotAllowed));
        let escalated = hosts.check("pay.example.com", 443).unwrap_err();
        assert!(
            escalated.to_string().contains("requires approval"),
            "{escalated}"
        );
        assert!(hosts.check("example.com", 443).is_err(), "not the apex");
    }

    #[test]
    fn paths_compare_by_component_and_deny_rules_win() {
        let caps = ToolCapabilities::none()
            .with_fs_read(FsPaths::FromPersonality)
            .with_fs_write(FsPaths::FromPersonality);
        let r = scope(
            "id = \"p\"\n[fs_reach]\nread = [\"/srv/up\"]\nwrite = [\"/srv/up/out\"]\ndeny = [\"/srv/up/private\"]\n",
            &caps,
        );
        let paths = r.fs.unwrap();
        assert!(paths.check(Path::new("/srv/up/a"), FsAccess::Read).is_ok());
        assert!(
            paths
                .check(Path::new("/srv/uploads/a"), FsAccess::Read)
                .is_err()
        );
        assert!(
            paths
                .check(Path::new("/srv/up/private/k"), FsAccess::Read)
                .is_err()
        );
        assert!(
            paths
                .check(Path::new("/srv/up/a"), FsAccess::Write)
                .is_err()
        );
        let access = paths
            .check(Path::new("/srv/up/out/../out/f"), FsAccess::Write)
            .unwrap();
        assert_eq!(access.relative, Path::new("f"));
        assert_eq!(paths.working_dir(), Path::new("/srv/work"));
    }

    #[test]
    fn argv_refusals_name_their_pattern_and_hooks_are_refused() {
        let caps = ToolCapabilities::none().with_process(["*"]);
        let r = scope(
            "id = \"p\"\n[safety.process]\nallow = [\"git\"]\ndeny_args = [\"git push --force*\"]\n[safety.env]\nallow = [\"TZ\"]\n",
            &caps,
        );
        let process = r.process.unwrap();
        let args = |a: &[&str]| a.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let refused = process
            .check_args(
                "git",
                "git",
                Path::new("/usr/bin/git"),
                &args(&["push", "--force-with-lease"]),
            )
            .unwrap_err();
        assert_eq!(
            refused.to_string(),
            "ARGS_NOT_ALLOWED: git push --force-with-lease refused by policy (the deny_args pattern `git push --force*`)"
        );
        assert!(
            process
                .check_args("git", "git", Path::new("/usr/bin/git"), &args(&["status"]))
                .is_ok()
        );
        // Named otherwise (a path to a link, the file a link leads to), the program is held
        // to the rules of the name it was allowed as.
        for (binary, resolved, argv) in [
            (
                "/opt/bin/g",
                "/opt/git-2.47/bin/git-2.47",
                &["push", "--force"][..],
            ),
            (
                "git-2.47",
                "/opt/git-2.47/bin/git-2.47",
                &["-c", "alias.x=!sh", "x"],
            ),
        ] {
            let refused = process
                .check_args(binary, "git", Path::new(resolved), &args(argv))
                .unwrap_err();
            assert_eq!(
                refused.denial_code(),
                Some(DenialCode::ArgsNotAllowed),
                "{binary}"
            );
        }
        assert_eq!(
            process.check_env("LD_PRELOAD").unwrap_err().denial_code(),
            Some(DenialCode::EnvNotAllowed)
        );
        assert!(process.check_env("TZ").is_ok());
        assert_eq!(process.allowed_binaries(), ["git"]);
    }
}
