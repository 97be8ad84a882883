"""The served Studio in a real headless Chromium (Debian's chromium and chromedriver, driven by Selenium):
the page opens on the default experiment with no failing check; generate, switch to expert mode, change
a field; run a 2-step config from the page and see its learning curve and summary. Screenshots go into
test-artifacts/studio/. Skips when the browser is not installed (.ci/run installs it)."""

import json
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
RUN_WAIT_S = 600  # a 2-step run of the tiny model, Ray start included, on a shared 2-core machine
FAILING_CHECKS = '[data-testid="stAlertContentWarning"], [data-testid="stAlertContentError"]'

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


def _wait(driver, condition, what: str, timeout: float = WAIT_S):
    try:
        # a rerun replaces the page's elements, so an element found a moment ago may be gone: look again
        ignored = (NoSuchElementException, StaleElementReferenceException)
        return WebDriverWait(driver, timeout, poll_frequency=0.25, ignored_exceptions=ignored).until(condition)
    except Exception as exc:  # TimeoutException: show what the page says instead
        raise AssertionError(f"waited {timeout} s for {what}; the page shows:\n{_text(driver)[:3000]}") from exc


def _failing_checks(driver) -> list:
    """The texts of the warnings and errors on the page (a check that fails shows one at its field)."""
    return [alert.text for alert in driver.find_elements(By.CSS_SELECTOR, FAILING_CHECKS)]


def _opened(driver) -> None:
    """Wait for a new session's first page: the default experiment, loaded and checked."""
    _wait(driver, lambda d: "Opened on the default experiment" in _text(d), "the first render")
    _wait(driver, lambda d: _button(d, "Generate Config").is_enabled(), "the Generate button to be enabled")
    assert _failing_checks(driver) == [], _failing_checks(driver)


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


def _type_lines(driver, label: str, text: str) -> None:
    """Replace a text area's lines and commit them (Ctrl+Enter)."""
    selector = f'textarea[aria-label="{label}"]'
    for _ in range(5):
        try:
            area = _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, selector), f"the text area {label}")
            area.send_keys(Keys.CONTROL, "a")
            area.send_keys(text)
            area.send_keys(Keys.CONTROL, Keys.ENTER)
            break
        except StaleElementReferenceException:
            continue
    _wait(driver, lambda d: d.find_element(By.CSS_SELECTOR, selector).get_attribute("value") == text, label)


def _tab(driver, name: str):
    return driver.find_element(By.XPATH, f"//*[@role='tab' and normalize-space()='{name}']")


def _button(driver, text: str):
    for button in driver.find_elements(By.TAG_NAME, "button"):
        if button.text.strip() == text:
            return button
    raise NoSuchElementException(f"no button {text!r}")


def _codes(driver) -> list:
    return [code.text for code in driver.find_elements(By.CSS_SELECTOR, '[data-testid="stCode"]')]


def test_the_page_opens_on_the_default_experiment_and_generates_in_both_modes(studio, browser, tmp_path):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "checkpoints"
    browser.get(studio)
    _opened(browser)
    assert "Beginner Mode" in _text(browser) and "Runs 2 stages: sft_warmup" in _text(browser)

    _type(browser, "Checkpoint root dir", str(root))
    _wait(browser, lambda d: _button(d, "Generate Config").is_enabled(), "the Generate button to be enabled")
    assert _failing_checks(browser) == [] and "Trainer devices" in _text(browser)
    _wait(browser, lambda d: _button(d, "Generate Config"), "the Generate button").click()
    _wait(browser, lambda d: any(f"checkpoint_root_dir: {root}" in c for c in _codes(d)), "the generated config")
    browser.save_screenshot(str(ARTIFACTS / "beginner.png"))

    _wait(browser, lambda d: _button(d, "Expert Mode"), "the mode switch").click()
    _wait(browser, lambda d: "Explorer and Synchronizer" in _text(d), "the expert tabs")
    _wait(browser, lambda d: _tab(d, "Trainer"), "the Trainer tab").click()
    _wait(browser, lambda d: "Advanced algorithm config" in _text(d), "the Trainer tab")
    _type(browser, "Save interval", "7")
    _wait(browser, lambda d: any("save_interval: 7" in c for c in _codes(d)), "the config to follow the change")
    assert "Training strategy" in _text(browser) and "Clip range in policy loss fn" in _text(browser)
    browser.save_screenshot(str(ARTIFACTS / "expert.png"))
    assert (ARTIFACTS / "beginner.png").stat().st_size > 10_000 and (ARTIFACTS / "expert.png").stat().st_size > 10_000


def test_a_two_step_run_from_the_page_shows_its_learning_curve_and_summary(studio, browser, tmp_path):
    """The default experiment's GRPO stage alone, 2 steps of 2 tasks, started with the page's Run button."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    root = tmp_path / "checkpoints"
    browser.get(studio)
    _opened(browser)
    _type(browser, "Checkpoint root dir", str(root))
    _type(browser, "Total steps", "2")
    _type(browser, "Explore batch size", "2")
    _wait(browser, lambda d: _button(d, "Expert Mode"), "the mode switch").click()
    _wait(browser, lambda d: _tab(d, "Other keys"), "the Other keys tab").click()
    _type_lines(browser, "Other keys (one Hydra override per line)", "stages=[]\nexplorer.eval_on_startup=false")
    _wait(browser, lambda d: "Runs 2 stages" not in _text(d), "the page to run the fields alone")
    _wait(browser, lambda d: _button(d, "Generate Config").is_enabled(), "the Generate button to be enabled")
    _button(browser, "Generate Config").click()
    _wait(browser, lambda d: any("total_steps: 2" in c for c in _codes(d)), "the generated config")
    _wait(browser, lambda d: _button(d, "Run"), "the Run button").click()

    def ended(driver):
        text = _text(driver)
        assert "Failed: exit code" not in text, "\n".join(_codes(driver))[-4000:]
        return "Finished: exit code 0" in text

    _wait(browser, ended, "the run to finish", timeout=RUN_WAIT_S)
    job_dir = root / "trinity" / "arithmetic"
    picture = _wait(browser, lambda d: d.find_element(By.CSS_SELECTOR, '[data-testid="stImage"] img'), "the curve")
    loaded = "return arguments[0].complete && arguments[0].naturalWidth"
    _wait(browser, lambda d: browser.execute_script(loaded, picture) > 0, "the learning curve to load")
    assert str(job_dir / "learning_curve.png") in _text(browser)  # its caption
    summary = _wait(browser, lambda d: next(c for c in _codes(d) if c.startswith("run summary: arithmetic")), "summary")
    header, _, row = summary.splitlines()[1:4]
    written = json.loads((job_dir / "summary.json").read_text())
    assert header.split()[:5] == ["mode", "train", "steps", "explore", "steps"], summary
    assert row.split()[:3] == ["both", "2", "2"] and f"{written['reward']['mean']:.3f}" in row, summary
    assert f"job dir:      {job_dir}" in summary, summary
    browser.execute_script("arguments[0].scrollIntoView()", picture)
    browser.save_screenshot(str(ARTIFACTS / "run.png"))
