"""The status page in a real headless Chromium (Debian's `chromium` and `chromium-driver`,
installed by the set-up when missing and we may), driven by Selenium against the app
served on 127.0.0.1 with a token, over a real Redis filled through the verbs.

The browser opens http://operator:TOKEN@127.0.0.1:PORT/ui: Chromium answers the page's
Basic challenge with those credentials and re-sends them with the page's fetches.
SCHEDTUNE_UI_SCREENSHOT=path saves what the first test draws (docs/ui.png is one).
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.wait import WebDriverWait
from werkzeug.serving import make_server

from extender.settings import Settings
from extender.web.app import create_app
from extender.wire.objects import decode_node
from tests.builders import make_node, make_pod
from tests.extender.web.test_ui import (
    HOSTILE, NODES, PLACEMENTS, RTX_3090, TOKEN, _closed_port, fill_cluster, hostile_node, place,
)  # fmt: skip

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
PACKAGES = ("chromium", "chromium-driver")
NOW = 1_790_000_000.0  # the data's time: 2026-09-21 14:13:20 UTC
WAIT_S = 10.0  # at most, for a render (the page fetches at once, then every 3 s)
APT_LOCK_WAIT_S = 600  # for another process's apt-get to finish


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Chromium and its driver: Debian's packages, installed with apt-get when absent (as
    root); the test is skipped, saying why, only where they cannot be installed."""
    if not (CHROMIUM.is_file() and CHROMEDRIVER.is_file()):
        apt = shutil.which("apt-get")
        if apt is None or os.geteuid() != 0:
            pytest.skip(f"{CHROMIUM} or {CHROMEDRIVER} missing and apt-get unusable here (needs "
                        f"root): apt-get install {' '.join(PACKAGES)}")
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        # Another test process may be installing them at the same moment (each xdist
        # worker runs this fixture): wait for its lock rather than fail on it.
        wait = ("-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}")
        install = [apt, *wait, "install", "-y", "--no-install-recommends", *PACKAGES]
        done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0:  # stale package lists: refresh them once
            subprocess.run([apt, *wait, "update"], env=env, capture_output=True, check=False)
            done = subprocess.run(install, env=env, capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"could not install {' '.join(PACKAGES)}: {done.stderr.strip()[-300:]}")
    return CHROMIUM


@pytest.fixture(scope="session")
def browser(chromium: Path) -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = str(chromium)  # with the driver's path: no selenium-manager
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,900", "--force-device-scale-factor=1"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    yield driver
    driver.quit()


@pytest.fixture
def serve(settings, binder, clock, estimator,  # noqa: ANN001
          redis_client) -> Iterator[Callable[..., str]]:
    """Start the app (with TOKEN) on 127.0.0.1; returns the page's URL, token included."""
    servers = []

    def start(config: Settings = settings) -> str:
        app = create_app(replace(config, auth_token=TOKEN), binder=binder, clock=clock,
                         estimator=estimator)
        server = make_server("127.0.0.1", 0, app, threaded=True)
        threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                         daemon=True).start()
        servers.append(server)
        return f"http://operator:{TOKEN}@127.0.0.1:{server.port}/ui"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _renders(browser: WebDriver) -> int:
    return int(browser.execute_script("return document.body.dataset.renders || 0"))


def _open(browser: WebDriver, url: str, renders: int = 1) -> None:
    browser.get(url)
    _wait(browser, lambda b: _renders(b) >= renders)


def _hold_still(browser: WebDriver) -> None:
    """Stop the page's refresh loop: the next refresh is not scheduled, and the one already
    pending (or in flight) is waited out, so the page keeps one render until `_resume`."""
    browser.execute_script("window.heldSetTimeout = window.setTimeout;"
                           "window.setTimeout = () => 0;")
    renders = _renders(browser)
    _wait(browser, lambda b: _renders(b) > renders)


def _resume(browser: WebDriver) -> None:
    """Restart the refresh loop held by `_hold_still` (one refresh now, awaited)."""
    renders = _renders(browser)
    browser.execute_script("window.setTimeout = window.heldSetTimeout; refresh();")
    _wait(browser, lambda b: _renders(b) > renders)


def _wait(browser: WebDriver, condition: Callable[[WebDriver], object]) -> None:
    WebDriverWait(browser, WAIT_S, poll_frequency=0.05).until(condition)


