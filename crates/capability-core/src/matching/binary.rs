//! Binaries and argv patterns: the process intersection and `deny_args` matching.

use std::fmt;
use std::path::Path;

use capability_types::check_binary_spec;
use wildmatch::WildMatch;

use super::{Dropped, Intersection};

/// Programs whose business is to start another program given among their arguments, after
/// options of their own (`env`, `xargs`, `timeout 10 cmd`, `nice -n 5 cmd`, a tracer, `sudo`
/// and its kin). Allowing one to a tool allows whatever it is asked to start; a guarded MCP
/// server started through one runs the program it names. One list for the review of a
/// personality (`toolcap validate`) and for the guard's examination of a server's code
/// (docs/guard.md, "Confinement").
pub const STARTS_ANOTHER: &[&str] = &[
    "env",
    "xargs",
    "nohup",
    "timeout",
    "nice",
    "ionice",
    "stdbuf",
    "setsid",
    "chrt",
    "taskset",
    "flock",
    "time",
    "watch",
    "strace",
    "ltrace",
    "valgrind",
    "sudo",
    "su",
    "doas",
    "runuser",
    "setpriv",
    "prlimit",
    "numactl",
    "cgexec",
    "catchsegv",
    "unbuffer",
    "tini",
    "dumb-init",
    "xvfb-run",
    "systemd-run",
    "chroot",
    "unshare",
    "nsenter",
    "script",
    "parallel",
    "entr",
    // Those that wrap a build, a test run or a session: a compiler cache, an agent, a fake
    // root or clock, a sandbox of another kind, a profiler, a proxy, a limiter.
    "ccache",
    "sccache",
    "distcc",
    "ssh-agent",
    "dbus-run-session",
    "dbus-launch",
    "eatmydata",
    "fakeroot",
    "fakechroot",
    "faketime",
    "pkexec",
    "bwrap",
    "firejail",
    "proot",
    "perf",
    "torsocks",
    "proxychains",
    "proxychains4",
    "rlwrap",
    "trickle",
    "cpulimit",
    "daemonize",
    "start-stop-daemon",
    "direnv",
    "lldb",
    "screen",
    // dpkg's `-c` runs a command with a target architecture's variables set.
    "dpkg-architecture",
    // A program under another architecture's name or setting, a scheduler's or the OOM
    // killer's setting, a security context, and the profilers that run what they measure.
    "setarch",
    "linux32",
    "linux64",
    "i386",
    "x86_64",
    "uclampset",
    "choom",
    "runcon",
    "heaptrack",
    "memusage",
    "sotruss",
    "gprofng",
    "gp-collect-app",
    "systemd-cat",
    "systemd-inhibit",
    "systemd-socket-activate",
];

/// Intersects declared binaries with a personality's `safety.process.allow`: `*` in the
/// declaration yields the personality's list; otherwise each declared binary is kept when the
/// personality lists the same spec (bare name or absolute path). Which file a bare name means is
/// decided by the process backend through its trusted search path, once, so two specs that are
/// spelled differently are never assumed to be the same file here.
pub fn intersect_binaries(declared: &[String], allow: &[String]) -> Intersection<String> {
    if allow.is_empty() {
        return Intersection::refuse_all(
            declared,
            "the personality allows no binaries (safety.process.allow is empty)",
        );
    }
    let mut out = Intersection::default();
    if declared.iter().any(|d| d == "*") {
        out.granted.extend(allow.iter().cloned());
    }
    for d in declared.iter().filter(|d| *d != "*") {
        if let Err(why) = check_binary_spec(d, false) {
            out.dropped.push(Dropped::new(d, why));
        } else if !allow.contains(d) {
            out.dropped.push(Dropped::new(
                d,
                format!("{d} is not in the personality's safety.process.allow"),
            ));
        } else if !out.granted.contains(d) {
            out.granted.push(d.clone());
        }
    }
    out.granted.sort();
    out.granted.dedup();
    out
}

/// A `deny_args` pattern: whitespace-separated tokens, the first naming the binary (bare name,
/// absolute path or `*`), the rest matched with `*` / `?` wildcards against argument tokens.
///
/// The pattern refuses an argv when the binary matches and the remaining pattern tokens match
/// arguments *in order*, not necessarily adjacent: `git push --force*` refuses
/// `git push --force-with-lease` and `git -C repo push origin --force`, not `git status`.
/// A space separates tokens; it is never a wildcard, and no shell is involved.
///
/// ```
/// use capability_core::matching::binary::ArgvPattern;
/// use std::path::Path;
/// let p = ArgvPattern::parse("git push --force*").unwrap();
/// let argv = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
/// assert!(p.matches("git", Path::new("/usr/bin/git"), &argv(&["push", "--force-with-lease"])));
/// assert!(!p.matches("git", Path::new("/usr/bin/git"), &argv(&["status"])));
/// ```
#[derive(Clone)]
pub struct ArgvPattern {
    text: String,
    binary: String,
    args: Vec<WildMatch>,
}

