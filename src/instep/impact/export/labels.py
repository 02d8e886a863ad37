"""Column names and value words of the impact table, in English and Chinese (seed 001)."""

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


def lang_of(lang: str) -> str:
    return lang if lang in COLUMNS else "en"
