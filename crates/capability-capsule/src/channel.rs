//! The host's side of one worker: its process, its channel, and one call over it (the call's
//! frame, the tool's scoped-object requests answered through the call's own scoped objects,
//! the answer), with the polling wait of `spin.rs`.

use std::os::unix::process::ExitStatusExt;
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use bytes::Bytes;
use capability_types::{CapabilityError, ToolContext};
use futures_util::StreamExt;
use futures_util::stream::FuturesUnordered;
use serde_json::Value;

use crate::ring::{RingReader, RingWriter};
use crate::wire::{
    CallContext, FrameError, FrameReader, FromWorker, ToWorker, WireError, decode, encode_into,
    restore_strings, reuse, write_frame,
};

/// How many of one call's requests the host performs at once (docs/isolation-model.md,
/// "Limits"). A tool in a capsule, or a worker taken over, can ask for as many fetches, reads or
/// children at once as it likes; past this many, the host takes the next request from the
/// channel only when one of them has finished, and the worker waits to send it.
pub const MAX_REQUESTS_IN_FLIGHT: usize = 64;

/// How a call ended without an answer from its worker; either way the worker is lost and must
/// be dropped.
pub(crate) enum Lost {
    /// The call's frame could not be written to the channel (the worker had died, or was
    /// killed, since its last call), so the worker never saw the call: its arguments come back
    /// whole, for another worker.
    Undelivered(Value, FrameError),
    /// The worker saw the call and may have run some of it.
    Midway(FrameError),
}

impl From<FrameError> for Lost {
    fn from(e: FrameError) -> Self {
        Lost::Midway(e)
    }
}

/// One worker process and its channel.
pub(crate) struct Worker {
    /// Killed when dropped (`kill_on_drop`).
    pub(crate) child: tokio::process::Child,
    pub(crate) writer: RingWriter,
    /// Read in place (cancel-safe), without a task and a channel in between.
    pub(crate) frames: FrameReader<RingReader>,
    pub(crate) stderr: Arc<Mutex<Vec<u8>>>,
    /// Keeps the end of the worker's stderr; ends at end-of-file.
    pub(crate) stderr_task: Option<tokio::task::JoinHandle<()>>,
    pub(crate) seq: u64,
    pub(crate) max_frame: usize,
    /// The runtime whose reactor its channel is registered with.
    pub(crate) runtime: Option<tokio::runtime::Id>,
    /// The context the worker holds: the last one sent, which later calls with the same one
    /// do not send again.
    pub(crate) context: Option<CallContext>,
    /// The frame being sent, its buffer kept for the next one (up to
    /// [`KEPT_BUFFER`](crate::wire::KEPT_BUFFER) bytes).
    pub(crate) out: Vec<u8>,
}

impl Worker {
    /// The session of the calls this worker has served (it serves one: `Capsule::take_idle`);
    /// `None` before its first call.
    pub(crate) fn session(&self) -> Option<&str> {
        self.context.as_ref().map(|held| held.session_id.as_str())
    }

    /// The next message. Cancel-safe. End of file is [`FrameError::Truncated`]: a worker never
    /// closes its channel on purpose while the host holds it.
    pub(crate) async fn receive(&mut self) -> Result<(FromWorker, Vec<Bytes>), FrameError> {
        match self.frames.next().await? {
            Some(body) => decode(body),
            None => Err(FrameError::Truncated),
        }
    }

    pub(crate) async fn send(
        &mut self,
        message: &ToWorker,
        blobs: &[Bytes],
    ) -> Result<(), FrameError> {
        self.out.clear();
        encode_into(&mut self.out, message, blobs, self.max_frame)?;
        let written = write_frame(&mut self.writer, &self.out).await;
        reuse(&mut self.out);
        written
    }

