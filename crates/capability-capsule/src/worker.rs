//! The worker side: confine this process, then run calls whose every scoped-object call is a
//! request to the host.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use capability_sandbox::{ResourceLimits, SandboxPolicy};
use capability_types::{
    AttachmentInfo, CapabilityError, DirEntry, FsMetadata, KeyValueStore, ProcessOutput,
    ScopedAttachments, ScopedFetch, ScopedFs, ScopedProcess, ScopedSecretsResolver, SecretRef,
    SecretString, SpawnOptions, Tool, ToolContext,
};
use futures_util::FutureExt;
use serde_json::Value;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::ops::{self, Operation};
use crate::sys;
use crate::wire::{
    CallContext, FrameReader, FromWorker, Op, ToWorker, WireError, WorkerSettings, decode, encode,
};

/// The first argument that puts a binary into worker mode.
pub const WORKER_FLAG: &str = "--toolcap-capsule-worker";

/// Exit status of a worker whose host sent something it does not understand.
const EXIT_PROTOCOL: i32 = 2;
/// Exit status of a worker that could not confine itself.
const EXIT_UNCONFINED: i32 = 3;

/// The one call at the top of `main` of any binary that hosts a capsule.
///
/// In a normal run it returns at once. When the host re-executes the binary as a worker
/// (`<binary> --toolcap-capsule-worker <tool> <settings>`), it never returns: it confines the
/// process (no file system, no sockets, no new processes, resource limits) *before* `tools` is
/// called — so no tool code, not even a constructor, runs unconfined — then serves calls of the
/// named tool until the host closes the channel, and exits.
///
/// # Ambient Authority
///
/// Reads this process's arguments. As a worker it confines the process itself, reads frames on
/// standard input, writes them on standard output and exits the process.
///
/// ```no_run
/// fn main() {
///     capability_capsule::run_worker_if_requested(capability_capsule_example_tools);
///     // ... the host program ...
/// }
/// # fn capability_capsule_example_tools() -> Vec<std::sync::Arc<dyn capability_types::Tool>> { Vec::new() }
/// ```
pub fn run_worker_if_requested<F>(tools: F)
where
    F: FnOnce() -> Vec<Arc<dyn Tool>>,
{
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() != Some(OsStr::new(WORKER_FLAG)) {
        return;
    }
    let tool = args.next();
    let settings = args.next();
    let extra = args.next();
    let code = match (tool, settings, extra) {
        (Some(tool), Some(settings), None) => worker_main(&tool, &settings, tools),
        _ => {
            report(&format!(
                "usage: {WORKER_FLAG} TOOL SETTINGS_JSON (started by a toolcap capsule host)"
            ));
            EXIT_PROTOCOL
        }
    };
    std::process::exit(code);
}

/// A line on stderr, which the host keeps the end of for its error messages.
fn report(message: &str) {
    let _ = writeln!(std::io::stderr(), "toolcap capsule worker: {message}");
}

