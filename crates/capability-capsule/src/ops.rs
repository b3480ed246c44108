//! Every scoped operation a capsule worker can ask of its host, defined once.
//!
//! An operation is a struct (its request, as it travels) that implements [`Operation`]: what
//! the host does with it through the call's own scoped objects ([`Operation::perform`]), and
//! how the worker turns the answer back into the scoped-object method's value
//! ([`Operation::output`]). The `scoped_ops!` list below makes the wire enum [`Op`] and the
//! host's dispatch of it from those definitions, so the wire format, the worker's forwarding
//! and the host's answering cannot disagree. Adding an operation is: its struct and impl here,
//! one line in the list, and the one-line forwarding method of the worker's proxy
//! (`worker.rs`) for the trait method it carries.
//!
//! Bytes (file contents, bodies, child output, stdin) ride in the frame's blobs, never in JSON.

use std::future::Future;
use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use capability_types::{
    AttachmentInfo, CapabilityError, DirEntry, ExposeSecret, FileKind, FsMetadata, ProcessOutput,
    SecretString, SpawnOptions, ToolContext,
};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One scoped operation: the request as it travels, what the host does with it, and what the
/// worker makes of the answer.
pub trait Operation: Into<Op> + Sized + Send {
    /// The answer as it travels (as JSON; its bytes ride in blobs).
    type Answer: Serialize + DeserializeOwned + Send;
    /// What the scoped-object method returns in the worker.
    type Output;

    /// Host side: performs the operation through `ctx`'s scoped objects, which enforce the
    /// policy again. `blobs` are the request's bytes.
    fn perform(
        self,
        ctx: &ToolContext,
        blobs: Vec<Bytes>,
    ) -> impl Future<Output = Result<(Self::Answer, Vec<Bytes>), CapabilityError>> + Send;

    /// Worker side: the method's value from the host's answer and its blobs.
    fn output(answer: Self::Answer, blobs: Vec<Bytes>) -> Result<Self::Output, CapabilityError>;
}

