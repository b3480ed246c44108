//! Audit events: one per decision, to `tracing` (target `toolcap::audit`) and to an optional
//! [`AuditSink`]. Events carry names, codes and our own reasons — never arguments, tool error
//! text or secret values.

use std::fmt;
use std::io::Write;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use capability_types::{DenialCode, ErrorCode};
use serde::{Deserialize, Serialize};

/// What an event records.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum AuditKind {
    /// The call passed every check and its `execute` is about to run.
    ToolCalled,
    /// The call was refused before `execute` (unknown tool, toolset, availability, missing
    /// backend, cancelled batch, audit failure). A denied call never has a `ToolCalled`.
    ToolDenied,
    /// `execute` finished: with a value, an error, a timeout, a cancellation or a panic.
    ToolCompleted,
    /// An invocation constraint (`max_invocations`, `only_after`, `forbidden`) refused the call
    /// before `execute`. Like `ToolDenied`, never followed by `ToolCalled`.
    ConstraintDenied,
    /// The call matched an `[escalate]` pattern; the approval handler is asked. `reason` lists
    /// the subjects.
    EscalationAsked,
    /// The approval handler's answer: `reason` is `approved`, or why not.
    EscalationDecided,
}

/// One audit record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct AuditEvent {
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: u64,
    /// What happened.
    pub event: AuditKind,
    /// The session.
    pub session_id: String,
    /// The personality, if any.
    pub personality_id: Option<String>,
    /// The call's id.
    pub call_id: String,
    /// The tool's name as the call gave it.
    pub tool: String,
    /// For `ToolDenied` and unsuccessful `ToolCompleted`: the result code.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub code: Option<ErrorCode>,
    /// The policy code, when a policy refused something.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub denial_code: Option<DenialCode>,
    /// The registry's own reason for a `ToolDenied` (never the tool's error text).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For `ToolCompleted`: how long `execute` ran, in microseconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duration_us: Option<u64>,
    /// For `ToolCalled` and `ToolDenied`, when the registry is configured to record them: the
    /// call's arguments with credential-like and configured sensitive keys masked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// The per-call tool filter the call was made under, if any (docs/policy.md, "Per-call
    /// tool filters").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_filter: Option<crate::ToolFilter>,
    /// For `ToolCalled` of a tool that declares `attachments`: the ids of the attachments it
    /// was handed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attachments: Option<Vec<String>>,
}

impl AuditEvent {
    pub(crate) fn new(
        event: AuditKind,
        session_id: &str,
        personality_id: Option<&str>,
        call_id: &str,
        tool: &str,
    ) -> Self {
        let timestamp_ms = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
            .unwrap_or(0);
        Self {
            timestamp_ms,
            event,
            session_id: session_id.to_owned(),
            personality_id: personality_id.map(str::to_owned),
            call_id: call_id.to_owned(),
            tool: tool.to_owned(),
            code: None,
            denial_code: None,
            reason: None,
            duration_us: None,
            arguments: None,
            tool_filter: None,
            attachments: None,
        }
    }

    pub(crate) fn with_attachments(mut self, ids: Option<Vec<String>>) -> Self {
        self.attachments = ids;
        self
    }

    pub(crate) fn with_tool_filter(mut self, filter: Option<&crate::ToolFilter>) -> Self {
        self.tool_filter = filter.cloned();
        self
    }

    pub(crate) fn with_arguments(mut self, arguments: Option<serde_json::Value>) -> Self {
        self.arguments = arguments;
        self
    }

    pub(crate) fn with_outcome(
        mut self,
        code: Option<ErrorCode>,
        denial_code: Option<DenialCode>,
    ) -> Self {
        self.code = code;
        self.denial_code = denial_code;
        self
    }

    pub(crate) fn with_reason(mut self, reason: impl Into<String>) -> Self {
        self.reason = Some(reason.into());
        self
    }

    pub(crate) fn with_duration(mut self, d: Duration) -> Self {
        self.duration_us = Some(u64::try_from(d.as_micros()).unwrap_or(u64::MAX));
        self
    }
}

/// Writing an audit record failed.
#[derive(Debug, thiserror::Error)]
#[error("audit sink failed: {0}")]
pub struct AuditError(String);

