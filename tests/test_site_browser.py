"""The transcript site in a real browser (Debian's Chromium through chromedriver, bench/browser.py), on an episode
transcribed here by the CLI with the offline tiny.en weights and speaker labels, its site kept by the job itself
(--site): a click plays from that moment, the segment being said is highlighted and kept in view, #t= opens at its
moment, a phrase found on the index opens its episode at the right time, from disk (file://) and from a plain
web server; transcript text that looks like markup stays text; no console error, no request to any other host.
Also `podscribe search` and `site` as commands: what they print and their exit codes."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench import browser
from bench.bench_archive import served
from bench.common import encode, join_clips, write_job
from helpers import JOB_ARGS, computed_once, podscribe, run_here

pytestmark = pytest.mark.model

TITLE = 'Ada & Ben: "<i>Printing</i>"'


@pytest.fixture(scope="module")
def chromium():
    why = browser.missing()
    if why:
        if os.environ.get("CI"):
            pytest.fail(why)
        pytest.skip(why)
    with browser.chromium() as driver:
        driver.set_script_timeout(20)
        yield driver


@pytest.fixture
def page(chromium):
    """The browser, its logs read empty first (what a test finds in them is its own)."""
    browser.console_errors(chromium)
    browser.requests(chromium)
    chromium.get("about:blank")
    return chromium


@pytest.fixture(scope="module")
def episode(clips, cache_dir, tmp_path_factory):
    """Three turns of two readers (LJSpeech, JFK, LJSpeech again; ~35 s, tags in the container) transcribed with
    tiny.en, speaker labels and names, all four text formats, and the job's own site: (job dir, site dir)."""

    def build(folder: Path):
        by_name = {c.path.name: c for c in clips}
        turns = [by_name["LJ001-0001.wav"], by_name["jfk.flac"], by_name["LJ001-0003.wav"]]
        joined = join_clips(turns, seconds=1e9)
        audio = encode(
            folder / "talk.mp3", joined.samples, "-metadata", f"title={TITLE}", "-metadata", "date=2024-03-05"
        )
        job, site = folder / "job", folder / "site"
        extra = ["--diarize", "--speaker-names", "Ada,Ben", "--subtitles", "srt,vtt,txt,json", "--site", str(site)]
        code, stdout, stderr = run_here(job, [audio], cache_dir, None, *extra, args=[*JOB_ARGS, "--word-timestamps"])
        assert code == 0, stderr
        assert f"site: {site / 'index.html'}" in stdout
        return job, site

    return computed_once(tmp_path_factory, "site-episode", build)


def segments_of(job: Path) -> list[dict]:
    return sorted(pq.read_table(job / "segments").to_pylist(), key=lambda s: s["segment"])


def clean(driver, own: str | None = None) -> None:
    """No error in the console and no request to another host since the last look."""
    assert browser.console_errors(driver) == []
    assert browser.elsewhere(browser.requests(driver), own) == []


def player(driver) -> dict:
    return driver.execute_script(
        "const p = document.getElementById('player'); const now = document.querySelector('.seg.now');"
        "return {t: p.currentTime, paused: p.paused, now: now && now.id, hash: location.hash};"
    )


