"""The errors the user sees as one line: every failure the CLI reports (exit 2) derives from InspectorError, and its
message is the line (never a repr, never a traceback), with every key the process knows masked."""

from __future__ import annotations

__all__ = ["InspectorError", "UsageError", "UnknownScenario", "SourceError", "FaultError", "RecordingError"]


class InspectorError(Exception):
    """Base of the errors that end a command with a one-line message."""

    def __str__(self) -> str:
        if not self.args:
            return type(self).__name__
        from inspector.core.redaction import mask_known  # (here: `inspector --help` imports this module, not that)

        return mask_known(str(self.args[0]))  # a key the process knows never reaches the one line


class UsageError(InspectorError):
    """The command line asks for something impossible."""


class UnknownScenario(InspectorError, LookupError):
    """No scenario of that name (the message lists the available ones)."""


class SourceError(InspectorError):
    """A session cannot be built (missing key, unknown scenario, unreadable file)."""


class FaultError(InspectorError, ValueError):
    """An unknown fault, a bad argument or an impossible combination."""


class RecordingError(InspectorError, ValueError):
    """A file that is a recording (or HAR) but cannot be read by this version."""
