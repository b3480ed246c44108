//! The interactive approval handler of `toolcap call --ask`: shows the escalated call on stderr
//! and reads `y`/`yes` (anything else refuses) from stdin.

use std::io::{BufRead, Read, Write};

use capability_core::{ApprovalHandler, ApprovalRequest, shown};
use capability_types::async_trait;

/// Asks on the terminal (or whatever stdin is: `echo y | toolcap call --ask …` works in scripts).
#[derive(Debug, Default)]
pub(crate) struct TerminalApprover;

#[async_trait]
impl ApprovalHandler for TerminalApprover {
    async fn approve(&self, request: &ApprovalRequest) -> Result<bool, String> {
        // Everything in the prompt that came from the call is shown escaped: an agent's path
        // must not clear the terminal or draw a subject line of its own (docs/policy.md,
        // "Escalation").
        // The arguments come first and cut short, the subjects (what is approved) last, right
        // above the question: a flood of arguments cannot scroll them out of sight.
        let mut prompt = format!(
            "toolcap: {} (call {})\n  arguments (credentials masked): {}\n\
             needs approval for:\n",
            shown(&request.tool),
            shown(&request.call_id),
            request.arguments_shown(SHOWN_ARGUMENTS)
        );
        for s in &request.subjects {
            prompt.push_str(&format!("  {}: {}\n", s.category, shown(&s.subject)));
        }
        prompt.push_str("approve? [y/N] ");
        // A thread of its own, not `spawn_blocking`: when the registry gives up waiting (the
        // personality's timeout), the process must be free to end, and the runtime waits for
        // its blocking tasks when it shuts down, which kept an unanswered terminal open until
        // someone pressed Enter. The thread is left blocked in its read; the process ends
        // without it.
        let (answered, answer) = tokio::sync::oneshot::channel();
        std::thread::Builder::new()
            .name("toolcap-ask".to_owned())
            .spawn(move || {
                let _ = answered.send(ask(&prompt));
            })
            .map_err(|e| format!("cannot ask on the terminal: {e}"))?;
        answer
            .await
            .map_err(|_| "the terminal prompt ended without an answer".to_owned())?
    }
}

/// About how much of a call's arguments a prompt shows.
const SHOWN_ARGUMENTS: usize = 2048;

/// The longest answer read: `y`, `yes` and a line ending fit many times over; a line that never
/// ends (`/dev/zero` as stdin) is read no further and refuses.
const ANSWER_BYTES: u64 = 64;

/// Shows `prompt` on stderr and reads one answer line from stdin.
fn ask(prompt: &str) -> Result<bool, String> {
    {
        // Let go of stderr before the read: the process may have to say something (that it was
        // stopped, say) while this thread still waits for an answer.
        let mut err = std::io::stderr().lock();
        err.write_all(prompt.as_bytes())
            .map_err(|e| e.to_string())?;
        err.flush().map_err(|e| e.to_string())?;
    }
    let mut answer = Vec::new();
    let read = std::io::stdin()
        .lock()
        .take(ANSWER_BYTES)
        .read_until(b'\n', &mut answer)
        .map_err(|e| e.to_string())?;
    if read == 0 {
        return Err("stdin closed before an answer".to_owned());
    }
    Ok(matches!(
        String::from_utf8_lossy(&answer)
            .trim()
            .to_ascii_lowercase()
            .as_str(),
        "y" | "yes"
    ))
}
