"""Re-run one case with torch.compile's debugging on and collect what the compiler wrote.

The case runs in a plain ``python -m pytest NODEID -p no:cacheprovider`` subprocess (its
own process group, the run's working directory and pytest arguments), with:
``TORCH_COMPILE_DEBUG=1`` and ``TORCH_COMPILE_DEBUG_DIR`` (FX graphs, Inductor IR before
and after fusion, output code), ``TORCH_TRACE`` (the structured trace tlparse reads),
``TORCH_LOGS`` (graph code, post-AOT graphs, output code, graph breaks, recompiles),
a fresh ``TORCHINDUCTOR_CACHE_DIR``/``TRITON_CACHE_DIR`` (no cache hit may skip code
generation; the kernel sources and their metadata are then exactly this case's),
``PYTHONFAULTHANDLER`` (a crash or a hang dumps the Python stacks), the profile's ``env``
and ``debug_env`` (whose values may name ``{logs}``, a directory collected into the
bundle: plog/device logs), and the device the case ran on. The run's time limit applies:
a time-out sends SIGABRT (stack dump), then SIGKILL to the group; a death by signal is
recorded as ``crashed``. ``rerun_plugin`` writes the re-run's structured outcome.
Artifacts are sorted into kinds; ``tlparse`` runs on the trace when it is on PATH.
Nothing here writes the bundle (``writer.py``) or renders (``issue_markdown.py``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep.bundle.rerun_plugin import ENV_OUTCOME
from instep.profiles import Profile
from instep.run.host_protocol import signal_name

#: TORCH_LOGS when the profile's debug_env does not set it.
DEFAULT_TORCH_LOGS = "graph_code,aot_graphs,output_code,graph_breaks,recompiles"
ABORT_GRACE_S = 3.0
TLPARSE_TIMEOUT_S = 300
#: Artifact kinds, in the order the issue lists them.
KINDS = (
    "fx_graph",
    "aot_graphs",
    "inductor_ir",
    "output_code",
    "kernel_source",
    "kernel_metadata",
    "compile_logs",
    "trace",
    "tlparse",
    "device_logs",
)
_KERNEL_SOURCE = (".cpp", ".h", ".c", ".cu", ".ttir", ".ttgir", ".llir", ".ptx", ".amdgcn", ".mlir")
_SKIP_SUFFIX = (".so", ".lock", ".o", ".pyc", ".cubin", ".hsaco", ".bin", ".npubin", ".pt")


@dataclass
class RerunResult:
    """What the debug re-run gave; paths are relative to ``workdir``."""

    argv: list[str]
    cwd: str
    env: dict[str, str]  # the variables set on top of the inherited environment
    workdir: Path
    status: str  # the re-run outcome's status, or crashed / timeout / error
    returncode: int | None
    signal: str | None = None
    duration: float = 0.0
    outcome: dict[str, Any] | None = None
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    tlparse_note: str = ""
    output_file: str = "output.txt"

    def as_dict(self) -> dict[str, Any]:
        return {
            "argv": self.argv,
            "cwd": self.cwd,
            "env": self.env,
            "status": self.status,
            "returncode": self.returncode,
            "signal": self.signal,
            "duration": round(self.duration, 3),
            "artifacts": self.artifacts,
            "tlparse": self.tlparse_note,
            "output_file": self.output_file,
        }


def debug_environment(
    profile: Profile, workdir: Path, cache_dir: Path, device: str | None = None
) -> dict[str, str]:
    """The variables a debug re-run sets (over the inherited environment)."""
    logs = workdir / "device_logs"
    env = dict(profile.env)
    env.update(
        {
            "TORCH_COMPILE_DEBUG": "1",
            "TORCH_COMPILE_DEBUG_DIR": str(workdir / "debug"),
            "TORCH_TRACE": str(workdir / "torch_trace"),
            "TORCH_LOGS": DEFAULT_TORCH_LOGS,
            "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
            "TRITON_CACHE_DIR": str(cache_dir / "triton"),
            "PYTHONFAULTHANDLER": "1",
            "PYTHONUNBUFFERED": "1",
        }
    )
    env.update({k: v.replace("{logs}", str(logs)) for k, v in profile.debug_env.items()})
    if profile.visible_devices_env and device:
        env[profile.visible_devices_env] = device
    env[ENV_OUTCOME] = str(workdir / "outcome.json")
    return env


def debug_rerun(
    argv: list[str],
    cwd: str,
    profile: Profile,
    workdir: Path,
    timeout: float,
    device: str | None = None,
) -> RerunResult:
    """Run ``argv`` (a pytest command) with debugging on; artifacts land in ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "device_logs").mkdir(exist_ok=True)
    cache_dir = Path(tempfile.mkdtemp(prefix="instep-bundle-cache-"))
    try:
        env = debug_environment(profile, workdir, cache_dir, device)
        argv = [*argv, "-p", "instep.bundle.rerun_plugin", "-s", "-v", "--tb=long"]
        result = _execute(argv, cwd, env, workdir, timeout)
        _collect_cache(cache_dir, workdir / "inductor_cache")
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    result.artifacts = classify_artifacts(workdir)
    result.tlparse_note = run_tlparse(workdir)
    if (workdir / "tlparse").is_dir():
        result.artifacts["tlparse"] = sorted(
            str(p.relative_to(workdir)) for p in (workdir / "tlparse").rglob("*") if p.is_file()
        )
    env_shown = {k: v for k, v in env.items() if k != ENV_OUTCOME}
    result.env = env_shown
    return result


