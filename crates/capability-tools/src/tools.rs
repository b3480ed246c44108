//! The standard tools of docs/reference.md, "Standard tools". Each uses only the scoped objects of its context.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use capability_types::{
    AttachmentsCapability, CapabilityError, FsPaths, SpawnOptions, StorageScope, Tool,
    ToolCapabilities, ToolContext,
};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::args::{parse, schema_of};

/// Reads a UTF-8 text file within the personality's read reach.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PathArgs {
    /// Absolute, or relative to the working directory.
    pub(crate) path: String,
}

#[async_trait]
impl Tool for ReadFile {
    /// A file's contents are text anyone who could write the file chose.
    fn output_is_untrusted(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "read_file"
    }
    fn description(&self) -> &str {
        "Reads a UTF-8 text file. Relative paths resolve against the session's working directory."
    }
    fn input_schema(&self) -> Value {
        schema_of::<PathArgs>()
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: PathArgs = parse(args)?;
        ctx.fs()?
            .read(Path::new(&args.path))
            .await
            .map(Value::String)
    }
}

/// Writes a whole file (atomically) within the personality's write reach.
#[derive(Debug, Clone, Copy, Default)]
pub struct WriteFile;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct WriteArgs {
    /// Absolute, or relative to the working directory.
    pub(crate) path: String,
    /// The whole new content of the file (UTF-8 text).
    pub(crate) content: String,
}

