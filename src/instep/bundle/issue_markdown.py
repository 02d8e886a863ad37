"""The issue text of an evidence bundle, in the form of seed 000 Appendix B (en / zh).

Title ``[Layer][Operator] short description``; then the sections of the template:
environment (version matrix), test (id, reproducer), comparison (CPU eager, device
eager, compiled), first failing stage and its evidence, artifacts, host logs, regression
test id, known workaround, and the human parts (root cause, fix, risk) with the
escalation target and what it needs from seed 000 section 8. :class:`IssueFacts` holds
what the renderer reads, all of it already gathered (``assembly.py``); this module
decides wording only. Every figure it prints comes from the stored outcome or the re-run.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from instep import glossary
from instep.layers import LAYER_DESCRIPTIONS, Layer
from instep.outcome import MANIFESTATIONS
from instep.suites.case_record import LEGS, read_case_figures
from instep.tomlfile import load_toml

MAX_DESCRIPTION = 90
MAX_MEMBERS_LISTED = 50

_OP_TARGET = re.compile(r"target:\s*(?:torch\.ops\.)?(aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)")
_OP_ANY = re.compile(r"\b(?:torch\.ops\.)?(aten\.[A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)?)")
#: Exceptions that only carry an inner one (the title then shows the innermost).
WRAPPERS = frozenset(
    {"BackendCompilerFailed", "InductorError", "LoweringException", "TorchRuntimeError"}
)
_PARAM = re.compile(r"^(?P<name>[^\[]+)(?:\[(?P<param>.*)\])?$")


@dataclass
class IssueFacts:
    """Everything the issue shows, gathered beforehand (redaction happens at write time)."""

    run: dict[str, Any]  # run_dict
    device_type: str
    backend: str
    case: str
    outcome: dict[str, Any]  # outcome_dict of the final attempt
    attempts: list[dict[str, Any]] = field(default_factory=list)
    batch: dict[str, Any] | None = None  # Batch.as_dict()
    members: list[dict[str, Any]] = field(default_factory=list)
    rerun_matrix: dict[str, Any] | None = None
    pytest_line: str = ""
    script: str | None = None  # bundle path of the standalone script
    rerun: dict[str, Any] | None = None  # RerunResult.as_dict() + "outcome"
    rerun_note: str = ""
    rerun_same_signature: bool | None = None
    artifacts: dict[str, list[str]] = field(default_factory=dict)  # kind -> bundle paths
    logs: dict[str, str] = field(default_factory=dict)  # label -> bundle path
    workaround: dict[str, Any] | None = None
    skipped_files: list[str] = field(default_factory=list)


# -- title -------------------------------------------------------------------------------------


def layer_label(layer: str | None) -> str:
    """``kernel_compile`` -> ``KernelCompile``; unknown -> ``Unclassified``."""
    if not layer:
        return "Unclassified"
    return "".join(part.capitalize() for part in str(layer).split("_"))


def operator_of(case: str, outcome: dict[str, Any]) -> str:
    """The operator a failure is about: the OpInfo op, an ``aten`` target named by the
    compiler, or else the smoke case / test name."""
    test = case.split("::")[-1]
    match = _PARAM.match(test)
    name, param = (match["name"], match["param"]) if match else (test, None)
    if name == "test_opinfo" and param:
        return param.rpartition("-")[0] or param
    texts = [str(e.get("message") or "") for e in outcome.get("exception_chain") or []]
    texts.append(str(outcome.get("message") or ""))
    for pattern in (_OP_TARGET, _OP_ANY):
        for text in texts:
            found = pattern.search(text)
            if found:
                return found.group(1).removesuffix(".default")
    if param:
        return param
    return name.removeprefix("test_") or name


def short_description(outcome: dict[str, Any]) -> str:
    """The root exception's type and first line, or the crash / time-out, shortened."""
    status = outcome.get("status")
    if status in MANIFESTATIONS:
        text = str(outcome.get("message") or status)
    else:
        text = ""
        chain = [e for e in outcome.get("exception_chain") or [] if e.get("message")]
        # the outermost says what the test saw, unless it only wraps the compiler's error
        if chain and _short_type(chain[0]) in WRAPPERS:
            chain = chain[::-1]
        for exc in chain[:1]:
            short_type = _short_type(exc)
            text = f"{short_type}: {exc['message']}" if short_type else str(exc["message"])
        if not text:
            text = str(outcome.get("message") or outcome.get("exception_type") or status)
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), str(status))
    first = " ".join(first.split())
    return glossary.cut(first, MAX_DESCRIPTION)


