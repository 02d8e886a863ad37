"""The ``instep`` command line: parse arguments, call library functions, render results.

Commands live one module each in this package and register themselves on :data:`cli`;
they hold no analysis logic. :func:`run` applies the error policy: an expected
error (:class:`instep.errors.InstepError`, a bad option) prints one line on stderr and
exits 2; anything else prints the traceback and asks for a bug report (exit 3).

Built on click rather than typer: the error policy needs click's public exception
classes, which typer (since 0.29) hides behind a private vendored copy.
"""

from __future__ import annotations

import logging
import sys
import traceback
from pathlib import Path

import click

from instep import __version__
from instep.cli import (
    bundle_cmd,
    compare_cmd,
    context,
    doctor_cmd,
    impact_cmd,
    merge_cmd,
    profile_cmd,
    report_cmd,
    run_cmd,
    runs_cmd,
    selftest_cmd,
    show_cmd,
    tier_cmd,
    triage_cmd,
)
from instep.cli.context import AppContext
from instep.errors import InstepError

BUG_REPORT = "this is a bug in instep: please report it with the traceback above"


@click.group(
    name="instep",
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--config",
    "config_path",
    type=click.Path(path_type=Path, dir_okay=False),
    help="instep.toml or pyproject.toml to read instead of the working directory's.",
)
@click.option("-v", "--verbose", count=True, help="More log output (repeatable).")
@click.option("-q", "--quiet", count=True, help="Less log output (repeatable).")
@click.version_option(__version__, "--version", prog_name="instep", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, config_path: Path | None, verbose: int, quiet: int) -> None:
    """Keep an out-of-tree torch.compile backend in step with upstream PyTorch.

    Impact analysis of upstream changes on a backend, and test governance: isolated
    runs, layered triage, reports, and a compile doctor.
    """
    level = logging.INFO + 10 * (quiet - verbose)
    _setup_logging(max(logging.DEBUG, min(logging.CRITICAL, level)))
    ctx.obj = AppContext(config_path=config_path)


def _setup_logging(level: int) -> None:
    # fast CLI start: the library loads when the command runs
    from rich.console import Console
    from rich.logging import RichHandler

    root = logging.getLogger("instep")
    root.handlers[:] = [
        RichHandler(
            level=level,
            show_time=False,
            show_path=level <= logging.DEBUG,
            console=Console(stderr=True),
        )
    ]
    root.setLevel(level)
    root.propagate = True  # pytest caplog and embedding applications see records too


def _register_commands() -> None:
    """Each module adds its commands to `cli`; --help lists them alphabetically."""
    for module in (
        doctor_cmd,
        impact_cmd,
        profile_cmd,
        run_cmd,
        show_cmd,
        runs_cmd,
        merge_cmd,
        triage_cmd,
        compare_cmd,
        selftest_cmd,
        tier_cmd,
        report_cmd,
        bundle_cmd,
    ):
        module.register(cli)


_register_commands()


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point."""
    context.PROCESS_ENDS_WITH_COMMAND = True
    sys.exit(run(argv))


def run(argv: list[str] | None = None) -> int:
    """Run the CLI and return its exit code instead of exiting (used by tests)."""
    try:
        result = cli.main(args=argv, prog_name="instep", standalone_mode=False)
    except click.exceptions.NoArgsIsHelpError as exc:  # a group called without a command
        click.echo(exc.ctx.get_help() if exc.ctx else str(exc))
        return 0
    except click.UsageError as exc:
        where = exc.ctx.command_path if exc.ctx else "instep"
        _error_line(f"{where}: error: {exc.format_message()}")
        return 2
    except click.ClickException as exc:
        _error_line(f"instep: error: {exc.format_message()}")
        return exc.exit_code
    except InstepError as exc:
        _error_line(f"instep: error: {exc}")
        return exc.exit_code
    except (click.Abort, KeyboardInterrupt):
        _error_line("instep: interrupted")
        return 130
    except Exception:  # the bug-report path: keep the whole traceback
        traceback.print_exc()
        _error_line(f"instep: internal error: {BUG_REPORT}")
        return 3
    return result if isinstance(result, int) else 0


def _error_line(text: str) -> None:
    print(" ".join(text.split()), file=sys.stderr)
