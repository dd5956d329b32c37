"""The one exception family a user can cause.

Every mistake a user can make (a bad flag, an impossible size, a malformed file or message)
raises a :class:`ShoalError` subclass whose message says what to change. The CLI prints the
message as one line on stderr and exits with code 2; library callers catch ``ShoalError``.
"""


class ShoalError(Exception):
    """Base class of the errors a user can cause and fix."""


class UsageError(ShoalError):
    """An argument or option that cannot be used as given (bad value, unit or range)."""


class WireError(ShoalError):
    """A message off the wire that does not follow the expected format."""


class CheckpointError(ShoalError):
    """A checkpoint that cannot be written or restarted from (missing, partial, corrupted,
    written by another version, or a state that cannot be saved); the message names the
    file or the element."""