def _execute(
    argv: list[str], cwd: str, env: dict[str, str], workdir: Path, timeout: float
) -> RerunResult:
    output = workdir / "output.txt"
    started = time.monotonic()
    status, sig, code = "error", None, None
    with open(output, "wb") as out:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd if Path(cwd).is_dir() else None,
                env={**os.environ, **env},
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            out.write(f"instep bundle: could not start {argv[0]}: {exc}\n".encode())
            return RerunResult(argv, cwd, env, workdir, "error", None)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            status = "timeout"
            _abort_group(proc)
            code = proc.returncode
            out.flush()
            out.write(f"\ninstep bundle: re-run timed out after {timeout:g}s\n".encode())
    duration = time.monotonic() - started
    outcome = _read_outcome(workdir / "outcome.json")
    if status != "timeout":
        if code is not None and code < 0:
            status, sig = "crashed", signal_name(-code)
        elif outcome is not None:
            status = str(outcome.get("status") or "error")
        elif code == 0:
            status = "passed"
        else:
            status = "error"  # collection failed, or pytest never reached the case
    elif code is not None and code < 0:
        sig = signal_name(-code)
    return RerunResult(argv, cwd, env, workdir, status, code, sig, duration, outcome)


def _abort_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGABRT first (faulthandler dumps every thread's stack), then SIGKILL the group."""
    for sig, grace in ((signal.SIGABRT, ABORT_GRACE_S), (signal.SIGKILL, 10.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace)
            if sig == signal.SIGKILL:
                return
        except subprocess.TimeoutExpired:
            continue
    with contextlib.suppress(ProcessLookupError):  # nothing of the group may live on
        os.killpg(proc.pid, signal.SIGKILL)


def _read_outcome(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _collect_cache(cache_dir: Path, target: Path) -> None:
    """Kernel sources, generated modules and metadata of the fresh cache (no binaries)."""
    for path in sorted(cache_dir.rglob("*")):
        if not path.is_file() or path.suffix in _SKIP_SUFFIX or path.name.endswith(".debug.lock"):
            continue
        rel = path.relative_to(cache_dir)
        if rel.parts[0] in ("fxgraph", "aotautograd", "locks"):
            continue  # pickled cache entries: not readable evidence
        if any(part.endswith(".debug") for part in rel.parts[:-1]):
            continue  # a copy of the debug dir's files
        dest = target / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, dest)


def classify_artifacts(workdir: Path) -> dict[str, list[str]]:
    """Files under ``workdir`` by kind (:data:`KINDS`), as paths relative to it."""
    kinds: dict[str, list[str]] = {k: [] for k in KINDS}
    for path in sorted(workdir.rglob("*")):
        if not path.is_file():
            continue
        rel = str(path.relative_to(workdir))
        kind = _kind(path, rel)
        if kind is not None:
            kinds[kind].append(rel)
    return {k: v for k, v in kinds.items() if v}


def _kind(path: Path, rel: str) -> str | None:
    name = path.name
    top = rel.split("/", 1)[0]
    if top == "tlparse":
        return "tlparse"
    if top == "torch_trace":
        return "trace"
    if top == "device_logs":
        return "device_logs"
    if name.startswith("fx_graph"):
        return "fx_graph"
    if "aot" in name and name.endswith((".log", ".py", ".txt")):
        return "aot_graphs"
    if name.startswith("ir_") and name.endswith(".txt"):
        return "inductor_ir"
    if name == "output_code.py" or (top == "inductor_cache" and path.suffix == ".py"):
        return "output_code"
    if path.suffix in _KERNEL_SOURCE:
        return "kernel_source"
    if path.suffix == ".json" and top in ("inductor_cache", "debug"):
        return "kernel_metadata"
    if name.endswith(".log") and top == "debug":
        return "compile_logs"
    return None


def run_tlparse(workdir: Path) -> str:
    """Run ``tlparse`` on each trace log into ``workdir/tlparse``; say what happened."""
    logs = sorted((workdir / "torch_trace").glob("*.log"))
    if not logs:
        return "no TORCH_TRACE log was written (the case compiled nothing?)"
    exe = shutil.which("tlparse")
    if exe is None:
        return (
            "tlparse is not on PATH: install it (pip install tlparse) and run"
            f" 'tlparse {logs[0].relative_to(workdir)} -o tl_out' in this directory"
        )
    notes = []
    for log in logs:
        out = workdir / "tlparse" / (log.stem if len(logs) > 1 else "")
        try:
            proc = subprocess.run(
                [exe, str(log), "-o", str(out), "--overwrite", "--no-browser"],
                capture_output=True,
                text=True,
                timeout=TLPARSE_TIMEOUT_S,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            notes.append(f"tlparse failed on {log.name}: {exc}")
            continue
        if proc.returncode != 0:
            last = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
            notes.append(f"tlparse exited {proc.returncode} on {log.name}: {last[0]}")
        else:
            notes.append(f"tlparse report of {log.name}: {out.relative_to(workdir)}/index.html")
    return "; ".join(notes)


def python_executable() -> str:
    """The interpreter the re-run uses: the one instep runs in (as the worker hosts do)."""
    return sys.executable
