"""The table's state: instants, the event log and its stores, locks, heartbeats,
the table configuration, file groups and the file-system view derived from the log."""

from .errors import *  # noqa: F401,F403 - the error hierarchy is part of this package's API
from .errors import LakelineError
from .instant import Action, Event, Instant, State
from .log import EventLog
from .timeline import Timeline

__all__ = ["Action", "Event", "EventLog", "Instant", "LakelineError", "State", "Timeline"]
