"""Column names, headings and sentences of the impact report, in English and Chinese.

The English texts are here; the Chinese ones are in instep's glossary
(``data/glossary.toml``, areas ``impact_headings``, ``impact_sections`` and
``impact_table``), beside every other zh text instep writes, so one word per concept holds
across the run reports, bundles and this report (``tests/test_glossary.py``). Actions
(Check, Test, Shim) and risk words stay in English, as in seed 001's table.
"""

from __future__ import annotations

from instep.glossary import glossary

_ZH = glossary()["texts"]

COLUMNS = {
    "en": ["ID", "Action", "Summary", "Analysis", "Risk", "Code change", "Test", "Stage"],
    "zh": list(_ZH["impact_table"]["columns"]),
}
YES_NO = {
    "en": {"yes": "yes", "no": "no", "unsure": "unsure"},
    "zh": {k: _ZH["impact_table"][k] for k in ("yes", "no", "unsure")},
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
    "zh": dict(_ZH["impact_headings"]),
}


SECTIONS = {
    "en": {
        "act_now": "Act now",
        "act_now_count": "{couplings} Shim coupling(s) at {places} place(s) in {units} unit(s)",
        "act_now_none": "No Shim: no upstream change was found that breaks the downstream.",
        "refusals_count": "{n} version check(s) refuse torch {new} and let {old} through"
        " ({modules} at module level)",
        "refusal_module": "module level: the module no longer imports",
        "refusal_function": "fails when `{scope}` is called",
        "refuses_when": "refuses when",
        "test_these": "Test these",
        "test_these_count": "the top {shown} of {total} Test places, by priority, each with"
        " the command that runs its suggested tests on the backend's device",
        "test_these_none": "No Test coupling.",
        "test_cols": ["#", "priority", "downstream place", "why", "units", "test to run"],
        "tests_run_all": "All suggested tests at once: `instep run --impact REPORT.json` (this"
        " analysis with `--format json`), on the backend's profile.",
        "more_tests": "+{n} more",
        "other_tests": "+{n} for its other changes",
        "where_upstream": "in an upstream checkout",
        "where_downstream": "in the downstream checkout",
        "shim_tests": "test",
        "count_cols": ["action", "means", "units", "couplings", "places"],
        "means_Shim": "the backend breaks on the new upstream: change its code",
        "means_Test": "behaviour the backend runs changed: run its tests",
        "means_Check": "read and confirm: no code change or test needed",
        "all": "all",
        "counting": "A unit is one upstream change (a commit, a patch, a file or class of a"
        " release); a coupling, one downstream place's dependency on one changed upstream"
        " symbol; a place, the downstream function, method or class that holds couplings"
        " (the module, for module-level code; an import line is none). A unit and a place"
        " count under the strongest action of their couplings, a coupling under its own.",
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
        "full_signatures": "full signatures",
        "breaking_path": "breaking path",
        "none": "none",
        "tests_note": "{without} of {needing} unit(s) that need a test have no suggested test:"
        " no operator's OpInfo or built-in case reaches what they change, and {why}",
        "no_tests_both": "neither the upstream nor the downstream source carries test files"
        " (wheels ship none).",
        "no_tests_up": "the upstream source carries no test files (a wheel ships none).",
        "no_tests_down": "the downstream source carries no test files (a wheel ships none).",
        "no_tests_match": "no test file names or imports what they change.",
        "no_test_eager": "its operators run eagerly on the backend",
        "no_test_branch": "its operators reach it only on a branch the backend never takes",
        "no_test_no_opinfo": "no OpInfo reaches this change",
        "no_test_broad": "too many operators reach it to pick one",
        "no_test_no_route": "no operator or built-in case reaches this change",
        "no_test_no_index": "the new upstream's OpInfos were not read",
        "no_test_wheel": "no upstream test files (a wheel ships none):"
        " `instep run --upstream-tests`",
        "tests_howto": "To get suggestions, give `--downstream` a checkout (a source tree or"
        " `repo@rev`) for the downstream's own tests, and `--upstream-old`/`--upstream-new`"
        " source trees (or `--upstream-git` with `--range`) for upstream tests; or let"
        " `instep run --impact FILE --upstream-tests DIR` pick upstream test modules from a"
        " PyTorch checkout.",
    },
    "zh": dict(_ZH["impact_sections"]),
}


# what a registered_kernel place does with the overload (model.KernelRole), as a reader says it
KERNEL_ROLES = {
    "en": {
        "kernel": "kernel",
        "custom": "own op",
        "autocast": "autocast policy",
        "c_shim": "C shim",
        "op_list": "op list",
    },
    "zh": dict(_ZH["impact_roles"]),
}


def kind_label(kind: object, role: object, lang: str) -> str:
    """A coupling's kind as printed: ``registered_kernel, autocast policy`` with its role."""
    if role is None:
        return str(kind)
    return f"{kind}, {KERNEL_ROLES[lang_of(lang)].get(str(role), str(role))}"


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


def no_test_text(reasons: tuple[str, ...], lang: str) -> str:
    """Why a Test place lists no test to run, in a few words (``sections.no_test_reasons``)."""
    t = SECTIONS[lang_of(lang)]
    return "; ".join(t[f"no_test_{r}"] for r in reasons)


def lang_of(lang: str) -> str:
    return lang if lang in COLUMNS else "en"
