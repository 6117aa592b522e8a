"""A line of progress on stderr at least every HEARTBEAT_S seconds while a
long command runs and stderr is a file or a pipe (a batch job's log, a CI
step), where no bar is drawn: the log shows the command is alive, what it
runs, how far it is and about how long is left."""

from __future__ import annotations

import threading
import time

from rich.console import Console

from oddnode.core.units import duration

HEARTBEAT_S = 30.0


class Heartbeat:
    """The progress of the step under way, said every ``period`` seconds by
    a thread of its own (a step may take minutes between two updates)."""

    def __init__(self, out: Console, period: float | None = None):
        self.out = out
        self.period = HEARTBEAT_S if period is None else period
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="oddnode-progress", daemon=True)
        self.label = "starting"  # rich markup: labels escape what they quote
        self.done: int = 0
        self.total: int | None = None
        self.started = self.step_started = time.monotonic()

    def __enter__(self) -> Heartbeat:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stopped.set()
        self._thread.join()

    def update(self, label: str | None = None, done: int | None = None, total: int | None = None) -> None:
        """A new step (``label``) restarts the step's clock; ``done`` of ``total`` is its progress."""
        with self._lock:
            if label is not None and label != self.label:
                self.label, self.step_started, self.done, self.total = label, time.monotonic(), 0, None
            if done is not None:
                self.done = done
            if total is not None:
                self.total = total

    def line(self) -> str:
        """progress: STEP, DONE/TOTAL, ELAPSED in this step, about LEFT left (total elapsed)."""
        with self._lock:
            now = time.monotonic()
            in_step = now - self.step_started
            parts = [f"progress: {self.label}"]
            if self.total:
                parts.append(f"{self.done}/{self.total}")
            parts.append(f"{duration(in_step)} in this step")
            if self.total and 0 < self.done < self.total:
                # The rest of the step at the pace of its part done.
                parts.append(f"about {duration(in_step / self.done * (self.total - self.done))} left")
            return ", ".join(parts) + f" ({duration(now - self.started)} in all)"

    def _beat(self) -> None:
        while not self._stopped.wait(self.period):
            self.out.print(self.line(), highlight=False, soft_wrap=True)
