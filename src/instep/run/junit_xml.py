"""``--junit-xml PATH``: a run's final outcomes as JUnit XML (what CI systems read).

Written from stored outcome dicts, like every other report: ``crashed`` and ``timeout``
become ``<error>`` with the signal/stage in the message; ``xfailed`` is a skip.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

_XML_INVALID = dict.fromkeys(c for c in range(32) if c not in (9, 10, 13))


def _clean(text: str | None) -> str:
    return (text or "").translate(_XML_INVALID)


def write_junit_xml(path: Path, run_name: str, outcomes: list[dict[str, Any]]) -> None:
    counts: Counter[str] = Counter()
    suite = ET.Element("testsuite", name=f"instep:{run_name}")
    for out in outcomes:
        nodeid = out["case"]
        file, _, rest = nodeid.partition("::")
        classname = (file.removesuffix(".py").replace("/", ".") + "." + rest).rsplit("::", 1)[0]
        name = rest.rsplit("::", 1)[-1] if rest else file
        case = ET.SubElement(
            suite,
            "testcase",
            classname=classname.replace("::", "."),
            name=name,
            file=file,
            time=f"{out.get('duration') or 0:.3f}",
        )
        status = out["status"]
        message = _clean(out.get("message"))[:2000]
        counts["tests"] += 1
        if status == "failed":
            counts["failures"] += 1
            el = ET.SubElement(case, "failure", message=message)
            el.text = _clean(out.get("longrepr") or message)
        elif status in ("error", "crashed", "timeout", "xpassed"):
            counts["errors"] += 1
            el = ET.SubElement(case, "error", message=f"[{status}] {message}", type=status)
            el.text = _clean(out.get("longrepr") or out.get("stderr_tail") or message)
        elif status in ("skipped", "xfailed"):
            counts["skipped"] += 1
            ET.SubElement(case, "skipped", message=_clean(out.get("skip_reason")))
        if out.get("stdout_tail"):
            ET.SubElement(case, "system-out").text = _clean(out["stdout_tail"])
        if out.get("stderr_tail"):
            ET.SubElement(case, "system-err").text = _clean(out["stderr_tail"])
    for key in ("tests", "failures", "errors", "skipped"):
        suite.set(key, str(counts[key]))
    suite.set("time", f"{sum(o.get('duration') or 0 for o in outcomes):.3f}")
    root = ET.Element("testsuites")
    root.append(suite)
    path.parent.mkdir(parents=True, exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
