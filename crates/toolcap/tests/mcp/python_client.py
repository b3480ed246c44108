"""toolcap's MCP server driven by the official MCP Python SDK (PyPI `mcp`, pinned in
.ci/mcp-deps), the way a Python agent framework would use it.

Run by crates/toolcap/tests/mcp_clients.rs:

    python python_client.py --toolcap BIN --personality P --workdir W --canary FILE
                            [--http URL] --mode auto|legacy

Each check prints "ok <name>"; the first failure prints "FAIL <name>: <why>" and exits 1.
"""

import argparse
import os
import sys
import time

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters

CANARY_TEXT = "canary-7d1f3c-do-not-leak"


class Failure(Exception):
    pass


def check(name, condition, why=""):
    if not condition:
        raise Failure(f"{name}: {why}")
    print(f"ok {name}", flush=True)


def text_of(result):
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


def processes_with(needle):
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmd and state != "Z":
            found.append(int(pid))
    return found


def make_client(args, elicitation_callback=None):
    if args.http:
        server = args.http
    else:
        server = StdioServerParameters(
            command=args.toolcap,
            args=[
                "mcp", "serve",
                "--personality", args.personality,
                "--workdir", args.workdir,
                "--store", os.path.join(args.scratch, f"state-{args.mode}.redb"),
            ],
        )
    return Client(server, mode=args.mode, elicitation_callback=elicitation_callback,
                  read_timeout_seconds=60)


async def answer_with(action, approve=None):
    asked = []

    async def callback(context, params):
        asked.append(params.message)
        content = None if approve is None else {"approve": approve}
        return types.ElicitResult(action=action, content=content)

    return asked, callback


async def run(args):
    prefix = f"{args.mode}/{'http' if args.http else 'stdio'}"
    asked, yes = await answer_with("accept", True)
    async with make_client(args, yes) as client:
        tools = await client.list_tools()
        names = sorted(t.name for t in tools.tools)
        check(f"{prefix} tools/list is the toolset", names == sorted(
            ["read_file", "write_file", "list_dir", "run_command", "kv_get", "kv_set"]), names)
        read = next(t for t in tools.tools if t.name == "read_file")
        check(f"{prefix} read_file is read-only", read.annotations.read_only_hint is True
              and read.annotations.destructive_hint is False, read.annotations)
        check(f"{prefix} read_file's schema requires path",
              read.input_schema.get("required") == ["path"], read.input_schema)

        ok = await client.call_tool("read_file", {"path": "notes.md"})
        check(f"{prefix} an allowed read", not ok.is_error and text_of(ok) == "hello from notes\n",
              ok)

        for path in (args.canary, "../canary.txt", "/proc/self/environ"):
            refused = await client.call_tool("read_file", {"path": path})
            body = text_of(refused)
            check(f"{prefix} refused read of {path}", refused.is_error
                  and body.startswith("PATH_NOT_REACHABLE: ") and CANARY_TEXT not in body, body)

        bad = await client.call_tool("read_file", {"path": 5})
        check(f"{prefix} bad arguments", bad.is_error and text_of(bad).startswith("INPUT_INVALID: "),
              text_of(bad))

        approved = await client.call_tool(
            "write_file", {"path": f"ask/{args.mode}-yes.txt", "content": "approved"})
        check(f"{prefix} an escalated write runs once approved",
              not approved.is_error and len(asked) == 1
              and os.path.exists(os.path.join(args.workdir, "ask", f"{args.mode}-yes.txt")),
              (text_of(approved), asked))
        check(f"{prefix} the user is told what the call does",
              "write_file" in asked[0] and f"{args.mode}-yes.txt" in asked[0], asked)

        ticks = []

        async def progress(value, total, message):
            ticks.append(value)

        slow = await client.call_tool("run_command", {"binary": "sleep", "args": ["1.6"]},
                                      progress_callback=progress)
        check(f"{prefix} progress arrives for a long call", not slow.is_error and len(ticks) >= 1,
              (text_of(slow), ticks))

        marker = "27.1828" if args.mode == "auto" else "27.1829"
        if args.http:
            marker = marker + "1"
        with anyio.move_on_after(1.5):
            await client.call_tool("run_command", {"binary": "sleep", "args": [marker]})
        deadline = time.monotonic() + 10
        while processes_with(marker) and time.monotonic() < deadline:
            await anyio.sleep(0.05)
        check(f"{prefix} a cancelled call's child is killed", not processes_with(marker),
              processes_with(marker))
        after = await client.call_tool("read_file", {"path": "notes.md"})
        check(f"{prefix} the session goes on after a cancellation", not after.is_error, after)

    for action, approve, label in (("decline", None, "declined"), ("accept", False, "unticked"),
                                   ("cancel", None, "cancelled")):
        asked, callback = await answer_with(action, approve)
        async with make_client(args, callback) as client:
            await client.list_tools()
            name = f"{args.mode}-{label}.txt"
            refused = await client.call_tool("write_file", {"path": f"ask/{name}", "content": "no"})
            check(f"{prefix} a {label} approval refuses the call",
                  refused.is_error and text_of(refused).startswith("ESCALATION_REFUSED: ")
                  and not os.path.exists(os.path.join(args.workdir, "ask", name))
                  and len(asked) == 1, (text_of(refused), asked))

    async with make_client(args, None) as client:
        await client.list_tools()
        name = f"{args.mode}-no-elicitation.txt"
        refused = await client.call_tool("write_file", {"path": f"ask/{name}", "content": "no"})
        check(f"{prefix} without elicitation an escalated call is refused",
              refused.is_error and text_of(refused).startswith("ESCALATION_REFUSED: ")
              and not os.path.exists(os.path.join(args.workdir, "ask", name)), text_of(refused))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--toolcap", required=True)
    parser.add_argument("--personality", required=True)
    parser.add_argument("--workdir", required=True)
    parser.add_argument("--canary", required=True)
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--http")
    parser.add_argument("--mode", choices=["auto", "legacy"], required=True)
    args = parser.parse_args()
    try:
        anyio.run(run, args)
    except Failure as failure:
        print(f"FAIL {failure}", flush=True)
        sys.exit(1)


if __name__ == "__main__":
    main()
