//! Network for confined children: a tool that declares both `process` and `network` gets
//! children that run in a network namespace of their own and reach exactly the tool's hosts
//! through the host's egress proxy. Real `curl` children, two loopback servers (the allowed host
//! and a forbidden one), HTTP through the proxy (absolute form), HTTPS-style tunnels (CONNECT),
//! and the direct route that must not exist.

use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use capability_core::PolicyFormat;
use capability_core::{
    CapabilityBackends, CompiledPolicy, DefaultToolRegistry, ExecutionContext, ToolCall,
};
use capability_fetch::{EgressProxy, FetchBackend, FetchConfig};
use capability_process::{ProcessBackend, ProcessConfig};
use capability_types::{
    CapabilityError, SpawnOptions, Tool, ToolCapabilities, ToolContext, ToolResult, async_trait,
};
use serde_json::{Value, json};

/// Runs `curl` with the given arguments; declares `network` only when `networked`.
struct Curl {
    name: &'static str,
    networked: bool,
}

#[async_trait]
impl Tool for Curl {
    fn name(&self) -> &str {
        self.name
    }
    fn description(&self) -> &str {
        "runs curl"
    }
    fn input_schema(&self) -> Value {
        json!({"type": "object"})
    }
    fn capabilities(&self) -> ToolCapabilities {
        let caps = ToolCapabilities::none().with_process(["curl"]);
        if self.networked {
            caps.with_network(["*"])
        } else {
            caps
        }
    }
    async fn execute(&self, args: Value, ctx: &ToolContext) -> Result<Value, CapabilityError> {
        let argv: Vec<String> = args["args"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|a| a.as_str().map(str::to_owned))
            .collect();
        let mut options = SpawnOptions::default();
        if let Some(proxy) = args["http_proxy"].as_str() {
            options = options.env("HTTP_PROXY", proxy).env("http_proxy", proxy);
        }
        let out = ctx.process()?.spawn("curl", &argv, options).await?;
        Ok(json!({
            "exit": out.exit_code,
            "stdout": String::from_utf8_lossy(&out.stdout),
            "stderr": String::from_utf8_lossy(&out.stderr),
        }))
    }
}

/// A server on host loopback that answers with its name and whether the request came in origin
/// form (as the proxy must forward it, whichever way the child sent it).
async fn server(name: &'static str) -> (u16, Arc<AtomicUsize>) {
    crate::support::http_server(name, move |request| {
        format!(
            "{name} origin-form={}",
            request.starts_with("GET / HTTP/1.1")
        )
    })
    .await
}

/// Collects what the audit target logs.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

