"""A long command run as a batch job runs it, stdout and stderr to files,
says how far it is on stderr at least every 30 s (docs/commands.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import time

from oddnode.app.cli.progress import HEARTBEAT_S

SECONDS = 2 * HEARTBEAT_S + 5  # two heartbeats, and time to end
SLACK_S = 10  # a loaded machine may start the command or print a line late


def test_a_long_command_writes_a_progress_line_at_least_every_30_s(tmp_path):
    sleeper = subprocess.Popen(["sleep", str(SECONDS + 60)])
    out, err = tmp_path / "out.json", tmp_path / "err.log"
    try:
        with open(out, "w") as stdout, open(err, "w") as stderr:
            command = subprocess.Popen([sys.executable, "-m", "oddnode", "affinity", "--pid", str(sleeper.pid),
                                        "--seconds", str(SECONDS), "--json"],
                                       stdout=stdout, stderr=stderr, cwd=tmp_path)
            started, seen = time.monotonic(), []  # when each progress line first showed in the file
            while command.poll() is None and time.monotonic() - started < SECONDS + 120:
                lines = [line for line in err.read_text().splitlines() if line.startswith("progress: ")]
                seen += [time.monotonic() - started] * (len(lines) - len(seen))
                time.sleep(0.5)
            assert command.wait(timeout=60) in (0, 1), err.read_text()
            ended = time.monotonic() - started
    finally:
        sleeper.kill()
        sleeper.wait()
    assert len(seen) >= 2, err.read_text()
    gaps = [b - a for a, b in zip([0.0, *seen], [*seen, ended])]
    assert max(gaps) <= HEARTBEAT_S + SLACK_S, (gaps, err.read_text())
    assert all(line.startswith("progress: affinity: ") for line in err.read_text().splitlines()
               if line.startswith("progress"))
    assert json.loads(out.read_text())["nodes"]  # stdout holds the document alone
