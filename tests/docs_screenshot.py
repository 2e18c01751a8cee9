"""Write docs/swagger-ui.png, the README's picture of `/docs`, as the browser test opens it.

From the project's root, with Debian's chromium and chromium-driver installed:

    .venv/bin/python -m tests.docs_screenshot
"""

import tempfile
from pathlib import Path

from tests.browser import chromium, open_docs, save_whole_page
from tests.gunicorn_server import ROOT, GunicornServer, server_environ

SCREENSHOT = ROOT / "docs" / "swagger-ui.png"


def main() -> None:
    server = GunicornServer(server_environ(PLANTSTORE_TOKENS="screenshot"))
    try:
        with tempfile.TemporaryDirectory() as profile, chromium(Path(profile)) as driver:
            open_docs(driver, f"http://127.0.0.1:{server.port}/docs", patience=30)
            SCREENSHOT.parent.mkdir(exist_ok=True)
            save_whole_page(driver, SCREENSHOT)
    finally:
        server.stop()
    print(f"wrote {SCREENSHOT.relative_to(ROOT)} ({SCREENSHOT.stat().st_size} bytes)")


if __name__ == "__main__":
    main()
