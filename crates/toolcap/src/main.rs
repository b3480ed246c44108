//! `toolcap`: run, explain and validate tool calls under a personality, from the shell.
//!
//! Exit codes: 0 success (the call returned `ok:true`, the call is allowed, no findings);
//! 1 a result of `ok:false`, a refusal, or findings; 2 bad usage or an unusable policy file, with
//! one line on stderr naming the problem.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "a command-line program prints its results"
)]

mod approve;
mod clients;
mod demo;
mod filter;
mod host;
mod mcp;
mod ordered;
mod review;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// `println!` that reports a closed or failing stdout as an error (exit 2) instead of
/// panicking: `toolcap call ... | head -c0` must not end in a panic.
macro_rules! outln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let mut out = std::io::stdout().lock();
        writeln!(out, $($arg)*)
            .and_then(|()| out.flush())
            .map_err(|e| crate::Usage(format!("cannot write to stdout: {e}")))
    }};
}
pub(crate) use outln;

/// `eprintln!` that ignores a closed stderr (there is nowhere left to say anything).
macro_rules! errln {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}
pub(crate) use errln;

use std::sync::Arc;

use capability_capsule::{Capsule, CapsuleConfig};
use capability_core::{
    DefaultToolRegistry, ExecutionContext, IsolationSelection, ToolCall, build_manifest, diff,
};
use capability_tools::{
    STANDARD_TOOLS, StandardConfig, Store, explain, standard_registry, standard_tools,
};
use capability_types::{ErrorCode, ToolResult};
use clap::{Parser, Subcommand};
use serde_json::Value;

