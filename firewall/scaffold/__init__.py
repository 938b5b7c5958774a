"""`firewall init`: the files a new project starts from, written only where none exist."""

from __future__ import annotations

import dataclasses
from importlib import resources
from pathlib import Path

ACTION_REF = "flakiness-firewall/flakiness-firewall@v1"
"""What the scaffolded workflows write after `uses:`; `firewall init --action` changes it."""


@dataclasses.dataclass(frozen=True)
class Planned:
    path: Path
    created: bool
    note: str = ""


def _template(name: str) -> str:
    return resources.files("firewall.scaffold").joinpath(name).read_text(encoding="utf-8")


def scaffold(root: Path, *, action: str = ACTION_REF) -> list[Planned]:
    """Write the config, an example eval and two workflows; never overwrite a file."""
    results = []
    config_note = ""
    pyproject = root / "pyproject.toml"
    if pyproject.exists() and "[tool.firewall]" in pyproject.read_text(encoding="utf-8"):
        results.append(Planned(pyproject, False, "already has [tool.firewall]"))
    else:
        if pyproject.exists():
            config_note = "firewall.toml takes precedence over pyproject.toml"
        results.append(_write(root / "firewall.toml", _template("firewall.toml"), config_note))
    results.append(_write(root / "evals" / "example_eval.py", _template("example_eval.py")))
    workflows = root / ".github" / "workflows"
    for name in ("firewall.yml", "firewall-nightly.yml"):
        results.append(_write(workflows / name, _template(name).replace("{action}", action)))
    return results


def _write(path: Path, text: str, note: str = "") -> Planned:
    if path.exists():
        return Planned(path, False, "exists, left as it is")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("x", encoding="utf-8") as handle:  # "x": never clobber a file that appeared
        handle.write(text)
    return Planned(path, True, note)