    /// Runs one call. `Err`: the worker is lost (and must be dropped). While none of the
    /// call's requests is being served, the channel is polled for up to `spin` before the task
    /// sleeps on it.
    pub(crate) async fn call(
        &mut self,
        args: Value,
        ctx: &ToolContext,
        spin: Duration,
    ) -> Result<Result<Value, CapabilityError>, Lost> {
        self.seq += 1;
        let seq = self.seq;
        let fresh = match &self.context {
            Some(held) if held.describes(ctx) => None,
            _ => Some(call_context(ctx)),
        };
        // Written compactly, long strings cost a copy where they are: none is lifted into a
        // blob (docs/isolation-model.md, "The wire format").
        let mut call = ToWorker::Call {
            seq,
            call_id: ctx.call_id.clone(),
            args,
            context: fresh,
            lifted: Vec::new(),
        };
        if let Err(error) = self.send(&call, &[]).await {
            // A frame that failed to go out whole was never run: the worker acts on a frame
            // only once it has all of it.
            return Err(match error {
                // The worker is gone; one that broke the protocol (a counter out of range) is
                // not given the benefit of the doubt.
                FrameError::Io(io) if io.kind() != std::io::ErrorKind::InvalidData => {
                    undelivered(call, FrameError::Io(io))
                }
                error => Lost::Midway(error),
            });
        }
        if let ToWorker::Call { context, .. } = &mut call
            && let Some(sent) = context.take()
        {
            self.context = Some(sent);
        }
        // Made with the call's first request: a call that asks nothing of the host allocates
        // no set.
        let mut pending = None;
        // Whether anything came back for this call: until then, a worker that is found gone
        // having left the call's frame untaken never acted on it.
        let mut heard = false;
        loop {
            let quick = if pending.as_ref().is_none_or(FuturesUnordered::is_empty) {
                crate::spin::next_within(&mut self.frames, spin)?
            } else {
                None
            };
            // At the bound, the next request waits in the channel until one has finished.
            let full = pending
                .as_ref()
                .is_some_and(|p: &FuturesUnordered<_>| p.len() >= MAX_REQUESTS_IN_FLIGHT);
            let message = match quick {
                Some(body) => decode(body),
                None => tokio::select! {
                    message = self.receive(), if !full => message,
                    Some((id, result)) = next_done(&mut pending) => {
                        self.reply(id, result).await?;
                        continue;
                    }
                },
            };
            if !heard && matches!(message, Err(FrameError::Truncated)) && self.writer.untaken() {
                // Gone without taking the call's frame whole (it died or was killed while idle,
                // before it saw the call): a worker acts on a frame only once it has all of it,
                // and it asked nothing of the host, so the call never ran.
                return Err(undelivered(call, FrameError::Truncated));
            }
            heard = true;
            match message {
                Err(e) => return Err(e.into()),
                Ok((FromWorker::Request { id, seq: of, op }, blobs)) => {
                    if of == seq {
                        pending
                            .get_or_insert_with(FuturesUnordered::new)
                            .push(async move { (id, op.perform(ctx, blobs).await) });
                    } else {
                        let stale = CapabilityError::failed(
                            "a request of a call that has ended is not answered",
                        );
                        self.reply(id, Err(stale)).await?;
                    }
                }
                Ok((
                    FromWorker::Done {
                        seq: of,
                        result,
                        lifted,
                    },
                    blobs,
                )) if of == seq => {
                    return match result {
                        Ok(mut value) => {
                            restore_strings(&mut value, &lifted, &blobs)?;
                            Ok(Ok(value))
                        }
                        Err(e) if lifted.is_empty() && blobs.is_empty() => {
                            Ok(Err(CapabilityError::from(e)))
                        }
                        Err(_) => Err(Lost::Midway(FrameError::Malformed(
                            "lifted strings: an error carries none".to_owned(),
                        ))),
                    };
                }
                Ok((other, _)) => {
                    return Err(Lost::Midway(FrameError::Malformed(format!(
                        "the worker sent {} during call {seq}",
                        message_name(&other)
                    ))));
                }
            }
        }
    }

    async fn reply(
        &mut self,
        id: u64,
        result: Result<(Value, Vec<Bytes>), CapabilityError>,
    ) -> Result<(), FrameError> {
        let (result, blobs) = match result {
            Ok((answer, blobs)) => (Ok(answer), blobs),
            Err(e) => (Err(WireError::from(&e)), Vec::new()),
        };
        let message = ToWorker::Reply { id, result };
        match self.send(&message, &blobs).await {
            Err(FrameError::TooLarge { len, max }) => {
                let refused = CapabilityError::invalid_input(format!(
                    "the answer ({len} bytes) exceeds the capsule's frame limit of {max} bytes"
                ));
                self.send(
                    &ToWorker::Reply {
                        id,
                        result: Err(WireError::from(&refused)),
                    },
                    &[],
                )
                .await
            }
            sent => sent,
        }
    }

