//! The guard's configuration file: which MCP servers to start and what each may reach
//! (docs/guard.md, "Configuration").

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

/// A guard configuration: the servers, by name.
///
/// ```
/// let config = capability_mcp::GuardConfig::parse(r#"
/// [servers.files]
/// command = "/usr/bin/node"
/// args = ["/opt/mcp/server-filesystem/dist/index.js", "/"]
/// runtime = ["/opt/mcp/server-filesystem"]
/// tools = ["read_text_file", "list_directory"]
/// [servers.files.reach]
/// read = ["/srv/workspace"]
/// "#).unwrap();
/// assert_eq!(config.servers["files"].reach.read.len(), 1);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct GuardConfig {
    /// The servers to start, by name (`[a-z0-9-]`, at most 32 characters). A server's tools are
    /// listed as `mcp__<name>__<tool>`.
    #[serde(default)]
    pub servers: BTreeMap<String, ServerConfig>,
}

/// One server: how to start it and what it may reach.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct ServerConfig {
    /// The program, an absolute path (no `PATH` lookup: what runs is what the file names).
    pub command: PathBuf,
    /// Its arguments.
    #[serde(default)]
    pub args: Vec<String>,
    /// The working directory (default: the guard's working directory).
    #[serde(default)]
    pub cwd: Option<PathBuf>,
    /// What the server's own code needs to run, read-only and executable: its interpreter's
    /// libraries, its package directory. Not reach: no argument may name these paths.
    #[serde(default)]
    pub runtime: Vec<PathBuf>,
    /// What its tools may reach, intersected with the personality.
    #[serde(default)]
    pub reach: Reach,
    /// Plain environment variables of the server (the rest of the environment is cleared).
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Secrets handed to the server as environment variables: variable name → secret ref (an
    /// exact name), looked up in toolcap's secrets backends when the server starts.
    #[serde(default)]
    pub secrets: BTreeMap<String, String>,
    /// Only these tools of the server are offered (by their own names); default all.
    #[serde(default)]
    pub tools: Option<Vec<String>>,
    /// The pins of the tools offered, by their own names (`toolcap mcp pins` prints them): when
    /// set, a tool is offered only while what the client is shown of it (its name, description
    /// and input schema) is what was pinned; a tool not pinned, or changed, is withheld and
    /// reported (docs/guard.md, "Pinning what the model is shown").
    #[serde(default)]
    pub pins: Option<BTreeMap<String, String>>,
    /// Argument names that hold paths, besides the ones recognised by default (`path`, `paths`,
    /// `file`, `files`, `directory`, `source`, `destination`, `root`, `uri`).
    #[serde(default)]
    pub path_arguments: Vec<String>,
    /// Limits of the server process and of each call.
    #[serde(default)]
    pub limits: Limits,
}

/// What a server's tools may reach.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Reach {
    /// Paths read.
    #[serde(default)]
    pub read: Vec<PathBuf>,
    /// Paths written (and read).
    #[serde(default)]
    pub write: Vec<PathBuf>,
    /// Hosts fetched, as host patterns; reached through the egress proxy only.
    #[serde(default)]
    pub hosts: Vec<String>,
}

/// Limits of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
#[non_exhaustive]
pub struct Limits {
    /// Address space, in MiB (default 4096).
    #[serde(default = "defaults::memory_mib")]
    pub memory_mib: u64,
    /// CPU time of the server process over its life, in seconds (default 3600).
    #[serde(default = "defaults::cpu_seconds")]
    pub cpu_seconds: u64,
    /// Processes (default 256; held for root too by the server's own PID namespace).
    #[serde(default = "defaults::processes")]
    pub processes: u64,
    /// The largest message the server may send, in bytes (default 16 MiB); a longer line
    /// stops the server (the calls in flight fail, it is restarted within its budget).
    #[serde(default = "defaults::output_bytes")]
    pub output_bytes: usize,
    /// A call that takes longer is cancelled and the server restarted (default 60 s).
    #[serde(default = "defaults::call_timeout_seconds")]
    pub call_timeout_seconds: u64,
    /// Restarts allowed after crashes and hangs before the server is marked down (default 3).
    #[serde(default = "defaults::restarts")]
    pub restarts: u32,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            memory_mib: defaults::memory_mib(),
            cpu_seconds: defaults::cpu_seconds(),
            processes: defaults::processes(),
            output_bytes: defaults::output_bytes(),
            call_timeout_seconds: defaults::call_timeout_seconds(),
            restarts: defaults::restarts(),
        }
    }
}

mod defaults {
    pub(super) fn memory_mib() -> u64 {
        4096
    }
    pub(super) fn cpu_seconds() -> u64 {
        3600
    }
    pub(super) fn processes() -> u64 {
        256
    }
    pub(super) fn output_bytes() -> usize {
        16 << 20
    }
    pub(super) fn call_timeout_seconds() -> u64 {
        60
    }
    pub(super) fn restarts() -> u32 {
        3
    }
}