impl AuditError {
    /// An error with a message.
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

/// Where audit events go besides `tracing`.
///
/// When recording a `ToolCalled` event fails, the registry refuses the call: a call that cannot
/// be audited does not run.
pub trait AuditSink: Send + Sync + fmt::Debug {
    /// Records one event. An error, or a panic (taken as an error: it goes no further than the
    /// registry), means the event was not recorded: a call whose start cannot be recorded does
    /// not run (docs/guarantees.md, G-REG-05).
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError>;
}

/// A writer whose data can be made durable (a file: `sync_data`). Implement it for the file
/// type the host opens; `capability-core` names no file type itself.
pub trait DurableWrite: Write + Send {
    /// Makes everything written so far durable.
    fn sync_data(&mut self) -> std::io::Result<()>;
}

impl DurableWrite for Vec<u8> {
    fn sync_data(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// When the JSON-lines sink makes events durable.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum FsyncPolicy {
    /// Flush to the writer after each event; durability is the OS's (the default).
    #[default]
    Flush,
    /// `sync_data` after each event: an event is on disk before the call it records runs.
    EveryEvent,
}

type Syncer<W> = fn(&mut W) -> std::io::Result<()>;

/// Appends each event as one JSON line to a writer and flushes it (and syncs it, with
/// [`FsyncPolicy::EveryEvent`]).
///
/// The sink holds no ambient authority: the caller opens the file (append mode is the
/// caller's choice) and hands it over.
pub struct JsonLinesAuditSink<W> {
    writer: Mutex<W>,
    sync: Option<Syncer<W>>,
}

impl<W: Write + Send> JsonLinesAuditSink<W> {
    /// A sink writing to `writer`, flushing after each event.
    pub fn new(writer: W) -> Self {
        Self {
            writer: Mutex::new(writer),
            sync: None,
        }
    }

    /// A sink with an explicit fsync policy.
    pub fn with_policy(writer: W, policy: FsyncPolicy) -> Self
    where
        W: DurableWrite,
    {
        let sync: Option<Syncer<W>> = match policy {
            FsyncPolicy::Flush => None,
            FsyncPolicy::EveryEvent => Some(<W as DurableWrite>::sync_data),
        };
        Self {
            writer: Mutex::new(writer),
            sync,
        }
    }

    /// Returns the writer.
    pub fn into_inner(self) -> W {
        self.writer
            .into_inner()
            .unwrap_or_else(PoisonError::into_inner)
    }
}

impl<W> fmt::Debug for JsonLinesAuditSink<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("JsonLinesAuditSink").finish_non_exhaustive()
    }
}

impl<W: Write + Send> AuditSink for JsonLinesAuditSink<W> {
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        let mut line = serde_json::to_vec(event).map_err(|e| AuditError::new(e.to_string()))?;
        line.push(b'\n');
        let mut w = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        w.write_all(&line)
            .and_then(|()| w.flush())
            .map_err(|e| AuditError::new(e.to_string()))?;
        if let Some(sync) = self.sync {
            sync(&mut w).map_err(|e| AuditError::new(format!("sync: {e}")))?;
        }
        Ok(())
    }
}

/// How much of `tail` (the end of a JSON-lines audit file) is whole lines: its length up to and
/// including its last newline, or `None` when it holds no newline at all.
///
/// A write to a file can be cut short when the writer is killed (the kernel stops between
/// pages once `SIGKILL` is pending), which leaves a partial last line. That line's event was
/// never acknowledged (its `record` had not returned, so the call it records did not go on),
/// and a host trims the file to its whole lines before appending again (docs/policy.md,
/// "Audit").
///
/// ```
/// use capability_core::whole_lines_len;
/// assert_eq!(whole_lines_len(b"{\"a\":1}\n{\"b\""), Some(8));
/// assert_eq!(whole_lines_len(b"{\"a\":1}\n"), Some(8));
/// assert_eq!(whole_lines_len(b"{\"tor"), None);
/// ```
pub fn whole_lines_len(tail: &[u8]) -> Option<usize> {
    tail.iter().rposition(|b| *b == b'\n').map(|i| i + 1)
}

/// How every line of a JSON-lines audit file begins: an [`AuditEvent`] is written with its
/// `timestamp_ms` first.
pub const EVENT_LINE_START: &str = "{\"timestamp_ms\":";

/// Whether `text` is where an event's line could begin: it begins as every event's line does
/// ([`EVENT_LINE_START`]) or, cut short, is the beginning of that. A host opening an audit file
/// reads its first line so, and cuts a partial last line only when it is so: a file that is not
/// an audit file (`--audit notes.md`) loses nothing (docs/policy.md, "Audit").
///
/// ```
/// use capability_core::begins_an_event;
/// assert!(begins_an_event(b"{\"timestamp_ms\":1795\n"));
/// assert!(begins_an_event(b"{\"times"));
/// assert!(!begins_an_event(b"my notes"));
/// assert!(!begins_an_event(b""));
/// ```
pub fn begins_an_event(text: &[u8]) -> bool {
    let start = EVENT_LINE_START.as_bytes();
    !text.is_empty() && (text.starts_with(start) || start.starts_with(text))
}