// One thread: every task (the proxy's too) runs where the capturing subscriber is installed.
// guarantee: G-KERN-07
#[tokio::test(flavor = "current_thread")]
async fn children_reach_exactly_their_tools_hosts_through_the_proxy() {
    let captured = Captured::default();
    let writer = captured.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_writer(move || writer.clone())
        .with_ansi(false)
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let (allowed, _) = server("allowed").await;
    let (forbidden, forbidden_hits) = server("forbidden").await;
    let policy = CompiledPolicy::load(
        &format!(
            "id = \"egress\"\n[safety.network]\nallow = [\"127.0.0.1:{allowed}\"]\n[safety.process]\nallow = [\"curl\"]\n"
        ),
        PolicyFormat::Toml,
        Some(Path::new("/home/egress")),
    )
    .unwrap();
    let process = ProcessConfig::from_process_env()
        .egress(Arc::new(EgressProxy::new(&FetchConfig::default())));
    let backends = CapabilityBackends::new()
        .with_process(Arc::new(ProcessBackend::new(process)))
        .with_fetch(Arc::new(FetchBackend::new(FetchConfig::default()).unwrap()));
    let mut registry = DefaultToolRegistry::new(Some(backends));
    registry
        .register(Curl {
            name: "net_curl",
            networked: true,
        })
        .unwrap();
    registry
        .register(Curl {
            name: "plain_curl",
            networked: false,
        })
        .unwrap();
    let ctx = ExecutionContext::new("egress", Arc::new(policy), "/");
    let run = |tool: &'static str, args: Vec<String>| {
        let call = ToolCall::new("1", tool, json!({"args": args}));
        let registry = &registry;
        let ctx = &ctx;
        async move {
            match registry.execute(call, ctx).await.result {
                ToolResult::Ok(value) => value,
                other => panic!("{tool}: {other:?}"),
            }
        }
    };
    let url = |port: u16| format!("http://127.0.0.1:{port}/");
    let curl = |extra: &[&str], port: u16| {
        let mut args: Vec<String> = ["-sS", "--max-time", "10", "-w", " status=%{http_code}"]
            .iter()
            .map(|s| (*s).to_owned())
            .collect();
        args.extend(extra.iter().map(|s| (*s).to_owned()));
        args.push(url(port));
        args
    };

    // HTTP through the proxy (absolute form) to the allowed host.
    let out = run("net_curl", curl(&[], allowed)).await;
    assert_eq!(out["exit"], 0, "{out}");
    assert_eq!(
        out["stdout"], "allowed origin-form=true status=200",
        "{out}"
    );
    // A proxy variable of the tool's own does not redirect the child: the egress proxy wins.
    let call = ToolCall::new(
        "2",
        "net_curl",
        json!({"args": curl(&[], allowed), "http_proxy": "http://127.0.0.1:9"}),
    );
    let out = registry.execute(call, &ctx).await.result;
    assert_eq!(
        out.value().unwrap()["stdout"],
        "allowed origin-form=true status=200",
        "{out:?}"
    );
    // The same through a CONNECT tunnel (what HTTPS uses).
    let out = run("net_curl", curl(&["--proxytunnel"], allowed)).await;
    assert_eq!(
        out["stdout"], "allowed origin-form=true status=200",
        "{out}"
    );

    // Inside the tunnel, the request asks the allowed address for another site: an address that
    // serves many names would answer for it. Refused by the proxy before the server sees it.
    let out = run(
        "net_curl",
        curl(&["--proxytunnel", "-H", "Host: evil.example"], allowed),
    )
    .await;
    assert!(
        out["stdout"]
            .as_str()
            .unwrap()
            .starts_with("HOST_NOT_ALLOWED: evil.example"),
        "{out}"
    );
    assert!(
        out["stdout"].as_str().unwrap().ends_with("status=403"),
        "{out}"
    );

    // The forbidden host: refused by the proxy, both ways.
    let out = run("net_curl", curl(&[], forbidden)).await;
    assert_eq!(
        out["stdout"], "HOST_NOT_ALLOWED: 127.0.0.1 is not in the declared allowedHosts status=403",
        "{out}"
    );
    let out = run("net_curl", curl(&["--proxytunnel"], forbidden)).await;
    assert_ne!(out["exit"], 0, "{out}");
    assert!(out["stderr"].as_str().unwrap().contains("403"), "{out}");

    // Around the proxy: the child's namespace has nothing else (its loopback is its own).
    let out = run("net_curl", curl(&["--noproxy", "*"], allowed)).await;
    assert_eq!(out["exit"], 7, "curl: could not connect: {out}");

    // A tool that declares no network: its child has none at all, proxy variables or not.
    let out = run("plain_curl", curl(&[], allowed)).await;
    assert_ne!(out["exit"], 0, "{out}");
    let out = run(
        "plain_curl",
        curl(&["--proxy", "http://127.0.0.1:3128"], allowed),
    )
    .await;
    assert_ne!(out["exit"], 0, "{out}");

    assert_eq!(
        forbidden_hits.load(Ordering::SeqCst),
        0,
        "the forbidden host was reached"
    );
    let log = String::from_utf8_lossy(&captured.0.lock().unwrap_or_else(PoisonError::into_inner))
        .to_string();
    assert_eq!(log.matches("kind=\"egress_allowed\"").count(), 4, "{log}");
    assert_eq!(log.matches("kind=\"egress_denied\"").count(), 3, "{log}");
    assert!(log.contains("host=\"evil.example\""), "{log}");
    assert!(log.contains(&format!("port={forbidden}")), "{log}");
    assert!(log.contains("tool=net_curl"), "{log}");
}
