//! The `Tool` trait: what a plugin author implements.

use async_trait::async_trait;
use serde_json::Value;

use crate::capabilities::ToolCapabilities;
use crate::context::ToolContext;
use crate::error::CapabilityError;

/// A tool an agent can call.
///
/// The registry reads [`capabilities`](Self::capabilities) once, at registration, and then
/// hands [`execute`](Self::execute) only the scoped objects that the intersection of that
/// declaration with the active personality allows; a tool that declares nothing gets none.
///
/// The crate documentation has a whole tool; the smallest declares nothing:
///
/// ```
/// use capability_types::ToolCapabilities;
/// // Touches nothing external: no scoped object is handed to it, and it needs no backend.
/// assert!(ToolCapabilities::none().is_empty());
/// ```
#[async_trait]
pub trait Tool: Send + Sync {
    /// The name the agent calls it by: 1–64 characters of `a-z`, `0-9`, `_`, `-`.
    fn name(&self) -> &str;

    /// What it does, for the model and for reviewers.
    fn description(&self) -> &str;

    /// The JSON schema of its arguments.
    fn input_schema(&self) -> Value;

    /// Everything external it touches. Read once at registration.
    fn capabilities(&self) -> ToolCapabilities;

    /// Top-level arguments the argument gate does not read as paths: data, or a program that
    /// `ScopedProcess` checks itself (docs/policy.md, "The argument gate").
    fn data_arguments(&self) -> &[&str] {
        &[]
    }

    /// Whether its results carry text from outside the user's control: a file's or a web
    /// page's contents, a command's or an MCP server's output. A personality's
    /// `[after_untrusted]` pauses tools after a batch in which such a tool ran
    /// (docs/policy.md, "After untrusted output"). Read once at registration.
    fn output_is_untrusted(&self) -> bool {
        false
    }

    /// Whether it can run here at all (a missing binary, an unsupported platform). A tool that
    /// is not available yields `not_available` and never runs.
    fn is_available(&self) -> bool {
        true
    }

    /// Runs one call. Errors become a failed [`ToolResult`](crate::ToolResult) with the code of
    /// [`CapabilityError::result_code`]; a panic becomes `execution_failed`.
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError>;
}