/// Keeps events in memory; for tests and for hosts that forward events themselves.
#[derive(Debug, Default)]
pub struct MemoryAuditSink {
    events: Mutex<Vec<AuditEvent>>,
}

impl MemoryAuditSink {
    /// An empty sink.
    pub fn new() -> Self {
        Self::default()
    }

    /// The events recorded so far.
    pub fn events(&self) -> Vec<AuditEvent> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl AuditSink for MemoryAuditSink {
    fn record(&self, event: &AuditEvent) -> Result<(), AuditError> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(event.clone());
        Ok(())
    }
}

/// Emits `event` to `tracing` and to `sink`.
pub(crate) fn emit(event: &AuditEvent, sink: Option<&dyn AuditSink>) -> Result<(), AuditError> {
    let code = event.code.map(ErrorCode::as_str);
    let denial = event.denial_code.map(DenialCode::as_str);
    match event.event {
        AuditKind::ToolDenied | AuditKind::ConstraintDenied => tracing::warn!(
            target: "toolcap::audit", event = if event.event == AuditKind::ToolDenied { "tool_denied" } else { "constraint_denied" }, session = %event.session_id,
            personality = event.personality_id.as_deref(), call_id = %event.call_id, tool = %event.tool,
            code, denial_code = denial, reason = event.reason.as_deref(),
        ),
        AuditKind::EscalationAsked | AuditKind::EscalationDecided => tracing::warn!(
            target: "toolcap::audit", event = if event.event == AuditKind::EscalationAsked { "escalation_asked" } else { "escalation_decided" },
            session = %event.session_id, personality = event.personality_id.as_deref(), call_id = %event.call_id,
            tool = %event.tool, reason = event.reason.as_deref(),
        ),
        AuditKind::ToolCalled => tracing::info!(
            target: "toolcap::audit", event = "tool_called", session = %event.session_id,
            personality = event.personality_id.as_deref(), call_id = %event.call_id, tool = %event.tool,
        ),
        AuditKind::ToolCompleted => tracing::info!(
            target: "toolcap::audit", event = "tool_completed", session = %event.session_id,
            personality = event.personality_id.as_deref(), call_id = %event.call_id, tool = %event.tool,
            code, denial_code = denial, duration_us = event.duration_us,
        ),
    }
    match sink {
        // A sink that panics has failed as one that returns an error has: the call it was
        // recording is refused or kept as for an error, and the panic goes no further (a sink
        // is the host's code, and a panic out of here would end the caller's task).
        Some(sink) => std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink.record(event)))
            .unwrap_or_else(|payload| {
                Err(AuditError::new(format!(
                    "the sink panicked: {}",
                    crate::panic_message(payload)
                )))
            }),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_event_line_begins_as_audit_files_are_recognised() {
        let event = AuditEvent::new(AuditKind::ToolCalled, "s", Some("p"), "c", "t");
        let line = serde_json::to_vec(&event).unwrap();
        assert!(
            line.starts_with(EVENT_LINE_START.as_bytes()),
            "{}",
            String::from_utf8_lossy(&line)
        );
        assert!(begins_an_event(&line));
    }

    #[test]
    fn json_lines_shape() {
        let sink = JsonLinesAuditSink::new(Vec::new());
        let e = AuditEvent::new(AuditKind::ToolDenied, "s1", Some("p"), "c1", "read_file")
            .with_outcome(Some(ErrorCode::Denied), Some(DenialCode::ToolNotInToolset))
            .with_reason("read_file is not in the toolset");
        sink.record(&e).unwrap();
        sink.record(&AuditEvent::new(
            AuditKind::ToolCalled,
            "s1",
            None,
            "c2",
            "t",
        ))
        .unwrap();
        let text = String::from_utf8(sink.into_inner()).unwrap();
        let lines: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert_eq!(lines[0]["event"], "tool_denied");
        assert_eq!(lines[0]["code"], "denied");
        assert_eq!(lines[0]["denial_code"], "TOOL_NOT_IN_TOOLSET");
        assert_eq!(lines[1]["event"], "tool_called");
        assert!(lines[1].get("code").is_none());
        assert_eq!(
            serde_json::from_value::<AuditEvent>(lines[0].clone()).unwrap(),
            e
        );
    }
}
