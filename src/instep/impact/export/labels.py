"""Column names, headings and sentences of the impact report, in English and Chinese.

The Chinese words follow the project glossary (layer 层, tier 档位, profile 配置档, triage
归因, untriaged 未分类); actions (Check, Test, Shim) and risk words stay in English as in
seed 001's table.
"""

from __future__ import annotations

COLUMNS = {
    "en": ["ID", "Action", "Summary", "Analysis", "Risk", "Code change", "Test", "Stage"],
    "zh": ["编号", "动作", "摘要", "分析", "风险", "是否改码", "是否需测试", "编译阶段"],
}
YES_NO = {
    "en": {"yes": "yes", "no": "no", "unsure": "unsure"},
    "zh": {"yes": "是", "no": "否", "unsure": "待确认"},
}
RISK = {
    "en": {"low": "low", "medium": "medium", "high": "high"},
    "zh": {"low": "low", "medium": "medium", "high": "high"},  # the seed keeps these in English
}
HEADINGS = {
    "en": {
        "title": "Upstream impact",
        "summary": "Summary",
        "by_stage": "By stage and action",
        "by_risk": "By risk",
        "by_kind": "Couplings by kind",
        "hotspots": "Where to start: downstream symbols reached by the most upstream units",
        "units": "Units",
        "debt": "Compat debt (version gates that no longer decide anything)",
        "warnings": "Warnings",
        "evidence": "Evidence",
        "tests": "Suggested tests",
    },
    "zh": {
        "title": "上游变更影响分析",
        "summary": "汇总",
        "by_stage": "按编译阶段与动作",
        "by_risk": "按风险",
        "by_kind": "按耦合类型",
        "hotspots": "优先排查：被最多上游变更单元触及的下游符号",
        "units": "变更单元",
        "debt": "兼容债（条件已恒真/恒假的版本门控）",
        "warnings": "警告",
        "evidence": "证据",
        "tests": "建议验证用例",
    },
}


SECTIONS = {
    "en": {
        "act_now": "Act now",
        "act_now_count": "{couplings} Shim coupling(s) in {units} unit(s)",
        "act_now_none": "No Shim: no upstream change was found that breaks the downstream.",
        "test_these": "Test these",
        "test_these_count": "the top {shown} of {total} downstream places reached by a Test"
        " coupling, by priority",
        "test_these_none": "No Test coupling.",
        "test_cols": ["#", "priority", "downstream place", "why", "units", "suggested tests"],
        "sinks": "only through long inherited paths",
        "debt": "Compat debt",
        "debt_count": "{n} place(s) whose version gate no longer decides anything on the"
        " supported versions ({conditions} condition(s))",
        "adapted": "Already adapted",
        "adapted_count": "{couplings} coupling(s) behind {gates} gate(s) the downstream"
        " already has",
        "covers": "covers",
        "by_stage": "Summary by stage",
        "stage_cols": ["stage", "Shim", "Test", "Check units", "Check files"],
        "totals": "{units} units, {couplings} couplings",
        "all_units": "All units",
        "coupled_units": "Units with couplings (every unit: --all)",
        "filters": ["Action", "Risk", "Stage", "Coupling kind", "Search"],
        "search": "symbol, file, text",
        "shown": "units shown",
        "more_units": "The per-unit table: `--all` (JSON and CSV always hold every unit).",
        "signature": "signature",
        "none": "none",
        "tests_note": "{without} of {needing} unit(s) that need a test have no suggested test:"
        " {why}",
        "no_tests_both": "neither the upstream nor the downstream source carries test files"
        " (wheels ship none).",
        "no_tests_up": "the upstream source carries no test files (a wheel ships none).",
        "no_tests_down": "the downstream source carries no test files (a wheel ships none).",
        "no_tests_match": "no test file names or imports what they change.",
        "tests_howto": "To get suggestions, give `--downstream` a checkout (a source tree or"
        " `repo@rev`) for the downstream's own tests, and `--upstream-old`/`--upstream-new`"
        " source trees (or `--upstream-git` with `--range`) for upstream tests; or let"
        " `instep run --impact FILE --upstream-tests DIR` pick upstream test modules from a"
        " PyTorch checkout.",
    },
    "zh": {
        "act_now": "立即处理",
        "act_now_count": "{units} 个变更单元中的 {couplings} 处 Shim 耦合",
        "act_now_none": "无 Shim：未发现会使下游出错的上游变更。",
        "test_these": "需要测试",
        "test_these_count": "按优先级排序，{total} 个含 Test 耦合的下游位置中的前 {shown} 个",
        "test_these_none": "无 Test 耦合。",
        "test_cols": ["#", "优先级", "下游位置", "依据", "变更单元数", "建议验证用例"],
        "sinks": "仅经由较长的继承调用路径",
        "debt": "兼容债",
        "debt_count": "{n} 处版本门控在所支持的版本上已不起作用（共 {conditions} 个条件）",
        "adapted": "已适配",
        "adapted_count": "下游已有的 {gates} 个门控覆盖了 {couplings} 处耦合",
        "covers": "覆盖",
        "by_stage": "按编译阶段汇总",
        "stage_cols": ["编译阶段", "Shim", "Test", "Check 单元", "Check 文件"],
        "totals": "{units} 个变更单元，{couplings} 处耦合",
        "all_units": "全部变更单元",
        "coupled_units": "有耦合的变更单元（全部单元：--all）",
        "filters": ["动作", "风险", "编译阶段", "耦合类型", "搜索"],
        "search": "符号、文件、文本",
        "shown": "个变更单元已显示",
        "more_units": "逐单元明细表：加 `--all`（JSON 与 CSV 始终包含全部单元）。",
        "signature": "签名",
        "none": "无",
        "tests_note": "需要测试的 {needing} 个变更单元中有 {without} 个没有建议验证用例：{why}",
        "no_tests_both": "上游与下游来源都不含测试文件（wheel 不带测试）。",
        "no_tests_up": "上游来源不含测试文件（wheel 不带测试）。",
        "no_tests_down": "下游来源不含测试文件（wheel 不带测试）。",
        "no_tests_match": "没有测试文件以其改动的文件命名或导入其改动的模块。",
        "tests_howto": "要得到建议：`--downstream` 指向下游源码检出（源码目录或 `repo@rev`）以使用"
        "下游自己的测试；`--upstream-old`/`--upstream-new` 指向上游源码目录（或 `--upstream-git`"
        " 加 `--range`）以使用上游测试；或用 `instep run --impact FILE --upstream-tests DIR`"
        " 从 PyTorch 检出中挑选上游测试模块。",
    },
}


def tests_note_text(note, lang: str) -> str:
    """The sentence saying why Test units have no suggested tests and how to get some."""
    t = SECTIONS[lang]
    up, down = note.upstream_tests == 0, note.downstream_tests == 0
    why = t[
        "no_tests_both"
        if up and down
        else "no_tests_up"
        if up
        else "no_tests_down"
        if down
        else "no_tests_match"
    ]
    text = t["tests_note"].format(without=note.without, needing=note.test_units, why=why)
    return f"{text} {t['tests_howto']}" if up or down else text


def lang_of(lang: str) -> str:
    return lang if lang in COLUMNS else "en"
