"""Named fault points: places in every protocol where a test can make things go wrong.

Code calls :func:`point` with a dotted name (``commit.after_requested``,
``log.store.before_link``, ...) at each step. Unarmed, a point costs one dict lookup.
A test arms a point in-process with :func:`arm`, or for a child process through the
environment variable ``LAKELINE_FAULTS``, a comma-separated list of ``name=action``:

* ``crash`` — the process dies at once (``os._exit``), as if killed; nothing is flushed.
* ``crash-once`` — like ``crash``, but only in the first process of a family that reaches
  the point: it claims ``<name>.fired`` in ``$LAKELINE_FAULT_DIR`` first (exclusive
  create). Kills one Spark executor's Python worker mid-task and lets its retry pass.
* ``raise`` — :class:`~lakeline.timeline.errors.FaultInjectedError` is raised.
* ``pause:SECONDS`` — sleep, then go on.
* ``wait`` — write ``<name>.reached`` into ``$LAKELINE_FAULT_DIR`` and block until a file
  ``<name>.release`` appears there; drives deterministic multi-process interleavings.

An optional ``@N`` after the action fires it on the N-th time the point is reached
(``commit.before_complete=crash@2``); by default the first.

In-process, :func:`on` runs a callable at a point instead: a test interleaves another
handle's action (an index created, a commit landed) at an exact step of a protocol.

:func:`set_hook` installs one callable that sees *every* point reached in this process,
armed or not, with the point's name, on the thread that reached it. The schedule
explorer (``tests/explorer``) uses it to park the threads it drives as actors at each
point until its scheduler picks them, and lets every other thread (heartbeats, engine
workers) through; the hook decides that itself, by ``threading.current_thread()``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..errors import FaultInjectedError

ENV_VAR = "LAKELINE_FAULTS"
DIR_VAR = "LAKELINE_FAULT_DIR"
CRASH_EXIT_CODE = 86


@dataclass
class _Fault:
    action: str
    on_hit: int = 1
    hits: int = 0
    call: Callable[[], None] | None = None


_armed: dict[str, _Fault] = {}
_env_seen: str | None = None
_hook: Callable[[str], None] | None = None


def _parse(spec: str) -> dict[str, _Fault]:
    out: dict[str, _Fault] = {}
    for item in filter(None, (s.strip() for s in spec.split(","))):
        name, _, action = item.partition("=")
        action, _, nth = action.partition("@")
        out[name.strip()] = _Fault(action.strip() or "raise", int(nth) if nth else 1)
    return out


def _sync_env() -> None:
    global _env_seen
    spec = os.environ.get(ENV_VAR, "")
    if spec != _env_seen:
        _env_seen = spec
        for name, fault in _parse(spec).items():
            _armed.setdefault(name, fault)


def arm(name: str, action: str = "raise", on_hit: int = 1) -> None:
    """Arm ``name`` in this process (see the module docstring for actions)."""
    _armed[name] = _Fault(action, on_hit)


def on(name: str, fn: Callable[[], None], on_hit: int = 1) -> None:
    """Run ``fn`` the ``on_hit``-th time ``name`` is reached in this process; whatever it
    raises propagates from the point."""
    _armed[name] = _Fault("call", on_hit, call=fn)


def set_hook(fn: Callable[[str], None] | None) -> Callable[[str], None] | None:
    """Call ``fn(name)`` at every point reached in this process, on the reaching thread,
    before any armed action (None removes it); returns the hook it replaces. Whatever
    ``fn`` raises propagates from the point. :func:`disarm_all` leaves it in place."""
    global _hook
    previous, _hook = _hook, fn
    return previous


def disarm_all() -> None:
    """Disarm every point in this process, including those from the environment."""
    global _env_seen
    _armed.clear()
    _env_seen = os.environ.get(ENV_VAR, "")


def point(name: str) -> None:
    """Mark a step of a protocol; does nothing unless ``name`` is armed.

    Raises:
        FaultInjectedError: the point is armed with ``raise``.
    """
    if _hook is not None:
        _hook(name)
    if os.environ.get(ENV_VAR, "") != (_env_seen or ""):
        _sync_env()
    fault = _armed.get(name)
    if fault is None:
        return
    fault.hits += 1
    if fault.hits != fault.on_hit:
        return
    action = fault.action
    if fault.call is not None:
        fault.call()
        return
    if action == "crash":
        os._exit(CRASH_EXIT_CODE)
    if action == "crash-once":
        try:
            fd = os.open(Path(os.environ.get(DIR_VAR, ".")) / f"{name}.fired", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return
        os.close(fd)
        os._exit(CRASH_EXIT_CODE)
    if action == "raise":
        raise FaultInjectedError(f"fault injected at {name}")
    if action.startswith("pause:"):
        time.sleep(float(action.split(":", 1)[1]))
        return
    if action == "wait":
        folder = Path(os.environ.get(DIR_VAR, "."))
        (folder / f"{name}.reached").write_text(str(os.getpid()))
        release = folder / f"{name}.release"
        while not release.exists():
            time.sleep(0.01)
        return
    raise FaultInjectedError(f"fault point {name} armed with unknown action {action!r}")