/// Makes the wire enum [`Op`] (internally tagged by `op`, in snake case) and its dispatch from
/// the list of operation structs.
macro_rules! scoped_ops {
    ($($(#[$doc:meta])* $variant:ident($ty:ident),)*) => {
        /// One scoped-object call of a running tool, as its worker asks it.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "op", rename_all = "snake_case")]
        #[non_exhaustive]
        pub enum Op {
            $($(#[$doc])* $variant($ty),)*
        }

        $(impl From<$ty> for Op {
            fn from(op: $ty) -> Op {
                Op::$variant(op)
            }
        })*

        impl Op {
            /// Performs the operation on the host through `ctx`'s scoped objects; the answer as
            /// JSON, with its blobs.
            pub async fn perform(
                self,
                ctx: &ToolContext,
                blobs: Vec<Bytes>,
            ) -> Result<(Value, Vec<Bytes>), CapabilityError> {
                match self {
                    $(Op::$variant(op) => answered(op.perform(ctx, blobs).await),)*
                }
            }
        }
    };
}

scoped_ops! {
    /// [`ScopedFs::read`](capability_types::ScopedFs::read).
    FsRead(FsRead),
    /// [`ScopedFs::read_bytes`](capability_types::ScopedFs::read_bytes).
    FsReadBytes(FsReadBytes),
    /// [`ScopedFs::write`](capability_types::ScopedFs::write).
    FsWrite(FsWrite),
    /// [`ScopedFs::append`](capability_types::ScopedFs::append).
    FsAppend(FsAppend),
    /// [`ScopedFs::exists`](capability_types::ScopedFs::exists).
    FsExists(FsExists),
    /// [`ScopedFs::list`](capability_types::ScopedFs::list).
    FsList(FsList),
    /// [`ScopedFs::mkdir`](capability_types::ScopedFs::mkdir).
    FsMkdir(FsMkdir),
    /// [`ScopedFs::metadata`](capability_types::ScopedFs::metadata).
    FsMetadata(FsMetadataOf),
    /// [`ScopedFs::remove`](capability_types::ScopedFs::remove).
    FsRemove(FsRemove),
    /// [`ScopedFetch::fetch`](capability_types::ScopedFetch::fetch).
    Fetch(Fetch),
    /// [`ScopedSecretsResolver::resolve`](capability_types::ScopedSecretsResolver::resolve).
    Secret(Secret),
    /// [`ScopedProcess::spawn`](capability_types::ScopedProcess::spawn).
    Spawn(Spawn),
    /// [`KeyValueStore::get`](capability_types::KeyValueStore::get).
    KvGet(KvGet),
    /// [`KeyValueStore::set`](capability_types::KeyValueStore::set).
    KvSet(KvSet),
    /// [`KeyValueStore::delete`](capability_types::KeyValueStore::delete).
    KvDelete(KvDelete),
    /// [`KeyValueStore::list`](capability_types::KeyValueStore::list).
    KvList(KvList),
    /// [`ScopedAttachments::list`](capability_types::ScopedAttachments::list).
    AttachmentList(AttachmentList),
    /// [`ScopedAttachments::read`](capability_types::ScopedAttachments::read).
    AttachmentRead(AttachmentRead),
}

fn answered<A: Serialize>(
    result: Result<(A, Vec<Bytes>), CapabilityError>,
) -> Result<(Value, Vec<Bytes>), CapabilityError> {
    let (answer, blobs) = result?;
    let value = serde_json::to_value(answer)
        .map_err(|e| CapabilityError::failed(format!("an answer that cannot be encoded: {e}")))?;
    Ok((value, blobs))
}

/// The first blob (absent: empty).
fn first(blobs: Vec<Bytes>) -> Bytes {
    blobs.into_iter().next().unwrap_or_default()
}

/// Defines an operation on one path whose answer is the scoped-object method's value: the
/// struct, and its [`Operation`] impl, which calls `$call` with the call's file system view,
/// the path and the request's blobs bound to the names given.
macro_rules! path_op {
    ($(#[$doc:meta])* $name:ident, |$fs:ident, $path:ident, $blobs:tt| $call:expr => $answer:ty) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// The path, as the tool gave it (relative paths resolve on the host).
            pub path: PathBuf,
        }

        impl Operation for $name {
            type Answer = $answer;
            type Output = $answer;
            async fn perform(
                self,
                ctx: &ToolContext,
                $blobs: Vec<Bytes>,
            ) -> Result<($answer, Vec<Bytes>), CapabilityError> {
                let ($fs, $path) = (ctx.fs()?, &self.path);
                Ok(($call.await?, Vec::new()))
            }
            fn output(answer: $answer, _: Vec<Bytes>) -> Result<$answer, CapabilityError> {
                Ok(answer)
            }
        }
    };
}

/// Reads a file as UTF-8 text; it comes back in blob 0 (checked as UTF-8 by the host's scoped
/// object, and again by the worker).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsRead {
    /// The path.
    pub path: PathBuf,
}

impl Operation for FsRead {
    type Answer = ();
    type Output = String;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<((), Vec<Bytes>), CapabilityError> {
        let text = ctx.fs()?.read(&self.path).await?;
        Ok(((), vec![Bytes::from(text)]))
    }
    fn output((): (), blobs: Vec<Bytes>) -> Result<String, CapabilityError> {
        String::from_utf8(first(blobs).to_vec()).map_err(|_| {
            CapabilityError::failed("the host answered a text read with bytes that are not UTF-8")
        })
    }
}

path_op!(
    /// Replaces a file's contents with blob 0; answers the bytes written.
    FsWrite, |fs, path, blobs| fs.write(path, &first(blobs)) => u64
);
path_op!(
    /// Appends blob 0 to a file (creating it); answers the bytes appended.
    FsAppend, |fs, path, blobs| fs.append(path, &first(blobs)) => u64
);
path_op!(
    /// Whether a path exists.
    FsExists, |fs, path, _| fs.exists(path) => bool
);
path_op!(
    /// Lists a directory.
    FsList, |fs, path, _| fs.list(path) => Vec<DirEntry>
);
path_op!(
    /// Creates a directory.
    FsMkdir, |fs, path, _| fs.mkdir(path) => ()
);
path_op!(
    /// Removes a file or an empty directory.
    FsRemove, |fs, path, _| fs.remove(path) => ()
);

/// Reads a file's bytes; they come back in blob 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsReadBytes {
    /// The path.
    pub path: PathBuf,
}

impl Operation for FsReadBytes {
    type Answer = ();
    type Output = Vec<u8>;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<((), Vec<Bytes>), CapabilityError> {
        let bytes = ctx.fs()?.read_bytes(&self.path).await?;
        Ok(((), vec![Bytes::from(bytes)]))
    }
    fn output((): (), blobs: Vec<Bytes>) -> Result<Vec<u8>, CapabilityError> {
        Ok(first(blobs).to_vec())
    }
}

/// Reads a path's metadata.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FsMetadataOf {
    /// The path.
    pub path: PathBuf,
}

/// The answer to [`FsMetadataOf`]; `modified_ns` is nanoseconds since the Unix epoch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct MetadataAnswer {
    /// The kind of object.
    pub kind: FileKind,
    /// Its length in bytes.
    pub len: u64,
    /// Its modification time, when known.
    pub modified_ns: Option<u64>,
}

