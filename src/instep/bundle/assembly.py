"""Builds one evidence bundle from a :class:`~instep.bundle.selection.Selection`.

Order of work: the reproducer (pytest command, standalone script for generated cases),
the stored evidence (outcome, attempts, output tails, version matrix), the debug re-run
(unless ``rerun=False``) with the re-run host's version matrix read meanwhile, the known
workaround from expected-failure lists, the issue text, ``bundle.json`` (the index), and
the archive. The bundle is ``OUT/<run>__<case or batch>/`` plus the same name
``.tar.gz``; everything is written through one redacting writer. Selection, re-running,
rendering and writing live in their own modules; this one only puts them together.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from instep.bundle.debug_rerun import RerunResult, debug_rerun, python_executable
from instep.bundle.issue_markdown import LABELS, IssueFacts, issue_title, render_issue
from instep.bundle.redaction import Redactor
from instep.bundle.reproducer import (
    pytest_argv,
    shell_line,
    standalone_script,
    suite_args,
)
from instep.bundle.selection import Selection
from instep.bundle.writer import MARKER, BundleWriter
from instep.doctor.version_matrix import read_version_matrix
from instep.outcome import MANIFESTATIONS
from instep.profiles import Profile
from instep.suites.expected_failures import load_lists
from instep.triage.classifier import Classifier

log = logging.getLogger(__name__)

BUNDLE_FORMAT = 1
MIN_RERUN_TIMEOUT_S = 120.0


@dataclass
class BundleResult:
    directory: Path
    archive: Path
    title: str
    files: list[str] = field(default_factory=list)
    rerun_status: str | None = None
    seconds: float = 0.0


def bundle_name(run_name: str, target: str) -> str:
    """A file-system-safe name: ``<run>__<case or batch>`` (at most 120 characters)."""
    tail = target.split("::", 1)[-1] if "::" in target else target
    raw = f"{run_name}__{tail}"
    return re.sub(r"[^A-Za-z0-9._-]+", "_", raw).strip("_")[:120]


def build_bundle(
    selection: Selection,
    profile: Profile,
    out_dir: Path,
    *,
    rerun: bool = True,
    lang: str = "en",
    timeout: float | None = None,
    expected_lists: Iterable[Any] = (),
) -> BundleResult:
    """Write the bundle of ``selection`` under ``out_dir``; returns where it is."""
    began = time.monotonic()
    run = selection.run
    settings = dict(run.get("settings") or {})
    outcome = selection.outcome
    redactor = Redactor().learn_env(os.environ, profile.env, profile.debug_env)
    writer = BundleWriter(out_dir / bundle_name(run["name"], selection.target), redactor)

    # -- reproducer ----------------------------------------------------------------------------
    cwd = str(settings.get("cwd") or Path.cwd())
    user_argv = pytest_argv(selection.case, settings, "python")
    line = shell_line(user_argv, cwd=cwd, env=dict(profile.env))
    writer.text("reproducer/pytest_command.sh", f"#!/bin/sh\n# {selection.case}\n{line}\n")
    args = suite_args(settings, profile.device_type, profile.dynamo_backend)
    if not args.backend_package and profile.backend_package:
        args = type(args)(**{**args.__dict__, "backend_package": profile.backend_package})
    script = standalone_script(selection.case, args)
    script_path = writer.text(f"reproducer/{script.name}", script.source) if script else None

    # -- stored evidence -----------------------------------------------------------------------
    logs: dict[str, str] = {}
    words = LABELS["zh" if lang == "zh" else "en"]
    for key, label in (
        ("stdout_tail", words["log_stdout"]),
        ("stderr_tail", words["log_stderr"]),
        ("longrepr", words["log_traceback"]),
    ):
        if outcome.get(key):
            logs[label] = writer.text(f"logs/stored_{key}.txt", str(outcome[key]))
    writer.json("outcome.json", outcome)
    if len(selection.attempts) > 1:
        writer.json("attempts.json", selection.attempts)
    if selection.batch is not None:
        writer.json("batch.json", selection.batch.as_dict())
        rows = [
            "\t".join((m["case"], m["status"], _first_line(m.get("message"))))
            for m in selection.members
        ]
        writer.text("cases.txt", "\n".join(rows) + "\n")

    # -- debug re-run --------------------------------------------------------------------------
    result: RerunResult | None = None
    rerun_matrix: dict[str, Any] | None = None
    artifacts: dict[str, list[str]] = {}
    same_signature: bool | None = None
    note = words["no_rerun"]
    if rerun:
        limit = timeout or max(2 * float(settings.get("timeout") or 300), MIN_RERUN_TIMEOUT_S)
        result, rerun_matrix = _rerun(selection, profile, settings, cwd, limit, writer)
        for kind, paths in result.artifacts.items():
            kept = [f"rerun/{p}" for p in paths if (writer.root / "rerun" / p).is_file()]
            if kept:
                artifacts[kind] = kept
        logs[words["log_rerun_output"]] = f"rerun/{result.output_file}"
        logs[words["log_rerun_environment"]] = "rerun/environment.txt"
        same_signature = _same_signature(profile, selection.case, outcome, result)
        note = ""
    writer.json(
        "version_matrix.json",
        {"run": run.get("version_matrix") or {}, "rerun_host": rerun_matrix},
    )

    # -- known workaround, issue, index ----------------------------------------------------------
    workaround = _workaround(selection.case, expected_lists)
    rerun_data = None
    if result is not None:
        rerun_data = {**result.as_dict(), "outcome": result.outcome}
    facts = IssueFacts(
        run=run,
        device_type=args.device,
        backend=args.backend,
        case=selection.case,
        outcome=outcome,
        attempts=selection.attempts,
        batch=selection.batch.as_dict() if selection.batch is not None else None,
        members=selection.members,
        rerun_matrix=rerun_matrix,
        pytest_line=line,
        script=script_path,
        rerun=rerun_data,
        rerun_note=note,
        rerun_same_signature=same_signature,
        artifacts=artifacts,
        logs=logs,
        workaround=workaround,
        skipped_files=writer.skipped,
    )
    title = redactor.text(issue_title(selection.case, outcome))
    writer.text("ISSUE.md", render_issue(facts, lang))
    seconds = time.monotonic() - began
    writer.json(
        MARKER,
        {
            "format": BUNDLE_FORMAT,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "title": title,
            "lang": lang,
            "run": {k: run.get(k) for k in ("name", "uid", "profile", "tier", "host", "argv")},
            "case": selection.case,
            "batch": selection.batch.id if selection.batch is not None else None,
            "reproducer": {"pytest": line, "script": script_path},
            "rerun": rerun_data and {k: v for k, v in rerun_data.items() if k != "outcome"},
            "rerun_same_signature": same_signature,
            "artifacts": artifacts,
            "logs": logs,
            "workaround": workaround,
            "skipped_files": writer.skipped,
            "seconds": round(seconds, 2),
            "files": writer.files(),
        },
    )
    archive = writer.archive()
    return BundleResult(
        writer.root,
        archive,
        title,
        writer.files(),
        result.status if result is not None else None,
        time.monotonic() - began,
    )


def _rerun(
    selection: Selection,
    profile: Profile,
    settings: dict[str, Any],
    cwd: str,
    limit: float,
    writer: BundleWriter,
) -> tuple[RerunResult, dict[str, Any] | None]:
    matrix: dict[str, Any] = {}

    def probe() -> None:
        try:
            matrix.update(read_version_matrix(profile).flat())
        except Exception as exc:  # the matrix is evidence, not a reason to lose the bundle
            matrix["errors"] = {"version_matrix": f"{type(exc).__name__}: {exc}"}

    thread = threading.Thread(target=probe, name="instep-bundle-matrix", daemon=True)
    thread.start()
    staging = Path(tempfile.mkdtemp(prefix="instep-bundle-"))
    try:
        argv = pytest_argv(selection.case, settings, python_executable())
        result = debug_rerun(
            argv, cwd, profile, staging, limit, device=selection.outcome.get("device")
        )
        writer.copy_tree(staging, "rerun")
        full_env = {**os.environ, **result.env}
        dump = "\n".join(f"{k}={v}" for k, v in writer.redactor.env(full_env).items())
        writer.text("rerun/environment.txt", dump + "\n")
        writer.json("rerun/rerun.json", result.as_dict())
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    thread.join(timeout=180)
    return result, matrix or None


def _same_signature(
    profile: Profile, case: str, stored: dict[str, Any], result: RerunResult
) -> bool | None:
    """Whether the re-run failed with the stored failure's signature (None: cannot tell)."""
    if result.outcome is None and result.status not in MANIFESTATIONS:
        return None
    if not stored.get("signature"):
        return None
    data = dict(result.outcome or {})
    data.update(status=result.status, case=case)
    if result.status == "crashed":
        data.update(signal=result.signal, stage=data.get("stage") or "call")
    try:
        found = Classifier(profile).classify(data)
    except Exception:  # evidence only
        log.exception("classifying the re-run of %s failed", case)
        return None
    return found is not None and found.signature == stored["signature"]


def _workaround(case: str, lists: Iterable[Any]) -> dict[str, Any] | None:
    paths = [Path(p) for p in lists]
    if not paths:
        return None
    for entry in load_lists(paths):
        if entry.matches(case):
            return {**entry.as_dict(), "source": entry.source}
    return None


def _first_line(text: Any) -> str:
    return next((ln.strip() for ln in str(text or "").splitlines() if ln.strip()), "")
