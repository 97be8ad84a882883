"""The served Studio in a real headless Chromium (Debian's chromium and chromedriver, driven by Selenium):
fill the beginner fields, generate, switch to expert mode, change a field, and screenshot both modes
into test-artifacts/studio/. Skips when the browser is not installed (.ci/run installs it)."""

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.conftest import REPO

CHROMIUM, CHROMEDRIVER = Path("/usr/bin/chromium"), Path("/usr/bin/chromedriver")
ARTIFACTS = REPO / "test-artifacts" / "studio"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,2400",
)
WAIT_S = 60

webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed (pip install -e '.[dev]')")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(
        "Debian's chromium and chromium-driver are not installed (apt-get install -y chromium chromium-driver)",
        allow_module_level=True,
    )

from selenium.common.exceptions import NoSuchElementException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.common.keys import Keys  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _studio_command(port: int) -> list:
    script = Path(sys.executable).parent / "trinity"
    launcher = [str(script)] if script.exists() else [sys.executable, "-c", "from trinity.cli import main; main()"]
    return [*launcher, "studio", "--port", str(port)]


@pytest.fixture(scope="module")
def studio(tmp_path_factory):
    """`trinity studio --port <free port>` as a subprocess; yields its URL."""
    port = _free_port()
    log_path = tmp_path_factory.mktemp("studio") / "server.log"
    with open(log_path, "wb") as log:
        server = subprocess.Popen(
            _studio_command(port),
            cwd=tmp_path_factory.getbasetemp(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + WAIT_S
    while True:
        try:
            urllib.request.urlopen(f"{url}/_stcore/health", timeout=2)
            break
        except OSError:
            if server.poll() is not None or time.time() > deadline:
                os.killpg(server.pid, signal.SIGKILL)
                pytest.fail(f"trinity studio did not come up within {WAIT_S} s:\n{log_path.read_text()}")
            time.sleep(0.3)
    yield url
    os.killpg(server.pid, signal.SIGTERM)
    try:
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=15)


@pytest.fixture
def browser(tmp_path):
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for flag in (*CHROMIUM_FLAGS, f"--user-data-dir={tmp_path / 'chromium-profile'}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


def _text(driver) -> str:
    return driver.find_element(By.TAG_NAME, "body").text


def _wait(driver, condition, what: str):
    try:
        # a rerun replaces the page's elements, so an element found a moment ago may be gone: look again
        ignored = (NoSuchElementException, StaleElementReferenceException)
        return WebDriverWait(driver, WAIT_S, poll_frequency=0.25, ignored_exceptions=ignored).until(condition)
    except Exception as exc:  # TimeoutException: show what the page says instead
        raise AssertionError(f"waited {WAIT_S} s for {what}; the page shows:\n{_text(driver)[:3000]}") from exc


def _type(driver, label: str, text: str) -> None:
    """Replace a text or number input's value and commit it (Enter starts the page's rerun)."""
    selector = f'input[aria-label="{label}"]'
    for _ in range(5):  # the field may be replaced by a rerun between finding and typing
        try:
            field = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, selector), f"the field {label}")
            field.send_keys(Keys.CONTROL, "a")
            field.send_keys(text, Keys.ENTER)
            break
        except StaleElementReferenceException:
            continue
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, selector).get_attribute("value") == text, f"{label}={text}")


def _button(driver, text: str):
    for button in driver.find_elements(By.TAG_NAME, "button"):
        if button.text.strip() == text:
            return button
    raise NoSuchElementException(f"no button {text!r}")


def _codes(driver) -> list:
    return [code.text for code in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stCode"]')]


def test_the_page_in_chromium_generates_a_config_in_both_modes(studio, browser, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "checkpoints"
    browser.get(studio)
    _wait(browser, lambda d: "Generate Config" in _text(d) and "must be given" in _text(d), "the first render")
    assert "Beginner Mode" in _text(browser) and not _button(browser, "Generate Config").is_enabled()

    _type(browser, "Checkpoint root dir", str(root))
    _type(browser, "Taskset path", str(root / "tasks.jsonl"))
    _type(browser, "Engine num", "1")
    _wait(browser, lambda d: _button(d, "Generate Config").is_enabled(), "the Generate button to be enabled")
    assert "must be given" not in _text(browser) and "Trainer devices" in _text(browser)
    _wait(browser, lambda d: _button(d, "Generate Config"), "the Generate button").click()
    _wait(browser, lambda d: any(f"checkpoint_root_dir: {root}" in c for c in _codes(d)), "the generated config")
    browser.save_screenshot(str(ARTIFACTS / "beginner.png"))

    _wait(browser, lambda d: _button(d, "Expert Mode"), "the mode switch").click()
    _wait(browser, lambda d: "Explorer and Synchronizer" in _text(d), "the expert tabs")
    _wait(
        browser, lambda d: d.find_element(By.XPATH, "//*[@role='tab' and normalize-space()='Trainer']"), "tab"
    ).click()
    _wait(browser, lambda d: "Advanced algorithm config" in _text(d), "the Trainer tab")
    _type(browser, "Save interval", "7")
    _wait(browser, lambda d: any("save_interval: 7" in c for c in _codes(d)), "the config to follow the change")
    assert "Training strategy" in _text(browser) and "Clip range in policy loss fn" in _text(browser)
    browser.save_screenshot(str(ARTIFACTS / "expert.png"))
    assert (ARTIFACTS / "beginner.png").stat().st_size > 10_000 and (ARTIFACTS / "expert.png").stat().st_size > 10_000
