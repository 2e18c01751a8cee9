"""Debian's headless Chromium, driven by selenium through Debian's chromedriver.

Both binaries are named, so Selenium Manager, which would download a driver or a browser,
never runs: this machine and CI reach no site but the package registries.
"""

import contextlib
from collections.abc import Iterator
from pathlib import Path
from unittest import mock

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.common.selenium_manager import SeleniumManager
from selenium.webdriver.support import expected_conditions as shown
from selenium.webdriver.support.ui import WebDriverWait

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")

#: Headless, as root (no sandbox), in a container (small /dev/shm, no GPU), and calling no
#: Google service on its own: the closed network would refuse it, and a test should not wait.
FLAGS = (
    "--headless=new",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1280,1600",
)


def _refuse_selenium_manager(*args, **kwargs):
    raise AssertionError("Selenium Manager ran: name the browser and its driver")


@contextlib.contextmanager
def chromium(profile: Path) -> Iterator[WebDriver]:
    """A fresh Chromium with its profile in `profile` (a new, empty directory), quit after use.

    Selenium Manager, which would download a browser or a driver, fails the start if it runs.
    """
    missing = [str(path) for path in (CHROMIUM, CHROMEDRIVER) if not path.is_file()]
    if missing:
        raise FileNotFoundError(
            f"{', '.join(missing)} missing: install Debian's chromium and chromium-driver "
            "(.ci/run does)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*FLAGS, f"--user-data-dir={profile}"):
        options.add_argument(flag)
    with mock.patch.object(SeleniumManager, "binary_paths", _refuse_selenium_manager):
        driver = webdriver.Chrome(
            service=Service(executable_path=str(CHROMEDRIVER)), options=options
        )
    try:
        yield driver
    finally:
        driver.quit()


def open_docs(driver: WebDriver, url: str, patience: float) -> None:
    """Open the docs page at `url` and wait until Swagger UI has rendered the document."""
    driver.get(url)
    WebDriverWait(driver, patience).until(
        shown.any_of(
            shown.presence_of_element_located((By.CSS_SELECTOR, ".opblock")),
            shown.presence_of_element_located((By.CSS_SELECTOR, ".errors-wrapper")),
        )
    )
    errors = driver.find_elements(By.CSS_SELECTOR, ".errors-wrapper")
    assert not errors, errors[0].text