def wait(driver, script: str, timeout_s: float = 10.0):
    """Poll a script until it returns something true (its value), else fail."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = driver.execute_script(script)
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"never true: {script}")


def test_the_job_kept_its_site_with_the_episode_in_speaker_turns_and_its_downloads(episode):
    job, site = episode
    segments = segments_of(job)
    page = next((site / "e").glob("talk.html"))
    html = page.read_text()
    assert html.count('class="seg') == len(segments) > 2
    assert html.count('<h2 class="who">') >= 2 and '<h2 class="who">Ada</h2>' in html  # turns, with names
    assert "Ada &amp; Ben: &quot;&lt;i&gt;Printing&lt;/i&gt;&quot;" in html  # the container's title, as text
    for ext in ("srt", "vtt", "txt", "json"):  # the job's own files, copied
        assert (site / "e" / f"talk.{ext}").read_bytes() == (job / "subtitles" / f"talk.{ext}").read_bytes()
    assert 'src="../../talk.mp3"' in html  # the audio beside the job, by a relative link


def test_a_click_plays_from_there_and_the_segment_said_is_highlighted_and_kept_in_view(page, episode):
    job, site = episode
    segments = segments_of(job)
    driver = page
    driver.get((site / "e" / "talk.html").as_uri())
    wait(driver, "return document.getElementById('player').readyState >= 1")
    assert player(driver)["paused"]

    # a segment's time, by keyboard: focus its link, Enter
    second = segments[1]
    link = driver.find_element("css selector", f"#s{second['segment']} a.at")
    link.send_keys("\ue007")  # Enter
    state = wait(
        driver, "const p = document.getElementById('player'); return !p.paused && p.currentTime > 0 && p.currentTime"
    )
    assert second["start_s"] - 0.05 <= state <= second["start_s"] + 1.0
    assert player(driver)["now"] == f"s{second['segment']}" and player(driver)["hash"] == f"#t={second['start_s']:.2f}"

    # a word, by mouse
    busy = max(segments[2:], key=lambda s: len(s["words"]))
    word = busy["words"][len(busy["words"]) // 2]
    span = driver.find_element("css selector", f"#s{busy['segment']} span[data-t='{word['start_s']:.2f}']")
    span.click()
    t = wait(
        driver, f"const t = document.getElementById('player').currentTime; return t >= {word['start_s'] - 0.05} && t"
    )
    assert t <= word["start_s"] + 1.0 and player(driver)["now"] == f"s{busy['segment']}"

    # playing across a segment's end moves the highlight to the next one, and scrolls it into view (a short window,
    # the page at its top, the sticky header over part of it)
    last, before = segments[-1], segments[-2]
    driver.set_window_size(800, 420)
    driver.execute_script("window.scrollTo(0, 0)")
    driver.execute_script(
        f"const p = document.getElementById('player'); p.currentTime = {last['start_s'] - 0.4}; p.play();"
    )
    wait(driver, f"return document.getElementById('player').currentTime > {last['start_s'] + 0.6}", 15)
    assert player(driver)["now"] == f"s{last['segment']}" != f"s{before['segment']}"
    in_view = (
        f"const r = document.getElementById('s{last['segment']}').getBoundingClientRect();"
        "const top = document.querySelector('header').getBoundingClientRect().bottom;"
        "return r.top >= top - 1 && r.bottom <= innerHeight + 1;"
    )
    assert wait(driver, in_view, 5)
    driver.set_window_size(1000, 800)
    driver.execute_script("document.getElementById('player').pause()")
    clean(driver)


def test_hash_t_opens_the_page_at_that_moment(page, episode):
    job, site = episode
    target = segments_of(job)[-1]
    at = target["start_s"] + 0.5
    page.get((site / "e" / "talk.html").as_uri() + f"#t={at}")
    t = wait(page, "const p = document.getElementById('player'); return p.readyState >= 1 && p.currentTime")
    assert abs(t - at) < 0.01 and player(page)["now"] == f"s{target['segment']}"
    clean(page)


def test_a_phrase_searched_on_the_index_opens_its_episode_at_its_moment_over_http(page, episode):
    job, site = episode
    segment = max(segments_of(job), key=lambda s: len(s["text"]))
    words = re.findall(r"[A-Za-z]+", segment["text"])[2:4]
    driver = page
    with served(site.parent) as base:  # the audio beside the job, reached by its relative link
        driver.get(base + "site/index.html")
        box = driver.find_element("id", "q")
        box.send_keys(f'"{words[0].upper()} {words[1]}"')  # any case
        first = wait(driver, "const a = document.querySelector('#hits li a'); return a && a.getAttribute('href')")
        marked = driver.find_element("css selector", "#hits li mark").text
        assert marked.lower() == f"{words[0]} {words[1]}".lower()
        assert first == f"e/talk.html#t={segment['start_s']:.2f}"
        driver.find_element("css selector", "#hits li a").click()
        t = wait(driver, "const p = document.getElementById('player'); return p && p.readyState >= 1 && p.currentTime")
        assert abs(t - segment["start_s"]) < 0.01 and player(driver)["now"] == f"s{segment['segment']}"
        driver.back()  # the search is in the address: back on the index, the hits are there again
        wait(driver, "return document.querySelectorAll('#hits li').length > 0")
        clean(driver, base)


@pytest.fixture(scope="module")
def markup_site(tmp_path_factory):
    """Episodes whose transcript and tags look like markup and script (written, not decoded), and their site."""
    folder = tmp_path_factory.mktemp("markup")
    said = [
        (0.0, 2.0, " Hello <script>window.pwned = 1</script> there.", "Speaker 1", []),
        (2.0, 4.0, ' <img src=x onerror="window.pwned = 2"> and &amp; stay text', "Speaker 2", ["loop"]),
        (4.0, 6.0, " Plain words at the end, a constructor.", "Speaker 1", []),  # a name every JS object has
    ]
    episodes = []
    for n, (title, duration) in enumerate((("<b>bold</b> title", 6.0), ("Zed", 60.0), ("Alpha", 30.0))):
        rows = [
            {"segment": i, "start_s": a, "end_s": b, "text": t, "speaker": who, "flags": flags}
            for i, (a, b, t, who, flags) in enumerate(said)
        ]
        episodes.append({"file_id": f"{n:032x}", "path": f"/nowhere/ep{n}.mp3", "status": "done", "title": title,
                         "duration_s": duration, "segments": rows})  # fmt: skip
    job = write_job(folder / "job", episodes)
    site = folder / "site"
    result = podscribe("site", str(job), "-o", str(site), cache_dir=folder / "cache")
    assert result.returncode == 0, result.stderr
    return job, site


def test_transcript_text_that_looks_like_markup_is_shown_never_run(page, markup_site):
    _, site = markup_site
    driver = page
    driver.get((site / "e" / "ep0.html").as_uri())
    text = driver.find_element("id", "transcript").text
    assert "<script>window.pwned = 1</script>" in text and '<img src=x onerror="window.pwned = 2">' in text
    assert driver.find_element("tag name", "h1").text == "<b>bold</b> title"
    driver.find_element("id", "only-flagged").click()  # the segments to check, alone
    shown = [p.get_attribute("id") for p in driver.find_elements("css selector", "p.seg") if p.is_displayed()]
    assert shown == ["s1"]
    driver.get((site / "index.html").as_uri() + "#q=pwned")
    wait(driver, "return document.querySelectorAll('#hits li').length === 6")
    assert "<script>window.pwned = 1</script>" in driver.find_element("id", "hits").text
    assert driver.execute_script(
        "return window.pwned === undefined && document.querySelectorAll('#hits script, #hits img').length === 0"
    )
    driver.get("about:blank")  # a new load: the index reads its query as it opens
    driver.get((site / "index.html").as_uri() + "#q=constructor")  # a word every JS object has a property of
    wait(driver, "return document.querySelectorAll('#hits li').length === 3")
    # the table sorts by a column's button
    driver.find_element("css selector", "th button[data-key='duration']").click()
    titles = [r.text.split("\n")[0] for r in driver.find_elements("css selector", "#episodes tbody tr td:first-child")]
    assert titles == ["<b>bold</b> title", "Alpha", "Zed"]
    clean(driver)


def test_search_and_site_commands_print_hits_and_exit_by_what_they_met(episode, markup_site, cache_dir, tmp_path):
    job, site = episode
    cache = tmp_path / "cache"
    phrase = " ".join(re.findall(r"[A-Za-z]+", segments_of(job)[0]["text"])[:2])
    result = podscribe("search", f'"{phrase}"', str(job), "--json", cache_dir=cache)
    assert result.returncode == 0, result.stderr
    doc = json.loads(result.stdout)
    assert doc["total"] >= 1 and doc["hits"][0]["page"].startswith((site / "e" / "talk.html").as_uri() + "#t=")
    shown = podscribe("search", phrase.upper(), str(job), "--speaker", "ada", cache_dir=cache)
    assert shown.returncode == 0 and "0:00:0" in shown.stdout and "Ada:" in shown.stdout
    assert podscribe("search", "  ?! ", str(job), cache_dir=cache).returncode == 2
    not_a_job = podscribe("search", "printing", str(site), cache_dir=cache)
    assert not_a_job.returncode == 2 and "is a site built by `podscribe site`" in not_a_job.stderr

    markup_job, _ = markup_site
    (markup_job / "segments" / f"{1:032x}.parquet").write_bytes(b"PAR1 cut short")
    out = tmp_path / "site"
    built = podscribe("site", str(markup_job), "-o", str(out), cache_dir=cache)
    assert built.returncode == 5 and "unreadable" in built.stderr and (out / "e" / "ep0.html").is_file()
    assert podscribe("search", "plain", str(markup_job), cache_dir=cache).returncode == 5
    assert podscribe("site", str(markup_job), "-o", str(markup_job / "job.json"), cache_dir=cache).returncode == 2
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("x")
    new_job = tmp_path / "new-job"
    refused = podscribe("transcribe", "--out", str(new_job), "--model", "tiny.en", "--site", str(other), "--",
                        str(job.parent / "talk.mp3"), cache_dir=cache_dir)  # fmt: skip
    assert refused.returncode == 2 and "no site podscribe built" in refused.stderr and not new_job.exists()