fn worker_main<F>(tool: &OsStr, settings: &OsStr, tools: F) -> i32
where
    F: FnOnce() -> Vec<Arc<dyn Tool>>,
{
    let Some(tool) = tool.to_str().map(str::to_owned) else {
        report("the tool name is not UTF-8");
        return EXIT_PROTOCOL;
    };
    let settings: WorkerSettings = match settings
        .to_str()
        .ok_or_else(|| "not UTF-8".to_owned())
        .and_then(|s| serde_json::from_str(s).map_err(|e| e.to_string()))
    {
        Ok(settings) => settings,
        Err(e) => {
            report(&format!("bad settings: {e}"));
            return EXIT_PROTOCOL;
        }
    };
    let mut channel = match sys::adopt_channel() {
        Ok(channel) => channel,
        Err(e) => {
            report(&e.to_string());
            return EXIT_PROTOCOL;
        }
    };
    let limits = ResourceLimits {
        address_space: settings.address_space,
        cpu_seconds: settings.cpu_seconds,
        processes: None,
        file_size: settings.file_size,
        open_files: settings.open_files,
    };
    // Nothing but stdin, stdout, stderr and the channel survives into the confined worker.
    let confined = sys::close_descriptors_after_channel()
        .map_err(|e| CapabilityError::not_available(format!("closing inherited descriptors: {e}")))
        .and_then(|()| SandboxPolicy::isolated().limits(limits).prepare())
        .and_then(|prepared| prepared.confine_current_process());
    if let Err(e) = confined {
        let refused = FromWorker::Refused {
            reason: e.to_string(),
        };
        if let Ok(frame) = encode(&refused, &[], settings.max_frame) {
            let _ = channel.write_all(&frame);
        }
        report(&format!("cannot confine myself: {e}"));
        return EXIT_UNCONFINED;
    }
    // From here on the process has no authority but its channel.
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            report(&format!("no runtime: {e}"));
            return EXIT_PROTOCOL;
        }
    };
    let tool = tools().into_iter().find(|t| t.name() == tool).ok_or(tool);
    let spin = Duration::from_micros(settings.spin_micros);
    runtime.block_on(serve(channel, tool, settings.max_frame, spin))
}

/// A reply as the worker receives it: the answer (or error) and the frame's blobs.
type Reply = (Result<Value, WireError>, Vec<Bytes>);

/// The worker's end of the channel: sends frames, matches replies to requests.
struct Link {
    out: mpsc::UnboundedSender<Vec<u8>>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
    max_frame: usize,
}

impl Link {
    fn send(&self, message: &FromWorker, blobs: &[Bytes]) -> Result<(), CapabilityError> {
        let frame = encode(message, blobs, self.max_frame)
            .map_err(|e| CapabilityError::invalid_input(format!("cannot send to the host: {e}")))?;
        self.out
            .send(frame)
            .map_err(|_| CapabilityError::failed("the channel to the host is closed"))
    }

