"""Choosers: who runs next, step by step.

A chooser sees the actors that may run (``enabled``), those parked at a fault point that
may crash (``crashable``) and those crashed (``crashed``, which may wake up as stale
processes), and returns a :class:`Decision`. Random choosers are a function of a seed;
:class:`PrefixChooser` replays a forced prefix and records the alternatives for the
exhaustive enumeration.
"""

from __future__ import annotations

import random
from dataclasses import dataclass


def actor_name(n: int) -> str:
    return "ABCDEFGHIJ"[n]


@dataclass(frozen=True)
class Decision:
    actor: int
    crash: bool = False
    revive: bool = False  # a crashed actor wakes up: a stale process

    def __str__(self) -> str:
        return f"{'x' if self.crash else 'r' if self.revive else ''}{actor_name(self.actor)}"


class Chooser:
    """Picks the next decision from the actors that may run (``enabled``) and those
    parked at a fault point (``crashable``); ``crashed`` ones may be woken up."""

    def choose(
        self, step: int, enabled: list[int], crashable: list[int], last: int | None, crashed: tuple[int, ...] = ()
    ) -> Decision:
        raise NotImplementedError


class RandomChooser(Chooser):
    """Seeded: mostly stays with the last actor (so one actor often runs a whole
    protocol while another is parked mid-way), sometimes switches, rarely crashes."""

    def __init__(
        self, seed: int, stay: float = 0.6, crash_p: float = 0.015, max_crashes: int = 1, revive_p: float = 0.01
    ) -> None:
        self.rng = random.Random(seed * 7919 + 1)
        self.stay, self.crash_p, self.crashes_left, self.revive_p = stay, crash_p, max_crashes, revive_p

    def choose(
        self, step: int, enabled: list[int], crashable: list[int], last: int | None, crashed: tuple[int, ...] = ()
    ) -> Decision:
        if crashed and self.rng.random() < self.revive_p:
            return Decision(self.rng.choice(crashed), revive=True)
        if crashable and self.crashes_left and self.rng.random() < self.crash_p:
            self.crashes_left -= 1
            return Decision(self.rng.choice(crashable), crash=True)
        if last in enabled and self.rng.random() < self.stay:
            return Decision(last)
        return Decision(self.rng.choice(enabled))


class PCTChooser(Chooser):
    """Probabilistic concurrency testing (Burckhardt et al., ASPLOS 2010): actors get
    random distinct priorities and the highest enabled one runs; at ``depth - 1`` random
    steps the running actor drops below everyone. So one actor typically runs whole
    protocols while another waits mid-way, which is the shape of most ordering bugs,
    and a bug of depth d is found with probability about 1 / (n * k^(d-1)). A crash,
    at most ``max_crashes``, hits the actor about to run, at a random step; in half the
    runs with a crash the dead actor wakes up again later, as a stale process."""

    def __init__(
        self,
        seed: int,
        actors: int,
        est_steps: int,
        depth: int | None = None,
        crash_p: float = 0.25,
        max_crashes: int = 1,
    ) -> None:
        self.rng = random.Random(seed * 7919 + 2)
        self.prio = self.rng.sample(range(actors, 2 * actors), actors)
        d = depth or self.rng.randint(2, 4)
        self.changes = set(self.rng.sample(range(max(est_steps, d)), d - 1))
        self.low = actors
        self.crash_at = self.rng.randrange(max(est_steps, 1)) if self.rng.random() < crash_p else -1
        self.crashes_left = max_crashes
        self.revive_at = (
            self.crash_at + 1 + self.rng.randrange(max(est_steps // 2, 1))
            if self.crash_at >= 0 and self.rng.random() < 0.5
            else -1
        )

    def choose(
        self, step: int, enabled: list[int], crashable: list[int], last: int | None, crashed: tuple[int, ...] = ()
    ) -> Decision:
        if crashed and step >= self.revive_at >= 0:
            self.revive_at = -1
            return Decision(crashed[0], revive=True)
        if step in self.changes and last is not None:
            self.low -= 1
            self.prio[last] = self.low
        best = max(enabled, key=lambda a: self.prio[a])
        if step >= self.crash_at >= 0 and self.crashes_left and best in crashable:
            self.crashes_left -= 1
            return Decision(best, crash=True)
        return Decision(best)


class PrefixChooser(Chooser):
    """Follows a forced prefix, then the default (stay with the last actor, else the
    lowest), recording what else could have been chosen at each step."""

    def __init__(self, prefix: list[Decision]) -> None:
        self.prefix = prefix
        self.taken: list[Decision] = []
        self.options: list[tuple[list[int], list[int], int | None]] = []
        self.diverged = False

    def choose(
        self, step: int, enabled: list[int], crashable: list[int], last: int | None, crashed: tuple[int, ...] = ()
    ) -> Decision:
        self.options.append((list(enabled), list(crashable), last))
        if step < len(self.prefix):
            d = self.prefix[step]
            if (
                (d.crash and d.actor in crashable)
                or (d.revive and d.actor in crashed)
                or (not d.crash and not d.revive and d.actor in enabled)
            ):
                self.taken.append(d)
                return d
            self.diverged = True
        d = Decision(last if last in enabled else enabled[0])
        self.taken.append(d)
        return d