def _short_type(exc: dict[str, Any]) -> str:
    return str(exc.get("type") or "").rsplit(".", 1)[-1]


def issue_title(case: str, outcome: dict[str, Any]) -> str:
    """``[Layer][Operator] short description`` (seed 000 Appendix B)."""
    return (
        f"[{layer_label(outcome.get('layer'))}][{operator_of(case, outcome)}] "
        f"{short_description(outcome)}"
    )


# -- wording -----------------------------------------------------------------------------------

LABELS: dict[str, dict[str, str]] = {
    "en": {
        "environment": "Environment",
        "matrix_run": "Version matrix recorded by the run",
        "matrix_rerun": "Version matrix of the host that re-ran the case",
        "run": "Run",
        "run_line": "`{name}` (profile `{profile}`, tier `{tier}`, host `{host}`, {started})",
        "test": "Test",
        "test_id": "Test ID",
        "status": "Stored outcome",
        "attempts": "Attempts",
        "flaky": "flaky",
        "reproducer": "Minimal reproducer",
        "pytest": "pytest command",
        "script": "Standalone script (torch only, no instep/pytest)",
        "no_script": "none (not a case instep generates: the pytest command is the reproducer)",
        "comparison": "Comparison",
        "cpu_eager": "CPU eager (reference)",
        "device_eager": "{device} eager (device leg)",
        "compiled": "{device} compiled ({backend})",
        "stored": "stored",
        "rerun": "debug re-run",
        "not_recorded": "not recorded",
        "no_triad": "(the case does not run instep's triad: the legs are not recorded)",
        "first_stage": "First failing stage",
        "stage": "Stage",
        "category": "category",
        "pytest_phase": "pytest phase",
        "compile_stage": "compile stage",
        "confidence": "confidence",
        "decided_by": "decided by",
        "evidence": "Evidence",
        "frame": "frame",
        "rule": "rule `{category}` matched `{matched}`",
        "ladder": "backend ladder",
        "stack": "stack at crash/time-out",
        "numerics": "numerics",
        "signature": "signature",
        "chain": "Exception chain (outermost first)",
        "artifacts": "Artifacts",
        "none": "none",
        "none_recorded": "(none recorded)",
        "missing": "missing",
        "logs": "Host / plog / device logs",
        "regression": "Regression test ID",
        "workaround": "Known workaround and its performance impact",
        "no_workaround": "none known: no expected-failure list entry matches this case",
        "layer": "layer",
        "perf": "Performance impact: not measured (fill in)",
        "batch": "Batch",
        "batch_cases": "{n} cases",
        "members": "Cases of the batch",
        "more": "… {n} more in cases.txt",
        "root_cause": "Root cause",
        "fix": "Proposed fix",
        "risk": "Risk and regression scope",
        "owner": "Ownership / escalation target",
        "needs": "Must be provided when escalating",
        "fill": "_(to be filled in by the owner)_",
        "reproduced": "reproduced: same signature as the stored failure",
        "not_reproduced": "the re-run gave a different result than the stored outcome",
        "rerun_skipped": "not run",
        "no_rerun": "not run (--no-rerun)",
        "log_stdout": "stored stdout tail",
        "log_stderr": "stored stderr tail",
        "log_traceback": "stored traceback",
        "log_rerun_output": "debug re-run output (full)",
        "log_rerun_environment": "debug re-run environment",
        "skipped_files": "Left out of the bundle",
        "culprit": "Likely upstream cause (instep triage --impact)",
        "culprit_coupling": "through",
    },
    "zh": glossary.texts("issue", {}, "zh"),
}

ARTIFACT_LABELS: dict[str, dict[str, str]] = {
    "en": {
        "fx_graph": "FX graph",
        "aot_graphs": "Post-AOT graphs",
        "inductor_ir": "Inductor IR",
        "output_code": "Generated code",
        "kernel_source": "Kernel sources",
        "kernel_metadata": "Kernel metadata",
        "compile_logs": "Compile logs",
        "trace": "TORCH_TRACE",
        "tlparse": "tlparse report",
        "device_logs": "Device logs",
    },
    "zh": glossary.texts("artifacts", {}, "zh"),
}

