"""What the UI tests share: a headless Chromium, waiting for a page, the trigger dialog, and screenshots.

The Airflow side is ``tests.support.local_airflow.LocalAirflow`` (real API server, scheduler, DAG processor and
triggerer on a loopback port). The UI-path tests of the example DAGs and the checkpoint page's tests both
drive Airflow through these, so they test the same way.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# Where screenshots go when they should land in the repository (the docs show them); a temporary folder
# otherwise, so a test run does not change the working tree.
SCREENSHOTS_ENV = "UI_SCREENSHOTS"


def headless_chromium():
    """Debian's chromium and chromedriver (``.ci/run`` installs them), through selenium."""
    from selenium import webdriver

    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver, "the UI tests need chromium and chromedriver: apt-get install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1400,1000"):
        options.add_argument(argument)
    return webdriver.Chrome(service=webdriver.ChromeService(driver), options=options)


def wait_until(condition: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll ``condition`` until it returns something true; exceptions count as "not yet" (page rendering)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = condition()
        except Exception:  # noqa: BLE001 - the page is still rendering
            value = None
        if value:
            return value
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def open_trigger_dialog(browser, url: str, dag_id: str):
    """Open the DAG's page and its Trigger dialog; return the dialog's own Trigger button."""
    from selenium.webdriver.common.by import By

    browser.get(f"{url}/dags/{dag_id}")
    wait_until(
        lambda: browser.find_element(By.CSS_SELECTOR, "button[aria-label='Trigger Dag']"), 60, "the page"
    ).click()

    def dialog_trigger():
        dialogs = browser.find_elements(By.CSS_SELECTOR, "[role='dialog']")
        buttons = [b for d in dialogs for b in d.find_elements(By.TAG_NAME, "button") if b.text == "Trigger"]
        return buttons[0] if buttons else None

    wait_until(dialog_trigger, 30, f"the trigger dialog of {dag_id}")
    time.sleep(1)  # the form validates its fields once rendered
    return dialog_trigger()


def fill_form(browser, typed: dict[str, str]) -> None:
    """Type into the open Trigger dialog's param fields (Airflow names each input ``element_<param>``)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    for name, text in typed.items():
        field = browser.find_element(By.CSS_SELECTOR, f"input[name='element_{name}']")
        browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", field)
        field.click()
        field.send_keys(Keys.CONTROL, "a")
        field.send_keys(Keys.DELETE)
        # One key at a time, each seen in the field before the next (sent again if it was not): the form
        # re-renders as it validates, and keys sent meanwhile can be dropped (seen: a long path lost a letter).
        for end in range(1, len(text) + 1):
            for _ in range(3):
                if field.get_attribute("value") == text[: end - 1]:
                    field.send_keys(text[end - 1])
                try:
                    wait_until(lambda f=field, e=text[:end]: f.get_attribute("value") == e, 2, "the key")
                    break
                except AssertionError:
                    continue
            else:
                raise AssertionError(f"the form's {name} reads {field.get_attribute('value')!r}, not {text[:end]!r}")
    time.sleep(1)  # the form validates the typed values


class Screenshots:
    """Saves full-window PNGs under a folder: ``$UI_SCREENSHOTS`` if set, else ``fallback``."""

    def __init__(self, fallback: Path):
        self.folder = Path(os.environ.get(SCREENSHOTS_ENV) or fallback)
        self.folder.mkdir(parents=True, exist_ok=True)

    def take(self, browser, name: str) -> Path:
        path = self.folder / f"{name}.png"
        assert browser.save_screenshot(str(path)), f"screenshot {name} was not written"
        return path
