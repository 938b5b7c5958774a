"""Adapters: other tools' evals run as the firewall's trials.

Each adapter is a module the Python worker imports like an eval's module and
calls like an eval's function; the runner names it as a ``module:function``
target. Nothing here imports the tool until a worker does.
"""