def _whole(x: float) -> str:
    """A number as the page writes it (JavaScript's Math.round: halves up)."""
    return str(math.floor(x + 0.5))


def _texts(elements: list[WebElement]) -> list[str]:
    return [e.text for e in elements]


def _css(root: WebDriver | WebElement, selector: str) -> list[WebElement]:
    return root.find_elements(By.CSS_SELECTOR, selector)


def _screenshot(browser: WebDriver, path: str) -> None:
    """The whole page, as tall as it is."""
    page, viewport, window = browser.execute_script(
        "return [document.documentElement.scrollHeight, innerHeight, outerHeight]")
    browser.set_window_size(1280, page + window - viewport)
    browser.save_screenshot(path)
    browser.set_window_size(1280, 900)


def test_the_page_draws_nodes_gpus_jobs_waiting_pods_and_decisions(
        browser, serve, client, store, clock) -> None:  # noqa: ANN001
    clock.now = NOW
    cluster = fill_cluster(client, store, clock)
    state = client.get("/ui/state.json").get_json()  # what the page must draw
    _open(browser, serve())

    def drawn() -> None:
        as_of = datetime.fromtimestamp(clock(), UTC).strftime("%Y-%m-%d %H:%M:%S")
        assert browser.find_element(By.ID, "as-of").text == f"data of {as_of} UTC"
        totals = browser.find_element(By.ID, "totals").text
        reserved = sum(g["reserved_mib"] for n in state["nodes"] for g in n["gpus"])
        assert totals == (f"4 nodes · 6 GPUs · {_whole(reserved)} of {3 * 24576 + 3 * 8192} MiB "
                          f"reserved · {len(PLACEMENTS)} jobs holding {len(PLACEMENTS)} GPU "
                          "slots · 1 waiting")
        assert not browser.find_element(By.ID, "error").is_displayed()
        assert [e.get_attribute("data-node") for e in _css(browser, "[data-node]")] == [
            n["metadata"]["name"] for n in NODES]
        head = browser.find_element(By.CSS_SELECTOR, '[data-node="gpu-node-2"] h2').text
        assert head == "gpu-node-2 2 × RTX-3070 (8192 MiB)"

        for node in state["nodes"]:
            for gpu in node["gpus"]:
                block = browser.find_element(By.CSS_SELECTOR,
                                             f'[data-gpu="{node["node"]}/{gpu["index"]}"]')
                assert _css(block, "[data-role=memory]")[0].text == (
                    f"{_whole(gpu['reserved_mib'])} / {gpu['capacity_mib']} MiB")
                assert _css(block, "[data-role=jobs]")[0].text == f"{gpu['jobs']}/4 jobs"
                assert _css(block, "[data-role=delay]")[0].text == (
                    f"new job waits {_whole(gpu['queue_delay_s'])} s")
                bar = _css(block, "[data-role=bar]")[0]
                fill = _css(bar, ".fill")[0]
                share = fill.rect["width"] / bar.rect["width"]
                assert share == pytest.approx(gpu["reserved_mib"] / gpu["capacity_mib"], abs=0.01)
                rows = _css(block, "tbody tr")
                pods = [j["pod"] for j in gpu["queue"]]
                assert [r.get_attribute("data-pod") for r in rows] == pods
                for row, job in zip(rows, gpu["queue"], strict=True):
                    assert _texts(_css(row, "td")) == [
                        job["pod"], job["model"], job["task"], job["state"],
                        _whole(job["reserved_mib"]), _whole(job["predicted_s"]),
                        _whole(job["remaining_s"])]
        running = browser.find_element(By.CSS_SELECTOR, 'tr[data-pod="default/resnet50-b64"]')
        assert _texts(_css(running, "td"))[3] == "running"

        [waiting] = state["waiting"]
        row = browser.find_element(By.CSS_SELECTOR, '#waiting tr[data-pod="default/vgg16-b64"]')
        cells = _texts(_css(row, "td"))
        assert cells[:2] == ["default/vgg16-b64", "42"]
        assert _texts(_css(row, ".need")) == [
            f"{t}: {_whole(n['padded_mib'])} MiB, {_whole(n['predicted_s'])} s"
            for t, n in waiting["needs"].items()]

        rows = _css(browser, "#decisions tbody tr")
        kinds = [d["kind"] for d in state["decisions"]]
        assert [r.get_attribute("data-kind") for r in rows] == kinds
        assert _texts(_css(rows[0], "td"))[1:] == [
            "waiting", "default/vgg16-b64", "", state["decisions"][0]["message"]]
        assert _texts(_css(rows[-1], "td"))[0] == "14:13:20"  # the first bind, at NOW

    _hold_still(browser)  # the reads take seconds on a loaded machine: no re-render mid-read
    drawn()
    _resume(browser)
    if path := os.environ.get("SCHEDTUNE_UI_SCREENSHOT"):
        _screenshot(browser, path)

    # Every 3 s the page fetches again: a new job shows up without a reload.
    renders = _renders(browser)
    late = make_pod("resnet18-late", model="resnet18", task="inference", requests=100)
    place(client, late, "gpu-node-3")
    _wait(browser, lambda b: _renders(b) > renders)
    assert _css(browser, '[data-gpu="gpu-node-3/0"] tr[data-pod="default/resnet18-late"]')
    assert _css(browser, "#decisions tbody tr")[0].get_attribute("data-pod") == (
        "default/resnet18-late")
    assert cluster.placed  # the state above was the one made here


