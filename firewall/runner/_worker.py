"""The trial worker: a child process that imports eval modules once and serves many trials.

It speaks JSON lines: a request ``{"target": "module:function", "seed": S,
"trial": I}`` on stdin, one reply ``{"result": ...}`` or ``{"error": "..."}``
on the protocol stream, which opens with one ``{"ready": true}`` line once the
worker has booted. Eval code never sees that stream: the worker moves it
to a private descriptor and points file descriptor 1 at stderr, so whatever an
eval prints lands in the worker's log and can never be taken for a reply.

``--discover PATH...`` instead imports the files under the paths and prints
the ``@firewall.eval`` functions it found, as one JSON document.

No process a trial starts outlives the trial. On Linux the worker is a child
subreaper: a process orphaned below it (a double fork, a ``setsid`` child whose
parent exited) becomes its child rather than init's, so every process a trial
started is still a descendant, in whatever session or group. Before it replies,
the worker kills and reaps all of its children but those started while an eval
module was imported, which belong to the module and live with the worker (a
server an eval talks to); a killed child's own children are adopted in turn,
and killed in the next round. A trial that started nothing costs one
``waitpid``. ``firewall/runner/reaper.py`` says what the rest of the runner
guarantees.

Every worker pays for its own start-up, once per runner slot, so serving
imports only what an interpreter has loaded anyway (json, os, signal, sys, time,
importlib), and ctypes for the one ``prctl`` call: no ``firewall`` package (the
runner loads this file by path), no typing, no inspect for plain functions.
asyncio, traceback, pathlib, inspect and ``firewall`` are imported on first
use, by the trials that need them.
"""

from __future__ import annotations

import importlib
import json
import os
import signal
import sys
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    import asyncio
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    Eval = tuple[Callable[..., Any], bool, bool]  # function, takes `trial`, is async

_FUNCTION = type(lambda: None)
_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
_VARARGS, _VARKEYWORDS, _COROUTINE = 0x04, 0x08, 0x80  # inspect.CO_VARARGS, ...
# What makes inspect look past a plain function's code object: then ask inspect.
_INTROSPECTED = (
    "__wrapped__",
    "__signature__",
    "_partialmethod",
    "__partialmethod__",
    "_is_coroutine_marker",
)


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    # The orchestrator owns interruption: it kills the worker when it needs to.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.path[0] != os.getcwd():
        sys.path.insert(0, os.getcwd())
    if argv[:1] == ["--discover"]:
        from pathlib import Path

        adopting = adopt_orphans()
        found = discover([Path(p) for p in argv[1:]])
        if adopting:
            end_processes(set())  # what importing the modules started ends with discovery
        print(json.dumps(found))
        return
    serve(own_log=argv[:1] == ["--own-log"])


def serve(*, own_log: bool = False) -> None:
    """Answer requests until stdin closes.

    With ``own_log`` (the runner's workers), stderr is a file the worker owns: it
    is emptied as each request arrives, so that when a trial kills the worker
    the log holds that trial's stderr only.
    """
    replies = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    requests = os.fdopen(os.dup(0), "r", encoding="utf-8")
    log = os.dup(2) if own_log else None  # private: an eval that moves fd 2 cannot redirect it
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    # Eval code sees an empty stdin, as a command eval does: it can neither hang on the
    # protocol stream nor eat a request from it.
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115 - lives with the worker
    cache: dict[str, Eval] = {}
    loop: asyncio.AbstractEventLoop | None = None
    adopting = adopt_orphans()
    modules: set[int] = set()  # children started by importing an eval module
    replies.write('{"ready": true}\n')  # booted: the orchestrator may send requests
    for line in requests:
        if log is not None:
            try:
                os.ftruncate(log, 0)
            except OSError:
                pass
        request = json.loads(line)
        try:
            entry = cache.get(request["target"])
            if entry is None:
                started = time.perf_counter()
                entry = _load(request["target"], cache)
                # Said at once: the trial's own timeout starts now, not at the request.
                replies.write(json.dumps({"imported": time.perf_counter() - started}) + "\n")
                if adopting:
                    modules.update(children())
            fn, takes_trial, is_async = entry
            kwargs = {"seed": request["seed"]}
            if takes_trial:
                kwargs["trial"] = request["trial"]
            if is_async and loop is None:
                import asyncio

                loop = asyncio.new_event_loop()
            called = time.perf_counter()  # the call alone: no boot, no import, no protocol
            if is_async:
                assert loop is not None
                value = loop.run_until_complete(fn(**kwargs))
            else:
                value = fn(**kwargs)
            reply = {"result": to_payload(value), "took": time.perf_counter() - called}
        except (Exception, SystemExit) as exc:  # any failure costs one trial
            reply = {"error": describe(exc), "traceback": own_traceback(exc)}
        if adopting:
            end_processes(modules)
        try:
            text = json.dumps(reply)
        except (TypeError, ValueError) as exc:
            text = json.dumps({"error": f"result is not JSON-serialisable: {exc}"})
        replies.write(text + "\n")


