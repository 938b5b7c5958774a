"""What the commands share: the common options and loading config + evals."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import click

from firewall.config import LoadedConfig, load_config
from firewall.discovery import discover, select
from firewall.spec import EvalSpec

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
    fn = click.option(
        "--format",
        "fmt",
        type=click.Choice(["table", "json"]),
        default="table",
        show_default=True,
        help="table for people, json (the artefact) for scripts.",
    )(fn)
    fn = click.option("--no-issues", is_flag=True, help="Open, update or close no GitHub issue.")(
        fn
    )
    return click.option(
        "--report",
        type=click.Path(path_type=Path, dir_okay=False),
        help="Where to write the JSON artefact (default: the config's `report`).",
    )(fn)


def seed_type(value: str) -> int | str:
    if value == "random":
        return value
    try:
        seed = int(value)
    except ValueError:
        raise click.BadParameter('expected a non-negative integer or "random"') from None
    if seed < 0:
        raise click.BadParameter('expected a non-negative integer or "random"')
    return seed


class SeedParam(click.ParamType):  # type: ignore[type-arg]  # generic only to type checkers
    name = "SEED|random"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, int):
            return value
        try:
            return seed_type(str(value))
        except click.BadParameter as exc:
            self.fail(str(exc), param, ctx)


@dataclasses.dataclass
class Project:
    config: LoadedConfig
    specs: list[EvalSpec]
    cwd: Path


def load_project(
    config_path: Path | None, ids: Sequence[str] = (), tags: Sequence[str] = ()
) -> Project:
    cwd = Path.cwd()
    config = load_config(config_path, cwd)
    specs = select(discover(config, cwd), ids, tags)
    return Project(config=config, specs=specs, cwd=cwd)
