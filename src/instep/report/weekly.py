"""The weekly summary of one run in Markdown, in the form of seed 000 section 7.

:func:`weekly_markdown` renders a :class:`~instep.report.run_summary.RunSummary` as: a
header (run, profile, tier, previous run, outcome counts, version matrix), the batch
table of section 7 (batch, topic, cases, passed / failed, judgement: the previous run's
batches followed into this run, then the batches new to it) and the seed 10.3 metrics
(this run and the previous one). ``lang="zh"`` gives Chinese labels. Table cells are
escaped for Markdown and for the HTML a Markdown renderer makes of them (``|``, ``<``,
``>``, ``&``, line breaks). Nothing here reads the store.
"""

from __future__ import annotations

import re

from instep.errors import BadInput
from instep.report.run_summary import NEW_IN_RUN, RunSummary

LANGS = ("en", "zh")

_TEXT = {
    "en": {
        "title": "Weekly test report: run {run}",
        "profile": "profile",
        "tier": "tier",
        "previous": "previous run",
        "none": "none",
        "started": "started",
        "outcomes": "outcomes",
        "versions": "Version matrix",
        "version_columns": ("component", "version"),
        "batches": "Batches and their results",
        "batch_note": (
            "Passed / failed count the members of the previous run's batch in this run;"
            " a batch new in this run counts its own cases."
        ),
        "columns": ("batch", "topic", "cases", "passed / failed", "judgement"),
        "no_batches": "No failures in this run or the previous one.",
        "metrics": "Metrics",
        "metric_columns": ("metric", "this run", "previous run"),
        "new_cases": "{n} new",
        "failed_now": "{n} failed",
    },
    "zh": {
        "title": "测试周报：运行 {run}",
        "profile": "配置",
        "tier": "层级",
        "previous": "上一次运行",
        "none": "无",
        "started": "开始时间",
        "outcomes": "结果",
        "versions": "版本矩阵",
        "version_columns": ("组件", "版本"),
        "batches": "Batch 映射与阶段结果",
        "batch_note": (
            "已记录结果统计上一次运行中该批次的用例在本次运行中的结果；本次新增批次统计其自身用例。"
        ),
        "columns": ("Batch", "主题", "用例数/范围", "已记录结果", "当前判断"),
        "no_batches": "本次和上一次运行均无失败。",
        "metrics": "指标",
        "metric_columns": ("指标", "本次运行", "上一次运行"),
        "new_cases": "新增 {n}",
        "failed_now": "{n} failed",
    },
}

#: Chinese for the judgements of ``BatchProgress.judgement`` and of ``run_summary``.
_JUDGEMENT_ZH = {
    "not re-run": "未重跑",
    "fixed": "已修复",
    "sank: errors changed (re-classify the new batches)": "下沉：错误已变化（需重新分类新批次）",
    "partly fixed: the rest still fails": "部分修复：其余仍失败",
    "partly fixed: the rest still fails, some with new errors": (
        "部分修复：其余仍失败，部分出现新错误"
    ),
    "open: some errors changed": "未解决：部分错误已变化",
    "open": "未解决",
    NEW_IN_RUN: "本次新增",
}
_OPEN_SINCE_ZH = "自 {run} 起未解决"

#: Chinese labels of ``instep.suites.metrics.TABLE_ROWS``.
_METRIC_ZH = {
    "cases collected": "收集用例数",
    "cases executed": "执行用例数",
    "compile success rate": "编译成功率",
    "compiled / failed to compile": "编译成功 / 编译失败",
    "semantic pass rate": "语义通过率",
    "failures not triaged (no layer)": "未归因的失败（无层）",
    "failures unclassified (no root-cause category)": "未分类的失败（无根因类别）",
    "crashes (signal)": "崩溃（信号）",
    "time-outs": "超时",
    "runtime device errors": "运行时设备错误",
    "fallbacks": "fallback 次数",
    "fallback ratio (to kernels)": "fallback 比例（相对 kernel）",
    "extern kernel calls": "extern kernel 调用",
    "graph breaks": "graph break 次数",
    "generated kernels": "生成 kernel 数",
    "IR nodes per kernel (fusion)": "每 kernel IR 节点数（融合）",
    "compile time": "编译时间",
    "autotune time": "autotune 时间",
    "model speedup (geomean)": "模型加速比（几何平均）",
    "peak memory (max model)": "峰值内存（最大模型）",
}
_METRIC_PREFIX_ZH = {"triad ": "三元对照 ", "failures at ": "失败层级 "}