/// Argument names that hold paths in every server, and the last words of names that do
/// (`file_path`, `workingDirectory`), compared in small letters, also with their separators
/// taken out (`file_name`, `fileName`).
pub(crate) const PATH_ARGUMENTS: &[&str] = &[
    "path",
    "paths",
    "pathname",
    "filepath",
    "filepaths",
    "file",
    "files",
    "filename",
    "filenames",
    "dirname",
    "src",
    "dst",
    "dir",
    "dirs",
    "directory",
    "directories",
    "folder",
    "folders",
    "source",
    "destination",
    "dest",
    "root",
    "uri",
    "cwd",
];

/// Whether a configuration may set the variable `var` for a server: a plain name, not a loader
/// or interpreter hook, and not one the guard fixes itself (`PATH`, `HOME`, and the egress proxy
/// variables, which always point at the proxy). Where a toolchain or its configuration lives
/// (`CARGO_HOME`, `GOROOT`, ...) is refused to a call, whose value nobody reviews, but is the
/// user's to configure: the place it names is examined as code (docs/guard.md, "Confinement").
fn settable(var: &str) -> Result<(), String> {
    if var.is_empty() || !var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(format!("{var:?} is not a variable name"));
    }
    if capability_core::is_refused_env_name(var) && !super::strings::ENV_ELSEWHERE.contains(&var) {
        return Err(format!(
            "{var} steers how programs load or run and cannot be set"
        ));
    }
    if capability_core::is_fixed_env_name(var)
        || capability_sandbox::EGRESS_PROXY_VARIABLES.contains(&var)
        || var.eq_ignore_ascii_case("no_proxy")
    {
        return Err(format!(
            "{var} is set by the guard itself and cannot be set"
        ));
    }
    Ok(())
}

/// A guard configuration that cannot be used, with what is wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardConfigError(pub String);

impl std::fmt::Display for GuardConfigError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for GuardConfigError {}

impl GuardConfig {
    /// Parses and checks a configuration (TOML). Unknown fields, relative paths, paths with a
    /// `..` component, bad names and empty server lists are errors.
    ///
    /// # Errors
    ///
    /// The first problem found, naming the server and field.
    pub fn parse(text: &str) -> Result<Self, GuardConfigError> {
        let config: GuardConfig =
            toml::from_str(text).map_err(|e| GuardConfigError(e.to_string()))?;
        if config.servers.is_empty() {
            return Err(GuardConfigError(
                "no [servers.NAME] is configured".to_owned(),
            ));
        }
        for (name, server) in &config.servers {
            server.check(name)?;
        }
        Ok(config)
    }
}

