"""``instep profile list|show``: the backend profiles instep knows and what they say."""

from __future__ import annotations

import json

import click
from rich.console import Console
from rich.table import Table

from instep.cli.context import AppContext
from instep.profiles import builtin_profile_names


@click.group("profile", no_args_is_help=True)
def profile_group() -> None:
    """List backend profiles, or show one with 'extends' resolved."""


@profile_group.command("list")
@click.pass_obj
def list_profiles(app: AppContext) -> None:
    """List built-in and user profiles with their device and backend."""
    user = app.config.user_profiles()
    table = Table("profile", "origin", "device", "dynamo backend", "rules", "description")
    for name in sorted({*builtin_profile_names(), *user}):
        prof = app.profile(name)
        origin = "config" if name in user else "built-in"
        table.add_row(
            name,
            origin,
            prof.device_type,
            prof.dynamo_backend,
            str(len(prof.rules)),
            prof.description,
        )
    Console().print(table)


@profile_group.command("show")
@click.argument("name")
@click.option(
    "--format",
    "fmt",
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="Output format.",
)
@click.pass_obj
def show_profile(app: AppContext, name: str, fmt: str) -> None:
    """Show profile NAME (cpu, cuda, npu, or one from the config)."""
    prof = app.profile(name)
    data = prof.model_dump(mode="json")
    if fmt == "json":
        click.echo(json.dumps(data, indent=2, ensure_ascii=False))
        return
    console = Console()
    console.print(f"[bold]{prof.name}[/bold] — {prof.description}", highlight=False)
    for key in (
        "extends",
        "device_type",
        "dynamo_backend",
        "backend_package",
        "visible_devices_env",
        "device_resource",
        "default_isolation",
        "env",
    ):
        console.print(f"  {key}: {data[key]}", highlight=False, markup=False)
    console.print(f"  version probes: {', '.join(p.name for p in prof.version_probes)}")
    console.print(f"  layer map: {len(prof.layer_map)} module/path prefixes")
    rules = Table("category", "layer", "pattern", "reference")
    for rule in prof.rules:
        rules.add_row(rule.category, str(rule.layer or "-"), rule.pattern, rule.reference or "")
    console.print(rules)


def register(cli: click.Group) -> None:
    cli.add_command(profile_group)
