"""No function of the package is more tangled than radon's rank C (complexity 20 at most):
past it a function is a procedure that wants named steps (issue 24; docs/development.md)."""

from __future__ import annotations

from pathlib import Path

from radon.complexity import cc_rank, cc_visit

PACKAGE = Path(__file__).resolve().parent.parent / "firewall"


def test_no_function_of_the_package_ranks_above_c() -> None:
    tangled = [
        f"{path.relative_to(PACKAGE.parent)}:{block.lineno} {block.fullname} "
        f"{cc_rank(block.complexity)} ({block.complexity})"
        for path in sorted(PACKAGE.rglob("*.py"))
        for block in cc_visit(path.read_text(encoding="utf-8"))
        if cc_rank(block.complexity) > "C"
    ]
    assert tangled == [], "split these into named steps:\n" + "\n".join(tangled)
