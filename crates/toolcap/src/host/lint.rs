//! `toolcap lint` checks a crate in a process of its own (docs/lint.md, "Sources it cannot
//! read"). The Rust parser it uses descends once per level of what it reads, so a source that
//! nests a few thousand levels deep (brackets, generic types, `!` or `&` in a row, a chain of
//! method calls) runs the parser out of stack, and a process out of stack is aborted, whatever
//! it was doing. The command line runs again as a child that does the checking; a child that
//! ends by a signal is answered with exit 2 and a message, as any source that cannot be read is,
//! instead of an abort.

use std::path::Path;
use std::process::{ExitCode, Stdio};

use crate::Usage;

/// Set in the child that does the checking.
const CHILD: &str = "TOOLCAP_LINT_CHILD";

/// In the process the user started: runs this command line again as a child that checks
/// `dir`, passes its report and exit code on, and answers a child that ended by a signal with
/// an error. `Ok(None)` in that child: the checking is to be done here. The child goes with
/// the future: a command stopped by a signal (`SIGTERM`) leaves no check running.
pub(crate) async fn in_a_child(dir: &Path) -> Result<Option<ExitCode>, Usage> {
    if std::env::var_os(CHILD).is_some() {
        return Ok(None);
    }
    let program = std::env::current_exe().map_err(|e| {
        Usage(format!(
            "lint: cannot find this program to check {}: {e}",
            dir.display()
        ))
    })?;
    // toolcap: allow(tokio::process::Command::new, reason = "toolcap's own command line, run again to check a crate apart from the process the user started")
    let checked = tokio::process::Command::new(program)
        .args(std::env::args_os().skip(1))
        .env(CHILD, "1")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .output()
        .await
        .map_err(|e| {
            Usage(format!(
                "lint: cannot start the check of {}: {e}",
                dir.display()
            ))
        })?;
    match checked.status.code() {
        Some(code) => {
            // What it said is already the command line's own (escaped where it quotes).
            std::io::Write::write_all(&mut std::io::stdout(), &checked.stdout)
                .map_err(|e| Usage(format!("cannot write to stdout: {e}")))?;
            let _ = std::io::Write::write_all(&mut std::io::stderr(), &checked.stderr);
            Ok(Some(ExitCode::from(u8::try_from(code).unwrap_or(2))))
        }
        None => {
            use std::os::unix::process::ExitStatusExt as _;
            let signal = checked.status.signal().unwrap_or_default();
            let name = match signal {
                6 => "SIGABRT",
                11 => "SIGSEGV",
                9 => "SIGKILL",
                _ => "a signal",
            };
            Err(Usage(format!(
                "lint: {} could not be checked: the check ended by {name} ({signal}), as it does \
                 when a source file nests deeper than the parser can follow (it runs out of \
                 stack); nothing was reported",
                dir.display()
            )))
        }
    }
}