#[async_trait]
impl Tool for WriteFile {
    fn name(&self) -> &str {
        "write_file"
    }
    fn description(&self) -> &str {
        "Writes a whole text file atomically; returns the number of bytes written."
    }
    fn input_schema(&self) -> Value {
        schema_of::<WriteArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        &["content"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_write(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: WriteArgs = parse(args)?;
        ctx.fs()?
            .write(Path::new(&args.path), args.content.as_bytes())
            .await
            .map(|n| json!(n))
    }
}

/// Lists a directory within the personality's read reach.
#[derive(Debug, Clone, Copy, Default)]
pub struct ListDir;

#[async_trait]
impl Tool for ListDir {
    fn name(&self) -> &str {
        "list_dir"
    }
    fn description(&self) -> &str {
        "Lists the names in a directory, sorted."
    }
    fn input_schema(&self) -> Value {
        schema_of::<PathArgs>()
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: PathArgs = parse(args)?;
        let entries = ctx.fs()?.list(Path::new(&args.path)).await?;
        Ok(json!(
            entries.into_iter().map(|e| e.name).collect::<Vec<_>>()
        ))
    }
}

/// Fetches an http(s) URL from a host the personality allows.
#[derive(Debug, Clone, Copy, Default)]
pub struct FetchUrl;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FetchArgs {
    /// An http or https URL.
    pub(crate) url: String,
    /// The HTTP method (default GET).
    #[serde(default)]
    pub(crate) method: Option<String>,
    /// Request headers.
    #[serde(default)]
    pub(crate) headers: BTreeMap<String, String>,
    /// The request body (text).
    #[serde(default)]
    pub(crate) body: Option<String>,
}

#[async_trait]
impl Tool for FetchUrl {
    /// A web page's text is its author's.
    fn output_is_untrusted(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "fetch_url"
    }
    fn description(&self) -> &str {
        "Fetches an http or https URL; returns {status, headers, body}. Redirects are followed and re-checked."
    }
    fn input_schema(&self) -> Value {
        schema_of::<FetchArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        &["headers", "body"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_network(["*"])
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: FetchArgs = parse(args)?;
        let method = args.method.as_deref().unwrap_or("GET").to_ascii_uppercase();
        let method = http::Method::from_bytes(method.as_bytes()).map_err(|_| {
            CapabilityError::invalid_input(format!("method: {method:?} is not an HTTP method"))
        })?;
        let mut request = http::Request::builder().method(method).uri(&args.url);
        for (name, value) in &args.headers {
            request = request.header(name, value);
        }
        let request = request
            .body(Bytes::from(args.body.unwrap_or_default()))
            .map_err(|e| CapabilityError::invalid_input(format!("url or headers: {e}")))?;
        let response = ctx.fetch()?.fetch(request).await?;
        let mut headers = BTreeMap::new();
        for (name, value) in response.headers() {
            let value = String::from_utf8_lossy(value.as_bytes()).into_owned();
            headers
                .entry(name.as_str().to_owned())
                .and_modify(|v: &mut String| {
                    v.push_str(", ");
                    v.push_str(&value);
                })
                .or_insert(value);
        }
        Ok(json!({
            "status": response.status().as_u16(),
            "headers": headers,
            "body": String::from_utf8_lossy(response.body()),
        }))
    }
}

/// Runs a binary the personality allows, without a shell.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunCommand;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunArgs {
    /// The binary: a name looked up on the allowed path, or an absolute path.
    pub(crate) binary: String,
    /// Its arguments (no shell: each is one argv entry).
    #[serde(default)]
    pub(crate) args: Vec<String>,
    /// The directory it runs in (within the reach); by default the working directory when the
    /// reach holds it, else an empty scratch directory.
    #[serde(default)]
    pub(crate) cwd: Option<String>,
    /// Extra environment variables (the personality's env rules apply).
    #[serde(default)]
    pub(crate) env: BTreeMap<String, String>,
    /// Kill it after this many milliseconds.
    #[serde(default)]
    #[schemars(range(min = 1))]
    pub(crate) timeout_ms: Option<u64>,
    /// Text written to its standard input.
    #[serde(default)]
    pub(crate) stdin: Option<String>,
}

#[async_trait]
impl Tool for RunCommand {
    /// A program's output is text its inputs chose.
    fn output_is_untrusted(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "run_command"
    }
    fn description(&self) -> &str {
        "Runs an allowed binary with arguments (never through a shell); returns {exit_code, signal, stdout, stderr, truncated}."
    }
    fn input_schema(&self) -> Value {
        schema_of::<RunArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        // The binary is checked where it runs, by canonical file against the allowed ones
        // (docs/policy.md, "The argument gate"): `/usr/bin/git` is a program to run, not a
        // file to read.
        &["stdin", "binary"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none()
            .with_process(["*"])
            .with_fs_read(FsPaths::FromPersonality)
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: RunArgs = parse(args)?;
        let mut options = SpawnOptions::default();
        if let Some(cwd) = args.cwd {
            options = options.cwd(cwd);
        }
        for (name, value) in args.env {
            options = options.env(name, value);
        }
        match args.timeout_ms {
            Some(0) => {
                return Err(CapabilityError::invalid_input(
                    "timeout_ms: must be at least 1",
                ));
            }
            Some(ms) => options = options.timeout(Duration::from_millis(ms)),
            None => {}
        }
        if let Some(stdin) = args.stdin {
            options = options.stdin(stdin);
        }
        let out = ctx
            .process()?
            .spawn(&args.binary, &args.args, options)
            .await?;
        if out.timed_out {
            return Err(CapabilityError::Timeout(format!(
                "{} timed out and its process group was killed (signal {})",
                args.binary,
                out.signal
                    .map_or_else(|| "none".to_owned(), |s| s.to_string())
            )));
        }
        Ok(json!({
            "exit_code": out.exit_code,
            "signal": out.signal,
            "stdout": String::from_utf8_lossy(&out.stdout),
            "stderr": String::from_utf8_lossy(&out.stderr),
            "truncated": out.truncated,
        }))
    }
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct KeyArgs {
    /// The key.
    key: String,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct SetArgs {
    /// The key.
    key: String,
    /// Any JSON value.
    value: Value,
    /// Expire the key after this many seconds.
    #[serde(default)]
    #[schemars(range(min = 1))]
    ttl_seconds: Option<i64>,
}

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct PrefixArgs {
    /// Only keys starting with this (exact case); empty lists every key.
    #[serde(default)]
    prefix: String,
}

fn kv_capabilities() -> ToolCapabilities {
    ToolCapabilities::none().with_storage(StorageScope::Personality, None)
}

/// Reads a key of the personality's key-value state.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvGet;

#[async_trait]
impl Tool for KvGet {
    fn name(&self) -> &str {
        "kv_get"
    }
    fn description(&self) -> &str {
        "Returns the value stored under a key, or null."
    }
    fn input_schema(&self) -> Value {
        schema_of::<KeyArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        &["key"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        kv_capabilities()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: KeyArgs = parse(args)?;
        Ok(ctx.kv()?.get(&args.key).await?.unwrap_or(Value::Null))
    }
}

/// Stores a JSON value under a key, optionally expiring.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvSet;

#[async_trait]
impl Tool for KvSet {
    fn name(&self) -> &str {
        "kv_set"
    }
    fn description(&self) -> &str {
        "Stores a JSON value under a key; ttl_seconds makes it expire."
    }
    fn input_schema(&self) -> Value {
        schema_of::<SetArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        &["key", "value"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        kv_capabilities()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: SetArgs = parse(args)?;
        let ttl = match args.ttl_seconds {
            None => None,
            Some(s) if s > 0 => Some(Duration::from_secs(s.unsigned_abs())),
            Some(_) => {
                return Err(CapabilityError::invalid_input(
                    "ttl_seconds: must be a positive integer",
                ));
            }
        };
        ctx.kv()?
            .set(&args.key, args.value, ttl)
            .await
            .map(|()| Value::Null)
    }
}

/// Deletes a key; returns whether it existed.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvDelete;

#[async_trait]
impl Tool for KvDelete {
    fn name(&self) -> &str {
        "kv_delete"
    }
    fn description(&self) -> &str {
        "Deletes a key; returns whether it existed."
    }
    fn input_schema(&self) -> Value {
        schema_of::<KeyArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        &["key"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        kv_capabilities()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: KeyArgs = parse(args)?;
        ctx.kv()?
            .delete(&args.key)
            .await
            .map(|existed| json!(existed))
    }
}

/// Lists keys by prefix.
#[derive(Debug, Clone, Copy, Default)]
pub struct KvList;

#[async_trait]
impl Tool for KvList {
    fn name(&self) -> &str {
        "kv_list"
    }
    fn description(&self) -> &str {
        "Lists the live keys starting with a prefix (exact case), sorted."
    }
    fn input_schema(&self) -> Value {
        schema_of::<PrefixArgs>()
    }
    fn data_arguments(&self) -> &[&str] {
        &["prefix"]
    }
    fn capabilities(&self) -> ToolCapabilities {
        kv_capabilities()
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: PrefixArgs = parse(args)?;
        ctx.kv()?.list(&args.prefix).await.map(|keys| json!(keys))
    }
}

/// Lists the call's attachments, or reads one (a range of at most 4 MiB): UTF-8 text as
/// `text`, other bytes as `base64`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ReadAttachment;

#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
struct AttachmentArgs {
    /// The attachment to read; without it, the call's attachments are listed.
    id: Option<String>,
    /// Where to start reading (default 0).
    offset: Option<u64>,
    /// At most this many bytes (default 65536, at most 4194304).
    #[schemars(range(min = 1, max = 4194304))]
    max_bytes: Option<u32>,
}

#[async_trait]
impl Tool for ReadAttachment {
    /// An attachment's contents are its sender's.
    fn output_is_untrusted(&self) -> bool {
        true
    }

    fn name(&self) -> &str {
        "read_attachment"
    }
    fn description(&self) -> &str {
        "Lists the attachments of this call, or reads one by id: text as text, other bytes as base64."
    }
    fn input_schema(&self) -> Value {
        schema_of::<AttachmentArgs>()
    }
    fn capabilities(&self) -> ToolCapabilities {
        ToolCapabilities::none().with_attachments(AttachmentsCapability::any())
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let args: AttachmentArgs = parse(args)?;
        let attachments = ctx.attachments()?;
        let Some(id) = args.id else {
            return serde_json::to_value(attachments.list().await?)
                .map_err(|e| CapabilityError::failed(e.to_string()));
        };
        let offset = args.offset.unwrap_or(0);
        let len = args.max_bytes.map_or(64 * 1024, |n| n as usize);
        let bytes = attachments.read(&id, offset, len).await?;
        let body = match std::str::from_utf8(&bytes) {
            Ok(text) => json!({"text": text}),
            Err(_) => json!({"base64": base64(&bytes)}),
        };
        let mut out = json!({"id": id, "offset": offset, "bytes_read": bytes.len()});
        if let (Some(out), Some(body)) = (out.as_object_mut(), body.as_object()) {
            out.extend(body.clone());
        }
        Ok(out)
    }
}

/// Standard base64 with padding (RFC 4648).
fn base64(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(char::from(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn base64_matches_rfc_4648() {
        for (input, want) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(super::base64(input.as_bytes()), want);
        }
    }
}
