"""What a what-if changes and what a run injects: the ``WhatIf`` value and the parsers of
``--what-if`` (``latency=5ms,bandwidth=1Gbit/s,slow=worker1:2x,recv=2ms``) and ``--inject-delay``
(``recv=2ms``, ``worker1=3x``). Pure; every bad item is a ``UsageError`` that names it."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from distviz.analyses.timing import fmt_us
from distviz.errors import UsageError

__all__ = ["WhatIf", "parse_what_if", "parse_inject_delay", "what_if_for_injection"]

_TIME = {"ns": 1e-3, "us": 1.0, "µs": 1.0, "ms": 1e3, "s": 1e6}
_RATE = {"bit/s": 1.0, "kbit/s": 1e3, "mbit/s": 1e6, "gbit/s": 1e9, "b/s": 8.0,
         "kb/s": 8e3, "mb/s": 8e6, "gb/s": 8e9}


@dataclass(frozen=True, slots=True)
class WhatIf:
    """Changes to simulate: ``latency_us`` added to every message (and acknowledgement) on the
    way; ``bandwidth_bits`` (bits/s) for the gradients' bytes, ``None`` for as measured;
    ``slow`` ``(worker, factor)`` pairs multiply that worker's node durations; ``recv_us`` is
    added to every ``RecvRpcBackward`` before it sends (what ``--inject-delay recv=`` does)."""

    latency_us: float = 0.0
    bandwidth_bits: float | None = None
    slow: tuple[tuple[str, float], ...] = ()
    recv_us: float = 0.0

    def factor(self, worker: str) -> float:
        return dict(self.slow).get(worker, 1.0)

    @property
    def empty(self) -> bool:
        return not (self.latency_us or self.bandwidth_bits or self.slow or self.recv_us)

    def describe(self) -> str:
        """``latency +5 ms, bandwidth 1 Gbit/s, worker1 2x slower`` or ``as measured``."""
        parts = []
        if self.latency_us:
            parts.append(f"latency +{fmt_us(self.latency_us)}")
        if self.bandwidth_bits:
            parts.append(f"bandwidth {_fmt_rate(self.bandwidth_bits)}")
        parts.extend(f"{w} {f:.3g}x slower" for w, f in self.slow)
        if self.recv_us:
            parts.append(f"recv +{fmt_us(self.recv_us)}")
        return ", ".join(parts) or "as measured"

    def to_json(self) -> dict[str, Any]:
        return {"latency_us": self.latency_us, "bandwidth_bits_per_s": self.bandwidth_bits,
                "slow": dict(self.slow), "recv_us": self.recv_us}


def _fmt_rate(bits: float) -> str:
    for unit, scale in (("Gbit/s", 1e9), ("Mbit/s", 1e6), ("kbit/s", 1e3)):
        if bits >= scale:
            return f"{bits / scale:g} {unit}"
    return f"{bits:g} bit/s"


def _number_unit(text: str, units: Mapping[str, float], what: str, example: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:e[-+]?[0-9]+)?)\s*([A-Za-zµ/]*)\s*", text)
    unit = m.group(2).lower() if m else ""
    if m is None or unit not in units:
        raise UsageError(f"{what} {text!r}: expected a number with a unit "
                         f"({', '.join(sorted(units))}), e.g. {example}")
    return float(m.group(1)) * units[unit]


def _slow_item(value: str, workers: Sequence[str] | None, flag: str, example: str
               ) -> tuple[str, float]:
    worker, sep, fac = value.rpartition(":") if ":" in value else value.rpartition("=")
    fac = fac.strip().lower().removesuffix("x")
    try:
        factor = float(fac) if sep else 0.0
    except ValueError:
        factor = 0.0
    if not sep or not worker or factor < 1.0:
        raise UsageError(f"{flag} {value!r}: expected WORKER:FACTOR with a factor of 1 or more, "
                         f"e.g. {example}")
    if workers is not None and worker not in workers:
        raise UsageError(f"{flag} {value!r}: no worker {worker!r}; workers: "
                         f"{', '.join(workers)}")
    return worker, factor


def parse_what_if(text: str, workers: Sequence[str] | None = None) -> WhatIf:
    """Parse ``latency=5ms,bandwidth=1Gbit/s,slow=worker1:2x,recv=2ms`` (any subset; ``slow``
    may repeat). Raises ``UsageError`` naming the bad item."""
    latency = recv = 0.0
    bandwidth: float | None = None
    slow: dict[str, float] = {}
    example = "--what-if latency=5ms,bandwidth=1Gbit/s,slow=worker1:2x,recv=2ms"
    for item in [x for x in text.split(",") if x.strip()]:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep:
            raise UsageError(f"--what-if {item!r}: expected KEY=VALUE, e.g. {example}")
        if key == "latency":
            latency = _number_unit(value, _TIME, "--what-if latency", "latency=5ms")
        elif key == "recv":
            recv = _number_unit(value, _TIME, "--what-if recv", "recv=2ms")
        elif key == "bandwidth":
            bandwidth = _number_unit(value, _RATE, "--what-if bandwidth", "bandwidth=1Gbit/s")
            if bandwidth <= 0:
                raise UsageError(f"--what-if bandwidth {value!r}: expected more than 0")
        elif key == "slow":
            w, f = _slow_item(value.strip(), workers, "--what-if slow", "slow=worker1:2x")
            slow[w] = f
        else:
            raise UsageError(f"--what-if {key!r}: unknown; expected latency, bandwidth, slow "
                             f"or recv, e.g. {example}")
    return WhatIf(latency, bandwidth, tuple(sorted(slow.items())), recv)


def parse_inject_delay(items: Sequence[str], workers: Sequence[str]) -> dict[str, Any]:
    """Parse ``--inject-delay recv=2ms`` and ``--inject-delay worker1=3x`` (repeatable, or
    comma-separated) into ``RunOptions.inject``: ``{"recv_s": 0.002, "slow": {"worker1": 3.0}}``.
    Raises ``UsageError`` naming the bad item."""
    out: dict[str, Any] = {}
    slow: dict[str, float] = {}
    for item in [x.strip() for raw in items for x in raw.split(",") if x.strip()]:
        key, sep, value = item.partition("=")
        if not sep:
            raise UsageError(f"--inject-delay {item!r}: expected recv=DURATION or WORKER=FACTORx, "
                             "e.g. --inject-delay recv=2ms or --inject-delay worker1=3x")
        if key.strip() == "recv":
            out["recv_s"] = _number_unit(value, _TIME, "--inject-delay recv", "recv=2ms") / 1e6
        else:
            w, f = _slow_item(item, workers, "--inject-delay", "worker1=3x")
            slow[w] = f
    if slow:
        out["slow"] = slow
    return out


def what_if_for_injection(injected: Mapping[str, Any]) -> WhatIf:
    """The what-if that models a run's ``real.injected`` delays (for predicting a delayed run
    from an undelayed trace)."""
    slow = injected.get("slow") or {}
    return WhatIf(recv_us=float(injected.get("recv_s") or 0.0) * 1e6,
                  slow=tuple(sorted((str(w), float(f)) for w, f in slow.items())))
