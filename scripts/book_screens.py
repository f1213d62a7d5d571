"""How long the built book is to a reader: screens per page at 1280 × 900, headless.

    python scripts/book_screens.py [_build/html] [--page chapters/03_fully_connected] [--json]

Opens each page of a built site (``jupyter-book build .``, or a one-page build's folder) in Debian's
chromium, 1280 px wide, and prints its height in screens of 900 px; for the landing page, also the
screens above its chapter list (the heading ``Chapters``). Prints the targets of issue 41 (the
landing page ≤ 3 screens to its chapter list, a chapter ≤ 20, the book ≤ 150) and exits 1 when one
is missed. The workshop kit (``teach`` and ``labs/*``, for teachers) is summed apart, with its own
limits (the teaching page ≤ 12 screens, a lab ≤ 10). Nothing outside 127.0.0.1 is fetched (the CDN's scripts are refused: Plotly boxes keep
the height they are given).
"""

from __future__ import annotations

import argparse
import functools
import http.server
import json
import re
import sys
import threading
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
WIDTH, HEIGHT = 1280, 900
#: Issue 41's targets, in screens.
LANDING_MAX, CHAPTER_MAX, BOOK_MAX = 3.0, 20.0, 150.0
#: The workshop kit's limits (issue 44), in screens: the teaching page, and each lab.
TEACH_MAX, LAB_MAX = 12.0, 10.0
#: A chapter's page: ``chapters/NN_name`` in the book, ``NN_name`` in a one-page build.
CHAPTER = re.compile(r"(^|/)\d\d_\w+$")

PAGE_JS = """() => {
    const h = document.documentElement.scrollHeight;
    const list = Array.from(document.querySelectorAll('article h2'))
        .find(e => /^\\s*(chapters|the chapters)\\b/i.test(e.textContent));
    return {height: h, list_top: list ? list.getBoundingClientRect().top + window.scrollY : null};
}"""


def is_workshop(page: str) -> bool:
    """Whether ``page`` belongs to the workshop kit (the teaching page and its labs)."""
    return page == "teach" or page.startswith("labs/")


def pages(site: Path) -> list[str]:
    """The site's pages, landing page first: ``intro`` then every ``chapters/*.html`` and the rest (not
    the labs' slide decks, ``slides/``: they are shown one slide at a time, not scrolled)."""
    found = sorted(p.relative_to(site).with_suffix("").as_posix() for p in site.rglob("*.html")
                   if not p.relative_to(site).parts[0].startswith(("_", "genindex", "search", "index", "slides")))
    return sorted(found, key=lambda p: (p != "intro", not p.startswith("chapters/"), p))


def measure(site: Path, only: list[str] | None = None) -> list[dict]:
    """Per page: its name, height (px), screens, and for the landing page the screens to its chapter list."""
    from playwright.sync_api import sync_playwright

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/"
    rows = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, headless=True,
                                        args=["--no-sandbox", "--disable-gpu"])
            ctx = browser.new_context(viewport={"width": WIDTH, "height": HEIGHT})
            page = ctx.new_page()
            page.route("**/*", lambda r: r.continue_() if r.request.url.startswith(url) else r.abort())
            for name in only or pages(site):
                page.goto(url + f"{name}.html", wait_until="load")
                page.wait_for_timeout(300)
                facts = page.evaluate(PAGE_JS)
                row = {"page": name, "height_px": facts["height"], "screens": facts["height"] / HEIGHT}
                if facts["list_top"] is not None:
                    row["screens_to_chapter_list"] = facts["list_top"] / HEIGHT
                rows.append(row)
            browser.close()
    finally:
        server.shutdown()
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("site", nargs="?", default="_build/html", type=Path, help="a built site's folder")
    ap.add_argument("--page", action="append", help="only this page (repeatable), e.g. intro")
    ap.add_argument("--json", action="store_true", help="print the rows as JSON")
    args = ap.parse_args(argv)
    if not (args.site / "index.html").exists() and not list(args.site.glob("*.html")):
        ap.error(f"site: {args.site} holds no built pages (build with `jupyter-book build .`)")
    rows = measure(args.site, args.page)
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    missed = []
    for r in rows:
        extra = ""
        if "screens_to_chapter_list" in r:
            extra = f"   ({r['screens_to_chapter_list']:.1f} to the chapter list)"
            if r["page"] == "intro" and r["screens_to_chapter_list"] > LANDING_MAX:
                missed.append(f"intro: {r['screens_to_chapter_list']:.1f} screens to the chapter list")
        print(f"{r['page']:<40} {r['screens']:6.1f} screens{extra}")
        limit = (TEACH_MAX if r["page"] == "teach" else LAB_MAX) if is_workshop(r["page"]) else \
            CHAPTER_MAX if CHAPTER.search(r["page"]) else None
        if limit is not None and r["screens"] > limit:
            missed.append(f"{r['page']}: {r['screens']:.1f} screens (at most {limit:g})")
    kit = [r for r in rows if is_workshop(r["page"])]
    if kit:
        print(f"{'workshop kit (teach, labs)':<40} {sum(r['screens'] for r in kit):6.1f} screens "
              f"(targets: teach ≤ {TEACH_MAX:g}, a lab ≤ {LAB_MAX:g}; not in the book's total)")
    total = sum(r["screens"] for r in rows if not is_workshop(r["page"]))
    print(f"{'book':<40} {total:6.1f} screens (targets: landing ≤ {LANDING_MAX:g} to the chapter list, "
          f"chapter ≤ {CHAPTER_MAX:g}, book ≤ {BOOK_MAX:g})")
    if not args.page and total > BOOK_MAX:
        missed.append(f"book: {total:.1f} screens")
    for m in missed:
        print("over target:", m)
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