/// Make the tools of AI agents safe to run: declarations checked against a personality, enforced
/// on every call.
#[derive(Debug, Parser)]
#[command(name = "toolcap", version, about, long_about = None)]
struct Cli {
    /// Log decisions and backend activity to stderr (RUST_LOG refines it, e.g. `toolcap::audit=info`).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run one standard tool under a personality and print its result as JSON.
    ///
    /// Exit 0 when the result is {"ok":true,...}, 1 when it is {"ok":false,...}, 2 on bad usage
    /// or an unusable policy file.
    Call {
        /// The personality policy file (.toml, .yaml, .yml or .json).
        #[arg(long, value_name = "FILE")]
        personality: PathBuf,
        /// Directory relative paths resolve against (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Session id (names the session storage scope): 1 to 256 bytes, no control characters.
        #[arg(long, value_name = "ID", default_value = "cli", value_parser = session_id)]
        session: String,
        /// Key-value store: a file path (embedded, the default lives in the user's data
        /// directory) or a redis:// URL.
        #[arg(long, value_name = "PATH|URL")]
        store: Option<String>,
        /// The store, read from this environment variable: a Redis URL's password stays out of
        /// the process list, where every local account can read a command line.
        #[arg(long, value_name = "VAR", conflicts_with = "store")]
        store_env: Option<String>,
        /// Append audit events (JSON lines) to this file.
        #[arg(long, value_name = "FILE")]
        audit: Option<PathBuf>,
        /// Ask on the terminal (stdin) when the call matches the personality's `[escalate]`
        /// patterns. Without it toolcap is headless and such calls are refused.
        #[arg(long)]
        ask: bool,
        /// Run the tool's code in a capsule: a worker process (this binary, re-executed) that
        /// confines itself with Landlock and seccomp before the tool runs and reaches files,
        /// hosts, secrets, children and state only by asking this process, which checks again.
        #[arg(long)]
        capsule: bool,
        #[command(flatten)]
        filter: filter::FilterArgs,
        /// Hand the call this file as an attachment (repeatable): FILE, or FILE:KIND with a
        /// MIME type (default: from the extension). Ids are att-1, att-2, …
        #[arg(long = "attach", value_name = "FILE[:KIND]")]
        attach: Vec<String>,
        /// read_file, write_file, list_dir, fetch_url, run_command, kv_get, kv_set, kv_delete,
        /// kv_list or read_attachment.
        tool: String,
        /// The arguments as a JSON object, e.g. '{"path": "notes.md"}', or - to read them from
        /// standard input (for arguments longer than a command line holds).
        args_json: String,
    },
    /// Would this call be allowed under the personality, and by which rule? Touches nothing.
    ///
    /// Exit 0 when allowed, 1 when not.
    Explain {
        /// The personality policy file.
        #[arg(long, value_name = "FILE")]
        personality: PathBuf,
        /// Directory relative paths resolve against (default: the current directory).
        #[arg(long, value_name = "DIR")]
        workdir: Option<PathBuf>,
        /// Explain a guarded tool (mcp__SERVER__TOOL) of this guard configuration, from its
        /// server's declaration; no server is started.
        #[arg(long, value_name = "FILE")]
        guard_config: Option<PathBuf>,
        /// The tool.
        tool: String,
        /// The arguments as a JSON object, or - to read them from standard input.
        args_json: String,
    },
    /// Report what the standard tools declare that the personality will not grant.
    ///
    /// Also reported: a toolset entry, a constraints table, an only_after, escalate tools or
    /// after_untrusted entry whose tool name is a typo away from a standard tool (the tool would
    /// be left out, its constraint unapplied, it refused every time, never asked about or never
    /// paused). Exit 0 when there is nothing to report, 1 when
    /// there are findings.
    Validate {
        /// The personality policy file.
        #[arg(long, value_name = "FILE")]
        personality: PathBuf,
        /// Report what the servers of this guard configuration declare that the personality
        /// will not grant (instead of the standard tools), and which the guard would not start
        /// for their code.
        #[arg(long, value_name = "FILE")]
        guard_config: Option<PathBuf>,
        /// The guard's working directory, a server's when its configuration sets no `cwd`
        /// (default: the current directory, as the guard's).
        #[arg(long, value_name = "DIR", requires = "guard_config")]
        workdir: Option<PathBuf>,
    },
    /// Print the permission manifest of the standard tools: every declaration and, with a
    /// personality, the effective access. Deterministic JSON with a SHA-256 of its content.
    Manifest {
        /// Compute the effective access under this personality.
        #[arg(long, value_name = "FILE")]
        personality: Option<PathBuf>,
        /// The manifest of a guard configuration's servers (mcp__SERVER__*), instead of the
        /// standard tools; `toolcap diff` compares two of them.
        #[arg(long, value_name = "FILE")]
        guard_config: Option<PathBuf>,
    },
    /// Report how NEW allows more than OLD (two manifests), by coverage.
    ///
    /// Exit 0 when nothing widened, 1 when something did. Compared: what each tool may reach
    /// (roots, hosts, binaries, secrets, storage, attachment kinds), the toolset, and with a
    /// personality the rules that take from the reach (deny paths, hosts and argv patterns,
    /// escalation, constraints, the child environment, the sandbox mode; docs/review.md).
    Diff {
        /// The manifest before the change.
        old: PathBuf,
        /// The manifest after the change.
        new: PathBuf,
        /// Print the widenings as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check a plugin crate's sources against its tools' declarations: no file, process,
    /// socket, environment or HTTP access outside the scoped objects, and execute using only
    /// what capabilities() declares (the engine of `cargo xtask lint`; docs/lint.md).
    ///
    /// Exit 0 when there is no error (warnings allowed), 1 when there are errors, 2 when a
    /// manifest or source cannot be read or parsed.
    Lint {
        /// The crate's directory (with Cargo.toml), or a workspace root: every member is
        /// checked.
        dir: PathBuf,
        /// text: one finding per line with file and line; sarif: a SARIF 2.1.0 log for GitHub
        /// code scanning and editors.
        #[arg(long, value_enum, default_value = "text")]
        format: LintFormat,
        /// Write the report to this file instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Serve the standard tools to MCP clients, or set a client up to use them.
    Mcp {
        #[command(subcommand)]
        command: mcp::McpCommand,
    },
    /// An end-to-end tour on a scratch directory and a loopback HTTP server: allowed and refused
    /// reads, writes, fetches, redirects, spawns and key-value writes that persist across runs.
    Demo {
        /// Keep the scratch directory (its path is printed).
        #[arg(long)]
        keep: bool,
    },
}

/// How `toolcap lint` prints its report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum LintFormat {
    Text,
    Sarif,
}

/// A problem with how toolcap was invoked: exit 2.
#[derive(Debug)]
struct Usage(String);

impl<E: std::fmt::Display> From<E> for Usage {
    fn from(e: E) -> Self {
        Usage(e.to_string())
    }
}

fn main() -> ExitCode {
    // No image of this process's memory (its secrets, every session's calls) is left where it
    // runs if it crashes (docs/isolation-model.md, "Core dumps"); lowering a limit cannot fail,
    // but if it did, nothing runs.
    if let Err(e) = capability_sandbox::dump_no_core() {
        errln!("toolcap: cannot keep this process from dumping core: {e}");
        return ExitCode::from(2);
    }
    // A capsule worker (`toolcap call --capsule` re-executes this binary) never gets past here.
    capability_capsule::run_worker_if_requested(standard_tools);
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // Help and the version are ours to print as they are.
        Err(e) if !e.use_stderr() => {
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            refused_command_line(&e);
            return ExitCode::from(2);
        }
    };
    host::init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            errln!("toolcap: cannot start the async runtime: {e}");
            return ExitCode::from(2);
        }
    };
    let outcome = runtime.block_on(async {
        // Listening from before the command starts, so no signal finds the default (dying
        // where it stands) in force.
        let stop = stop_signal();
        // A command blocked where it cannot see the signal (a read of a pipe nobody writes)
        // would never end: a moment after the signal it ends all the same, with what it
        // holds (its children die with it; a scratch home left is swept by the next toolcap).
        let blocked = stop_signal();
        tokio::spawn(async move {
            let (name, number) = blocked.await;
            tokio::time::sleep(STOP_GRACE).await;
            errln!("toolcap: stopped by {name}");
            std::process::exit(128 + i32::from(number));
        });
        tokio::select! {
            outcome = run(cli.command) => Ok(outcome),
            signal = stop => Err(signal),
        }
    });
    // The command is over, or its future is gone (a signal): its calls cancelled, their
    // children killed, their scratch homes removed. What it handed to tasks of their own (an
    // MCP session, an HTTP connection) goes with the runtime. A thread still blocked reading
    // standard input (an MCP client on sockets that stopped reading but holds our input open,
    // or a terminal) is not waited for: dropping the runtime would wait for it for ever.
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    match outcome {
        Ok(Ok(code)) => code,
        Ok(Err(Usage(message))) => {
            // A message can quote what toolcap was given (a policy's key, a server's error):
            // its control and unseen characters are written out (what is already escaped is
            // not escaped again), and a line after the first (a parser's excerpt of the file)
            // is indented, so a crafted file can neither drive the terminal it is reviewed in
            // nor begin a line of its own (docs/reference.md, "Exit codes").
            let lines: Vec<_> = message
                .trim_end_matches('\n')
                .split('\n')
                .map(capability_types::visible)
                .collect();
            errln!("toolcap: {}", lines.join("\n  "));
            ExitCode::from(2)
        }
        Err((name, number)) => {
            errln!("toolcap: stopped by {name}");
            ExitCode::from(128 + number)
        }
    }
}

