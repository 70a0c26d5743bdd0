"""FAST mode's rules an observed order must obey: now ``distviz.replay.legality``, beside the
verdict that uses them; kept here under its old name."""

from distviz.replay.legality import Violation, check

__all__ = ["Violation", "check"]
