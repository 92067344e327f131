"""The agent run on its own (`python -m heet_agent`), spoken to over its stdin/stdout as the
controller does: for the tests of the agent alone."""

from __future__ import annotations

import json
import subprocess
import sys


class AgentProcess:
    def __init__(self, workdir, *extra, env=None):
        self.proc = subprocess.Popen([sys.executable, "-m", "heet_agent", "--workdir", str(workdir), "--host", "h1",
                                      *extra],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        self.next_id = 0

    def line(self):
        raw = self.proc.stdout.readline()
        assert raw, "agent closed stdout"
        return json.loads(raw)

    def send_raw(self, data: bytes):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def request(self, op, **args):
        self.next_id += 1
        self.send_raw(json.dumps({"id": self.next_id, "op": op, "args": args}).encode() + b"\n")
        while True:
            message = self.line()
            if message.get("id") == self.next_id:
                return message

    def events_until(self, name):
        while True:
            message = self.line()
            if message.get("event") == name:
                return message

    def close(self):
        self.proc.stdin.close()
        return self.proc.wait(timeout=10)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
