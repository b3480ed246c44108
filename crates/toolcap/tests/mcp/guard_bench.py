"""The guard's cost, measured from outside: the same MCP server (tests/mcp/hostile_server.py,
its `echo` tool) spoken to directly and through `toolcap mcp guard`, alternating A B A B so
both see the same machine, medians and per-round ratios printed (docs/benchmarks.md, "MCP
guard").

    python3 guard_bench.py --toolcap target/release/toolcap [--rounds 7] [--calls 500]

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
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, bufsize=0)
        self.next = 1
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "1"}})
        self.notify("notifications/initialized")

    def notify(self, method):
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "method": method}) + "\n").encode())

    def request(self, method, params):
        rid = self.next
        self.next += 1
        self.proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method,
                                           "params": params}) + "\n").encode())
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the server closed during {method}")
            message = json.loads(line)
            if message.get("id") == rid:
                return message

    def call(self, tool):
        answer = self.request("tools/call", {"name": tool, "arguments": {"n": 1}})
        if answer.get("result", {}).get("isError"):
            raise RuntimeError(f"call failed: {answer}")

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def cold(argv, tool):
    start = time.perf_counter()
    session = Session(argv)
    session.call(tool)
    session.close()
    return time.perf_counter() - start


def per_call(argv, tool, calls):
    session = Session(argv)
    session.call(tool)  # warm
    start = time.perf_counter()
    for _ in range(calls):
        session.call(tool)
    elapsed = time.perf_counter() - start
    session.close()
    return elapsed / calls


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--toolcap", required=True)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    scratch = tempfile.mkdtemp(prefix="guard-bench-")
    config = os.path.join(scratch, "servers.toml")
    with open(config, "w") as f:
        f.write(f'[servers.bench]\ncommand = "{sys.executable if sys.executable.startswith("/usr/") else "/usr/bin/python3"}"\n'
                f'args = ["{SERVER}"]\nruntime = ["{HERE}"]\n')
    personality = os.path.join(scratch, "p.toml")
    with open(personality, "w") as f:
        f.write('id = "bench"\ntoolset = ["mcp__bench__echo"]\n')
    direct = ["/usr/bin/python3", SERVER]
    guarded = [args.toolcap, "mcp", "guard", "--personality", personality, "--config", config,
               "--workdir", scratch]

    rows = {"cold start": ([], []), "per call": ([], [])}
    cold(direct, "echo"), cold(guarded, "mcp__bench__echo")  # warm-up
    for _ in range(args.rounds):
        rows["cold start"][0].append(cold(direct, "echo"))
        rows["cold start"][1].append(cold(guarded, "mcp__bench__echo"))
        rows["per call"][0].append(per_call(direct, "echo", args.calls))
        rows["per call"][1].append(per_call(guarded, "mcp__bench__echo", args.calls))
    print(f"{args.rounds} rounds, {args.calls} calls per per-call round, direct and guarded alternating")
    for name, (a, b) in rows.items():
        ratios = [y / x for x, y in zip(a, b)]
        unit, scale = ("ms", 1e3) if name == "cold start" else ("µs", 1e6)
        print(f"{name}: direct {statistics.median(a) * scale:.1f} {unit}, "
              f"guarded {statistics.median(b) * scale:.1f} {unit}, "
              f"ratio median {statistics.median(ratios):.2f}x "
              f"(min {min(ratios):.2f}x, max {max(ratios):.2f}x)")


if __name__ == "__main__":
    main()