impl ArgvPattern {
    /// Parses a pattern; the error names it.
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut tokens = text.split_ascii_whitespace();
        let binary = tokens
            .next()
            .ok_or_else(|| format!("{text:?} has no tokens"))?
            .to_owned();
        if binary != "*" {
            check_binary_spec(&binary, false).map_err(|why| format!("{text:?}: {why}"))?;
        }
        Ok(Self {
            text: text.to_owned(),
            binary,
            args: tokens.map(WildMatch::new).collect(),
        })
    }

    /// Whether the argv is refused: `requested` is the binary as the call named it, `resolved`
    /// the canonical file it resolved to.
    pub fn matches(&self, requested: &str, resolved: &Path, args: &[String]) -> bool {
        let binary_matches = match self.binary.as_str() {
            "*" => true,
            b if b.starts_with('/') => Path::new(b) == resolved || b == requested,
            b => {
                let requested_name = Path::new(requested).file_name().and_then(|n| n.to_str());
                let resolved_name = resolved.file_name().and_then(|n| n.to_str());
                requested_name == Some(b) || resolved_name == Some(b)
            }
        };
        if !binary_matches {
            return false;
        }
        let mut want = self.args.iter().peekable();
        for arg in args {
            match want.peek() {
                Some(pattern) if pattern.matches(arg) => {
                    want.next();
                }
                Some(_) => {}
                None => break,
            }
        }
        want.peek().is_none()
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl fmt::Debug for ArgvPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("ArgvPattern").field(&self.text).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn binary_intersection() {
        let allow = ["git".to_owned(), "/usr/bin/ls".to_owned()];
        let i = intersect_binaries(&["*".into()], &allow);
        assert_eq!(i.granted, ["/usr/bin/ls", "git"]);
        let i = intersect_binaries(
            &["git".into(), "rm".into(), "/tmp/x/git".into(), "ls".into()],
            &allow,
        );
        assert_eq!(i.granted, ["git"]);
        assert_eq!(
            i.dropped
                .iter()
                .map(|d| d.entry.as_str())
                .collect::<Vec<_>>(),
            ["rm", "/tmp/x/git", "ls"]
        );
        let i = intersect_binaries(&["*".into()], &[]);
        assert!(i.granted.is_empty() && i.dropped[0].reason.contains("allows no binaries"));
        let i = intersect_binaries(&["../git".into(), "".into()], &allow);
        assert!(i.granted.is_empty() && i.dropped.len() == 2);
    }

    #[test]
    fn argv_tokens_not_strings() {
        let git = Path::new("/usr/bin/git");
        let p = ArgvPattern::parse("git push --force*").unwrap();
        assert!(p.matches("git", git, &argv(&["push", "--force"])));
        assert!(p.matches("git", git, &argv(&["push", "--force-with-lease"])));
        assert!(p.matches(
            "git",
            git,
            &argv(&["-C", "repo", "push", "origin", "--force"])
        ));
        assert!(p.matches("/usr/bin/git", git, &argv(&["push", "--force"])));
        assert!(!p.matches("git", git, &argv(&["status"])));
        assert!(!p.matches("git", git, &argv(&["push"])));
        assert!(
            !p.matches("git", git, &argv(&["--force", "push"])),
            "order matters"
        );
        assert!(
            !p.matches("git", git, &argv(&["push --force"])),
            "a space is not a token separator inside one argument"
        );
        assert!(!p.matches("hg", Path::new("/usr/bin/hg"), &argv(&["push", "--force"])));
        let any = ArgvPattern::parse("* --exec*").unwrap();
        assert!(any.matches(
            "find",
            Path::new("/usr/bin/find"),
            &argv(&[".", "--exec=rm"])
        ));
        let whole = ArgvPattern::parse("rm").unwrap();
        assert!(whole.matches("rm", Path::new("/usr/bin/rm"), &argv(&[])));
        let abs = ArgvPattern::parse("/usr/bin/git push").unwrap();
        assert!(abs.matches("git", git, &argv(&["push"])));
        assert!(ArgvPattern::parse("   ").is_err());
        assert!(ArgvPattern::parse("bin/git push").is_err());
    }
}
