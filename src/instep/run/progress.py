"""The live view of ``instep run``: a rich progress bar with counts and ETA, and the summary.

A :class:`~instep.run.runner.RunReporter` that draws on stderr (stdout stays clean for
``--collect-only`` lists and scripts). Counts are of *final* outcomes; reruns show as
"rerun". It renders what the runner tells it and decides nothing.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.table import Table

from instep.outcome import FAILING
from instep.run.runner import RunReporter, RunResult

if TYPE_CHECKING:
    from instep.store import Run

_STYLE = {
    "passed": "green",
    "failed": "red",
    "error": "red",
    "crashed": "bold red",
    "timeout": "magenta",
    "skipped": "yellow",
    "xfailed": "yellow",
    "xpassed": "yellow",
}


class ProgressReporter(RunReporter):
    def __init__(self, console: Console | None = None, max_failures_listed: int = 25) -> None:
        self.console = console or Console(stderr=True)
        self.counts: Counter[str] = Counter()
        self.reruns = 0
        self.failures: list[tuple[str, str, str]] = []
        self.max_failures_listed = max_failures_listed
        self.progress = Progress(
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[counts]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=self.console,
            transient=False,
        )
        self.task: Any = None

    def run_started(self, run: Run, resumed: bool) -> None:
        verb = "resuming" if resumed else "run"
        self.console.print(f"instep: {verb} [bold]{run.name}[/bold] (profile {run.profile})")

    def plan_ready(self, total: int, already_done: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task(
            "cases", total=total, completed=already_done, counts=self._counts_text()
        )

    def _counts_text(self) -> str:
        parts = [
            f"[{_STYLE[s]}]{s} {self.counts[s]}[/]"
            for s in ("passed", "failed", "error", "crashed", "timeout", "skipped")
            if self.counts[s]
        ]
        if self.reruns:
            parts.append(f"rerun {self.reruns}")
        return " ".join(parts)

    def outcome(self, nodeid: str, status: str, final: bool, data: dict[str, Any]) -> None:
        if not final:
            self.reruns += 1
        else:
            self.counts[status] += 1
            if status in FAILING:
                self.failures.append((nodeid, status, (data.get("message") or "").strip()))
        if self.task is not None:
            self.progress.update(self.task, advance=1 if final else 0, counts=self._counts_text())

    def tick(self) -> None:
        if self.task is not None:
            self.progress.refresh()

    def run_finished(self, result: RunResult) -> None:
        self.progress.stop()
        if self.failures:
            table = Table(title="failures", title_justify="left")
            width = case_width(self.console.width, share=0.5)
            table.add_column("case", no_wrap=True, min_width=width)
            table.add_column("status")
            table.add_column("message")
            for nodeid, status, message in self.failures[: self.max_failures_listed]:
                first = message.splitlines()[0][:160] if message else ""
                table.add_row(node_tail(nodeid, width), f"[{_STYLE[status]}]{status}[/]", first)
            self.console.print(table)
            if len(self.failures) > self.max_failures_listed:
                more = len(self.failures) - self.max_failures_listed
                self.console.print(f"… and {more} more (instep show {result.run.name})")
        print_summary(self.console, result)


def case_width(console_width: int, share: float) -> int:
    """Columns for a node id in a table: ``share`` of the terminal, 24 at least."""
    return max(24, int(console_width * share) - 4)


def node_tail(nodeid: str, width: int) -> str:
    """A node id cut from the left to ``width``: the class and test name are what tell
    cases apart (``test_torchinductor_opinfo.py::T…`` says nothing)."""
    if len(nodeid) <= width:
        return nodeid
    return "…" + nodeid[len(nodeid) - width + 1 :]


def print_summary(console: Console, result: RunResult) -> None:
    counts = result.counts
    parts = [f"{counts[s]} {s}" for s in _STYLE if counts[s]]
    done = sum(counts.values())
    missing = result.planned - done
    if missing > 0:
        parts.append(f"{missing} not run")
    summary = ", ".join(parts) or "no tests ran"
    console.print(
        f"instep: run [bold]{result.run.name}[/bold] {result.status}: {summary}"
        f" in {result.wall_s:.1f}s",
        highlight=False,
    )