ESCALATION = Path(__file__).resolve().parent / "data" / "escalation.toml"


@functools.lru_cache(maxsize=1)
def escalation_table() -> dict[str, Any]:
    """Seed 000 section 8 as data: layer -> owner and what the escalation must carry."""
    return load_toml(ESCALATION)


# -- rendering ---------------------------------------------------------------------------------


def render_issue(facts: IssueFacts, lang: str = "en") -> str:
    """The issue markdown of ``facts`` in ``lang`` (``en`` or ``zh``)."""
    t = LABELS["zh" if lang == "zh" else "en"]
    art = ARTIFACT_LABELS["zh" if lang == "zh" else "en"]
    code = "zh" if lang == "zh" else "en"
    o = facts.outcome
    device = facts.device_type.upper()
    out: list[str] = [f"# {issue_title(facts.case, o)}", ""]

    out += [f"## {t['environment']}", "", f"{t['matrix_run']}:", ""]
    out += _matrix_lines(facts.run.get("version_matrix") or {}, t)
    if facts.rerun_matrix:
        out += ["", f"{t['matrix_rerun']}:", "", *_matrix_lines(facts.rerun_matrix, t)]
    run = facts.run
    run_line = t["run_line"].format(
        name=run.get("name"),
        profile=run.get("profile"),
        tier=run.get("tier") or "-",
        host=run.get("host") or "-",
        started=run.get("started_at") or "",
    )
    out += ["", f"- {t['run']}: {run_line}", ""]

    out += [f"## {t['test']}", "", f"- {t['test_id']}: `{facts.case}`"]
    out.append(
        f"- {t['status']}: **{glossary.status(o.get('status'), code)}**"
        + (f" ({o.get('duration'):.2f} s)" if isinstance(o.get("duration"), (int, float)) else "")
    )
    if len(facts.attempts) > 1:
        states = ", ".join(
            f"#{a.get('attempt')} {glossary.status(a.get('status'), code)}" for a in facts.attempts
        )
        flaky = f" ({t['flaky']})" if o.get("flaky") else ""
        out.append(f"- {t['attempts']}: {states}{flaky}")
    out += [f"- {t['reproducer']}:", f"  - {t['pytest']}:", "", "    ```sh"]
    out += [f"    {facts.pytest_line}", "    ```", ""]
    out.append(
        f"  - {t['script']}: "
        + (f"[{facts.script}]({facts.script})" if facts.script else t["no_script"])
    )
    out.append("")

    out += [f"## {t['comparison']}", ""]
    out += _comparison_lines(facts, t, device, code)
    out.append("")

    out += [f"## {t['first_stage']}", ""]
    out += _stage_lines(o, t, code)
    out.append("")

    culprits = (o.get("evidence") or {}).get("culprits") or []
    if culprits:
        out += [f"## {t['culprit']}", "", *_culprit_lines(culprits, t), ""]

    out += [f"## {t['artifacts']}", ""]
    for kind, label in art.items():
        if kind == "device_logs":
            continue
        paths = facts.artifacts.get(kind) or []
        if kind == "tlparse" and facts.rerun is not None:
            index = [p for p in paths if p.endswith("/index.html")]
            note = facts.rerun.get("tlparse") or t["none"]
            out.append(f"- {label}: " + (_links(index) if index else note))
            continue
        out.append(f"- {label}: " + (_links(paths) if paths else t["none"]))
    if facts.rerun is None:
        out.append(f"- ({t['rerun']}: {facts.rerun_note or t['rerun_skipped']})")
    logs = [f"[{label}]({path})" for label, path in facts.logs.items()]
    logs += [f"[{p}]({p})" for p in facts.artifacts.get("device_logs") or []]
    out.append(f"- {t['logs']}: " + (", ".join(logs) if logs else t["none"]))
    if facts.skipped_files:
        out.append(f"- {t['skipped_files']}: " + "; ".join(facts.skipped_files[:20]))
    out.append("")

    if facts.batch is not None:
        b = facts.batch
        out += [
            f"## {t['batch']}",
            "",
            f"- `{b['batch']}`: {b.get('layer') or '?'} / {b.get('category') or '?'} — "
            f"`{b.get('signature') or ''}`",
            f"- {t['batch_cases'].format(n=b['size'])}: "
            + ", ".join(
                f"{n} {glossary.status(s, code)}"
                for s, n in sorted((b.get("statuses") or {}).items())
            ),
            f"- {t['members']}:",
            "",
        ]
        for m in facts.members[:MAX_MEMBERS_LISTED]:
            out.append(f"  - `{m['case']}` {glossary.status(m['status'], code)}")
        if len(facts.members) > MAX_MEMBERS_LISTED:
            out.append("  - " + t["more"].format(n=len(facts.members) - MAX_MEMBERS_LISTED))
        out.append("")

    out += [f"## {t['regression']}", "", f"- `{facts.case}`"]
    if facts.batch is not None:
        out.append(
            f"- `instep tier L2 --from-run {run.get('name')}` (batch `{facts.batch['batch']}`)"
        )
    out.append("")

    out += [f"## {t['workaround']}", ""]
    w = facts.workaround
    if w:
        line = f"- {w.get('reason') or '-'}"
        extras = [f"{t['layer']} {w['layer']}" if w.get("layer") else "", w.get("issue") or ""]
        extras = [e for e in extras if e]
        out.append(line + (f" ({'; '.join(extras)})" if extras else ""))
        if w.get("source"):
            out.append(f"- `{w['source']}`: `{w.get('case')}`")
    else:
        out.append(f"- {t['no_workaround']}")
    out += [f"- {t['perf']}", ""]

    layer = str(o.get("layer") or "")
    owner = escalation_table().get(layer)
    out += [f"## {t['root_cause']}", "", t["fill"], "", f"## {t['fix']}", "", t["fill"], ""]
    out += [f"## {t['risk']}", "", t["fill"], "", f"## {t['owner']}", ""]
    if owner:
        out += [f"- {owner[f'owner_{code}']}", f"- {t['needs']}: {owner[f'needs_{code}']}"]
    else:
        out.append(t["fill"])
    out.append("")
    return "\n".join(out)


