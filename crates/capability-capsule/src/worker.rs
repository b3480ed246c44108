//! The worker side: confine this process, then run calls whose every scoped-object call is a
//! request to the host.

use std::collections::HashMap;
use std::ffi::OsStr;
use std::future::Future;
use std::io::Write;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Poll, Waker};
use std::time::Duration;

use async_trait::async_trait;
use bytes::Bytes;
use capability_sandbox::{ResourceLimits, SandboxPolicy};
use capability_types::{
    AttachmentInfo, CancellationToken, CapabilityError, DirEntry, FsMetadata, KeyValueStore,
    ProcessOutput, ScopedAttachments, ScopedFetch, ScopedFs, ScopedProcess, ScopedSecretsResolver,
    SecretRef, SecretString, SpawnOptions, Tool, ToolContext,
};
use futures_util::FutureExt;
use serde_json::Value;
use tokio::sync::oneshot;

use crate::ops::{self, Operation};
use crate::ring::RingWriter;
use crate::sys;
use crate::wire::{
    CallContext, FrameError, FrameReader, FromWorker, Op, ToWorker, WireError, WorkerSettings,
    decode, encode, encode_into, reuse,
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
/// Reads this process's arguments. As a worker it confines the process itself, speaks frames over
/// the channel its host passed (descriptors 3 and 4, see [`ring`](crate::ring)) and exits the
/// process.
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
    // The channel: its socket on descriptor 3, its shared memory on 4, mapped and then closed.
    let channel = sys::adopt_channel().and_then(|socket| {
        let shared = sys::adopt_shared()?;
        crate::ring::adopt(socket, std::os::fd::AsFd::as_fd(&shared))
    });
    let channel = match channel {
        Ok(channel) => channel,
        Err(e) => {
            report(&format!("the channel: {e}"));
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
        if let (Ok(frame), Ok(mut channel)) = (
            encode(&refused, &[], settings.max_frame),
            channel.blocking(),
        ) {
            channel.set_timeout(Some(Duration::from_secs(5)));
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

/// The worker's end of the channel: queues frames for the serving loop to write, matches
/// replies to requests.
struct Link {
    outbox: Mutex<Outbox>,
    pending: Mutex<HashMap<u64, oneshot::Sender<Reply>>>,
    next_id: AtomicU64,
    max_frame: usize,
}

/// Frames queued for the host, written by the serving loop ([`serve`]) and by nobody else, so
/// they go out whole and in order.
#[derive(Default)]
struct Outbox {
    bytes: Vec<u8>,
    /// How much of `bytes` the socket has taken.
    written: usize,
    /// The serving loop, while it waits with nothing queued.
    waiting: Option<Waker>,
}

impl Link {
    fn send(&self, message: &FromWorker, blobs: &[Bytes]) -> Result<(), CapabilityError> {
        let mut outbox = self.outbox.lock().unwrap_or_else(PoisonError::into_inner);
        // Appended to what is queued, into the buffer kept from earlier frames.
        encode_into(&mut outbox.bytes, message, blobs, self.max_frame)
            .map_err(|e| CapabilityError::invalid_input(format!("cannot send to the host: {e}")))?;
        // A frame queued from another task (a tool's own) must wake the loop that writes it.
        if let Some(waker) = outbox.waiting.take() {
            waker.wake();
        }
        Ok(())
    }

    /// Ready as soon as a frame is queued.
    fn queued(&self) -> impl Future<Output = ()> + '_ {
        std::future::poll_fn(|cx| {
            let mut outbox = self.outbox.lock().unwrap_or_else(PoisonError::into_inner);
            if outbox.written < outbox.bytes.len() {
                Poll::Ready(())
            } else {
                outbox.waiting = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }

    /// Writes what is queued, as much as the ring has room for without waiting; an error when
    /// the channel is broken.
    fn flush(&self, writer: &mut RingWriter) -> std::io::Result<Flushed> {
        let mut outbox = self.outbox.lock().unwrap_or_else(PoisonError::into_inner);
        if outbox.bytes.is_empty() {
            return Ok(Flushed::Nothing);
        }
        while outbox.written < outbox.bytes.len() {
            let at = outbox.written;
            match writer.try_write(&outbox.bytes[at..]) {
                Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
                Ok(n) => outbox.written += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    return Ok(Flushed::Blocked);
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        // Kept for the next frame, unless a large answer's: that is not held while the worker
        // idles.
        reuse(&mut outbox.bytes);
        outbox.written = 0;
        Ok(Flushed::Sent)
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

/// What a [`Link::flush`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushed {
    /// Nothing was queued.
    Nothing,
    /// Everything queued went out.
    Sent,
    /// The ring took only part of it: the rest waits until it has room.
    Blocked,
}

/// The running call, polled by the serving loop itself.
type Running = Pin<Box<dyn Future<Output = ()> + Send>>;

/// What the serving loop woke for.
enum Event {
    /// The running call finished (its answer is queued).
    Finished,
    /// A frame was queued for the host.
    Queued,
    /// The ring has room again.
    Writable(std::io::Result<()>),
    /// The host's next frame, or the end of the channel.
    Frame(Result<Option<Bytes>, FrameError>),
}

/// Serves calls until the host closes the channel (0) or breaks the protocol
/// ([`EXIT_PROTOCOL`]).
///
/// One task does everything: it polls the running call where it is (no task per call), writes
/// the frames the call queues without a writer task in between, and reads the host's frames.
/// After it has sent something, whose answer the host sends back, it polls the channel for up
/// to `spin` before it sleeps on it (docs/isolation-model.md, "The warm path").
async fn serve(
    channel: crate::ring::Unregistered,
    tool: Result<Arc<dyn Tool>, String>,
    max_frame: usize,
    spin: Duration,
) -> i32 {
    let (reader, mut writer) = match channel.register() {
        Ok(halves) => halves,
        Err(e) => {
            report(&format!("channel: {e}"));
            return EXIT_PROTOCOL;
        }
    };
    let mut frames = FrameReader::new(reader, max_frame);
    let link = Arc::new(Link {
        outbox: Mutex::new(Outbox::default()),
        pending: Mutex::new(HashMap::new()),
        next_id: AtomicU64::new(1),
        max_frame,
    });
    if link.send(&FromWorker::Ready {}, &[]).is_err() {
        return EXIT_PROTOCOL;
    }
    let mut running: Option<Running> = None;
    // The context of the calls, as the host last sent it, ready to be handed to a call.
    let mut held: Option<Arc<Template>> = None;
    loop {
        let flushed = match link.flush(&mut writer) {
            Ok(flushed) => flushed,
            // The host is gone: nobody to answer.
            Err(_) => return 0,
        };
        let blocked = flushed == Flushed::Blocked;
        // The host answers what was just sent: its frame is likely moments away.
        let quick = if flushed == Flushed::Sent && !spin.is_zero() {
            crate::spin::next_within(&mut frames, spin).transpose()
        } else {
            None
        };
        let event = match quick {
            Some(frame) => Event::Frame(frame.map(Some)),
            None => tokio::select! {
                biased;
                () = poll_running(&mut running) => Event::Finished,
                () = link.queued(), if !blocked => Event::Queued,
                ready = writer.writable(), if blocked => Event::Writable(ready),
                frame = frames.next() => Event::Frame(frame),
            },
        };
        let body = match event {
            Event::Finished => {
                running = None;
                continue;
            }
            Event::Queued => continue,
            Event::Writable(Ok(())) => continue,
            Event::Writable(Err(_)) | Event::Frame(Ok(None)) => return 0,
            Event::Frame(Err(e)) => {
                report(&format!("bad frame from the host: {e}"));
                return EXIT_PROTOCOL;
            }
            Event::Frame(Ok(Some(body))) => body,
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
                if running.is_some() {
                    report("the host started a call while one was running");
                    return EXIT_PROTOCOL;
                }
                if let Err(e) = crate::wire::restore_strings(&mut args, &lifted, &blobs) {
                    report(&format!("bad call from the host: {e}"));
                    return EXIT_PROTOCOL;
                }
                if let Some(context) = context {
                    held = Some(Arc::new(Template::new(context)));
                }
                let Some(template) = held.clone() else {
                    report("the host sent a call without a context, and none was held");
                    return EXIT_PROTOCOL;
                };
                link.forget_pending();
                running = Some(Box::pin(run_call(
                    Arc::clone(&link),
                    tool.clone(),
                    seq,
                    call_id,
                    args,
                    template,
                )));
            }
            ToWorker::Reply { id, result } => {
                // A reply to a request of an ended call has nobody waiting: dropped.
                let _ = link.answer(id, result, blobs);
            }
        }
    }
}

/// Ready when the running call has finished; never while none runs.
fn poll_running(running: &mut Option<Running>) -> impl Future<Output = ()> + '_ {
    std::future::poll_fn(move |cx| match running.as_mut() {
        Some(call) => call.as_mut().poll(cx),
        None => Poll::Pending,
    })
}

async fn run_call(
    link: Arc<Link>,
    tool: Result<Arc<dyn Tool>, String>,
    seq: u64,
    call_id: String,
    args: Value,
    template: Arc<Template>,
) {
    let result = match tool {
        Err(name) => Err(CapabilityError::not_available(format!(
            "tool {name} is not built into the capsule's worker binary"
        ))),
        Ok(tool) => {
            let ctx = template.context(&link, seq, call_id);
            let name = &template.tool;
            // A panic is caught around the tool's future, as the registry catches one: it ends the
            // call with an error, never the worker's loop that polls it.
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
    // Written compactly: the result's long strings need no blob (docs/isolation-model.md,
    // "The wire format").
    let done = FromWorker::Done {
        seq,
        result: result.map_err(|e| WireError::from(&e)),
        lifted: Vec::new(),
    };
    if let Err(e) = link.send(&done, &[]) {
        // Too large or too deeply nested a value: say so instead.
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

/// What the calls of one context share, built once when the host sends the context (it sends
/// one only when it changes): a call adds its id, its own token and its own proxy, stamped with
/// its number so that a proxy a tool kept past its call is never taken for a later call's.
struct Template {
    session_id: Arc<str>,
    personality_id: Option<Arc<str>>,
    tool: Arc<str>,
    working_dir: Arc<Path>,
    declared: Arc<[SecretRef]>,
    // Which scoped objects the calls have.
    fetch: bool,
    fs: bool,
    secrets: bool,
    process: bool,
    attachments: bool,
    kv: bool,
}

impl Template {
    /// Each of the context's strings kept once, in an `Arc` its calls share.
    fn new(context: CallContext) -> Self {
        Self {
            declared: (context.secrets.iter().flatten())
                .filter_map(|text| SecretRef::parse(text).ok())
                .collect(),
            secrets: context.secrets.is_some(),
            session_id: Arc::from(context.session_id),
            personality_id: context.personality_id.map(Arc::from),
            tool: Arc::from(context.tool),
            working_dir: Arc::from(context.working_dir),
            fetch: context.fetch,
            fs: context.fs,
            process: context.process,
            attachments: context.attachments,
            kv: context.kv,
        }
    }

    /// The context of call `seq`, its scoped objects proxies to the host.
    fn context(&self, link: &Arc<Link>, seq: u64, call_id: String) -> ToolContext {
        let remote = Arc::new(Remote {
            link: Arc::clone(link),
            seq,
            declared: Arc::clone(&self.declared),
        });
        // A token of its own: nothing in the worker cancels it, and a tool that cancels its own
        // reaches no other call.
        let mut ctx = ToolContext::shared(
            Arc::clone(&self.session_id),
            Arc::clone(&self.working_dir),
            CancellationToken::new(),
        )
        .with_call(call_id, &*self.tool);
        ctx.personality_id.clone_from(&self.personality_id);
        if self.fetch {
            ctx.scoped_fetch = Some(remote.clone());
        }
        if self.fs {
            ctx.scoped_fs = Some(remote.clone());
        }
        if self.secrets {
            ctx.secrets_resolver = Some(remote.clone());
        }
        if self.process {
            ctx.scoped_process = Some(remote.clone());
        }
        if self.attachments {
            ctx.scoped_attachments = Some(remote.clone());
        }
        if self.kv {
            ctx.kv_store = Some(remote);
        }
        ctx
    }
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