def adopt_orphans() -> bool:
    """Make this process the reaper of its descendants' orphans; False where it cannot be."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (ImportError, OSError, AttributeError):  # an interpreter built without ctypes
        return False


def end_processes(spared: set[int]) -> None:
    """SIGKILL and reap every child but the ``spared``, until none is left.

    With ``adopt_orphans`` in force that is every process started below this one,
    since an orphaned descendant becomes a child here. ``spared`` loses the pids
    that are no longer children, so that a pid passed on is not spared by mistake,
    and gains those that refuse the signal.
    """
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return  # no children at all: the usual case
        if pid:
            spared.discard(pid)
            continue  # reaped one that had exited; look again
        left = children()
        spared.intersection_update(left)
        doomed = [child for child in left if child not in spared]
        if not doomed:
            return
        killed = []
        for child in doomed:
            try:
                os.kill(child, signal.SIGKILL)
            except ProcessLookupError:  # reaped meanwhile, by a thread of the eval's
                continue
            except PermissionError:  # a setuid program: not the worker's to kill
                spared.add(child)
                continue
            killed.append(child)
        if killed:
            try:
                os.waitpid(killed[0], 0)
            except ChildProcessError:
                pass


def children() -> list[int]:
    """This process's children (each thread has a list of its own), zombies included."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # reaps nothing
    except ChildProcessError:
        return []  # none: no need to read /proc
    pids: list[int] = []
    try:
        for thread in os.listdir("/proc/self/task"):
            with open(f"/proc/self/task/{thread}/children", "rb") as file:
                pids.extend(int(pid) for pid in file.read().split())
    except FileNotFoundError:  # a thread that just ended, or no CONFIG_PROC_CHILDREN
        return _children_by_parent()
    return pids


def _children_by_parent() -> list[int]:
    """This process's children, found by reading every process's parent."""
    me = str(os.getpid()).encode()
    pids: list[int] = []
    try:
        names = os.listdir("/proc")
    except OSError:  # no /proc mounted: nothing can be found
        return pids
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as file:
                parent = file.read().rpartition(b")")[2].split(maxsplit=2)[1]
        except (OSError, IndexError):
            continue
        if parent == me:
            pids.append(int(name))
    return pids


def _load(target: str, cache: dict[str, Eval]) -> Eval:
    module_name, _, qualname = target.partition(":")
    obj: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"{target} is not callable")
    entry = (obj, *shape(obj))
    cache[target] = entry
    return entry


