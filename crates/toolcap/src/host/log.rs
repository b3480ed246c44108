//! The log on stderr (`-v`, `RUST_LOG`), which a terminal may show and an MCP client keeps as
//! the server's log: each event is written with its control characters written out, so nothing
//! a log line quotes (a path a model sent, a guarded server's words, what a library repeats of
//! a peer's message) drives the terminal.

use std::io::Write;

/// Logs to stderr: warnings by default (audit events go to `--audit FILE`, not here; the MCP
/// SDK's own only when they are errors, since it warns once per message a peer sends that it
/// answers with an error, and a guarded server's or a client's messages are not to write the
/// log); everything, audit included, with `--verbose`, but the SDK's debug events, which quote
/// each message whole; `RUST_LOG` (`target=level,...`) replaces either.
pub(crate) fn init_logging(verbose: bool) {
    use tracing_subscriber::filter::{LevelFilter, Targets};
    use tracing_subscriber::prelude::*;
    let targets = std::env::var("RUST_LOG")
        .ok()
        .and_then(|spec| spec.parse::<Targets>().ok())
        .unwrap_or_else(|| {
            if verbose {
                // Not the MCP SDK's debug events: they quote every message whole, a call's
                // credentials and a file's contents among them, into what a client keeps as
                // the server's log (docs/mcp.md, "Logs").
                Targets::new()
                    .with_default(LevelFilter::DEBUG)
                    .with_target("rmcp", LevelFilter::INFO)
            } else {
                Targets::new()
                    .with_default(LevelFilter::WARN)
                    .with_target("toolcap::audit", LevelFilter::OFF)
                    .with_target("rmcp", LevelFilter::ERROR)
            }
        });
    let _ = tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| Shown(std::io::stderr()))
                .with_ansi(false)
                .with_target(true),
        )
        .with(targets)
        .try_init();
}

/// The log's writer: each event written to `W` with every control character but its closing
/// line break written out (`\u{d}`, `\u{1b}`, a line break inside as `\n`), as is every
/// character a terminal draws as nothing ([`visible`](capability_types::visible)).
struct Shown<W: Write>(W);

impl<W: Write> Shown<W> {
    fn event(&mut self, event: &[u8]) -> std::io::Result<()> {
        let text = String::from_utf8_lossy(event);
        let (body, end) = match text.strip_suffix('\n') {
            Some(body) => (body, "\n"),
            None => (&*text, ""),
        };
        let shown = capability_types::visible(body).replace('\n', "\\n");
        self.0.write_all(format!("{shown}{end}").as_bytes())
    }
}

impl<W: Write> Write for Shown<W> {
    /// The formatting layer writes an event whole, in one call, through a writer of its own.
    fn write(&mut self, event: &[u8]) -> std::io::Result<usize> {
        self.event(event)?;
        Ok(event.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write as _;

    use super::Shown;

    // guarantee: G-CLI-06
    #[test]
    fn an_event_is_written_with_its_control_characters_written_out() {
        let mut out = Shown(Vec::new());
        out.write_all(
            "WARN toolcap::guard: stopped: said \r\u{1b}]0;owned\u{7}\nINFO spoofed \u{202e}\tok\n"
                .as_bytes(),
        )
        .unwrap();
        out.write_all(b"plain line\n").unwrap();
        assert_eq!(
            String::from_utf8(out.0).unwrap(),
            "WARN toolcap::guard: stopped: said \\u{d}\\u{1b}]0;owned\\u{7}\\nINFO spoofed \\u{202e}\tok\nplain line\n"
        );
    }
}
