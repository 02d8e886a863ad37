"""``instep report RUN``: the offline HTML dashboard of a run, or its weekly Markdown summary.

``--out DIR`` writes ``DIR/index.html``, one page per non-passing case and the assets
(``instep.report.dashboard``; no extra needed). ``--format md`` prints
the weekly summary of seed 000 section 7 with the metrics (``instep.report.weekly``), or
writes it to ``--out FILE``; ``--lang zh`` gives Chinese labels. The store is only read.
"""

from __future__ import annotations

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
    history: int,
    db: str | None,
) -> None:
    """Report on RUN (a name, an id, or 'latest'): HTML dashboard or weekly Markdown."""
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
    from instep.report.weekly import weekly_markdown

    text = weekly_markdown(summary, lang)
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
