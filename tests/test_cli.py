"""The command line's contract: version, help, and the error policy."""

from __future__ import annotations

import json

import click

import instep
from instep.cli import cli


def test_version_matches_package(instep_proc):
    res = instep_proc("--version")
    assert res.code == 0
    assert res.out.strip() == f"instep {instep.__version__}"


def test_no_arguments_prints_help(instep):
    res = instep()
    assert res.code == 0
    assert "Usage: instep" in res.out
    assert "profile" in res.out


def test_unknown_command_is_one_line_exit_2(instep_proc):
    res = instep_proc("frobnicate")
    assert res.code == 2
    assert res.err.strip().splitlines() == ["instep: error: No such command 'frobnicate'."]
    assert "Traceback" not in res.err


def test_bad_option_value_names_the_option(instep):
    res = instep("profile", "show", "cpu", "--format", "xml")
    assert res.code == 2
    lines = res.err.strip().splitlines()
    assert len(lines) == 1
    assert "'--format'" in lines[0] and "'xml'" in lines[0]


def test_expected_error_is_one_line_exit_2(instep):
    res = instep("profile", "show", "no-such-profile")
    assert res.code == 2
    assert res.err.strip() == (
        "instep: error: profile 'no-such-profile' not found (known profiles: base, cpu, cuda, npu)"
    )


def test_unexpected_error_prints_traceback_and_asks_for_report(instep, monkeypatch):
    @click.command("explode")
    def explode() -> None:
        raise ZeroDivisionError("boom")

    cli.add_command(explode)
    try:
        res = instep("explode")
    finally:
        cli.commands.pop("explode")
    assert res.code == 3
    assert "Traceback" in res.err and "ZeroDivisionError: boom" in res.err
    assert "please report it" in res.err.strip().splitlines()[-1]


def test_every_command_has_accurate_help(instep):
    for name, command in cli.commands.items():
        res = instep(name, "--help")
        assert res.code == 0, name
        assert f"Usage: instep {name}" in res.out
        first_line = (command.help or "").strip().splitlines()[0]
        assert first_line.split()[0] in res.out


def test_profile_show_json_is_resolved(instep):
    res = instep("profile", "show", "npu", "--format", "json")
    assert res.code == 0
    data = json.loads(res.out)
    assert data["device_type"] == "npu"
    assert data["visible_devices_env"] == "ASCEND_RT_VISIBLE_DEVICES"
    # inherited from base through 'extends'
    assert data["layer_map"]["torch._inductor.lowering"] == "lowering"
    assert {p["name"] for p in data["version_probes"]} >= {"torch", "torch_npu", "cann"}


def test_verbosity_flags_set_log_level(instep):
    import logging

    assert instep("-vv", "profile", "list").code == 0
    assert logging.getLogger("instep").level == logging.DEBUG
    assert instep("-qq", "profile", "list").code == 0
    assert logging.getLogger("instep").level == logging.ERROR