def cell(text: object) -> str:
    """One Markdown table cell: one line, pipes escaped, no HTML a renderer would run."""
    value = " ".join(str(text).split())
    value = value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return value.replace("|", "\\|")


def judgement_text(judgement: str, lang: str) -> str:
    if lang != "zh":
        return judgement
    match = re.fullmatch(r"open since (.+)", judgement)
    if match:
        return _OPEN_SINCE_ZH.format(run=match.group(1))
    return _JUDGEMENT_ZH.get(judgement, judgement)


def metric_label(label: str, lang: str) -> str:
    if lang != "zh":
        return label
    for prefix, zh in _METRIC_PREFIX_ZH.items():
        if label.startswith(prefix):
            return zh + label[len(prefix) :]
    return _METRIC_ZH.get(label, label)


def _row(values: tuple[object, ...] | list[object]) -> str:
    return "| " + " | ".join(cell(v) for v in values) + " |"


def _table(columns: tuple[str, ...], rows: list[list[object]]) -> list[str]:
    return [_row(columns), "|" + "|".join("---" for _ in columns) + "|", *map(_row, rows)]


def weekly_markdown(summary: RunSummary, lang: str = "en") -> str:
    """The weekly summary of ``summary`` (seed 000 section 7 plus the 10.3 metrics)."""
    if lang not in LANGS:
        raise BadInput(f"--lang {lang}: expected one of {', '.join(LANGS)}")
    t = _TEXT[lang]
    run = summary.run
    counts = ", ".join(f"{n} {status}" for status, n in (run.get("counts") or {}).items())
    lines = [
        f"# {cell(t['title'].format(run=run['name']))}",
        "",
        f"- {t['profile']}: {cell(run['profile'])}; {t['tier']}: {cell(run.get('tier') or '-')}",
        f"- {t['previous']}: {cell(summary.previous or t['none'])}",
        f"- {t['started']}: {cell(run.get('started_at') or '-')}",
        f"- {t['outcomes']}: {cell(counts or '-')}",
        "",
    ]
    if summary.version_matrix:
        lines += [f"## {t['versions']}", ""]
        lines += _table(
            t["version_columns"], [[name, value] for name, value in summary.version_matrix]
        )
        lines.append("")
    lines += [f"## {t['batches']}", ""]
    if summary.batches:
        lines += [t["batch_note"], ""]
        rows: list[list[object]] = []
        for b in summary.batches:
            topic = f"{b['layer'] or 'untriaged'}: {b['category'] or '?'} — "
            topic += (b["signature"] or "")[:100]
            cases = str(b["previous_cases"] if b["previous_cases"] is not None else b["size"])
            if b["previous_cases"] is None:
                result = t["failed_now"].format(n=b["size"])
            else:
                result = f"{b['passed']} passed / {b['failed']} failed"
                if b["new_members"]:
                    result += f" (+{t['new_cases'].format(n=b['new_members'])})"
            judgement = judgement_text(b["judgement"], lang)
            if b["moved"]:
                judgement += " → " + ", ".join(sorted(set(b["moved"].values())))
            rows.append([b["batch"], topic, cases, result, judgement])
        lines += _table(t["columns"], rows)
    else:
        lines.append(t["no_batches"])
    lines += ["", f"## {t['metrics']}", ""]
    before = dict(summary.previous_metric_rows)
    if summary.previous:
        columns = t["metric_columns"]
        metric_rows = [
            [metric_label(label, lang), value, before.get(label, "-")]
            for label, value in summary.metric_rows
        ]
    else:
        columns = t["metric_columns"][:2]
        metric_rows = [[metric_label(label, lang), value] for label, value in summary.metric_rows]
    lines += _table(columns, metric_rows)
    return "\n".join(lines) + "\n"