    /// What became of a lost worker: ends it if it still runs, and names its exit and the end
    /// of what it wrote to stderr.
    pub(crate) async fn describe_loss(&mut self, lost: &FrameError) -> String {
        let status = match tokio::time::timeout(Duration::from_millis(500), self.child.wait()).await
        {
            Ok(Ok(status)) => Some(status),
            _ => {
                let _ = self.child.start_kill();
                self.child.wait().await.ok()
            }
        };
        let ended = match status {
            Some(status) => describe_status(status),
            None => "the worker could not be reaped".to_owned(),
        };
        let mut why = match lost {
            FrameError::Truncated => ended,
            other => format!("{other}; {ended}"),
        };
        // The worker is gone, so its stderr ends: let the reader take the last lines.
        if let Some(task) = self.stderr_task.as_mut() {
            let _ = tokio::time::timeout(Duration::from_secs(1), task).await;
        }
        let tail = self
            .stderr
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let tail = String::from_utf8_lossy(&tail);
        let tail: String = tail
            .trim()
            .chars()
            .map(|c| if c.is_control() { ' ' } else { c })
            .collect();
        if !tail.is_empty() {
            why.push_str("; stderr: ");
            why.push_str(&tail);
        }
        why
    }
}

/// The next of `pending`'s operations to finish; never ready while none runs.
async fn next_done<F: Future>(pending: &mut Option<FuturesUnordered<F>>) -> Option<F::Output> {
    match pending {
        Some(running) if !running.is_empty() => running.next().await,
        _ => std::future::pending().await,
    }
}

/// A call the worker never acted on, its arguments given back for another worker.
fn undelivered(call: ToWorker, error: FrameError) -> Lost {
    match call {
        ToWorker::Call { args, .. } => Lost::Undelivered(args, error),
        _ => Lost::Midway(error),
    }
}

fn message_name(message: &FromWorker) -> &'static str {
    match message {
        FromWorker::Ready {} => "ready",
        FromWorker::Refused { .. } => "refused",
        FromWorker::Request { .. } => "a request",
        FromWorker::Done { .. } => "the result of another call",
    }
}

fn describe_status(status: ExitStatus) -> String {
    if let Some(signal) = status.signal() {
        let name = match signal {
            libc::SIGKILL => " (SIGKILL: killed, or out of CPU time or memory)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGABRT => " (SIGABRT: aborted, e.g. out of memory)",
            libc::SIGSYS => " (SIGSYS: a forbidden system call)",
            libc::SIGXCPU => " (SIGXCPU: out of CPU time)",
            libc::SIGBUS => " (SIGBUS)",
            _ => "",
        };
        format!("the worker was killed by signal {signal}{name}")
    } else {
        match status.code() {
            Some(code) => format!("the worker exited with status {code}"),
            None => "the worker ended".to_owned(),
        }
    }
}

pub(crate) fn call_context(ctx: &ToolContext) -> CallContext {
    CallContext {
        session_id: ctx.session_id.to_string(),
        personality_id: ctx.personality_id.as_deref().map(str::to_owned),
        tool: ctx.tool.clone(),
        working_dir: ctx.working_dir.to_path_buf(),
        fetch: ctx.scoped_fetch.is_some(),
        fs: ctx.scoped_fs.is_some(),
        secrets: ctx
            .secrets_resolver
            .as_ref()
            .map(|s| s.declared().iter().map(|r| r.as_str().to_owned()).collect()),
        process: ctx.scoped_process.is_some(),
        kv: ctx.kv_store.is_some(),
        attachments: ctx.scoped_attachments.is_some(),
    }
}

impl CallContext {
    /// Whether this is what [`call_context`] makes of `ctx`, compared in place.
    fn describes(&self, ctx: &ToolContext) -> bool {
        let secrets_match = match (&self.secrets, &ctx.secrets_resolver) {
            (None, None) => true,
            (Some(held), Some(resolver)) => {
                let declared = resolver.declared();
                held.len() == declared.len()
                    && held.iter().zip(declared).all(|(h, d)| h == d.as_str())
            }
            _ => false,
        };
        self.session_id == *ctx.session_id
            && self.personality_id.as_deref() == ctx.personality_id.as_deref()
            && self.tool == ctx.tool
            && self.working_dir == *ctx.working_dir
            && self.fetch == ctx.scoped_fetch.is_some()
            && self.fs == ctx.scoped_fs.is_some()
            && secrets_match
            && self.process == ctx.scoped_process.is_some()
            && self.kv == ctx.kv_store.is_some()
            && self.attachments == ctx.scoped_attachments.is_some()
    }
}
