"""RealModelNotebook.Screenshot: the tour as a reader sees it in a browser.
The notebook RealModelNotebook.ExecuteExamples executed (WORK/executed) is
converted to HTML by nbconvert and rendered by headless Chromium (Debian's
`chromium`, installed by scripts/setup-notebook) into WORK/nnsight_tour.png.

The picture is checked: it is not blank; it holds the logit-lens heatmap (a
large block of the heatmap's blues: its cells are shaded from white to dark
blue by probability); and below the heatmap there is more rendered content
(text: the patching table and the steering output follow it). The HTML holds
the patching table with both answers.

    screenshot_test.py WORK
"""
import os
import shutil
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import Checks  # noqa: E402
from png import pixels  # noqa: E402

WIDTH, HEIGHT = 1000, 4400


def main():
    work = sys.argv[1]
    c = Checks()
    nb = os.path.join(work, "executed", "nnsight_tour.ipynb")
    if not c.check(os.path.exists(nb), "the executed tour exists (RealModelNotebook.ExecuteExamples makes it)"):
        return c.finish()
    html_dir = os.path.join(work, "html")
    run = subprocess.run(["jupyter", "nbconvert", "--to", "html", nb, "--output-dir", html_dir],
                         capture_output=True, text=True)
    html_path = os.path.join(html_dir, "nnsight_tour.html")
    if not c.check(run.returncode == 0 and os.path.exists(html_path), "jupyter nbconvert --to html", run.stderr[-2000:]):
        return c.finish()
    with open(html_path, encoding="utf-8") as f:
        html = f.read()
    c.check("The Colosseum is located in the city of</td><td><b> Rome</b>" in html
            and "The Colosseum is located in the city of</td><td><b> Paris</b>" in html,
            "the HTML holds the patching table with the patched and the clean answer")

    browser = shutil.which("chromium")
    if not c.check(browser is not None, "chromium is installed (scripts/setup-notebook)"):
        return c.finish()
    shot = os.path.join(work, "nnsight_tour.png")
    if os.path.exists(shot):
        os.remove(shot)
    # Offline: the page's require.js and MathJax links fail at once and are not needed.
    run = subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                          f"--window-size={WIDTH},{HEIGHT}", "--virtual-time-budget=5000",
                          f"--screenshot={shot}", "file://" + os.path.abspath(html_path)],
                         capture_output=True, text=True, timeout=300)
    if not c.check(run.returncode == 0 and os.path.exists(shot), f"chromium renders the page into {shot}",
                   run.stderr[-2000:]):
        return c.finish()

    w, h, get = pixels(shot)
    c.check((w, h) == (WIDTH, HEIGHT), f"the screenshot is {WIDTH}x{HEIGHT}", (w, h))
    inked = 0
    blue_rows = []  # y of rows with many heatmap blues
    dark_rows = []  # y of rows with text-dark pixels
    for y in range(0, h, 2):
        blue = dark = 0
        for x in range(0, w, 2):
            r, g, b = get(x, y)
            if r < 235 or g < 235 or b < 235:
                inked += 1
            if b - r > 40 and b > 90:
                blue += 1
            if r < 90 and g < 90 and b < 90:
                dark += 1
        if blue > 60:
            blue_rows.append(y)
        if dark > 3:
            dark_rows.append(y)
    total = (w // 2) * (h // 2)
    c.check(inked > 0.03 * total, f"the page is not blank ({100 * inked / total:.1f}% of pixels inked)")
    # The heatmap: the longest band of consecutive rows with many blues
    # (30 layers of cells, about 20 px each; syntax-highlighted code is blue
    # too, but only in thin bands).
    band, best = None, (0, 0)
    for y in blue_rows:
        band = (band[0], y) if band and y - band[1] <= 6 else (y, y)
        if band[1] - band[0] > best[1] - best[0]:
            best = band
    c.check(best[1] - best[0] > 400,
            f"the logit-lens heatmap is there (a band of heatmap blues from y={best[0]} to {best[1]})")
    below = [y for y in dark_rows if y > best[1] + 20]
    c.check(len(below) > 100, f"content follows the heatmap: the patching table and steering ({2 * len(below)} rows of text)")
    print(f"screenshot: {shot}")
    return c.finish()


if __name__ == "__main__":
    sys.exit(main())
