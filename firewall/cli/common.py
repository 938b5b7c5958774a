"""What the commands share: the common options, each parsed into its type at the edge."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from firewall.constants import MAX_K, MIN_K
from firewall.discovery import Shard
from firewall.runner.seeds import BaseSeed

F = TypeVar("F", bound=Callable[..., Any])


def config_option(fn: F) -> F:
    return click.option(
        "--config",
        "config_path",
        type=click.Path(path_type=Path, dir_okay=False),
        help="firewall.toml or pyproject.toml to read (default: ./firewall.toml, else "
        "[tool.firewall] in ./pyproject.toml).",
    )(fn)


def selection_options(fn: F) -> F:
    fn = click.option(
        "--tag",
        "tags",
        multiple=True,
        metavar="TAG",
        help="Only evals carrying this tag (repeat to require several).",
    )(fn)
    return click.argument("ids", nargs=-1, metavar="[IDS]...")(fn)


def output_options(fn: F) -> F:
    """--report, --no-issues and --format: where a deciding command's results go."""
    fn = format_option("table for people, json (the artefact) for scripts.")(fn)
    fn = click.option("--no-issues", is_flag=True, help="Open, update or close no GitHub issue.")(
        fn
    )
    return click.option(
        "--report",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Where to write the JSON artefact (default: the config's `report`).",
    )(fn)


class SeedParam(click.ParamType):  # type: ignore[type-arg]  # generic only to type checkers
    """``--seed N`` or ``--seed random``, parsed once into a ``BaseSeed``."""

    name = "SEED|random"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, BaseSeed):
            return value
        try:
            return BaseSeed.parse(value)
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


class ShardParam(click.ParamType):  # type: ignore[type-arg]
    """``--shard I/N``, parsed once into a ``Shard``."""

    name = "I/N"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, Shard):
            return value
        try:
            return Shard.parse(str(value))
        except ValueError as exc:
            self.fail(str(exc), param, ctx)


def seed_option(help: str) -> Callable[[F], F]:
    return click.option("--seed", type=SeedParam(), help=help)


def shard_option(fn: F) -> F:
    return click.option(
        "--shard",
        type=ShardParam(),
        help="Only shard I of N (1-based) of the evals, dealt round-robin by sorted id.",
    )(fn)


def dry_run_option(fn: F) -> F:
    return dry_run_option_saying("Decide and print; change no file and no issue.")(fn)


def dry_run_option_saying(help: str) -> Callable[[F], F]:
    return click.option("--dry-run", is_flag=True, help=help)


def k_option(help: str = "Trials per eval, overriding the config.") -> Callable[[F], F]:
    return click.option("--k", type=click.IntRange(min=MIN_K, max=MAX_K), help=help)


def format_option(help: str = "table for people, json for scripts.") -> Callable[[F], F]:
    return click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help=help,
    )