def test_a_job_on_several_gpus_is_one_job_holding_a_slot_on_each(
        browser, serve, client, store) -> None:
    node = make_node("gpu-node-4", RTX_3090, count=4, memory_mib=24576, replicas=4)
    store.put_node(*decode_node(node, "node"))
    place(client, make_pod("ddp", model="resnet18", batch=32, gpus=4), "gpu-node-4", [node])
    place(client, make_pod("alone", model="resnet18", batch=8), "gpu-node-4", [node])
    _open(browser, serve())
    totals = browser.find_element(By.ID, "totals").text
    assert " MiB reserved · 2 jobs holding 5 GPU slots · 0 waiting" in totals, totals


def test_a_gpu_whose_node_layout_is_unknown_is_not_counted_as_zero_mib(
        browser, serve, client, store) -> None:
    """A local `serve` without the node watcher: the bound job's GPU has no size."""
    node = make_node("gpu-node-5", RTX_3090, count=1, memory_mib=24576)
    place(client, make_pod("unsized", model="resnet18", batch=8), "gpu-node-5", [node])
    _open(browser, serve())
    totals = browser.find_element(By.ID, "totals").text
    assert " of 0 MiB" not in totals and "1 GPUs of unknown size: no node layout yet" in totals, \
        totals


def test_user_text_is_drawn_as_text_never_markup(browser, serve, client,  # noqa: ANN001
                                                 store) -> None:
    node = hostile_node(store)
    place(client, make_pod("victim", model="resnet50", batch=32), "gpu-node-x", [node])
    _open(browser, serve())
    head = browser.find_element(By.CSS_SELECTOR, '[data-node="gpu-node-x"] h2').text
    assert head == f"gpu-node-x 1 × {HOSTILE} (24576 MiB)"
    message = _texts(_css(browser, "#decisions tbody tr td"))[-1]
    assert HOSTILE in message
    assert _css(browser, "img") == [] and _css(browser, "#injected") == []
    assert browser.execute_script("return window.injected") is None


def test_redis_down_shows_why(browser, serve, settings) -> None:  # noqa: ANN001
    down = replace(settings, redis_url=f"redis://127.0.0.1:{_closed_port()}/0",
                   redis_timeout_s=0.2)
    browser.get(serve(down))
    error = browser.find_element(By.ID, "error")
    _wait(browser, lambda b: error.is_displayed())
    assert error.text.startswith("could not refresh: state store unreachable")


def test_a_learned_time_correction_is_shown_beside_the_predicted_seconds(
        browser, serve, client, store, redis_client) -> None:
    """The monitor's learned bias for the class (`extender.core.time_bias`), as published."""
    node = make_node("gpu-node-6", RTX_3090, count=1, memory_mib=24576, replicas=4)
    store.put_node(*decode_node(node, "node"))
    redis_client.hset("st:interference", "bias|RTX-3090|train", "0.2")
    place(client, make_pod("learned", model="resnet18", batch=32), "gpu-node-6", [node])
    _open(browser, serve())
    row = browser.find_element(By.CSS_SELECTOR, 'tr[data-pod="default/learned"]')
    job = store.job(row.get_attribute("data-uid"))
    assert _texts(_css(row, "td"))[5] == (
        f"{_whole(job.predicted_s)} (x{math.exp(0.2):.2f} learned: RTX-3090|train)")
