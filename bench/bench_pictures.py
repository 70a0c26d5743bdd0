"""B6: pictures of a big trace a person can read: the default PNG and SVG, the worker summary.

    python bench/bench_pictures.py --trace FILE [--repeat 3] [--json]

For the trace (B2's 15,000-node pipeline): the view ``distviz export -f png`` and ``-f svg`` pick
by default, its size in pixels, whether Graphviz shrank it (its ``Scaling by`` warning) and how
long choosing and drawing took (``draw_picture``: the tries it laid out and the final render);
the worker summary (``--view summary``: ``worker_summary`` with the real run's times, its DOT
and ``dot -Tsvg``); and the whole ``distviz export TRACE --view summary -f svg`` command in a
fresh process (Python start-up, loading and replaying the trace included). The trace's own load
and replay are not part of the in-process times (B3-B5 measure them). Medians over ``repeat``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import emit, run_child

from distviz.render import graphviz_backend
from distviz.render.pictures import draw_picture
from distviz.replay import replay
from distviz.trace import load
from distviz.views import ViewSpec


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    trace = load(args.trace)
    rp = replay(trace, mode="fast")
    out: dict[str, object] = {"nodes": len(trace.nodes),
                              "backends": ",".join(graphviz_backend.available_backends())}
    for fmt in ("png", "svg"):
        times = []
        for _ in range(max(1, args.repeat)):
            t0 = time.perf_counter()
            pic = draw_picture(trace, rp, fmt, ViewSpec(), graph=rp.graph)
            times.append(time.perf_counter() - t0)
        size = pic.choice.size_px or (0, 0)
        out.update({f"{fmt}_view": pic.choice.dot.detail, f"{fmt}_width": size[0],
                    f"{fmt}_height": size[1], f"{fmt}_shrunk": pic.scaled is not None,
                    f"{fmt}_warnings": len(pic.warnings), f"{fmt}_s": statistics.median(times)})
    times = []
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        pic = draw_picture(trace, rp, "svg", ViewSpec(detail="summary"), graph=rp.graph)
        times.append(time.perf_counter() - t0)
    out.update({"summary_s": statistics.median(times), "summary_min_s": min(times),
                "summary_max_s": max(times)})
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(max(1, args.repeat)):
            wall, _o, _c = run_child([sys.executable, "-m", "distviz", "export", args.trace,
                                      "--view", "summary", "-f", "svg", "-o",
                                      str(Path(tmp) / "s.svg")], stdout_devnull=True)
            walls.append(wall)
    out.update({"summary_cmd_s": statistics.median(walls), "summary_cmd_min_s": min(walls),
                "summary_cmd_max_s": max(walls)})
    emit(out, args.json)


if __name__ == "__main__":
    main()
