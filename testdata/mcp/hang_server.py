#!/usr/bin/env python3
"""A minimal MCP server over stdio for pg-tool's tests: tools "echo" (answers
with its pid) and "hang" (never answers). With PIDFILE set it appends its own
pid and that of a child it starts (sleep 300) to that file, so a test can
check that stopping the server kills its whole process group."""
import json
import os
import subprocess
import sys

if os.environ.get("PIDFILE"):
    child = subprocess.Popen(["sleep", "300"])
    with open(os.environ["PIDFILE"], "a") as f:
        f.write("%d %d\n" % (os.getpid(), child.pid))


def send(msg):
    sys.stdout.write(json.dumps(msg) + "\n")
    sys.stdout.flush()


TOOLS = [
    {"name": "echo", "description": "Echoes the message with the server's pid.",
     "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}}, "required": ["message"]}},
    {"name": "hang", "description": "Never answers.", "inputSchema": {"type": "object"}},
]

for line in sys.stdin:
    req = json.loads(line)
    method, rid = req.get("method"), req.get("id")
    if rid is None:
        continue  # a notification
    params = req.get("params") or {}
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": rid, "result": {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "hang", "version": "1"}}})
    elif method == "tools/list":
        send({"jsonrpc": "2.0", "id": rid, "result": {"tools": TOOLS}})
    elif method == "tools/call" and params.get("name") == "echo":
        text = "pid %d: %s" % (os.getpid(), params.get("arguments", {}).get("message", ""))
        send({"jsonrpc": "2.0", "id": rid, "result": {"content": [{"type": "text", "text": text}]}})
    elif method == "tools/call":
        pass  # hang: never answer
    elif method == "ping":
        send({"jsonrpc": "2.0", "id": rid, "result": {}})
    else:
        send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "method not found: " + method}})
