//! The interactive approval handler of `toolcap call --ask`: shows the escalated call on stderr
//! and reads `y`/`yes` (anything else refuses) from stdin.

use std::io::{BufRead, Write};

use capability_core::{ApprovalHandler, ApprovalRequest};
use capability_types::async_trait;

/// Asks on the terminal (or whatever stdin is: `echo y | toolcap call --ask …` works in scripts).
#[derive(Debug, Default)]
pub(crate) struct TerminalApprover;

#[async_trait]
impl ApprovalHandler for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Result<bool, String> {
        let mut prompt = format!(
            "toolcap: {} (call {}) needs approval for:\n",
            request.tool, request.call_id
        );
        for s in &request.subjects {
            prompt.push_str(&format!("  {}: {}\n", s.category, s.subject));
        }
        prompt.push_str(&format!(
            "  arguments (credentials masked): {}\n",
            request.arguments
        ));
        prompt.push_str("approve? [y/N] ");
        tokio::task::spawn_blocking(move || {
            let mut err = std::io::stderr().lock();
            err.write_all(prompt.as_bytes())
                .map_err(|e| e.to_string())?;
            err.flush().map_err(|e| e.to_string())?;
            let mut answer = String::new();
            let read = std::io::stdin()
                .lock()
                .read_line(&mut answer)
                .map_err(|e| e.to_string())?;
            if read == 0 {
                return Err("stdin closed before an answer".to_owned());
            }
            Ok(matches!(
                answer.trim().to_ascii_lowercase().as_str(),
                "y" | "yes"
            ))
        })
        .await
        .map_err(|e| e.to_string())?
    }
}