def _culprit_lines(culprits: list[dict[str, Any]], t: dict[str, str]) -> list[str]:
    """The upstream units triage tied the failure to, best first, with their evidence."""
    lines = []
    for c in culprits:
        pr = f"PR #{c['pr']}: " if c.get("pr") else ""
        title = c.get("title") or c.get("unit")
        lines.append(f"- {pr}{title} (`{c.get('unit')}`): {c.get('action')}, {c.get('confidence')}")
        coupling = c.get("coupling") or {}
        if coupling.get("downstream"):
            lines.append(
                f"  - {t['culprit_coupling']} {coupling.get('kind')} `{coupling.get('upstream')}`"
                f" -> `{coupling.get('downstream')}`"
            )
        for e in (c.get("evidence") or [])[:3]:
            lines.append(f"  - {e.get('detail')}")
    return lines


def _matrix_lines(matrix: dict[str, Any], t: dict[str, str]) -> list[str]:
    if not matrix:
        return [f"- {t['none_recorded']}"]
    lines = []
    for key, value in matrix.items():
        if key == "errors" and isinstance(value, dict):
            lines += [f"- {k}: **{t['missing']}** ({v})" for k, v in value.items()]
        else:
            lines.append(f"- {key}: `{value}`" if value is not None else f"- {key}: -")
    return lines


def _links(paths: list[str]) -> str:
    shown = [f"[{p.rsplit('/', 1)[-1]}]({p})" for p in paths[:12]]
    if len(paths) > 12:
        shown.append(f"+{len(paths) - 12}")
    return ", ".join(shown)


def _legs(outcome: dict[str, Any] | None) -> dict[str, str]:
    return read_case_figures((outcome or {}).get("metrics"))["triad"] if outcome else {}


