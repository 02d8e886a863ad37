"""The child side of ``instep doctor compile``: install the hooks, then run the script.

Run as ``python -m instep.doctor.compile_bootstrap`` with ``INSTEP_DOCTOR_CONFIG`` set to a
JSON object (see :mod:`instep.doctor.compile_session`): ``argv`` (the script and its
arguments, or ``["-m", module, ...]``), ``threshold_s``, ``repeat_s`` and ``snapshot``
(the JSON file the stage timings and watchdog reports are written to). It makes a
:class:`StageRecorder` active (the torch hooks install when torch is imported, so the
script's own setup before ``import torch`` is untouched), starts the :class:`Watchdog`,
registers ``faulthandler`` on SIGUSR1 (the parent asks for all stacks before it kills a
process that ran out of time), runs the script with :mod:`runpy` as ``__main__`` with
``sys.argv`` and ``sys.path[0]`` as Python would set them, and writes the last snapshot
however the script ends. Plain code, no logic beyond that.
"""

from __future__ import annotations

import faulthandler
import json
import os
import runpy
import signal
import sys

from instep.doctor.stage_timing import StageRecorder
from instep.doctor.watchdog import Watchdog

CONFIG_ENV = "INSTEP_DOCTOR_CONFIG"


def main() -> int:
    config = json.loads(os.environ.pop(CONFIG_ENV))
    argv = list(config["argv"])
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    recorder = StageRecorder(snapshot_path=config.get("snapshot"))
    watchdog = Watchdog(
        recorder,
        threshold_s=float(config.get("threshold_s", 300.0)),
        repeat_s=config.get("repeat_s"),
    )
    if hasattr(signal, "SIGTERM"):

        def on_term(signum: int, frame: object) -> None:
            recorder.write_snapshot()  # what was active: the stage of a timeout
            os._exit(128 + signum)

        signal.signal(signal.SIGTERM, on_term)
    code = 0
    with recorder, watchdog:
        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]
                sys.path[0] = os.getcwd()
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            else:
                script = os.path.abspath(argv[0])
                sys.argv = [argv[0], *argv[1:]]
                sys.path[0] = os.path.dirname(script)
                runpy.run_path(script, run_name="__main__")
        except SystemExit as exc:
            if exc.code is None:
                code = 0
            elif isinstance(exc.code, int):
                code = exc.code
            else:
                print(exc.code, file=sys.stderr)
                code = 1
    return code


if __name__ == "__main__":
    sys.exit(main())
