//! `--allowed-tools`, `--allowed-mcp-servers`, `--allowed-mcp-tools`: a per-call tool filter
//! from the command line (docs/policy.md, "Per-call tool filters").

use capability_core::ToolFilter;
use clap::Args;

use crate::Usage;

/// The filter flags shared by `call`, `mcp serve` and `mcp guard`.
#[derive(Debug, Args)]
pub(crate) struct FilterArgs {
    /// Only tools matching one of these glob patterns (comma-separated or repeated), within
    /// the personality's toolset; e.g. 'read_*,list_dir'.
    #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
    allowed_tools: Option<Vec<String>>,
    /// Only MCP tools (mcp__SERVER__TOOL) of servers matching one of these patterns.
    #[arg(long, value_name = "PATTERN", value_delimiter = ',')]
    allowed_mcp_servers: Option<Vec<String>>,
    /// Of SERVER's MCP tools, only those whose bare name matches PATTERN; repeatable, e.g.
    /// github=get_* --allowed-mcp-tools github=list_*.
    #[arg(long, value_name = "SERVER=PATTERN")]
    allowed_mcp_tools: Vec<String>,
}

impl FilterArgs {
    /// The filter the flags describe, or `None` when none was given.
    pub(crate) fn filter(&self) -> Result<Option<ToolFilter>, Usage> {
        if self.allowed_tools.is_none()
            && self.allowed_mcp_servers.is_none()
            && self.allowed_mcp_tools.is_empty()
        {
            return Ok(None);
        }
        let bad = |e: capability_core::ToolFilterError| Usage(e.to_string());
        let mut filter = ToolFilter::new();
        if let Some(tools) = &self.allowed_tools {
            filter = filter.allowed_tools(tools.clone()).map_err(bad)?;
        }
        if let Some(servers) = &self.allowed_mcp_servers {
            filter = filter.allowed_mcp_servers(servers.clone()).map_err(bad)?;
        }
        let mut per_server: std::collections::BTreeMap<&str, Vec<String>> = Default::default();
        for entry in &self.allowed_mcp_tools {
            let (server, pattern) = entry.split_once('=').ok_or_else(|| {
                Usage(format!(
                    "--allowed-mcp-tools {entry:?}: expected SERVER=PATTERN, e.g. github=get_*"
                ))
            })?;
            per_server
                .entry(server)
                .or_default()
                .push(pattern.to_owned());
        }
        for (server, patterns) in per_server {
            filter = filter.allowed_mcp_tools(server, patterns).map_err(bad)?;
        }
        Ok(Some(filter))
    }
}