/// How long a stopped command has to end on its own before the process ends anyway; the
/// runtime's own shutdown, after a command that ended, waits at most one second.
const STOP_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Waits for a request to stop — `SIGINT` (a terminal's Ctrl-C), `SIGTERM` (an MCP client or
/// a service manager), `SIGHUP` (the terminal went away) — and names it with its number.
/// Handled rather than left to kill the process, so that what a call leaves behind (a child's
/// scratch home, a guarded server's home) is removed first (docs/reference.md, "Exit codes").
/// A signal whose handler cannot be installed keeps its default (dying); the others are
/// still listened to.
fn stop_signal() -> impl std::future::Future<Output = (&'static str, u8)> {
    use tokio::signal::unix::{Signal, SignalKind, signal};
    /// The next delivery of `signal`; never, when it has no handler.
    async fn next(signal: &mut Option<Signal>) {
        let delivered = match signal {
            Some(s) => s.recv().await.is_some(),
            None => false,
        };
        if !delivered {
            std::future::pending::<()>().await;
        }
    }
    // Installed now, before the command starts.
    let mut int = signal(SignalKind::interrupt()).ok();
    let mut term = signal(SignalKind::terminate()).ok();
    let mut hup = signal(SignalKind::hangup()).ok();
    async move {
        tokio::select! {
            () = next(&mut int) => ("SIGINT", 2),
            () = next(&mut term) => ("SIGTERM", 15),
            () = next(&mut hup) => ("SIGHUP", 1),
        }
    }
}

/// The most ARGS_JSON read from standard input: twice `write_file`'s 64 MiB, room for JSON's
/// escapes.
const MAX_STDIN_ARGS: u64 = 128 * 1024 * 1024;

/// ARGS_JSON as given, or read from standard input when it is `-`: a command line holds at most
/// 128 KiB in one argument on Linux (docs/reference.md, "The `toolcap` command line"). `ask`
/// says that stdin is taken by `--ask`'s answer.
fn args_text(given: String, ask: bool) -> Result<String, Usage> {
    use std::io::Read as _;
    if given != "-" {
        return Ok(given);
    }
    if ask {
        return Err(Usage(
            "--ask reads its answer from standard input: give ARGS_JSON on the command line, not -"
                .to_owned(),
        ));
    }
    let mut bytes = Vec::new();
    std::io::stdin()
        .lock()
        .take(MAX_STDIN_ARGS + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Usage(format!("cannot read ARGS_JSON from standard input: {e}")))?;
    if bytes.len() as u64 > MAX_STDIN_ARGS {
        return Err(Usage(format!(
            "ARGS_JSON on standard input is longer than {} MiB",
            MAX_STDIN_ARGS >> 20
        )));
    }
    String::from_utf8(bytes)
        .map_err(|_| Usage("ARGS_JSON is not valid JSON: standard input is not UTF-8".to_owned()))
}

fn parse_args(text: &str) -> Result<Value, Usage> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| Usage(format!("ARGS_JSON is not valid JSON: {e}")))?;
    // A key given twice: the parser keeps the last, and the command line shows the first.
    capability_core::json_duplicate_key(text).map_err(|e| Usage(format!("ARGS_JSON: {e}")))?;
    if !value.is_object() {
        return Err(Usage(
            "ARGS_JSON must be a JSON object, e.g. '{\"path\": \"notes.md\"}'".to_owned(),
        ));
    }
    Ok(value)
}