impl ServerConfig {
    fn check(&self, name: &str) -> Result<(), GuardConfigError> {
        let bad = |what: String| Err(GuardConfigError(format!("servers.{name}: {what}")));
        if name.is_empty()
            || name.len() > 32
            || !name
                .bytes()
                .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        {
            return bad("a server name is 1 to 32 of a-z, 0-9 and '-'".to_owned());
        }
        let absolute = |field: &str, path: &Path| {
            if !path.is_absolute() || path.to_str().is_none_or(|p| p.contains('\0')) {
                Err(GuardConfigError(format!(
                    "servers.{name}.{field}: {} is not an absolute UTF-8 path",
                    path.display()
                )))
            } else if path
                .components()
                .any(|c| matches!(c, std::path::Component::ParentDir))
            {
                // `/opt/mcp/../..` is `/` to the kernel, and reads as a place beneath
                // `/opt/mcp` to a reviewer: what the configuration grants must be what it
                // says (docs/guard.md, "Configuration").
                Err(GuardConfigError(format!(
                    "servers.{name}.{field}: {} has a '..' component; write the path it means",
                    path.display()
                )))
            } else {
                Ok(())
            }
        };
        absolute("command", &self.command)?;
        if let Some(cwd) = &self.cwd {
            absolute("cwd", cwd)?;
        }
        for path in &self.runtime {
            absolute("runtime", path)?;
        }
        for path in &self.reach.read {
            absolute("reach.read", path)?;
        }
        for path in &self.reach.write {
            absolute("reach.write", path)?;
        }
        for var in self.env.keys() {
            settable(var).or_else(|why| bad(format!("env: {why}")))?;
        }
        for (var, name) in &self.secrets {
            settable(var).or_else(|why| bad(format!("secrets: {why}")))?;
            if self.env.contains_key(var) {
                return bad(format!("secrets: {var} is set by env too"));
            }
            match capability_types::SecretRef::parse(name) {
                Ok(r) if !r.is_glob() => {}
                Ok(_) => {
                    return bad(format!(
                        "secrets.{var}: {name:?} must name one secret, not a glob"
                    ));
                }
                Err(why) => return bad(format!("secrets.{var}: {why}")),
            }
        }
        for (tool, pin) in self.pins.iter().flatten() {
            if tool.is_empty() {
                return bad("pins: a tool name is empty".to_owned());
            }
            if !super::pin::is_pin(pin) {
                return bad(format!(
                    "pins.{tool}: {pin:?} is not a pin (sha256: and 64 small hex digits, as \
                     `toolcap mcp pins` prints them)"
                ));
            }
        }
        if self.limits.call_timeout_seconds == 0 || self.limits.output_bytes < 1024 {
            return bad(
                "limits: call_timeout_seconds must be positive and output_bytes at least 1024"
                    .to_owned(),
            );
        }
        // No server starts with no memory, no CPU time or no process of its own: refused as
        // the configuration is read, not found when it fails to start.
        for (limit, value) in [
            ("memory_mib", self.limits.memory_mib),
            ("cpu_seconds", self.limits.cpu_seconds),
            ("processes", self.limits.processes),
        ] {
            if value == 0 {
                return bad(format!(
                    "limits.{limit}: 0 leaves the server nothing to start with"
                ));
            }
        }
        // A NUL byte cannot be handed to a program (it ends a C string): refused here, naming
        // where, rather than when the server is started.
        let nul = |field: String, text: &str| {
            if text.contains('\0') {
                bad(format!("{field}: a NUL byte cannot be passed to a program"))
            } else {
                Ok(())
            }
        };
        for (i, arg) in self.args.iter().enumerate() {
            nul(format!("args[{i}]"), arg)?;
        }
        for (var, value) in &self.env {
            nul(format!("env.{var}"), value)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // guarantee: G-MCP-08
    #[test]
    fn hostile_configs_are_refused_with_the_field_named() {
        for (text, says) in [
            ("", "no [servers"),
            ("[servers]\n", "no [servers"),
            ("[servers.a]\ncommand = \"node\"\n", "servers.a.command"),
            ("[servers.A]\ncommand = \"/bin/x\"\n", "server name"),
            ("[servers.a__b]\ncommand = \"/bin/x\"\n", "server name"),
            (
                "[servers.a]\ncommand = \"/bin/x\"\nsurprise = 1\n",
                "unknown field",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.reach]\nread = [\"rel\"]\n",
                "reach.read",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.env]\nLD_PRELOAD = \"/x.so\"\n",
                "LD_PRELOAD",
            ),
            // Where a toolchain lives may be configured (and is examined), as may kubectl's
            // configuration; a family that only shares its prefix is a refused name still.
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.env]\nDOTNET_ROOT_X64 = \"/x\"\n",
                "DOTNET_ROOT_X64 steers",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.env]\nHOME = \"/root\"\n",
                "HOME is set by the guard",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.env]\nhttps_proxy = \"http://x\"\n",
                "https_proxy is set by the guard",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.secrets]\nPATH = \"P\"\n",
                "PATH is set by the guard",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.limits]\ncall_timeout_seconds = 0\n",
                "limits",
            ),
            // Refused when the configuration is read (and reviewed), not only when the server
            // fails to start: a NUL byte no program can be handed, limits no server starts in.
            (
                "[servers.a]\ncommand = \"/bin/x\"\nargs = [\"a\\u0000b\"]\n",
                "servers.a: args[0]: a NUL byte",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.env]\nA = \"a\\u0000b\"\n",
                "servers.a: env.A: a NUL byte",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\\u0000y\"\n",
                "servers.a.command",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.limits]\nmemory_mib = 0\n",
                "memory_mib",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.limits]\ncpu_seconds = 0\n",
                "cpu_seconds",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.limits]\nprocesses = 0\n",
                "processes",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a]\ncommand = \"/bin/y\"\n",
                "duplicate",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.pins]\nread = \"sha256:abc\"\n",
                "pins.read",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.pins]\nread = 7\n",
                "invalid type",
            ),
            (
                "[servers.a]\ncommand = \"/bin/x\"\n[servers.a.pins]\n\"\" = \"sha256:0\"\n",
                "pins: a tool name is empty",
            ),
        ] {
            let err = GuardConfig::parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text:?}: {err}");
        }
    }

    #[test]
    fn defaults_are_filled_in() {
        let config = GuardConfig::parse("[servers.a]\ncommand = \"/bin/x\"\n").unwrap();
        let a = &config.servers["a"];
        assert_eq!(a.limits, Limits::default());
        assert!(a.tools.is_none());
        assert!(a.reach.read.is_empty());
    }

    // guarantee: G-MCP-08
    /// Where a toolchain or kubectl's configuration lives is refused to a call but is the
    /// user's to configure for a server (the place is examined as code when the server starts).
    #[test]
    fn a_servers_toolchain_and_cluster_configuration_may_be_named() {
        let config = GuardConfig::parse(
            "[servers.k]\ncommand = \"/bin/x\"\n[servers.k.env]\nKUBECONFIG = \"/etc/k\"\n\
             CARGO_HOME = \"/opt/cargo\"\nGOROOT = \"/usr/lib/go\"\n\
             AWS_CONFIG_FILE = \"/etc/aws/config\"\nGH_CONFIG_DIR = \"/etc/gh\"\n\
             AWS_SHARED_CREDENTIALS_FILE = \"/etc/aws/credentials\"\n\
             CLOUDSDK_PYTHON = \"/usr/bin/python3\"\nDOCKER_CONFIG = \"/etc/docker-cli\"\n",
        )
        .unwrap();
        assert_eq!(config.servers["k"].env.len(), 8);
    }
}
