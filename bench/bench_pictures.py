"""B6: time to draw a trace: the default SVG and the HTML step viewer.

    python bench/bench_pictures.py --trace FILE [--repeat 3] [--json]

Does what ``distviz run/replay --svg/--html`` do, minus writing the file: SVG is
``to_dot(trace, replay)`` then ``graphviz_backend.render(source, "svg")``; HTML is
``to_dot(trace)`` rendered to SVG then ``to_html(trace, replay, svg=...)``. The replay itself is
not timed (B3/B4 measure it). Medians over ``repeat`` runs.
"""

from __future__ import annotations

import argparse
import statistics
import time

from common import emit

from distviz.render import graphviz_backend
from distviz.render.dot import to_dot
from distviz.render.html import to_html
from distviz.replay import replay
from distviz.trace import load


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    trace = load(args.trace)
    rp = replay(trace, mode="fast")
    svg_t: list[float] = []
    dot_t: list[float] = []
    html_t: list[float] = []
    svg_bytes = html_bytes = 0
    for _ in range(max(1, args.repeat)):
        t0 = time.perf_counter()
        source = to_dot(trace, rp)
        t1 = time.perf_counter()
        svg = graphviz_backend.render(source, "svg")
        t2 = time.perf_counter()
        plain = to_dot(trace)
        page = to_html(trace, rp, svg=graphviz_backend.render(plain, "svg").decode("utf-8"))
        t3 = time.perf_counter()
        dot_t.append(t1 - t0)
        svg_t.append(t2 - t0)
        html_t.append(t3 - t2)
        svg_bytes, html_bytes = len(svg), len(page.encode("utf-8"))
    emit({"nodes": len(trace.nodes), "backends": ",".join(graphviz_backend.available_backends()),
          "svg_s": statistics.median(svg_t), "svg_min_s": min(svg_t), "svg_max_s": max(svg_t),
          "to_dot_s": statistics.median(dot_t), "html_s": statistics.median(html_t),
          "html_min_s": min(html_t), "html_max_s": max(html_t), "svg_bytes": svg_bytes,
          "html_bytes": html_bytes}, args.json)


if __name__ == "__main__":
    main()