impl Operation for FsMetadataOf {
    type Answer = MetadataAnswer;
    type Output = FsMetadata;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<(MetadataAnswer, Vec<Bytes>), CapabilityError> {
        let meta = ctx.fs()?.metadata(&self.path).await?;
        let modified_ns = meta
            .modified
            .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
            .and_then(|d| u64::try_from(d.as_nanos()).ok());
        let answer = MetadataAnswer {
            kind: meta.kind,
            len: meta.len,
            modified_ns,
        };
        Ok((answer, Vec::new()))
    }
    fn output(a: MetadataAnswer, _: Vec<Bytes>) -> Result<FsMetadata, CapabilityError> {
        let modified = a
            .modified_ns
            .map(|ns| SystemTime::UNIX_EPOCH + Duration::from_nanos(ns));
        Ok(FsMetadata::new(a.kind, a.len, modified))
    }
}

/// An HTTP request; its body rides in blob 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Fetch {
    /// The method.
    pub method: String,
    /// The URI.
    pub uri: String,
    /// The headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// The answer to [`Fetch`]; the body rides in blob 0.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResponseAnswer {
    /// The status code.
    pub status: u16,
    /// The headers, in order.
    pub headers: Vec<(String, Vec<u8>)>,
}

/// Header pairs of an HTTP message, as they travel.
fn header_pairs(headers: &http::HeaderMap) -> Vec<(String, Vec<u8>)> {
    headers
        .iter()
        .map(|(name, value)| (name.as_str().to_owned(), value.as_bytes().to_vec()))
        .collect()
}

impl Fetch {
    /// The request of `request` (its body goes in blob 0).
    pub fn of(request: http::Request<Bytes>) -> (Fetch, Bytes) {
        let (parts, body) = request.into_parts();
        let op = Fetch {
            method: parts.method.as_str().to_owned(),
            uri: parts.uri.to_string(),
            headers: header_pairs(&parts.headers),
        };
        (op, body)
    }
}