def _comparison_lines(facts: IssueFacts, t: dict[str, str], device: str, code: str) -> list[str]:
    stored = _legs(facts.outcome)
    rerun_outcome = (facts.rerun or {}).get("outcome")
    rerun = _legs(rerun_outcome)
    labels = {
        "eager_cpu": t["cpu_eager"],
        "eager_device": t["device_eager"].format(device=device),
        "compiled_device": t["compiled"].format(device=device, backend=facts.backend),
    }
    lines: list[str] = []
    for leg in LEGS:
        state = stored.get(leg)
        parts = [
            f"{t['stored']}: {glossary.leg_state(state, code) if state else t['not_recorded']}"
        ]
        if facts.rerun is not None:
            state = rerun.get(leg)
            parts.append(
                f"{t['rerun']}: {glossary.leg_state(state, code) if state else t['not_recorded']}"
            )
        lines.append(f"- {labels[leg]}: " + ", ".join(parts))
    if not stored and not rerun:
        lines.append(f"- {t['no_triad']}")
    stored_desc = short_description(facts.outcome)
    stored_status = glossary.status(facts.outcome.get("status"), code)
    lines.append(f"- {t['stored']}: {stored_status} — `{stored_desc}`")
    if facts.rerun is not None:
        rerun_desc = glossary.status(facts.rerun.get("status"), code)
        if rerun_outcome and rerun_outcome.get("status") not in ("passed", None):
            rerun_desc = f"{rerun_desc} — `{short_description(rerun_outcome)}`"
        if facts.rerun.get("signal"):
            rerun_desc = f"{rerun_desc} ({facts.rerun['signal']})"
        lines.append(f"- {t['rerun']}: {rerun_desc} ({facts.rerun.get('duration')} s)")
        if facts.rerun_same_signature is not None:
            lines.append(
                f"  - {t['reproduced'] if facts.rerun_same_signature else t['not_reproduced']}"
            )
    else:
        lines.append(f"- {t['rerun']}: {facts.rerun_note or t['rerun_skipped']}")
    return lines


def _stage_lines(o: dict[str, Any], t: dict[str, str], code: str) -> list[str]:
    layer = o.get("layer")
    try:
        desc = LAYER_DESCRIPTIONS[Layer(layer)] if layer else ""
    except ValueError:
        desc = ""
    if code == "zh" and desc:
        desc = glossary.layer_description(str(layer)) or desc
    evidence = o.get("evidence") or {}
    triage = evidence.get("triage") or {}
    stage_bits = [f"**{layer or '?'}**" + (f" ({desc})" if desc else "")]
    stage_bits.append(f"{t['category']} `{o.get('category') or '?'}`")
    if o.get("stage"):
        stage_bits.append(f"{t['pytest_phase']} `{o['stage']}`")
    if evidence.get("compile_stage"):
        stage_bits.append(f"{t['compile_stage']} `{evidence['compile_stage']}`")
    if o.get("confidence") is not None:
        stage_bits.append(f"{t['confidence']} {o['confidence']}")
    if triage.get("decided_by"):
        stage_bits.append(f"{t['decided_by']} `{triage['decided_by']}`")
    lines = [f"- {t['stage']}: " + ", ".join(stage_bits), f"- {t['evidence']}:"]
    frames = triage.get("frames") or {}
    if frames:
        lines.append(
            f"  - {t['frame']}: `{frames.get('frame')}` -> {frames.get('layer')}"
            f" (`{frames.get('reason')}`)"
        )
    rule = triage.get("rule") or {}
    if rule:
        lines.append(
            "  - "
            + t["rule"].format(category=rule.get("category"), matched=rule.get("matched"))
            + (f" ({rule['reference']})" if rule.get("reference") else "")
        )
    if evidence.get("ladder"):
        ladder = evidence["ladder"]
        rungs = ", ".join(
            f"{k}: {glossary.status(v.get('status') if isinstance(v, dict) else v, code)}"
            for k, v in (ladder.get("rungs") or {}).items()
        )
        bound = ladder.get("layer") or ladder.get("min_layer")
        lines.append(f"  - {t['ladder']}: {rungs} -> {bound}")
    if evidence.get("stack_layer"):
        frame = evidence.get("stack_frame")
        lines.append(f"  - {t['stack']}: `{frame}` -> {evidence['stack_layer']}")
    if triage.get("numerics"):
        stats = ", ".join(f"{k} {v}" for k, v in triage["numerics"].items())
        lines.append(f"  - {t['numerics']}: {stats}")
    if o.get("signature"):
        lines.append(f"  - {t['signature']}: `{o['signature']}`")
    chain = o.get("exception_chain") or []
    if chain:
        lines += ["", f"{t['chain']}:", "", "```"]
        for exc in chain:
            message = next(iter(str(exc.get("message") or "").splitlines()), "")
            relation = f"[{exc['relation']}] " if exc.get("relation") else ""
            lines.append(f"{relation}{exc.get('type')}: {glossary.cut(message, 300)}")
            for frame in (exc.get("frames") or [])[-4:]:
                where = frame.get("module") or frame.get("file")
                lines.append(f"    {where}:{frame.get('line')} in {frame.get('function')}")
        lines.append("```")
    return lines
