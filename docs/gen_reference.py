"""A MkDocs hook: the reference pages' generated parts, rendered from the code that holds them.

Where the code is the truth, the docs say what the code says: a page holds a marker
line and this hook replaces it, on every build, with

- ``<!-- generated: cli -->``: the ``--help`` of every ``firewall`` command, walked
  from the click group in ``firewall.cli`` (subcommands of groups included);
- ``<!-- generated: config -->``: every key of the configuration, walked from the
  pydantic models in ``firewall/config.py``, with its type, default and bounds;
- ``<!-- generated: schema NAME -->``: the JSON Schema ``firewall schema NAME`` prints.

What a key or an option is *for* is written by hand in the pages;
``tests/test_docs.py`` checks that every key and every option is, using the walks
below. mkdocs.yml names this file under ``hooks`` and leaves it out of the site.
"""

from __future__ import annotations

import json
import re
import sys
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined

# The docs describe this checkout's code, not whichever firewall is installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from firewall.cli import main
from firewall.cli.schema import SCHEMAS, json_schema
from firewall.config import Settings

HELP_WIDTH = 88
MARKER = re.compile(r"^( *)<!-- generated: (cli|config|schema [a-z-]+) -->$", re.MULTILINE)


# --- the walks (tests/test_docs.py uses them too) ------------------------------------


def commands() -> Iterator[tuple[str, click.Command, click.Context]]:
    """Every command as ``("quarantine add", command, context)``, groups before their own."""

    def walk(group: click.Group, parent: click.Context, path: str) -> Iterator[Any]:
        for name in group.list_commands(parent):
            command = group.get_command(parent, name)
            if command is None or command.hidden:
                continue
            context = click.Context(
                command, info_name=name, parent=parent, max_content_width=HELP_WIDTH
            )
            full = f"{path} {name}".strip()
            yield full, command, context
            if isinstance(command, click.Group):
                yield from walk(command, context, full)

    root = click.Context(main, info_name="firewall", max_content_width=HELP_WIDTH)
    yield "", main, root
    yield from walk(main, root, "")


def options(command: click.Command) -> list[str]:
    """The option names of ``command`` as a user types them (``--k``, ``-v``, ``--verbose``)."""
    return [
        name
        for param in command.params
        if isinstance(param, click.Option) and not param.hidden
        for name in (*param.opts, *param.secondary_opts)
    ]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, alone, optional or in a list; None for a plain value."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        model = _model_of(arg)
        if model is not None:
            return model
    return None


def tables(
    model: type[BaseModel] = Settings, path: str = ""
) -> Iterator[tuple[str, type[BaseModel]]]:
    """Every table of the configuration: ``("", Settings)``, ``("evals", EvalEntry)``, ..."""
    yield path, model
    for name, field in model.model_fields.items():
        inner = _model_of(field.annotation)
        if inner is not None:
            yield from tables(inner, f"{path}.{name}" if path else name)


def keys() -> list[str]:
    """Every configuration key as a dotted path: ``k``, ``nightly.release_after``, ..."""
    return [
        f"{path}.{name}" if path else name
        for path, model in tables()
        for name, field in model.model_fields.items()
        if _model_of(field.annotation) is None
    ]


# --- rendering ------------------------------------------------------------------------


def _type(annotation: Any) -> str:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return _type(args[0])
    if origin in (typing.Union, types.UnionType):
        shown = [_type(arg) for arg in args if arg is not type(None)]
        return " or ".join(shown) + (" (optional)" if type(None) in args else "")
    if origin is typing.Literal:
        return " or ".join(f'`"{arg}"`' if isinstance(arg, str) else f"`{arg}`" for arg in args)
    if origin is list:
        return f"list of {_type(args[0])}s"
    if origin is dict:
        return "table"
    names = {int: "integer", float: "number", str: "string", bool: "boolean"}
    if annotation is Any:
        return "any"
    return names.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _code(text: str) -> str:
    """``text`` as inline code that survives a Markdown table: a pipe would end the cell,
    and Markdown would read a regex's backslashes, stars and underscores."""
    special = "&<>|\\*_`[]"
    text = "".join(f"&#{ord(char)};" if char in special else char for char in text)
    return f"<code>{text}</code>"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:,}" if isinstance(value, int) else str(value)


def _constraints(metadata: list[Any]) -> list[str]:
    words = {
        "ge": ">= {}",
        "gt": "> {}",
        "le": "<= {}",
        "lt": "< {}",
        "min_length": "length >= {}",
        "max_length": "length <= {}",
    }
    said = []
    for item in metadata:
        for attribute, form in words.items():
            value = getattr(item, attribute, None)
            if value is not None:
                said.append(form.format(_number(value)))
        pattern = getattr(item, "pattern", None)
        if pattern is not None and len(pattern) <= 50:
            said.append(f"matches {_code(pattern)}")
    return said


def _bounds(field: FieldInfo) -> str:
    """What validation allows, as far as the field's declared constraints say; a
    validator's own checks are in the hand-written pages."""
    said = _constraints(list(field.metadata))
    for arg in typing.get_args(field.annotation):  # list[Label]: each item's constraints
        if typing.get_origin(arg) is typing.Annotated:
            extras: list[Any] = []
            for extra in typing.get_args(arg)[1:]:
                extras.extend(getattr(extra, "metadata", [extra]))
            said += [f"each {item}" for item in _constraints(extras)]
    return ", ".join(said)


def _default(field: FieldInfo) -> str:
    if field.default_factory is not None:
        value = field.default_factory()  # type: ignore[call-arg]
    elif field.default is PydanticUndefined:
        return "required"
    else:
        value = field.default
    if value is None:
        return "unset"
    return f"`{json.dumps(value)}`"


def _table_name(path: str) -> str:
    if not path:
        return ""
    parts = path.split(".")
    if parts[0] in ("evals", "limits"):
        head = f"[[{parts[0]}]]"
        return head + "".join(f" {part} = {{...}}" for part in parts[1:])
    return "[" + path + "]"


def config_reference() -> str:
    out = []
    for path, model in tables():
        plain = [
            (name, field)
            for name, field in model.model_fields.items()
            if _model_of(field.annotation) is None
        ]
        name = _table_name(path)
        out += [f"### `{name}`" if name else "### Top level", ""]
        out += ["| key | type | default | allowed |", "|---|---|---|---|"]
        for name, field in plain:
            row = [f"`{name}`", _type(field.annotation), _default(field), _bounds(field)]
            out.append("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")
        out.append("")
    return "\n".join(out)


def cli_reference() -> str:
    out = []
    for path, command, context in commands():
        title = f"firewall {path}".strip()
        out += [f"### `{title}`", "", "```text", command.get_help(context), "```", ""]
    return "\n".join(out)


def schema_reference(name: str) -> str:
    if name not in SCHEMAS:
        raise ValueError(f"no schema {name!r}: `firewall schema` has {sorted(SCHEMAS)}")
    document = json.dumps(json_schema(name), indent=2, sort_keys=True)
    return f"```json\n{document}\n```"


def render(marker: str) -> str:
    if marker == "cli":
        return cli_reference()
    if marker == "config":
        return config_reference()
    return schema_reference(marker.split(" ", 1)[1])


def on_page_markdown(markdown: str, **_: Any) -> str:
    """MkDocs calls this for each page: replace each marker with what it stands for, at
    the marker's indentation (a marker may sit in a collapsible block)."""

    def replace(match: re.Match[str]) -> str:
        indent = match.group(1)
        return "\n".join(
            indent + line if line else line for line in render(match.group(2)).splitlines()
        )

    return MARKER.sub(replace, markdown)
