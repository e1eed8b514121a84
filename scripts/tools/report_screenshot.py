"""The HTML report in a real browser: a screenshot at 1280 px and a layout check.

Makes a BREAD report from a small real run (the README's main job, linear
regression on NHEFS, with its settings: 10 to 10,000 distributions, 50 chains), or from a
saved result directory (``--from DIR``: its report is regenerated in a copy), then
opens it in headless Chromium (Debian's ``chromium``) at 1280 x 900 and

- saves the screenshot (default ``scripts/figures/report_screenshot/report_screenshot.png``);
- measures the layout in the browser (a copy of the page with a small script
  added): whether the page is wider than the window, which elements stick out
  of it other than inside the boxes that scroll on purpose (wide tables, the
  settings), and where the verdict banner and the bound figure end, which must
  be within the first screen (800 px);

and prints the measurements (also saved beside the screenshot as
``report_screenshot.json``).  Exit status 1 if the layout check fails, 2 if no
Chromium is found (the report is still made).

Usage: ``PYTHONPATH=$PWD python scripts/tools/report_screenshot.py [--from DIR] [--png FILE]``.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PNG = ROOT / "scripts" / "figures" / "report_screenshot" / "report_screenshot.png"
WIDTH, HEIGHT, FIRST_SCREEN = 1280, 900, 800
RUN = ["run", str(ROOT / "stan_models" / "linear_regression.stan"), "--simulator",
       str(ROOT / "stan_models" / "linear_regression_sim.stan"), "--data", "nhefs",
       "--steps", "10,100,1000,10000", "--chains", "50", "--seed", "0"]
BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")

# Added to a copy of the report: measure the laid-out page, write it into the DOM.
MEASURE = """<script>
window.addEventListener('load', () => {
  const inside = el => el.closest('.scroll, pre');
  const wide = [...document.querySelectorAll('body *')].filter(el => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.right > window.innerWidth + 0.5 && !inside(el.parentElement || el);
  }).map(el => el.tagName.toLowerCase() + (el.className ? '.' + el.className : ''));
  const bottom = sel => { const el = document.querySelector(sel);
                          return el ? el.getBoundingClientRect().bottom : null; };
  const layout = {window_width: window.innerWidth,
                  page_width: document.documentElement.scrollWidth,
                  overflowing: wide,
                  verdict_bottom: bottom('.verdict'),
                  bound_figure_bottom: bottom('#bound-figure img'),
                  status: (document.querySelector('.verdict .status') || {}).textContent};
  document.body.setAttribute('data-layout', JSON.stringify(layout));
});
</script>"""


def browser() -> str | None:
    return next((path for name in BROWSERS if (path := shutil.which(name))), None)


def chromium(exe: str, page: Path, profile: Path, *extra: str) -> subprocess.CompletedProcess:
    """One headless Chromium call on ``page`` with a fresh profile and no network."""
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
             "--disable-background-networking", "--disable-component-update", "--disable-sync",
             f"--user-data-dir={profile}", f"--window-size={WIDTH},{HEIGHT}"]
    return subprocess.run([exe, *flags, *extra, page.as_uri()], capture_output=True, text=True,
                          timeout=120)


def make_report(source: Path | None, work: Path, keep: Path | None = None) -> Path:
    """The report of a small real run (saved in ``keep`` if given), or of a saved
    result (regenerated in a copy)."""
    from bread_stan.cli.main import main

    out = keep or work / "result"
    if source is None:
        status = main([*RUN, "--out", str(out)])
        if status not in (0, 4):
            raise SystemExit(f"the run failed with exit status {status}")
    else:
        shutil.copytree(source, out, ignore=shutil.ignore_patterns(".lock", "shards",
                                                                  "report.html"))
        main(["report", str(out)])  # its exit status is the run's verdict
        if not (out / "report.html").exists():
            raise SystemExit(f"could not regenerate the report of {source}")
    return out / "report.html"


def measure(exe: str, report: Path, work: Path) -> dict:
    page = work / "measured.html"
    page.write_text(report.read_text().replace("</body>", MEASURE + "</body>"))
    dom = chromium(exe, page, work / "profile-measure", "--virtual-time-budget=3000",
                   "--dump-dom").stdout
    found = re.search(r"data-layout=\"([^\"]*)\"", dom)
    if not found:
        raise SystemExit("the browser did not report the layout")
    import html
    return json.loads(html.unescape(found.group(1)))


def problems(layout: dict) -> list[str]:
    out = []
    if layout["page_width"] > layout["window_width"]:
        out.append(f"the page is {layout['page_width']} px wide in a "
                   f"{layout['window_width']} px window")
    if layout["overflowing"]:
        out.append("elements stick out of the window: " + ", ".join(layout["overflowing"][:5]))
    for key in ("verdict_bottom", "bound_figure_bottom"):
        if layout[key] is None or layout[key] > FIRST_SCREEN:
            out.append(f"{key.replace('_', ' ')} is at {layout[key]} px, not within the first "
                       f"{FIRST_SCREEN} px")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--from", dest="source", type=Path, default=None,
                        help="a saved BREAD result directory (default: a small real run)")
    parser.add_argument("--png", type=Path, default=PNG, help="where to save the screenshot")
    parser.add_argument("--out", type=Path, default=None,
                        help="keep the small run's result here (for a later --from)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        report = make_report(args.source, work, args.out)
        exe = browser()
        if exe is None:
            print(f"report: {report} (no Chromium found: apt-get install chromium)")
            return 2
        args.png.parent.mkdir(parents=True, exist_ok=True)
        shot = chromium(exe, report, work / "profile-shot", f"--screenshot={args.png}")
        if not args.png.exists():
            raise SystemExit(f"no screenshot: {shot.stderr[-2000:]}")
        layout = measure(exe, report, work)
        layout["problems"] = problems(layout)
        layout["browser"] = subprocess.run([exe, "--version"], capture_output=True,
                                           text=True).stdout.strip() or exe
        args.png.with_suffix(".json").write_text(json.dumps(layout, indent=1) + "\n")
        print(json.dumps(layout, indent=1))
        print(f"screenshot: {args.png}")
        return 1 if layout["problems"] else 0


if __name__ == "__main__":
    sys.exit(main())
