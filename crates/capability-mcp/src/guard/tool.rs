//! A tool of a guarded server, as a registry tool: `mcp__<server>__<tool>`, its declaration the
//! server's reach, its execution a relay after toolcap's own argument checks (docs/guard.md,
//! "Argument checks").

use std::path::{Path, PathBuf};
use std::sync::Arc;

use capability_core::matching::path::RunsLater;
use capability_core::{ResolvedCapabilities, ResolvedHosts, ResolvedPaths, normalize_lexically};
use capability_types::backend::{FsAccess, HostPolicy, PathPolicy};
use capability_types::{
    CapabilityError, DenialCode, FsPaths, Tool, ToolCapabilities, ToolContext, async_trait,
};
use rmcp::model::CallToolResult;
use serde_json::Value;

use super::supervisor::{CallFailure, Supervisor};

/// One tool of one guarded server.
#[derive(Debug)]
pub(crate) struct GuardedTool {
    pub(crate) name: String,
    upstream: String,
    description: String,
    schema: Value,
    caps: ToolCapabilities,
    supervisor: Arc<Supervisor>,
    checks: ArgumentCheck,
    /// The declaration resolved under the personality the server was started under: what its
    /// process is confined to for its life.
    pub(crate) confined: Arc<ResolvedCapabilities>,
}

impl GuardedTool {
    pub(crate) fn new(
        supervisor: Arc<Supervisor>,
        upstream: &rmcp::model::Tool,
        caps: ToolCapabilities,
        checks: ArgumentCheck,
        confined: Arc<ResolvedCapabilities>,
    ) -> Self {
        let name = format!("mcp__{}__{}", supervisor.name, upstream.name);
        Self {
            checks: checks.for_tool(&name),
            name,
            upstream: upstream.name.to_string(),
            // What the model reads, as a person reads it (docs/guard.md, "Pinning what the
            // model is shown").
            description: format!(
                "[{} via toolcap] {}",
                supervisor.name,
                capability_types::visible(upstream.description.as_deref().unwrap_or(""))
            ),
            schema: readable(Value::Object((*upstream.input_schema).clone())),
            caps,
            supervisor,
            confined,
        }
    }
}

/// `schema` with the prose a model reads in it, every `description` and `title` that is a
/// string at any depth, [`visible`](capability_types::visible): written by the server, told
/// to the model. Names, `enum` values and defaults are left as they are: they are what the
/// model sends back, and the server must recognise them. The depth is bounded by the JSON
/// parser that read the schema (serde_json refuses more than 128 levels).
fn readable(schema: Value) -> Value {
    match schema {
        Value::Object(members) => Value::Object(
            members
                .into_iter()
                .map(|(name, value)| {
                    let value = match value {
                        Value::String(text) if name == "description" || name == "title" => {
                            Value::String(capability_types::visible(&text).into_owned())
                        }
                        other => readable(other),
                    };
                    (name, value)
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.into_iter().map(readable).collect()),
        other => other,
    }
}

/// toolcap's checks of a guarded tool's arguments beyond the registry's gate (which covers
/// absolute paths and `file://` URLs anywhere): a relative path in an argument named as a path
/// must be within the server's read or its write reach from every directory the server may
/// resolve it from ([`relative_bases`]), as the gate requires of an absolute one; every
/// `http(s)` URL must name a host its reach allows.
#[derive(Debug, Clone)]
pub(crate) struct ArgumentCheck {
    tool: String,
    server: String,
    /// The server's reach after the personality.
    paths: Option<Arc<ResolvedPaths>>,
    hosts: Option<Arc<ResolvedHosts>>,
    path_arguments: Arc<[String]>,
    /// Where the server may resolve a relative path from, its working directory first.
    bases: Arc<[PathBuf]>,
}

/// Where a home directory the guard cannot place stands in a path (explain's server, not
/// started, and `~` in an argument): a place no reach holds, shown as `~`.
const HOME_STAND_IN: &str = "/~";

/// The directories a server may resolve a relative path from: its working directory, and every
/// directory its command line names (alone or after a `=`; a relative one from the working
/// directory), since a server given directories
/// may resolve against them instead: the filesystem server resolves `etc/passwd` against the
/// first directory it serves, so, given `/`, it reads `/etc/passwd` whatever its working
/// directory is (docs/guard.md, "Argument checks"). A `~` in the command line is the server's
/// `home`, when known.
#[allow(
    clippy::disallowed_methods,
    reason = "which directories a server's command line names, asked as the server will see them: the host's look, not a tool's reach"
)]
pub(crate) fn relative_bases(args: &[String], cwd: &Path, home: Option<&Path>) -> Vec<PathBuf> {
    let mut bases = vec![normalize_lexically(cwd)];
    for arg in args {
        let value = arg.split_once('=').map_or(arg.as_str(), |(_, value)| value);
        for text in [arg.as_str(), value] {
            let base = match text.strip_prefix('~') {
                Some(rest) if rest.is_empty() || rest.starts_with('/') => {
                    let rest = rest.trim_start_matches('/');
                    match home {
                        // toolcap: allow(std::path::Path::is_dir, reason = "the guard asks which directories a server's command line names, as the server will see them; the host's look, not a tool's reach")
                        Some(home) => Some(home.join(rest)).filter(|dir| dir.is_dir()),
                        // Not started (explain): a place no reach holds, as the home it will
                        // have is in none.
                        None => Some(Path::new(HOME_STAND_IN).join(rest)),
                    }
                }
                // toolcap: allow(std::path::Path::is_dir, reason = "the guard asks which directories a server's command line names, as the server will see them; the host's look, not a tool's reach")
                _ => Some(cwd.join(text)).filter(|dir| !text.is_empty() && dir.is_dir()),
            };
            if let Some(base) = base.map(|dir| normalize_lexically(&dir))
                && !bases.contains(&base)
            {
                bases.push(base);
            }
        }
    }
    bases
}

