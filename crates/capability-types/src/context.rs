//! The per-call context a tool receives: identity, working directory, cancellation, and the
//! scoped objects its declaration and the personality allow.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::attachments::ScopedAttachments;
use crate::cancel::CancellationToken;
use crate::error::CapabilityError;
use crate::scoped::{KeyValueStore, ScopedFetch, ScopedFs, ScopedProcess, ScopedSecretsResolver};

/// Everything a tool gets for one call.
///
/// The registry fills the scoped fields from the resolved capabilities: a field is `Some` only
/// when the tool declared that category and a backend for it is configured (otherwise the call
/// never reaches the tool). Plugin authors testing a tool by hand build one with
/// [`ToolContext::new`] and the `with_*` methods.
///
/// ```
/// use capability_types::{ErrorCode, ToolContext};
/// let ctx = ToolContext::new("session-1", "/srv/work").with_call("call-1", "word_count");
/// assert_eq!(ctx.tool, "word_count");
/// // No scoped object for a category the tool did not declare.
/// let missing = ctx.fs().err().unwrap();
/// assert_eq!(missing.result_code(), ErrorCode::NotAvailable);
/// ```
#[derive(Clone)]
#[non_exhaustive]
pub struct ToolContext {
    /// The agent session this call belongs to.
    pub session_id: Arc<str>,
    /// The active personality, if any.
    pub personality_id: Option<Arc<str>>,
    /// The id of this call within its batch.
    pub call_id: String,
    /// The tool's name.
    pub tool: String,
    /// Relative paths resolve against this directory, never the process's.
    pub working_dir: Arc<Path>,
    /// The batch's token: cancelled when the batch is cancelled. A call that times out is
    /// dropped at its next `.await` and never polled again.
    pub cancellation: CancellationToken,
    /// HTTP(S), limited to the resolved hosts (`network`).
    pub scoped_fetch: Option<Arc<dyn ScopedFetch>>,
    /// Files, limited to the resolved reach (`fs_reach`).
    pub scoped_fs: Option<Arc<dyn ScopedFs>>,
    /// Secrets, limited to the declared refs (`secrets`).
    pub secrets_resolver: Option<Arc<dyn ScopedSecretsResolver>>,
    /// Child processes, limited to the resolved binaries (`process`).
    pub scoped_process: Option<Arc<dyn ScopedProcess>>,
    /// Key-value state in the declared scope's namespace (`storage`).
    pub kv_store: Option<Arc<dyn KeyValueStore>>,
    /// The call's attachments of the kinds allowed (`attachments`).
    pub scoped_attachments: Option<Arc<dyn ScopedAttachments>>,
}

impl ToolContext {
    /// A context with no scoped objects.
    pub fn new(session_id: impl Into<Arc<str>>, working_dir: impl AsRef<Path>) -> Self {
        Self::shared(
            session_id.into(),
            Arc::from(working_dir.as_ref()),
            CancellationToken::new(),
        )
    }

    /// [`new`](Self::new) from values a host already shares between the calls of a batch: no
    /// copy of the session, the directory or the token.
    pub fn shared(
        session_id: Arc<str>,
        working_dir: Arc<Path>,
        cancellation: CancellationToken,
    ) -> Self {
        Self {
            session_id,
            personality_id: None,
            call_id: String::new(),
            tool: String::new(),
            working_dir,
            cancellation,
            scoped_fetch: None,
            scoped_fs: None,
            secrets_resolver: None,
            scoped_process: None,
            kv_store: None,
            scoped_attachments: None,
        }
    }

    /// Sets the call id and tool name.
    pub fn with_call(mut self, call_id: impl Into<String>, tool: impl Into<String>) -> Self {
        self.call_id = call_id.into();
        self.tool = tool.into();
        self
    }
    /// Sets the fetcher.
    pub fn with_fetch(mut self, fetch: Arc<dyn ScopedFetch>) -> Self {
        self.scoped_fetch = Some(fetch);
        self
    }
    /// Sets the file system view.
    pub fn with_fs(mut self, fs: Arc<dyn ScopedFs>) -> Self {
        self.scoped_fs = Some(fs);
        self
    }
    /// Sets the secrets resolver.
    pub fn with_secrets(mut self, secrets: Arc<dyn ScopedSecretsResolver>) -> Self {
        self.secrets_resolver = Some(secrets);
        self
    }
    /// Sets the process spawner.
    pub fn with_process(mut self, process: Arc<dyn ScopedProcess>) -> Self {
        self.scoped_process = Some(process);
        self
    }
    /// Sets the key-value store.
    pub fn with_kv(mut self, kv: Arc<dyn KeyValueStore>) -> Self {
        self.kv_store = Some(kv);
        self
    }

    /// Sets the attachments.
    pub fn with_attachments(mut self, attachments: Arc<dyn ScopedAttachments>) -> Self {
        self.scoped_attachments = Some(attachments);
        self
    }

    /// The fetcher, or `not_available` naming the undeclared `network` capability.
    pub fn fetch(&self) -> Result<&dyn ScopedFetch, CapabilityError> {
        self.scoped_fetch
            .as_deref()
            .ok_or_else(|| self.undeclared("network"))
    }
    /// The file system view, or `not_available` naming the undeclared `fs_reach` capability.
    pub fn fs(&self) -> Result<&dyn ScopedFs, CapabilityError> {
        self.scoped_fs
            .as_deref()
            .ok_or_else(|| self.undeclared("fs_reach"))
    }
    /// The secrets resolver, or `not_available` naming the undeclared `secrets` capability.
    pub fn secrets(&self) -> Result<&dyn ScopedSecretsResolver, CapabilityError> {
        self.secrets_resolver
            .as_deref()
            .ok_or_else(|| self.undeclared("secrets"))
    }
    /// The spawner, or `not_available` naming the undeclared `process` capability.
    pub fn process(&self) -> Result<&dyn ScopedProcess, CapabilityError> {
        self.scoped_process
            .as_deref()
            .ok_or_else(|| self.undeclared("process"))
    }
    /// The key-value store, or `not_available` naming the undeclared `storage` capability.
    pub fn kv(&self) -> Result<&dyn KeyValueStore, CapabilityError> {
        self.kv_store
            .as_deref()
            .ok_or_else(|| self.undeclared("storage"))
    }

    /// The call's attachments, or `not_available` naming the undeclared `attachments`
    /// capability.
    pub fn attachments(&self) -> Result<&dyn ScopedAttachments, CapabilityError> {
        self.scoped_attachments
            .as_deref()
            .ok_or_else(|| self.undeclared("attachments"))
    }

    fn undeclared(&self, capability: &str) -> CapabilityError {
        CapabilityError::not_available(format!(
            "tool {} has no {capability} capability in this call (not declared, or no backend)",
            if self.tool.is_empty() {
                "<unnamed>"
            } else {
                &self.tool
            }
        ))
    }
}

impl fmt::Debug for ToolContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ToolContext")
            .field("session_id", &self.session_id)
            .field("personality_id", &self.personality_id)
            .field("call_id", &self.call_id)
            .field("tool", &self.tool)
            .field("working_dir", &self.working_dir)
            .field("cancelled", &self.cancellation.is_cancelled())
            .field("scoped_fetch", &self.scoped_fetch.is_some())
            .field("scoped_fs", &self.scoped_fs.is_some())
            .field("secrets_resolver", &self.secrets_resolver.is_some())
            .field("scoped_process", &self.scoped_process.is_some())
            .field("kv_store", &self.kv_store.is_some())
            .field("scoped_attachments", &self.scoped_attachments.is_some())
            .finish()
    }
}