fn known_tool(tool: &str) -> Result<(), Usage> {
    if STANDARD_TOOLS.contains(&tool) {
        Ok(())
    } else {
        Err(Usage(format!(
            "unknown tool {tool:?} (standard tools: {})",
            STANDARD_TOOLS.join(", ")
        )))
    }
}

fn print_json(value: &impl serde::Serialize) -> Result<(), Usage> {
    let text = serde_json::to_string_pretty(value)
        .map_err(|e| Usage(format!("cannot print the result: {e}")))?;
    outln!("{text}")
}

/// The files toolcap keeps for a run, beside its personality: its audit file, its embedded
/// store and a configuration (a guard's), each out of every tool's reach
/// ([`host::load_policy_keeping`]).
pub(crate) fn own_files<'a>(
    audit: Option<&'a Path>,
    store: &'a Store,
    config: Option<&'a Path>,
) -> Vec<&'a Path> {
    let store = match store {
        Store::Embedded(path) => Some(path.as_path()),
        _ => None,
    };
    [audit, store, config].into_iter().flatten().collect()
}

async fn run(command: Command) -> Result<ExitCode, Usage> {
    match command {
        Command::Call {
            personality,
            workdir,
            session,
            store,
            store_env,
            audit,
            ask,
            capsule,
            filter,
            attach,
            tool,
            args_json,
        } => {
            known_tool(&tool)?;
            let filter = filter.filter()?;
            let attachments = host::attachments(&attach)?;
            let store = host::store(store, store_env.as_deref())?;
            let own = own_files(audit.as_deref(), &store, None);
            let policy = Arc::new(host::load_policy_keeping(&personality, &own)?);
            let args = parse_args(&args_text(args_json, ask)?)?;
            let workdir = host::workdir(workdir)?;
            let result = match standard_registry(StandardConfig::new(store)).await {
                Err(e) => ToolResult::error(ErrorCode::NotAvailable, e.to_string()),
                Ok(registry) => {
                    let registry = match audit {
                        Some(path) => registry.with_audit_sink(host::audit_file(&path)?),
                        None => registry,
                    };
                    let registry = if ask {
                        registry.with_approval_handler(Arc::new(approve::TerminalApprover))
                    } else {
                        registry
                    };
                    let registry = if capsule {
                        let config = CapsuleConfig::current_exe().map_err(Usage::from)?;
                        registry
                            .with_isolation(Arc::new(Capsule::new(config)), IsolationSelection::All)
                    } else {
                        registry
                    };
                    let mut ctx = ExecutionContext::new(session, policy, workdir);
                    if let Some(filter) = filter {
                        ctx = ctx.with_tool_filter(filter);
                    }
                    let call = ToolCall::new("cli-1", tool, args).with_attachments(attachments);
                    registry.execute(call, &ctx).await.result
                }
            };
            outln!("{}", serde_json::to_string(&result).map_err(Usage::from)?)?;
            Ok(if result.is_ok() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Explain {
            personality,
            workdir,
            guard_config,
            tool,
            args_json,
        } => {
            let own: Vec<&Path> = guard_config.iter().map(PathBuf::as_path).collect();
            let policy = host::load_policy_keeping(&personality, &own)?;
            let args = parse_args(&args_text(args_json, false)?)?;
            let workdir = host::workdir(workdir)?;
            let explanation = match guard_config {
                None => explain(&tool, &args, &policy, &workdir),
                Some(path) => mcp::explain_guarded(
                    &host::load_guard_config(&path)?,
                    &tool,
                    &args,
                    policy,
                    &workdir,
                )?,
            };
            print_json(&explanation)?;
            Ok(if explanation.allowed {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Validate {
            personality,
            guard_config: Some(path),
            workdir,
        } => {
            let policy = host::load_policy(&personality)?;
            mcp::validate_guard(&host::load_guard_config(&path)?, &policy, workdir)
        }
        Command::Validate {
            personality,
            guard_config: None,
            ..
        } => {
            let policy = host::load_policy(&personality)?;
            let mut registry = DefaultToolRegistry::new(None);
            for tool in standard_tools() {
                registry.register_arc(tool).map_err(Usage::from)?;
            }
            let mut findings: Vec<String> = registry
                .validate(&policy)
                .iter()
                .map(ToString::to_string)
                .collect();
            findings.extend(review::misspelt_tools(&policy, &STANDARD_TOOLS));
            let id = policy.id().unwrap_or("?");
            for finding in &findings {
                outln!("{finding}")?;
            }
            let checked = STANDARD_TOOLS
                .iter()
                .filter(|t| policy.allows_tool(t))
                .count();
            review::conclude(&policy, findings.len(), || {
                format!(
                    "ok: {checked} standard tool(s) in the toolset of {id}; every declaration is granted as declared"
                )
            })
        }
        Command::Manifest {
            personality,
            guard_config,
        } => {
            let policy = personality.as_deref().map(host::load_policy).transpose()?;
            let manifest = match guard_config {
                Some(path) => host::load_guard_config(&path)?.manifest(policy.as_ref()),
                None => {
                    let declarations: Vec<(String, capability_types::ToolCapabilities)> =
                        standard_tools()
                            .iter()
                            .map(|t| (t.name().to_owned(), t.capabilities()))
                            .collect();
                    build_manifest(
                        declarations.iter().map(|(n, c)| (n.as_str(), c)),
                        policy.as_ref(),
                    )
                }
            };
            {
                use std::io::Write as _;
                let mut out = std::io::stdout().lock();
                out.write_all(manifest.to_pretty_json().as_bytes())
                    .and_then(|()| out.flush())
                    .map_err(|e| Usage(format!("cannot write to stdout: {e}")))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        Command::Diff { old, new, json } => {
            let old = host::load_manifest(&old)?;
            let new = host::load_manifest(&new)?;
            let widenings = diff(&old, &new);
            if json {
                print_json(&widenings)?;
            } else if widenings.is_empty() {
                outln!("no widenings")?;
            } else {
                for w in &widenings {
                    outln!("{w}")?;
                }
            }
            Ok(if widenings.is_empty() {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Mcp { command } => mcp::run(command).await,
        Command::Lint {
            dir,
            format,
            output,
        } => {
            if let Some(code) = host::lint_in_a_child(&dir).await? {
                return Ok(code);
            }
            let report =
                capability_lint::lint_dir(&dir).map_err(|e| Usage(format!("lint: {e}")))?;
            let text = match format {
                LintFormat::Text => report.to_text(),
                LintFormat::Sarif => serde_json::to_string_pretty(&report.to_sarif())? + "\n",
            };
            match output {
                Some(path) => host::write(&path, &text)
                    .map_err(|e| Usage(format!("cannot write {}: {e}", path.display())))?,
                None => outln!("{}", text.trim_end_matches('\n'))?,
            }
            Ok(if report.errors() == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Command::Demo { keep } => demo::run(keep)
            .await
            .map_err(|e| Usage(format!("demo: {e:#}"))),
    }
}

/// The parser's refusal, on stderr, its control characters escaped: its message quotes the
/// arguments it was given, and an agent or a script that builds a command line can put terminal
/// escapes in one. Without colour, which is escapes too.
fn refused_command_line(e: &clap::Error) {
    let text = e.render().to_string();
    let shown: Vec<_> = text.split('\n').map(capability_types::shown).collect();
    let _ = std::io::Write::write_all(&mut std::io::stderr(), shown.join("\n").as_bytes());
}

/// A `--session` id: it names a storage namespace and appears in every audit event, so it is
/// not empty, not endless and shows as one line.
fn session_id(given: &str) -> Result<String, String> {
    if given.is_empty() {
        return Err("a session id cannot be empty".to_owned());
    }
    if given.len() > 256 {
        return Err(format!(
            "a session id is at most 256 bytes, not {}",
            given.len()
        ));
    }
    if given.chars().any(char::is_control) {
        return Err("a session id cannot contain control characters".to_owned());
    }
    Ok(given.to_owned())
}