impl ArgumentCheck {
    pub(crate) fn new(
        server: &str,
        paths: Option<Arc<ResolvedPaths>>,
        hosts: Option<Arc<ResolvedHosts>>,
        path_arguments: Arc<[String]>,
        bases: Vec<PathBuf>,
    ) -> Self {
        Self {
            tool: format!("mcp__{server}"),
            server: server.to_owned(),
            paths,
            hosts,
            path_arguments,
            bases: bases.into(),
        }
    }

    pub(crate) fn for_tool(&self, tool: &str) -> Self {
        Self {
            tool: tool.to_owned(),
            ..self.clone()
        }
    }

    pub(crate) fn check(&self, args: &Value) -> Result<(), CapabilityError> {
        let mut stack: Vec<(Option<&str>, &Value)> = vec![(None, args)];
        while let Some((key, value)) = stack.pop() {
            match value {
                Value::Object(map) => {
                    for (name, value) in map {
                        // A member's name may be a path too (a map from paths to contents), as
                        // the argument gate reads it.
                        self.check_what_runs_later(name)?;
                        stack.push((Some(name.as_str()), value));
                    }
                }
                // An array inherits its key: `"paths": ["a", "b"]`.
                Value::Array(items) => stack.extend(items.iter().map(|v| (key, v))),
                Value::String(text) => {
                    self.check_what_runs_later(text)?;
                    if is_web_url(text) {
                        self.check_url(text.trim())?;
                    } else if key.is_some_and(|k| self.names_a_path(k))
                        && !text.is_empty()
                        && !text.starts_with('/')
                    {
                        self.check_relative(text)?;
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Whether the argument `key` holds a path: one of [`PATH_ARGUMENTS`] or the configured
    /// names, or a name whose last word is one of them in any case (`file_path`, `filePath`,
    /// `workingDirectory`, `base_dir`), as servers spell them (docs/guard.md, "Argument
    /// checks").
    ///
    /// [`PATH_ARGUMENTS`]: super::config::PATH_ARGUMENTS
    fn names_a_path(&self, key: &str) -> bool {
        if self.path_arguments.iter().any(|name| name == key) {
            return true;
        }
        // The last word: after the last `_` or `-`, or from the last capital that follows a
        // small letter or a digit.
        let bytes = key.as_bytes();
        let start = (1..bytes.len())
            .rev()
            .find(|&i| {
                matches!(bytes[i - 1], b'_' | b'-')
                    || (bytes[i].is_ascii_uppercase()
                        && (bytes[i - 1].is_ascii_lowercase() || bytes[i - 1].is_ascii_digit()))
            })
            .unwrap_or(0);
        let last = key[start..].to_ascii_lowercase();
        // The whole name without its separators: `file_name` and `fileName` are `filename`.
        let squashed: String = key
            .chars()
            .filter(char::is_ascii_alphanumeric)
            .map(|c| c.to_ascii_lowercase())
            .collect();
        super::config::PATH_ARGUMENTS.contains(&last.as_str())
            || super::config::PATH_ARGUMENTS.contains(&squashed.as_str())
    }

    /// A relative path in an argument named as a path, read from each of the server's
    /// [`relative_bases`]: within its reach from every one.
    ///
    /// Two readings more. Text with `://` in it (a URI, `s3://bucket/key`) is let by from a
    /// base where, read as a path, it stays beneath that base; servers do read it as a path,
    /// and then `s3://../../etc/passwd` is `../etc/passwd` (`s3:` and the first `..` cancel),
    /// so one that climbs out is checked. A path that starts with `~` is read from a home
    /// directory by servers that expand it (the server's own for `~/`, another account's for
    /// `~name/`), which the guard cannot place: one that climbs out of that home is refused.
    fn check_relative(&self, text: &str) -> Result<(), CapabilityError> {
        let refused = |path: &Path, why: &str| {
            CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!(
                    "{} (argument {text:?} of {}) is outside the reach of the MCP server \
                     {}{why}",
                    path.display(),
                    self.tool,
                    self.server
                ),
            )
        };
        if let Some(rest) = text.strip_prefix('~') {
            let tail = rest.split_once('/').map_or("", |(_, tail)| tail);
            let home = Path::new(HOME_STAND_IN);
            let path = normalize_lexically(&home.join(tail));
            if !path.starts_with(home) {
                return Err(refused(
                    Path::new(text),
                    ", read from the home directory a server expands `~` to",
                ));
            }
        }
        let uri = text.contains("://");
        for (i, base) in self.bases.iter().enumerate() {
            let path = normalize_lexically(&base.join(text));
            if uri && path.starts_with(base) {
                continue;
            }
            // As the argument gate takes an absolute path (docs/guard.md, "Argument checks"):
            // within the read or the write reach; which one the server will use, the kernel
            // holds it to.
            let reached = self
                .paths
                .as_ref()
                .is_some_and(|paths| paths.reaches(&path).is_ok());
            if !reached {
                // Past the working directory, say where the reading came from: the server's
                // command line, not the argument alone.
                let from = if i == 0 {
                    String::new()
                } else if base.starts_with(HOME_STAND_IN) {
                    // The placeholder of a home not made yet (explain).
                    ", read from the home `~` its command line names (a server may resolve \
                     relative paths from it)"
                        .to_owned()
                } else {
                    format!(
                        ", read from {}, a directory its command line names (a server may \
                         resolve relative paths from it)",
                        base.display()
                    )
                };
                // The placeholder home (explain) is shown as the `~` it stands for.
                let shown = match path.strip_prefix(HOME_STAND_IN) {
                    Ok(rest) => Path::new("~").join(rest),
                    Err(_) => path,
                };
                return Err(refused(&shown, &from));
            }
            self.runs_later(&path, text)?;
        }
        Ok(())
    }

    /// An absolute path or a `file:` URL, anywhere in the arguments: not a place beneath the
    /// server's write reach that toolcap's own writes refuse for what would run it later
    /// ([`ResolvedPaths::runs_later_beneath_write_root`]). The registry's gate has already
    /// held it to the reach; the server may write wherever the kernel lets it, and which of
    /// reading and writing it will do cannot be told.
    fn check_what_runs_later(&self, text: &str) -> Result<(), CapabilityError> {
        if text.starts_with('/') {
            self.runs_later(Path::new(text), text)
        } else if let Some(Ok(path)) = capability_core::matching::scheme::file_url_path(text) {
            self.runs_later(&path, text)
        } else {
            Ok(())
        }
    }

    /// The refusal of `path` (named by the argument `text`) where the server could write what
    /// git, a shell, an agent's client or an editor runs later, or what the personality keeps
    /// from writes (docs/guard.md, "Argument checks").
    fn runs_later(&self, path: &Path, text: &str) -> Result<(), CapabilityError> {
        let Some(paths) = &self.paths else {
            return Ok(());
        };
        // By name (and by where a home's places lead), then what the path's spelling cannot
        // tell: hooks a repository's configuration names, a git directory of another name.
        let allow = |area: &Path| {
            format!(
                "a personality that means to allow it lists {} among its write roots, as does \
                 the server's reach",
                area.display()
            )
        };
        let found = paths
            .runs_later_beneath_write_root(path)
            .map(|(full, area, runs)| (full, runs.why(), allow(&area)))
            .or_else(|| {
                let (full, rule) = paths.kept_from_writes_beneath_write_root(path)?;
                Some((
                    full,
                    "the personality keeps it from writes",
                    format!("fs_reach.deny_write {}", rule.display()),
                ))
            })
            .or_else(|| {
                let a = paths.check(path, FsAccess::Write).ok()?;
                let place = capability_sandbox::git_place_of(&a.path, &a.root)?;
                Some(match place {
                    capability_sandbox::GitPlace::NewGitDir(dir) => (
                        a.path,
                        "it would make a directory a git directory, whose hooks and \
                         configuration git runs outside any sandbox when the user next runs git \
                         there",
                        format!(
                            "{} is no git directory, and no write may make it one",
                            dir.display()
                        ),
                    ),
                    place => (a.path, RunsLater::Git.why(), allow(place.area())),
                })
            });
        match found {
            None => Ok(()),
            Some((full, why, allow)) => Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!(
                    "{} (argument {text:?} of {}) is a place the MCP server {} could write, and \
                     {why}; the guard cannot tell whether a server will read or write a path it \
                     is handed, so it hands it neither ({allow})",
                    full.display(),
                    self.tool,
                    self.server,
                ),
            )),
        }
    }

    fn check_url(&self, text: &str) -> Result<(), CapabilityError> {
        let url = capability_fetch::check_url(text)?;
        let host = url.host_str().unwrap_or_default();
        let port = url.port_or_known_default().unwrap_or(0);
        match &self.hosts {
            Some(hosts) => hosts.check(host, port).map(drop),
            None => Err(CapabilityError::denied(
                DenialCode::HostNotAllowed,
                format!(
                    "{host} (in the arguments of {}) is not a host the MCP server {} may reach",
                    self.tool, self.server
                ),
            )),
        }
    }
}

#[async_trait]
impl Tool for GuardedTool {
    /// What a server answers is its own text (docs/policy.md, "After untrusted output").
    fn output_is_untrusted(&self) -> bool {
        true
    }
    fn name(&self) -> &str {
        &self.name
    }
    fn description(&self) -> &str {
        &self.description
    }
    fn input_schema(&self) -> Value {
        self.schema.clone()
    }
    fn capabilities(&self) -> ToolCapabilities {
        self.caps.clone()
    }
    async fn execute(&self, args: Value, _ctx: &ToolContext) -> Result<Value, CapabilityError> {
        self.checks.check(&args)?;
        let Value::Object(arguments) = args else {
            return Err(CapabilityError::invalid_input(
                "arguments: expected a JSON object",
            ));
        };
        match self.supervisor.call(&self.upstream, arguments).await {
            Ok(result) => relay(result),
            Err(CallFailure::Protocol(message)) => Err(CapabilityError::failed(format!(
                "the MCP server {} refused the call: {message}",
                self.supervisor.name
            ))),
            Err(CallFailure::Unrelayed(message)) => Err(CapabilityError::failed(message)),
            Err(CallFailure::Server(message)) => Err(CapabilityError::not_available(message)),
            Err(CallFailure::Planted(message)) => Err(CapabilityError::denied(
                DenialCode::PathNotReachable,
                format!("write not permitted: {message}"),
            )),
        }
    }
}

/// Whether `text` is an `http(s)` URL as a server would take it: in every form a URL parser
/// reads as one (`HTTPS://host`, ` http://host`, `http:host`, `ht\ttp://host`;
/// `capability_core::matching::scheme`).
fn is_web_url(text: &str) -> bool {
    use capability_core::matching::scheme::reads_as_url;
    reads_as_url(text, "http") || reads_as_url(text, "https")
}

/// A server's answer as the tool's value: text blocks alone as one text (a structured result
/// without content as its JSON), so the model reads them as it did from the server; content
/// with an image, audio or a resource in it as the blocks themselves, under
/// [`CONTENT_KEY`](crate::CONTENT_KEY), so the client shows them as the server sent them; an
/// error as its text, other blocks named ([`named`]).
fn relay(result: CallToolResult) -> Result<Value, CapabilityError> {
    let texts_only = result.content.iter().all(|block| block.as_text().is_some());
    if result.is_error != Some(true) && !texts_only {
        let blocks = serde_json::to_value(&result.content).map_err(|e| {
            CapabilityError::failed(format!("the server's answer cannot be relayed: {e}"))
        })?;
        return Ok(serde_json::json!({ crate::CONTENT_KEY: blocks }));
    }
    let mut text = String::new();
    for block in &result.content {
        if !text.is_empty() {
            text.push('\n');
        }
        match block.as_text() {
            Some(t) => text.push_str(&t.text),
            None => text.push_str(&named(block)),
        }
    }
    if text.is_empty()
        && let Some(structured) = &result.structured_content
    {
        text = structured.to_string();
    }
    if result.is_error == Some(true) {
        Err(CapabilityError::failed(text))
    } else {
        Ok(Value::String(text))
    }
}

/// A block that is not text, named in an error's message by its kind and what it is
/// (`[image: image/png]`, `[resource_link: file:///srv/shot.png]`), not by its data: the model
/// reads why a call failed, not a screenshot's base64.
fn named(block: &impl serde::Serialize) -> String {
    let value = serde_json::to_value(block).unwrap_or_default();
    let kind = value["type"].as_str().unwrap_or("content");
    let what = value
        .get("uri")
        .or_else(|| value.pointer("/resource/uri"))
        .or_else(|| value.get("mimeType"))
        .and_then(Value::as_str);
    match what {
        Some(what) => format!("[{kind}: {what}]"),
        None => format!("[{kind}]"),
    }
}

/// The declaration of a server's tools: its reach as explicit lists, and the secrets it is
/// handed.
pub(crate) fn declaration(server: &super::config::ServerConfig) -> ToolCapabilities {
    let reach = &server.reach;
    let mut caps = ToolCapabilities::none();
    let secrets: Vec<capability_types::SecretRef> = server
        .secrets
        .values()
        .filter_map(|name| capability_types::SecretRef::parse(name).ok())
        .collect();
    if !secrets.is_empty() {
        caps = caps.with_secrets(secrets);
    }
    let readable: Vec<PathBuf> = reach.read.iter().chain(&reach.write).cloned().collect();
    if !readable.is_empty() {
        caps = caps.with_fs_read(FsPaths::Paths(readable));
    }
    if !reach.write.is_empty() {
        caps = caps.with_fs_write(FsPaths::Paths(reach.write.clone()));
    }
    if !reach.hosts.is_empty() {
        caps = caps.with_network(reach.hosts.iter().cloned());
    }
    caps
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> ArgumentCheck {
        ArgumentCheck::new(
            "fs",
            None,
            None,
            Arc::from(vec!["target".to_owned()]),
            vec![PathBuf::from("/srv/ws")],
        )
    }

    // guarantee: G-MCP-07
    #[test]
    fn arguments_named_as_paths_in_the_spellings_servers_use() {
        let c = check();
        for key in [
            "path",
            "paths",
            "file",
            "source",
            "uri",
            "target",
            "file_path",
            "filePath",
            "FILE-PATH",
            "output_path",
            "workingDirectory",
            "base_dir",
            "cwd",
            "filename",
            "folder",
            "notebook_path",
            "file_name",
            "fileName",
            "FILE-NAME",
            "filepath",
            "pathname",
            "dir_name",
            "src",
            "dst",
        ] {
            assert!(c.names_a_path(key), "{key}");
        }
        for key in [
            "query", "content", "name", "pattern", "url", "profile", "username", "hostname",
            "location",
        ] {
            assert!(!c.names_a_path(key), "{key}");
        }
        // A URL in every form a WHATWG parser (Node's `URL`, the `url` crate) reads as one is
        // checked: with no hosts, each is refused; text that only starts with the word is not.
        for url in [
            "https://evil.example/x",
            " HTTP://evil.example/",
            "http:evil.example",
            "https:\\\\evil.example\\x",
            "http:/evil.example",
            "ht\ttp://evil.example/x",
            "h\rttps://evil.example",
            "\u{1}http://evil.example",
            "http\n:evil.example",
        ] {
            assert!(c.check(&serde_json::json!({"q": url})).is_err(), "{url}");
        }
        assert!(
            c.check(&serde_json::json!({"q": "http: the protocol"}))
                .is_ok()
        );
        // With no reach, any relative path in such an argument is refused; others are not read.
        assert!(c.check(&serde_json::json!({"file_path": "../x"})).is_err());
        assert!(c.check(&serde_json::json!({"query": "../x"})).is_ok());
        // A URI in a path argument is let by while, read as a path, it stays beneath the
        // server's directory; one that climbs out is checked as a path.
        assert!(
            c.check(&serde_json::json!({"uri": "s3://bucket/key"}))
                .is_ok()
        );
        assert!(
            c.check(&serde_json::json!({"path": "s3://../../etc/passwd"}))
                .is_err()
        );
        assert!(
            c.check(&serde_json::json!({"path": "a://b/../../../x"}))
                .is_err()
        );
    }
}
