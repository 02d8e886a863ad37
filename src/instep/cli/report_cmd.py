"""``instep report RUN``: the offline HTML dashboard of a run, its Markdown report, or the
weekly summary of a profile and tier.

``--out DIR`` writes ``DIR/index.html``, one page per non-passing case and the assets
(``instep.report.dashboard``; no extra needed). ``--format md`` prints
the run's report with its batches and metrics (``instep.report.weekly``), or writes it to
``--out FILE``. ``--weekly`` summarises the runs of ``--profile`` and ``--tier`` from
``--since`` to ``--until`` (default: the last 7 days) in Markdown, with a to-do list whose
owners come from the config's ``[owners]``. ``--lang zh`` gives Chinese. The store is
only read.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import click

from instep.cli.context import AppContext, db_option, open_store
from instep.errors import BadInput


@click.command("report")
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--out",
    type=click.Path(path_type=Path),
    help="Directory of the HTML dashboard (required for html); file for md [stdout].",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["html", "md"]),
    default="html",
    show_default=True,
    help="The HTML dashboard or the weekly Markdown summary.",
)
@click.option(
    "--lang",
    type=click.Choice(["en", "zh"]),
    default="en",
    show_default=True,
    help="Language of the Markdown summary's labels.",
)
@click.option(
    "--weekly",
    is_flag=True,
    help="The weekly summary of a profile and tier over a date range (Markdown).",
)
@click.option(
    "--since",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="With --weekly: first day, YYYY-MM-DD [7 days before --until].",
)
@click.option(
    "--until",
    type=click.DateTime(formats=["%Y-%m-%d"]),
    help="With --weekly: last day, YYYY-MM-DD, included [today, UTC].",
)
@click.option("--profile", help="With --weekly: the runs' profile [the last run's].")
@click.option("--tier", help="With --weekly: the runs' tier [the last run's].")
@click.option(
    "--history",
    type=click.IntRange(min=1),
    default=20,
    show_default=True,
    help="Runs of the same profile and tier in the trend (this one included).",
)
@db_option
@click.pass_obj
def report_command(
    app: AppContext,
    run_ref: str,
    out: Path | None,
    fmt: str,
    lang: str,
    weekly: bool,
    since: datetime | None,
    until: datetime | None,
    profile: str | None,
    tier: str | None,
    history: int,
    db: str | None,
) -> None:
    """Report on RUN (a name, an id, or 'latest'): HTML dashboard or Markdown; or --weekly."""
    if weekly:
        _weekly(app, run_ref, out, lang, since, until, profile, tier, db)
        return
    for name, value in (("--since", since), ("--until", until), ("--profile", profile)):
        if value is not None:
            raise BadInput(f"{name}: only with --weekly (a report of one run takes RUN)")
    if tier is not None:
        raise BadInput("--tier: only with --weekly (a report of one run takes RUN)")
    # fast CLI start: the library loads when the command runs
    from instep.report.run_summary import summarize_run

    if fmt == "html":
        if out is None:
            raise BadInput("instep report: --out DIR is required for the HTML dashboard")
        # fast CLI start: the library loads when the command runs
        from instep.report.dashboard import output_directory

        output_directory(out)  # before reading anything: a bad --out is said at once
    with open_store(app, db, must_exist=True) as store:
        summary = summarize_run(store, run_ref, history=history)
    if fmt == "html":
        # fast CLI start: the library loads when the command runs
        from instep.report.dashboard import write_dashboard

        assert out is not None
        dashboard = write_dashboard(summary, out)
        click.echo(str(dashboard.index))
        return
    # fast CLI start: the library loads when the command runs
    from instep.report.weekly import run_report_markdown

    _write_md(run_report_markdown(summary, lang), out)


def _weekly(
    app: AppContext,
    run_ref: str,
    out: Path | None,
    lang: str,
    since: datetime | None,
    until: datetime | None,
    profile: str | None,
    tier: str | None,
    db: str | None,
) -> None:
    if run_ref != "latest":
        raise BadInput(
            f"instep report --weekly: got RUN {run_ref!r}; the summary covers a date range"
            " (expected --since/--until, e.g. --since 2026-01-01)"
        )
    # fast CLI start: the library loads when the command runs
    from instep.report.weekly import weekly_markdown, weekly_summary

    with open_store(app, db, must_exist=True) as store:
        summary = weekly_summary(
            store,
            since=since.date() if since else None,
            until=until.date() if until else None,
            profile=profile,
            tier=tier,
            owners=app.config.owners,
        )
    _write_md(weekly_markdown(summary, lang), out)


def _write_md(text: str, out: Path | None) -> None:
    if out is None:
        click.echo(text, nl=False)
        return
    if out.is_dir():
        raise BadInput(f"--out {out}: is a directory; --format md writes one file")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise BadInput(f"--out {out}: cannot write there ({exc.strerror or exc})") from exc
    click.echo(str(out))


def register(cli: click.Group) -> None:
    cli.add_command(report_command)