impl Operation for Fetch {
    type Answer = ResponseAnswer;
    type Output = http::Response<Bytes>;
    async fn perform(
        self,
        ctx: &ToolContext,
        blobs: Vec<Bytes>,
    ) -> Result<(ResponseAnswer, Vec<Bytes>), CapabilityError> {
        let fetch = ctx.fetch()?;
        let mut request = http::Request::builder()
            .method(self.method.as_str())
            .uri(self.uri);
        for (name, value) in self.headers {
            request = request.header(name, value);
        }
        let request = request
            .body(first(blobs))
            .map_err(|e| CapabilityError::invalid_input(format!("a malformed request: {e}")))?;
        let (parts, body) = fetch.fetch(request).await?.into_parts();
        let answer = ResponseAnswer {
            status: parts.status.as_u16(),
            headers: header_pairs(&parts.headers),
        };
        Ok((answer, vec![body]))
    }
    fn output(
        a: ResponseAnswer,
        blobs: Vec<Bytes>,
    ) -> Result<http::Response<Bytes>, CapabilityError> {
        let mut response = http::Response::builder().status(a.status);
        for (name, value) in a.headers {
            response = response.header(name, value);
        }
        response
            .body(first(blobs))
            .map_err(|e| CapabilityError::failed(format!("a malformed response: {e}")))
    }
}

/// Resolves a declared secret.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Secret {
    /// The secret's name.
    pub name: String,
}

impl Operation for Secret {
    type Answer = String;
    type Output = SecretString;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<(String, Vec<Bytes>), CapabilityError> {
        let value = ctx.secrets()?.resolve(&self.name).await?;
        Ok((value.expose_secret().to_owned(), Vec::new()))
    }
    fn output(value: String, _: Vec<Bytes>) -> Result<SecretString, CapabilityError> {
        Ok(SecretString::from(value))
    }
}

/// Runs a child; stdin rides in blob 0 when `stdin` is true.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spawn {
    /// The binary.
    pub binary: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The working directory.
    pub cwd: Option<PathBuf>,
    /// Extra variables.
    pub env: Vec<(String, String)>,
    /// Whether blob 0 is the child's stdin.
    pub stdin: bool,
    /// The timeout, in milliseconds.
    pub timeout_ms: Option<u64>,
}

/// The answer to [`Spawn`]; stdout rides in blob 0, stderr in blob 1.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OutputAnswer {
    /// The exit code, when the child exited.
    pub exit_code: Option<i32>,
    /// The signal, when one ended it.
    pub signal: Option<i32>,
    /// Whether output was cut at the cap.
    pub truncated: bool,
    /// Whether the timeout ended it.
    pub timed_out: bool,
}

impl Spawn {
    /// The request of a spawn (stdin, if any, goes in blob 0).
    pub fn of(binary: &str, args: &[String], options: SpawnOptions) -> (Spawn, Option<Bytes>) {
        let op = Spawn {
            binary: binary.to_owned(),
            args: args.to_vec(),
            cwd: options.cwd,
            env: options.env,
            stdin: options.stdin.is_some(),
            timeout_ms: options
                .timeout
                .map(|t| u64::try_from(t.as_millis()).unwrap_or(u64::MAX)),
        };
        (op, options.stdin)
    }
}

impl Operation for Spawn {
    type Answer = OutputAnswer;
    type Output = ProcessOutput;
    async fn perform(
        self,
        ctx: &ToolContext,
        blobs: Vec<Bytes>,
    ) -> Result<(OutputAnswer, Vec<Bytes>), CapabilityError> {
        let mut options = SpawnOptions::default();
        options.cwd = self.cwd;
        options.env = self.env;
        options.timeout = self.timeout_ms.map(Duration::from_millis);
        if self.stdin {
            options.stdin = Some(first(blobs));
        }
        let output = ctx
            .process()?
            .spawn(&self.binary, &self.args, options)
            .await?;
        let answer = OutputAnswer {
            exit_code: output.exit_code,
            signal: output.signal,
            truncated: output.truncated,
            timed_out: output.timed_out,
        };
        Ok((answer, vec![output.stdout, output.stderr]))
    }
    fn output(a: OutputAnswer, blobs: Vec<Bytes>) -> Result<ProcessOutput, CapabilityError> {
        let mut blobs = blobs.into_iter();
        let stdout = blobs.next().unwrap_or_default();
        let stderr = blobs.next().unwrap_or_default();
        Ok(
            ProcessOutput::new(a.exit_code, a.signal, stdout, stderr, a.truncated)
                .with_timed_out(a.timed_out),
        )
    }
}

