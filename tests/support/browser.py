"""Chromium, headless, for the tests that render our HTML reports."""

from __future__ import annotations

import shutil
import subprocess


CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


# No network, no first-run work, a fresh profile: the flags a headless
# Chromium needs on a machine without outside access.
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def chromium(*args: str, profile) -> subprocess.CompletedProcess[str]:
    return subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
                          capture_output=True, text=True, timeout=120)