def shape(fn: Callable[..., Any]) -> tuple[bool, bool]:
    """Whether fn takes `trial` (by name or **kwargs), and whether it is a coroutine function.

    For a plain function this reads the code object, as inspect.signature and
    inspect.iscoroutinefunction would, without importing inspect.
    """
    if type(fn) is _FUNCTION and not any(hasattr(fn, name) for name in _INTROSPECTED):
        code = fn.__code__
        flags = code.co_flags
        count = code.co_argcount + code.co_kwonlyargcount
        count += bool(flags & _VARARGS) + bool(flags & _VARKEYWORDS)
        names = code.co_varnames[:count]
        return "trial" in names or bool(flags & _VARKEYWORDS), bool(flags & _COROUTINE)
    import inspect

    parameters = inspect.signature(fn).parameters
    takes_trial = "trial" in parameters or any(
        p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()
    )
    return takes_trial, inspect.iscoroutinefunction(fn)


def to_payload(value: Any) -> Any:
    """The trial result JSON of what an eval function returned."""
    # An eval can only return a TrialResult if `firewall` has been imported (by the eval).
    trial_result = getattr(sys.modules.get("firewall"), "TrialResult", None)
    if trial_result is not None and isinstance(value, trial_result):
        return value.to_json()
    if isinstance(value, bool):
        return {"score": 1.0 if value else 0.0}
    if isinstance(value, (int, float)):
        return {"score": float(value)}  # NaN and inf travel as such and are refused upstream
    if isinstance(value, dict):
        return value
    if hasattr(value, "item") and callable(value.item):  # numpy scalars
        return to_payload(value.item())
    raise TypeError(
        f"returned {type(value).__name__}; expected a number, a bool, a dict "
        "or firewall.TrialResult"
    )


def describe(exc: BaseException) -> str:
    if isinstance(exc, SystemExit):
        return f"eval called sys.exit({exc.code!r})"
    from pathlib import Path

    frames = _own_frames(exc)
    where = f" (at {Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else ""
    return f"{type(exc).__name__}: {exc}{where}"


def own_traceback(exc: BaseException) -> str | None:
    """The traceback of the eval's own frames: neither this worker's nor importlib's."""
    if isinstance(exc, SystemExit):
        return None
    import traceback

    lines = [
        "Traceback (most recent call last):\n",
        *traceback.format_list(_own_frames(exc)),
        *traceback.format_exception_only(type(exc), exc),
    ]
    text = "".join(lines)
    return text if len(text) <= _TRACEBACK_CHARS else "…" + text[-_TRACEBACK_CHARS:]


_TRACEBACK_CHARS = 6000


def _own_frames(exc: BaseException) -> list[Any]:
    import traceback

    return [
        frame
        for frame in traceback.extract_tb(exc.__traceback__)
        if frame.filename != __file__ and not frame.filename.startswith("<frozen ")
    ]


def discover(paths: list[Path]) -> dict[str, Any]:
    """Import every module under the paths and list the decorated evals."""
    import inspect
    from pathlib import Path

    from firewall import EVAL_ATTRIBUTE

    root = Path.cwd()
    found: list[dict[str, Any]] = []
    errors: list[str] = []
    for file in _python_files(paths):
        module_name = ".".join(file.relative_to(root).with_suffix("").parts)
        try:
            module = importlib.import_module(module_name)
        except BaseException as exc:  # report, do not crash discovery
            errors.append(f"{file.relative_to(root)}: cannot import: {describe(exc)}")
            continue
        for name, obj in vars(module).items():
            options = getattr(obj, EVAL_ATTRIBUTE, None)
            if options is None or getattr(obj, "__module__", None) != module.__name__:
                continue
            try:
                line = inspect.getsourcelines(obj)[1]
            except (OSError, TypeError):
                line = None
            found.append(
                {
                    "options": options,
                    "target": f"{module_name}:{getattr(obj, '__qualname__', name)}",
                    "file": str(file.relative_to(root)),
                    "line": line,
                }
            )
    return {"evals": found, "errors": errors}


def _python_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        path = path.resolve()
        if path.is_file():
            files.append(path)
        elif path.is_dir():
            files.extend(
                p
                for p in sorted(path.rglob("*.py"))
                if not any(part.startswith((".", "__")) for part in p.relative_to(path).parts)
            )
    return files


if __name__ == "__main__":
    main()