/// Reads a key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvGet {
    /// The key.
    pub key: String,
}

impl Operation for KvGet {
    type Answer = Option<Value>;
    type Output = Option<Value>;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<(Option<Value>, Vec<Bytes>), CapabilityError> {
        Ok((ctx.kv()?.get(&self.key).await?, Vec::new()))
    }
    fn output(value: Option<Value>, _: Vec<Bytes>) -> Result<Option<Value>, CapabilityError> {
        Ok(value)
    }
}

/// Stores a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvSet {
    /// The key.
    pub key: String,
    /// The value.
    pub value: Value,
    /// The time to live, in milliseconds.
    pub ttl_ms: Option<u64>,
}

impl KvSet {
    /// The request of a `set`. A TTL under a millisecond is rounded up, so that it does not
    /// become the refused zero.
    pub fn of(key: &str, value: Value, ttl: Option<Duration>) -> KvSet {
        KvSet {
            key: key.to_owned(),
            value,
            ttl_ms: ttl.map(|t| {
                let ms = u64::try_from(t.as_millis()).unwrap_or(u64::MAX);
                if ms == 0 && !t.is_zero() { 1 } else { ms }
            }),
        }
    }
}

impl Operation for KvSet {
    type Answer = ();
    type Output = ();
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<((), Vec<Bytes>), CapabilityError> {
        let ttl = self.ttl_ms.map(Duration::from_millis);
        ctx.kv()?.set(&self.key, self.value, ttl).await?;
        Ok(((), Vec::new()))
    }
    fn output((): (), _: Vec<Bytes>) -> Result<(), CapabilityError> {
        Ok(())
    }
}

/// Deletes a key; answers whether it was there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvDelete {
    /// The key.
    pub key: String,
}

impl Operation for KvDelete {
    type Answer = bool;
    type Output = bool;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<(bool, Vec<Bytes>), CapabilityError> {
        Ok((ctx.kv()?.delete(&self.key).await?, Vec::new()))
    }
    fn output(existed: bool, _: Vec<Bytes>) -> Result<bool, CapabilityError> {
        Ok(existed)
    }
}

/// Lists the keys under a prefix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KvList {
    /// The prefix.
    pub prefix: String,
}

impl Operation for KvList {
    type Answer = Vec<String>;
    type Output = Vec<String>;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<(Vec<String>, Vec<Bytes>), CapabilityError> {
        Ok((ctx.kv()?.list(&self.prefix).await?, Vec::new()))
    }
    fn output(keys: Vec<String>, _: Vec<Bytes>) -> Result<Vec<String>, CapabilityError> {
        Ok(keys)
    }
}

/// Lists the call's attachments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentList {}

impl Operation for AttachmentList {
    type Answer = Vec<AttachmentInfo>;
    type Output = Vec<AttachmentInfo>;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<(Vec<AttachmentInfo>, Vec<Bytes>), CapabilityError> {
        Ok((ctx.attachments()?.list().await?, Vec::new()))
    }
    fn output(
        list: Vec<AttachmentInfo>,
        _: Vec<Bytes>,
    ) -> Result<Vec<AttachmentInfo>, CapabilityError> {
        Ok(list)
    }
}

/// Reads a range of one of the call's attachments (the host bounds its length).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttachmentRead {
    /// The attachment's id.
    pub id: String,
    /// Where to start.
    pub offset: u64,
    /// At most this many bytes.
    pub len: usize,
}

impl Operation for AttachmentRead {
    type Answer = ();
    type Output = Bytes;
    async fn perform(
        self,
        ctx: &ToolContext,
        _: Vec<Bytes>,
    ) -> Result<((), Vec<Bytes>), CapabilityError> {
        let bytes = ctx
            .attachments()?
            .read(&self.id, self.offset, self.len)
            .await?;
        Ok(((), vec![bytes]))
    }
    fn output((): (), blobs: Vec<Bytes>) -> Result<Bytes, CapabilityError> {
        Ok(first(blobs))
    }
}
