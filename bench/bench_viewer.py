"""B8: the HTML viewer of a big trace: export time, first paint, a step, a search, in Chromium.

    python bench/bench_viewer.py --nodes 100000 [--repeat 3] [--steps 30] [--json]
    python bench/bench_viewer.py --trace FILE ...

Writes ``synthetic_trace(nodes)`` to a file (not timed), then:

* ``export_s``: ``distviz export FILE -f html`` as a fresh process (start-up, load, replay, the
  page written), the median of ``repeat`` runs; ``html_bytes`` the page's size;
* ``paint_ms``: in a real headless Chromium (``tests/chromium.py``, the DevTools protocol on a
  pipe), the time from navigation start to the first frame of the canvas (the page's
  ``paintMs``), median over ``repeat`` fresh loads, and ``open_s`` the wall time of the same;
* ``full_ms``: switching to every node (``f``), its layout and first frame;
* ``step_ms``: one step (``n``) in the full view at 100 % zoom following the step's node, from
  the key event to the frame after next (two ``requestAnimationFrame``: the canvas rasterised
  and shown), median and max over ``steps`` steps; ``step_js_ms`` the script's own part;
* ``search_ms``/``search_found``: typing a variable (a weight of the last stage) and Enter until
  the frame that shows the match.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import REPO, emit, run_child

sys.path.insert(0, str(REPO / "tests"))
from chromium import Chromium  # noqa: E402 - tests/chromium.py drives the browser

from distviz.replay.synthetic import synthetic_trace  # noqa: E402

FRAME = "new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"
STEPS_JS = """(async () => {
  const out = [], js = [];
  for (let k = 0; k < STEPS; k++) {
    const t = performance.now();
    document.dispatchEvent(new KeyboardEvent("keydown", {key: "n", bubbles: true}));
    js.push(performance.now() - t);
    await FRAME;
    out.push(performance.now() - t);
  }
  return [out, js];
})()""".replace("FRAME", FRAME)
FULL_JS = """(async () => {
  const t = performance.now();
  document.dispatchEvent(new KeyboardEvent("keydown", {key: "f", bubbles: true}));
  await FRAME;
  return performance.now() - t;
})()""".replace("FRAME", FRAME)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--nodes", type=int, help="size of the synthetic trace")
    src.add_argument("--trace", help="a trace file")
    parser.add_argument("--workers", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.trace:
            path = Path(args.trace)
            var = None
        else:
            tr = synthetic_trace(args.nodes, args.workers, 0)
            path = Path(tmp) / "big.trace.json"
            tr.save(path)
            var = f"s{args.workers - 1}.w2"
            del tr
        page = Path(tmp) / "big.html"
        exports = []
        for _ in range(max(1, args.repeat)):
            wall, _o, _c = run_child([sys.executable, "-m", "distviz", "export", str(path), "-f",
                                      "html", "-o", str(page)], stdout_devnull=True)
            exports.append(wall)
        out: dict[str, object] = {"export_s": statistics.median(exports),
                                  "export_min_s": min(exports), "export_max_s": max(exports),
                                  "html_bytes": page.stat().st_size}
        with Chromium(1400, 900) as browser:
            paints, opens = [], []
            for _ in range(max(1, args.repeat)):
                t0 = time.perf_counter()
                browser.goto("about:blank")
                browser.goto(page.as_uri())
                paint = browser.wait_for("document.body.dataset.paintMs", timeout=120)
                opens.append(time.perf_counter() - t0)
                paints.append(float(paint))
            out.update({"paint_ms": statistics.median(paints), "paint_max_ms": max(paints),
                        "open_s": statistics.median(opens), "nodes": int(browser.eval(
                            "distviz.layout() ? document.getElementById('distviz-data') && "
                            "JSON.parse(document.getElementById('distviz-data').textContent)"
                            ".kind.length : 0")),
                        "first_view": browser.eval("document.body.dataset.view")})
            out["full_ms"] = float(browser.eval(FULL_JS, timeout=120))
            frames, js = browser.eval(STEPS_JS.replace("STEPS", str(args.steps)), timeout=300)
            out.update({"step_ms": statistics.median(frames), "step_max_ms": max(frames),
                        "step_js_ms": statistics.median(js), "steps": len(frames),
                        "view": browser.eval("document.body.dataset.view"),
                        "zoom": float(browser.eval("distviz.camera.s"))})
            if var is not None:
                browser.key("/")
                browser.type_text(var)
                t0 = time.perf_counter()
                browser.key("Enter")
                browser.eval(FRAME)
                out["search_ms"] = (time.perf_counter() - t0) * 1000
                selected = browser.eval("document.body.dataset.selected || ''")
                out["search_found"] = selected.endswith(f"AccumulateGrad({var})")
                out["search_var"] = var
            out["errors"] = len(browser.errors())
    emit(out, args.json)


if __name__ == "__main__":
    main()
