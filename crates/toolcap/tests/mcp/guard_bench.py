"""The guard's cost, measured from outside: the same MCP server (tests/mcp/hostile_server.py,
its `echo` tool) spoken to directly and through `toolcap mcp guard`, alternating A B A B so
both see the same machine, medians and per-round ratios printed (docs/benchmarks.md, "MCP
guard").

    python3 guard_bench.py --toolcap target/release/toolcap [--rounds 7] [--calls 500]
                           [--server echo|filesystem]

`echo` is the stub's echo (a server that does almost nothing, so the guard's own cost shows
plainly); `filesystem` is the real `@modelcontextprotocol/server-filesystem` from the cache of
`.ci/mcp-deps`, reading a 4 KiB file.

Cold start: spawn, `initialize`, one `tools/call`, close, the whole process waited for.
Per call: the mean of `--calls` sequential `tools/call` round trips after the handshake.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER = os.path.join(HERE, "hostile_server.py")


class Session:
    def __init__(self, argv):
        # Buffered: an unbuffered pipe reads a line one byte (one system call) at a time,
        # which would measure the client, not the servers.
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL)
        self.next = 1
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.notify("notifications/initialized")

    def notify(self, method):
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())
        self.proc.stdin.flush()

    def request(self, method, params):
        rid = self.next
        self.next += 1
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                           "params": params}) + "\n").encode())
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed during {method}")
            message = json.loads(line)
            if message.get("id") == rid:
                return message

    def call(self, tool, arguments):
        answer = self.request("tools/call", {"name": tool, "arguments": arguments})
        if answer.get("result", {}).get("isError"):
            raise RuntimeError(f"call failed: {answer}")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def cold(argv, tool, arguments):
    start = time.perf_counter()
    session = Session(argv)
    session.call(tool, arguments)
    session.close()
    return time.perf_counter() - start


def per_call(argv, tool, arguments, calls):
    session = Session(argv)
    session.call(tool, arguments)  # warm
    start = time.perf_counter()
    for _ in range(calls):
        session.call(tool, arguments)
    elapsed = time.perf_counter() - start
    session.close()
    return elapsed / calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--toolcap", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--server", choices=["echo", "filesystem"], default="echo")
    args = parser.parse_args()
    scratch = os.path.realpath(tempfile.mkdtemp(prefix="guard-bench-"))
    with open(os.path.join(scratch, "q3.txt"), "w") as f:
        f.write("x" * 4096)
    config = os.path.join(scratch, "servers.toml")
    if args.server == "echo":
        direct = ["/usr/bin/python3", SERVER]
        upstream, arguments = "echo", {"n": 1}
        with open(config, "w") as f:
            f.write(f'[servers.bench]\ncommand = "/usr/bin/python3"\n'
                    f'args = ["{SERVER}"]\nruntime = ["{HERE}"]\n')
    else:
        cache = os.environ.get("TOOLCAP_MCP_CACHE", os.path.expanduser("~/.cache/toolcap-mcp"))
        modules = os.path.join(cache, "servers", "node_modules")
        index = os.path.join(modules, "@modelcontextprotocol", "server-filesystem", "dist", "index.js")
        direct = ["/usr/bin/node", index, scratch]
        upstream, arguments = "read_text_file", {"path": os.path.join(scratch, "q3.txt")}
        with open(config, "w") as f:
            f.write(f'[servers.bench]\ncommand = "/usr/bin/node"\nargs = ["{index}", "{scratch}"]\n'
                    f'runtime = ["{modules}"]\n[servers.bench.reach]\nread = ["{scratch}"]\n')
    personality = os.path.join(scratch, "p.toml")
    with open(personality, "w") as f:
        f.write(f'id = "bench"\ntoolset = ["mcp__bench__{upstream}"]\n'
                f'[fs_reach]\nread = ["{scratch}"]\n')
    guarded = [args.toolcap, "mcp", "guard", "--personality", personality, "--config", config,
               "--workdir", scratch]
    tool = f"mcp__bench__{upstream}"

    rows = {"cold start": ([], []), "per call": ([], [])}
    cold(direct, upstream, arguments), cold(guarded, tool, arguments)  # warm-up
    for _ in range(args.rounds):
        rows["cold start"][0].append(cold(direct, upstream, arguments))
        rows["cold start"][1].append(cold(guarded, tool, arguments))
        rows["per call"][0].append(per_call(direct, upstream, arguments, args.calls))
        rows["per call"][1].append(per_call(guarded, tool, arguments, args.calls))
    print(f"{args.server}: {args.rounds} rounds, {args.calls} calls per per-call round, "
          "direct and guarded alternating")
    for name, (a, b) in rows.items():
        ratios = [y / x for x, y in zip(a, b)]
        unit, scale = ("ms", 1e3) if name == "cold start" else ("µs", 1e6)
        print(f"{name}: direct {statistics.median(a) * scale:.1f} {unit}, "
              f"guarded {statistics.median(b) * scale:.1f} {unit}, "
              f"ratio median {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
