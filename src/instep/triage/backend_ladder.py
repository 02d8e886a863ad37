"""``--bisect``: re-run failed cases down the backend ladder to bound their layer.

The ladder is ``eager`` -> ``aot_eager`` -> ``aot_eager_decomp_partition`` -> the
profile's target backend (PyTorch's own debug backends, as ``CompilerBisector`` uses
them). Each rung re-runs the still unresolved failed cases of a run, isolated, with the
backend redirected by ``backend_redirect`` (a pytest plugin). A rung *reproduces* a
failure when the case fails there with the same signature. The first rung that
reproduces bounds the layer:

========================== ===========================================================
first reproducing rung     layer
========================== ===========================================================
``eager``                  ``eager`` when the chain never entered the compiler (the
                           test's eager reference), else ``dynamo``
``aot_eager``              ``aot``
``aot_eager_decomp_part.`` ``decomposition``
target only                lowering or deeper: the exception frames choose among
                           lowering, scheduler, codegen, kernel_compile, runtime, numerics
none (target passes too)   not reproduced: the stored classification stays, ``flaky``
========================== ===========================================================

One set of worker hosts serves every rung: each re-run carries its rung in its own
environment. A suite that compiles while its modules are imported cannot be redirected
that way (the compiled function keeps the backend of that moment): its cases are run in
hosts started per rung, as the redirect plugin asks (``NEEDS_OWN_HOST``). What each rung
gave is written into the original outcome's
``evidence.ladder`` and the outcome is classified again with it. Only failed cases pay:
cases that passed are never re-run.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sqlalchemy import select

from instep.layers import Layer
from instep.outcome import FAILING
from instep.profiles import Profile
from instep.run.runner import RunOptions, classified_outcome, execute_run, make_pool
from instep.run.worker_pool import WorkItem
from instep.store import Store
from instep.store.schema import Case, Outcome
from instep.triage.backend_redirect import ENV, NEEDS_OWN_HOST
from instep.triage.classifier import Classifier

DEBUG_RUNGS = ("eager", "aot_eager", "aot_eager_decomp_partition")
_RUNG_LAYER = {"aot_eager": Layer.AOT, "aot_eager_decomp_partition": Layer.DECOMPOSITION}


@dataclass
class LadderReport:
    cases: int = 0
    reruns: int = 0
    hosts_started: int = 0  # worker hosts started for the whole ladder, not per rung
    wall_s: float = 0.0
    layers: dict[str, str | None] = field(default_factory=dict)  # case -> ladder layer


def ladder_of(profile: Profile) -> tuple[str, ...]:
    return (*DEBUG_RUNGS, profile.dynamo_backend)


def ladder_verdict(
    rungs: dict[str, dict[str, Any]], target: str, original_signature: str | None
) -> dict[str, Any]:
    """``evidence.ladder`` from what each rung gave (``status``, ``signature``, ``layer``)."""
    verdict: dict[str, Any] = {"rungs": rungs, "reproduced": False, "layer": None}
    for rung in (*DEBUG_RUNGS, target):
        got = rungs.get(rung)
        if got is None or got.get("status") not in FAILING:
            continue
        if got.get("signature") != original_signature:
            continue  # another failure: this rung does not reproduce the original
        verdict.update(reproduced=True, first_rung=rung)
        if rung == "eager":
            verdict["layer"] = "eager" if got.get("layer") == "eager" else "dynamo"
        elif rung in _RUNG_LAYER:
            verdict["layer"] = str(_RUNG_LAYER[rung])
        else:
            verdict["min_layer"] = "lowering"
        return verdict
    return verdict


def bisect_run(
    store: Any,
    run: Any,
    profile: Profile,
    workers: int = 1,
    inductor_cache_dir: Path | None = None,
    base: Any = None,
) -> LadderReport:
    """Re-run ``run``'s failed cases down the ladder and re-classify them (see module doc).

    ``base``: the run's :class:`~instep.run.runner.RunOptions`, whose devices and engine
    (``--devices``, ``--engine ray`` and its cluster) the re-runs keep.
    """
    began = time.monotonic()
    report = LadderReport()
    failed = {
        r["case"]: r
        for r in store.outcome_rows(run.id)
        if r["status"] in FAILING and not str(r["category"] or "").startswith("env.")
    }
    report.cases = len(failed)
    if not failed:
        return report
    rungs: dict[str, dict[str, dict[str, Any]]] = {case: {} for case in failed}
    pending = set(failed)
    own_hosts: set[str] = set()  # compiled while collecting: the rung must be set at start
    target = profile.dynamo_backend

    def note(case: str, rung: str, outcome: dict[str, Any], todo: set[str]) -> None:
        got = rungs[case][rung] = _rung_record(outcome)
        if got.get("status") in FAILING and (got.get("signature") == failed[case].get("signature")):
            todo.discard(case)

    with _LadderHosts(run, profile, sorted(failed), workers, inductor_cache_dir, base) as hosts:
        for attempt, rung in enumerate(ladder_of(profile), start=1):
            if not pending:
                break
            results = hosts.run(rung, sorted(pending), attempt)
            report.reruns += len(pending)
            for case in sorted(pending):
                outcome = results.get(case, {"status": "missing"})
                if outcome.get("skip_reason") == NEEDS_OWN_HOST:
                    pending.discard(case)
                    own_hosts.add(case)
                    continue
                note(case, rung, outcome, pending)
        report.hosts_started = getattr(hosts.pool, "hosts_started", 0)  # Ray: its workers'
    if own_hosts:
        # the suite compiled at import: hosts started per rung, each with the rung set
        with tempfile.TemporaryDirectory(prefix="instep-ladder-") as tmp:
            for rung in ladder_of(profile):
                if not own_hosts:
                    break
                cases = sorted(own_hosts)
                results, hosts_started = _run_rung_own_hosts(
                    run, profile, rung, cases, workers, inductor_cache_dir, base, tmp
                )
                report.reruns += len(cases)
                report.hosts_started += hosts_started
                for case in cases:
                    note(case, rung, results.get(case, {"status": "missing"}), own_hosts)
    classifier = Classifier(profile)
    with store.session() as s:
        for case, row in failed.items():
            verdict = ladder_verdict(rungs[case], target, row.get("signature"))
            report.layers[case] = verdict.get("layer") or verdict.get("min_layer")
            evidence = dict(row.get("evidence") or {})
            evidence["ladder"] = verdict
            row["evidence"] = evidence
            found = classifier.classify(row)
            outcome = s.scalars(_final_outcome_query(Outcome, run.id, case)).one()
            if found is not None:
                values: dict[str, Any] = {"evidence": evidence}
                found.apply(values)
                for key in ("layer", "category", "signature", "confidence", "evidence"):
                    setattr(outcome, key, values[key])
            else:
                outcome.evidence = evidence
        s.commit()
    report.wall_s = time.monotonic() - began
    return report


RUNG_FIELDS = ("status", "layer", "category", "signature", "exception_type", "duration")


def _rung_record(outcome: dict[str, Any]) -> dict[str, Any]:
    """What ``evidence.ladder.rungs`` keeps of one rung's outcome (JSON, small): with
    ``--engine ray`` also the host it ran on."""
    record = {key: outcome.get(key) for key in RUNG_FIELDS}
    if outcome.get("message"):
        record["message"] = str(outcome["message"])[:300]
    node = (outcome.get("evidence") or {}).get("node")
    if isinstance(node, dict) and node.get("host"):
        record["node"] = node["host"]
    return record


def _final_outcome_query(outcome_cls: Any, run_id: int, nodeid: str) -> Any:
    return (
        select(outcome_cls)
        .join(Case, Case.id == outcome_cls.case_id)
        .where(outcome_cls.run_id == run_id, outcome_cls.final.is_(True), Case.nodeid == nodeid)
    )


def _ladder_options(
    run: Any,
    cases: list[str],
    workers: int,
    inductor_cache_dir: Path | None,
    base: Any,
    name: str,
) -> RunOptions:
    """Options of the ladder's re-runs: the run's settings, isolated cases, the redirect
    plugin, and the devices and engine the run had."""
    settings = dict(run.settings or {})
    engine = {}
    if base is not None:
        engine = {
            "devices": list(base.devices),
            "engine": base.engine,
            "address": base.address,
            "ray_resource": base.ray_resource,
            "max_tasks": base.max_tasks,
        }
    return RunOptions(
        paths=cases,
        workers=max(1, min(workers, len(cases))),
        isolate="case",
        timeout=float(settings.get("timeout", 600.0)),
        preimport=settings.get("preimport"),
        pytest_args=[*settings.get("pytest_args", []), "-p", "instep.triage.backend_redirect"],
        inductor_cache_dir=inductor_cache_dir,
        cwd=Path(settings["cwd"]) if settings.get("cwd") else None,
        name=name,
        **engine,
    )


def _run_rung_own_hosts(
    run: Any,
    profile: Profile,
    rung: str,
    cases: list[str],
    workers: int,
    inductor_cache_dir: Path | None,
    base: Any,
    tmp: str,
) -> tuple[dict[str, dict[str, Any]], int]:
    """Run ``cases`` in hosts started with ``rung`` set (so that it reaches what the
    test modules compile at import), in a temporary store: their classified outcomes and
    how many hosts that started."""
    rung_profile = profile.model_copy(update={"env": {**profile.env, ENV: rung}})
    opts = _ladder_options(run, cases, workers, inductor_cache_dir, base, f"ladder-{rung}")
    db = str(Path(tmp) / f"{rung}.db")
    result = execute_run(db, rung_profile, opts, classifier=Classifier)
    with Store(db) as store:
        return {r["case"]: r for r in store.outcome_rows(result.run.id)}, result.hosts_started


class _LadderHosts:
    """One set of worker hosts for every rung of the ladder.

    The hosts collect the failed cases once, with the redirect plugin loaded; each work
    item carries its rung in its environment (``INSTEP_LADDER_BACKEND``), set in the
    case's own process only, so no host is started per rung. Cases run isolated.
    """

    def __init__(
        self,
        run: Any,
        profile: Profile,
        cases: list[str],
        workers: int,
        inductor_cache_dir: Path | None,
        base: Any = None,
    ) -> None:
        opts = _ladder_options(run, cases, workers, inductor_cache_dir, base, "ladder")
        self.profile = profile
        self.pool = make_pool(profile, opts)
        self.classifier = Classifier(profile)
        self.timeouts: dict[str, float | None] = {}

    def __enter__(self) -> _LadderHosts:
        self.pool.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.pool.close()

    def run(self, rung: str, cases: list[str], attempt: int) -> dict[str, dict[str, Any]]:
        """Run ``cases`` with every compile redirected to ``rung``; their classified outcomes
        (a case missing from the answer did not run: every host failed)."""

        def items() -> list[WorkItem]:
            return [
                WorkItem(c, c.split("::", 1)[0], self.timeouts.get(c), attempt, {ENV: rung})
                for c in cases
            ]

        submitted = self.pool.collected_once
        if submitted:
            self.pool.submit(items())
        results: dict[str, dict[str, Any]] = {}
        for event in self.pool.events():
            if event.kind == "collected":
                for case in event.data["cases"]:
                    self.timeouts[case["nodeid"]] = case.get("timeout")
                if not submitted:
                    self.pool.submit(items())
                    submitted = True
            elif event.kind == "outcome" and event.item is not None:
                results[event.item.nodeid] = classified_outcome(
                    event, event.item, self.profile, self.classifier
                )
        return results