    async fn request(
        &self,
        seq: u64,
        op: Op,
        blobs: &[Bytes],
    ) -> Result<(Value, Vec<Bytes>), CapabilityError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(id, tx);
        if let Err(e) = self.send(&FromWorker::Request { id, seq, op }, blobs) {
            self.pending
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .remove(&id);
            return Err(e);
        }
        let (result, blobs) = rx
            .await
            .map_err(|_| CapabilityError::failed("the call ended before the host answered"))?;
        result.map(|answer| (answer, blobs)).map_err(Into::into)
    }

    fn answer(&self, id: u64, result: Result<Value, WireError>, blobs: Vec<Bytes>) -> bool {
        let waiter = self
            .pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&id);
        match waiter {
            Some(waiter) => {
                let _ = waiter.send((result, blobs));
                true
            }
            None => false,
        }
    }

    /// Forgets the requests of a finished call: their futures end with an error.
    fn forget_pending(&self) {
        self.pending
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

async fn serve(
    channel: std::os::unix::net::UnixStream,
    tool: Result<Arc<dyn Tool>, String>,
    max_frame: usize,
    spin: Duration,
) -> i32 {
    let stream = match channel
        .set_nonblocking(true)
        .and_then(|()| tokio::net::UnixStream::from_std(channel))
    {
        Ok(stream) => stream,
        Err(e) => {
            report(&format!("channel: {e}"));
            return EXIT_PROTOCOL;
        }
    };
    let (reader, mut writer) = stream.into_split();
    let mut frames = FrameReader::new(reader, max_frame);
    let (out, mut outgoing) = mpsc::unbounded_channel::<Vec<u8>>();
    tokio::spawn(async move {
        while let Some(frame) = outgoing.recv().await {
            if writer.write_all(&frame).await.is_err() {
                break;
            }
        }
    });
    let link = Arc::new(Link {
        out,
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        max_frame,
    });
    if link.send(&FromWorker::Ready {}, &[]).is_err() {
        return EXIT_PROTOCOL;
    }
    let mut running: Option<tokio::task::JoinHandle<()>> = None;
    // The context of the calls, as the host last sent it.
    let mut held: Option<Arc<CallContext>> = None;
    loop {
        // Everything the last frame set going (the call, its requests, the frames they send)
        // runs first; then the channel is polled for a while before the worker sleeps on it.
        let quick = if spin.is_zero() {
            Ok(None)
        } else {
            tokio::task::yield_now().await;
            crate::spin::next_within(&mut frames, spin)
        };
        let next = match quick {
            Ok(Some(body)) => Ok(Some(body)),
            Ok(None) => frames.next().await,
            Err(e) => Err(e),
        };
        let body = match next {
            Ok(Some(body)) => body,
            Ok(None) => return 0,
            Err(e) => {
                report(&format!("bad frame from the host: {e}"));
                return EXIT_PROTOCOL;
            }
        };
        let (message, blobs) = match decode::<ToWorker>(body) {
            Ok(decoded) => decoded,
            Err(e) => {
                report(&format!("bad message from the host: {e}"));
                return EXIT_PROTOCOL;
            }
        };
        match message {
            ToWorker::Call {
                seq,
                call_id,
                mut args,
                context,
                lifted,
            } => {
                if running.as_ref().is_some_and(|call| !call.is_finished()) {
                    report("the host started a call while one was running");
                    return EXIT_PROTOCOL;
                }
                if let Err(e) = crate::wire::restore_strings(&mut args, &lifted, &blobs) {
                    report(&format!("bad call from the host: {e}"));
                    return EXIT_PROTOCOL;
                }
                if let Some(context) = context {
                    held = Some(Arc::new(context));
                }
                let Some(context) = held.clone() else {
                    report("the host sent a call without a context, and none was held");
                    return EXIT_PROTOCOL;
                };
                link.forget_pending();
                running = Some(tokio::spawn(run_call(
                    Arc::clone(&link),
                    tool.clone(),
                    seq,
                    call_id,
                    args,
                    context,
                )));
            }
            ToWorker::Reply { id, result } => {
                // A reply to a request of an ended call has nobody waiting: dropped.
                let _ = link.answer(id, result, blobs);
            }
        }
    }
}

async fn run_call(
    link: Arc<Link>,
    tool: Result<Arc<dyn Tool>, String>,
    seq: u64,
    call_id: String,
    args: Value,
    context: Arc<CallContext>,
) {
    let result = match tool {
        Err(name) => Err(CapabilityError::not_available(format!(
            "tool {name} is not built into the capsule's worker binary"
        ))),
        Ok(tool) => {
            let ctx = remote_context(&link, seq, call_id, &context);
            let name = context.tool.clone();
            // A panic is caught as the registry catches one, in the call's own task.
            match std::panic::AssertUnwindSafe(tool.execute(args, &ctx))
                .catch_unwind()
                .await
            {
                Ok(result) => result,
                Err(payload) => Err(CapabilityError::failed(format!(
                    "tool {name} panicked in its capsule: {}",
                    capability_core::panic_message(payload)
                ))),
            }
        }
    };
    // The result's long strings ride in the frame's blob (docs/isolation-model.md, "The warm
    // path").
    let (result, lifted, blobs) = match result {
        Ok(mut value) => {
            let (lifted, blobs) = crate::wire::lift_strings(&mut value);
            (Ok(value), lifted, blobs)
        }
        Err(e) => (Err(WireError::from(&e)), Vec::new(), Vec::new()),
    };
    let done = FromWorker::Done {
        seq,
        result,
        lifted,
    };
    if let Err(e) = link.send(&done, &blobs) {
        // Too large a value: say so instead.
        let failed = FromWorker::Done {
            seq,
            result: Err(WireError::from(&CapabilityError::failed(format!(
                "the tool's result cannot be returned: {e}"
            )))),
            lifted: Vec::new(),
        };
        let _ = link.send(&failed, &[]);
    }
}

/// The proxy every scoped object of a call is: requests to the host, stamped with the call.
#[derive(Clone)]
struct Remote {
    link: Arc<Link>,
    seq: u64,
    declared: Arc<[SecretRef]>,
}

fn remote_context(
    link: &Arc<Link>,
    seq: u64,
    call_id: String,
    context: &CallContext,
) -> ToolContext {
    let declared: Arc<[SecretRef]> = context
        .secrets
        .iter()
        .flatten()
        .filter_map(|text| SecretRef::parse(text).ok())
        .collect();
    let remote = Arc::new(Remote {
        link: Arc::clone(link),
        seq,
        declared,
    });
    let mut ctx = ToolContext::new(context.session_id.clone(), context.working_dir.clone())
        .with_call(call_id, context.tool.clone());
    ctx.personality_id = context.personality_id.as_deref().map(Arc::from);
    if context.fetch {
        ctx = ctx.with_fetch(remote.clone());
    }
    if context.fs {
        ctx = ctx.with_fs(remote.clone());
    }
    if context.secrets.is_some() {
        ctx = ctx.with_secrets(remote.clone());
    }
    if context.process {
        ctx = ctx.with_process(remote.clone());
    }
    if context.attachments {
        ctx = ctx.with_attachments(remote.clone());
    }
    if context.kv {
        ctx = ctx.with_kv(remote);
    }
    ctx
}

impl Remote {
    /// Asks the host to perform `op` for the running call; the method's value from its answer.
    async fn call<O: Operation>(
        &self,
        op: O,
        blobs: &[Bytes],
    ) -> Result<O::Output, CapabilityError> {
        let (answer, blobs) = self.link.request(self.seq, op.into(), blobs).await?;
        let answer = serde_json::from_value(answer).map_err(|e| {
            CapabilityError::failed(format!("the host answered in an unexpected shape: {e}"))
        })?;
        O::output(answer, blobs)
    }
}

#[async_trait]
impl ScopedFs for Remote {
    async fn read(&self, path: &Path) -> Result<String, CapabilityError> {
        self.call(ops::FsRead { path: path.into() }, &[]).await
    }
    async fn read_bytes(&self, path: &Path) -> Result<Vec<u8>, CapabilityError> {
        self.call(ops::FsReadBytes { path: path.into() }, &[]).await
    }
    async fn write(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        let blob = Bytes::copy_from_slice(contents);
        self.call(ops::FsWrite { path: path.into() }, &[blob]).await
    }
    async fn append(&self, path: &Path, contents: &[u8]) -> Result<u64, CapabilityError> {
        let blob = Bytes::copy_from_slice(contents);
        self.call(ops::FsAppend { path: path.into() }, &[blob])
            .await
    }
    async fn exists(&self, path: &Path) -> Result<bool, CapabilityError> {
        self.call(ops::FsExists { path: path.into() }, &[]).await
    }
    async fn list(&self, path: &Path) -> Result<Vec<DirEntry>, CapabilityError> {
        self.call(ops::FsList { path: path.into() }, &[]).await
    }
    async fn mkdir(&self, path: &Path) -> Result<(), CapabilityError> {
        self.call(ops::FsMkdir { path: path.into() }, &[]).await
    }
    async fn metadata(&self, path: &Path) -> Result<FsMetadata, CapabilityError> {
        self.call(ops::FsMetadataOf { path: path.into() }, &[])
            .await
    }
    async fn remove(&self, path: &Path) -> Result<(), CapabilityError> {
        self.call(ops::FsRemove { path: path.into() }, &[]).await
    }
}

#[async_trait]
impl ScopedFetch for Remote {
    async fn fetch(
        &self,
        request: http::Request<Bytes>,
    ) -> Result<http::Response<Bytes>, CapabilityError> {
        let (op, body) = ops::Fetch::of(request);
        self.call(op, &[body]).await
    }
}

#[async_trait]
impl ScopedSecretsResolver for Remote {
    async fn resolve(&self, name: &str) -> Result<SecretString, CapabilityError> {
        let name = name.to_owned();
        self.call(ops::Secret { name }, &[]).await
    }
    fn declared(&self) -> &[SecretRef] {
        &self.declared
    }
}

#[async_trait]
impl ScopedProcess for Remote {
    async fn spawn(
        &self,
        binary: &str,
        args: &[String],
        options: SpawnOptions,
    ) -> Result<ProcessOutput, CapabilityError> {
        let (op, stdin) = ops::Spawn::of(binary, args, options);
        let blobs: Vec<Bytes> = stdin.into_iter().collect();
        self.call(op, &blobs).await
    }
}

#[async_trait]
impl KeyValueStore for Remote {
    async fn get(&self, key: &str) -> Result<Option<Value>, CapabilityError> {
        let key = key.to_owned();
        self.call(ops::KvGet { key }, &[]).await
    }
    async fn set(
        &self,
        key: &str,
        value: Value,
        ttl: Option<Duration>,
    ) -> Result<(), CapabilityError> {
        self.call(ops::KvSet::of(key, value, ttl), &[]).await
    }
    async fn delete(&self, key: &str) -> Result<bool, CapabilityError> {
        let key = key.to_owned();
        self.call(ops::KvDelete { key }, &[]).await
    }
    async fn list(&self, prefix: &str) -> Result<Vec<String>, CapabilityError> {
        let prefix = prefix.to_owned();
        self.call(ops::KvList { prefix }, &[]).await
    }
}

#[async_trait]
impl ScopedAttachments for Remote {
    async fn list(&self) -> Result<Vec<AttachmentInfo>, CapabilityError> {
        self.call(ops::AttachmentList {}, &[]).await
    }
    async fn read(&self, id: &str, offset: u64, len: usize) -> Result<Bytes, CapabilityError> {
        let id = id.to_owned();
        self.call(ops::AttachmentRead { id, offset, len }, &[])
            .await
    }
}

#[cfg(test)]
mod tests {
    //! The worker's loop as a host drives it, over a real socket pair: what it answers, and
    //! what it takes as the host breaking the protocol (the worker then ends; the host sees the
    //! channel close and fails the call, docs/isolation-model.md, "The warm path").
    use super::*;
    use capability_types::ToolCapabilities;
    use serde_json::json;
    use std::io::Read;
    use std::os::unix::net::UnixStream;
    use std::path::PathBuf;

    const MAX: usize = 1 << 20;

    /// Answers with the identity its call was given; `{"wait": true}` never answers.
    struct Whoami;

    #[async_trait]
    impl Tool for Whoami {
        fn name(&self) -> &str {
            "whoami"
        }
        fn description(&self) -> &str {
            "the call's identity"
        }
        fn input_schema(&self) -> Value {
            json!({"type": "object"})
        }
        fn capabilities(&self) -> ToolCapabilities {
            ToolCapabilities::none()
        }
        async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
            if args["wait"] == json!(true) {
                std::future::pending::<()>().await;
            }
            if args.get("echo").is_some() {
                return Ok(args);
            }
            Ok(json!({
                "session": ctx.session_id.as_ref(),
                "dir": ctx.working_dir.display().to_string(),
                "call": ctx.call_id,
                "fs": ctx.scoped_fs.is_some(),
            }))
        }
    }

    /// The host's end, and the worker's loop running on a thread of its own until it returns
    /// its exit status.
    fn start() -> (UnixStream, std::thread::JoinHandle<i32>) {
        let (host, worker) = UnixStream::pair().unwrap_or_else(|e| panic!("socket pair: {e}"));
        host.set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap_or_else(|e| panic!("{e}"));
        let serving = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("runtime: {e}"));
            let tool: Arc<dyn Tool> = Arc::new(Whoami);
            runtime.block_on(serve(worker, Ok(tool), MAX, Duration::ZERO))
        });
        let mut host = host;
        assert_eq!(receive(&mut host), Some(FromWorker::Ready {}));
        (host, serving)
    }

    /// Sends `message`, a call's long strings lifted into the blob as the host lifts them.
    fn send(host: &mut UnixStream, message: &ToWorker) {
        let mut message = message.clone();
        let mut blobs = Vec::new();
        if let ToWorker::Call { args, lifted, .. } = &mut message {
            (*lifted, blobs) = crate::wire::lift_strings(args);
        }
        let frame = encode(&message, &blobs, MAX).unwrap_or_else(|e| panic!("encode: {e}"));
        host.write_all(&frame)
            .unwrap_or_else(|e| panic!("write: {e}"));
    }

    /// The worker's next message; `None` when it closed the channel.
    fn receive(host: &mut UnixStream) -> Option<FromWorker> {
        receive_with_blobs(host).map(|(message, _)| message)
    }

    fn receive_with_blobs(host: &mut UnixStream) -> Option<(FromWorker, Vec<Bytes>)> {
        let mut prefix = [0u8; 4];
        match host.read_exact(&mut prefix) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return None,
            Err(e) => panic!("read: {e}"),
        }
        let mut body = vec![0u8; u32::from_be_bytes(prefix) as usize];
        host.read_exact(&mut body)
            .unwrap_or_else(|e| panic!("read: {e}"));
        Some(decode(Bytes::from(body)).unwrap_or_else(|e| panic!("decode: {e}")))
    }

    fn context(session: &str, dir: &str) -> CallContext {
        CallContext {
            session_id: session.into(),
            personality_id: Some("p".into()),
            tool: "whoami".into(),
            working_dir: PathBuf::from(dir),
            fetch: false,
            fs: true,
            secrets: None,
            process: false,
            kv: false,
            attachments: false,
        }
    }

    /// A call as the host sends it: without its long strings, which `send` puts in the blob.
    fn call(seq: u64, args: Value, context: Option<CallContext>) -> ToWorker {
        ToWorker::Call {
            seq,
            call_id: format!("c{seq}"),
            args,
            context,
            lifted: Vec::new(),
        }
    }

    /// The answer to call `seq`, its lifted strings put back as the host puts them.
    fn answer(host: &mut UnixStream, seq: u64) -> Value {
        answer_lifted(host, seq).0
    }

    /// The answer to call `seq` and how many of its strings rode in the blob.
    fn answer_lifted(host: &mut UnixStream, seq: u64) -> (Value, usize) {
        match receive_with_blobs(host) {
            Some((
                FromWorker::Done {
                    seq: done,
                    result: Ok(mut value),
                    lifted,
                },
                blobs,
            )) if done == seq => {
                crate::wire::restore_strings(&mut value, &lifted, &blobs)
                    .unwrap_or_else(|e| panic!("restore: {e}"));
                (value, lifted.len())
            }
            other => panic!("expected the answer to call {seq}, got {other:?}"),
        }
    }

    #[test]
    fn a_call_without_a_context_runs_in_the_one_held_from_the_call_before() {
        let (mut host, serving) = start();
        send(&mut host, &call(1, json!({}), Some(context("a", "/w/a"))));
        let first = answer(&mut host, 1);
        assert_eq!(
            first,
            json!({"session": "a", "dir": "/w/a", "call": "c1", "fs": true})
        );
        send(&mut host, &call(2, json!({}), None));
        assert_eq!(
            answer(&mut host, 2),
            json!({"session": "a", "dir": "/w/a", "call": "c2", "fs": true}),
            "the held context, with the call's own id"
        );
        send(&mut host, &call(3, json!({}), Some(context("b", "/w/b"))));
        assert_eq!(
            answer(&mut host, 3),
            json!({"session": "b", "dir": "/w/b", "call": "c3", "fs": true}),
            "a new context replaces the held one"
        );
        drop(host);
        assert_eq!(
            serving.join().ok(),
            Some(0),
            "a closed channel ends it cleanly"
        );
    }

    #[test]
    fn a_results_long_strings_ride_in_the_blob_and_come_back_whole() {
        let (mut host, serving) = start();
        let long = "é".repeat(300) + "\u{1F600}\"\\\n";
        let args = json!({
            "echo": {"short": "s", "long": long, "list": [long, 1, "t", {"deep": long}]},
            "after": "x".repeat(256),
        });
        send(&mut host, &call(1, args.clone(), Some(context("a", "/w"))));
        let (value, lifted) = answer_lifted(&mut host, 1);
        assert_eq!(
            value, args,
            "every string in its place, byte for byte, both ways"
        );
        assert_eq!(lifted, 4, "the four strings of 256 bytes or more");
        // A result without long strings carries no blob.
        send(&mut host, &call(2, json!({"echo": "short"}), None));
        assert_eq!(answer_lifted(&mut host, 2), (json!({"echo": "short"}), 0));
        drop(host);
        assert_eq!(serving.join().ok(), Some(0));
    }

    #[test]
    fn a_first_call_without_a_context_ends_the_worker_unanswered() {
        let (mut host, serving) = start();
        send(&mut host, &call(1, json!({}), None));
        assert_eq!(receive(&mut host), None, "no answer; the channel closes");
        assert_eq!(serving.join().ok(), Some(EXIT_PROTOCOL));
    }

    #[test]
    fn a_call_while_one_is_running_ends_the_worker() {
        let (mut host, serving) = start();
        send(
            &mut host,
            &call(1, json!({"wait": true}), Some(context("a", "/w"))),
        );
        send(&mut host, &call(2, json!({}), None));
        assert_eq!(receive(&mut host), None, "neither call is answered");
        assert_eq!(serving.join().ok(), Some(EXIT_PROTOCOL));
    }

    #[test]
    fn a_frame_that_is_not_a_message_for_the_worker_ends_it() {
        for header in [
            // The internally tagged form of earlier builds.
            r#"{"type":"call","seq":1,"call_id":"c","args":{},"context":null}"#,
            // A message the worker sends, not one it takes.
            r#"{"ready":{}}"#,
            // An unknown field.
            r#"{"call":{"seq":1,"call_id":"c","args":{},"context":null,"extra":1}}"#,
            "not json",
        ] {
            let (mut host, serving) = start();
            let mut frame = Vec::new();
            let body_len = 4 + 1 + header.len();
            frame.extend_from_slice(&(body_len as u32).to_be_bytes());
            frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
            frame.push(0);
            frame.extend_from_slice(header.as_bytes());
            host.write_all(&frame)
                .unwrap_or_else(|e| panic!("write: {e}"));
            assert_eq!(receive(&mut host), None, "{header}: no answer");
            assert_eq!(serving.join().ok(), Some(EXIT_PROTOCOL), "{header}");
        }
        // A call whose lifted strings do not fit its arguments, or a blob without them.
        for (header, blob) in [
            (
                r#"{"call":{"seq":1,"call_id":"c","args":{"a":""},"context":null,"lifted":[[0,9]]}}"#,
                &b"abc"[..],
            ),
            (
                r#"{"call":{"seq":1,"call_id":"c","args":{"a":""},"context":null}}"#,
                &b"abc"[..],
            ),
        ] {
            let (mut host, serving) = start();
            let body_len = 4 + 1 + 4 + header.len() + blob.len();
            let mut frame = (body_len as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&(header.len() as u32).to_be_bytes());
            frame.push(1);
            frame.extend_from_slice(&(blob.len() as u32).to_be_bytes());
            frame.extend_from_slice(header.as_bytes());
            frame.extend_from_slice(blob);
            host.write_all(&frame)
                .unwrap_or_else(|e| panic!("write: {e}"));
            assert_eq!(receive(&mut host), None, "{header}: no answer");
            assert_eq!(serving.join().ok(), Some(EXIT_PROTOCOL), "{header}");
        }
        // A frame whose lengths do not add up.
        let (mut host, serving) = start();
        host.write_all(&[0, 0, 0, 6, 0, 0, 0, 9, 0, b'{'])
            .unwrap_or_else(|e| panic!("write: {e}"));
        assert_eq!(receive(&mut host), None);
        assert_eq!(serving.join().ok(), Some(EXIT_PROTOCOL));
    }
}
