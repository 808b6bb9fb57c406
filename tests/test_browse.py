"""`podscribe search` and `podscribe site` on job dirs written with the real tables' schemas (bench.common.write_job):
what a search matches (case, accents, phrases, speakers, files), what the site holds (escaped text, a search index
that gives back the words it was built from), and how both meet bad input. The fast tier: no model, no browser
(the browser and the CLI: tests/test_site_browser.py)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from bench.common import write_job
from pipeline.browse import text
from pipeline.browse.archive import NotAJob, open_archive
from pipeline.browse.cache import folded
from pipeline.browse.query import SearchOptions, matching, search
from pipeline.browse.site import SiteOptions, build_site
from pipeline.browse.site.searchindex import key_of
from pipeline.facts.errors import StorageError, UsageProblem
from pipeline.outputs.record import own_digests

SAID = [
    # (start, end, text, speaker, flags)
    (0.0, 4.0, " Welcome to the Garden Hour, I'm Lena.", "Speaker 1", []),
    (4.0, 9.5, " Today we talk about climate change and the café on Main Street.", "Speaker 1", []),
    (9.5, 14.0, " Climate is one thing; change is another.", "Speaker 2", ["low_logprob"]),
    (14.0, 18.0, " I don't know, said the CAFE owner. Crème brûlée!", "Speaker 2", []),
    (18.0, 21.0, " Climate", "Speaker 1", []),
    (21.0, 25.0, " change in the weather <script>window.pwned = 1</script> & more", "Speaker 1", ["loop"]),
]


def words_of(start: float, end: float, said: str, speaker: str | None) -> list[dict]:
    parts = said.split(" ")[1:]
    step = (end - start) / max(1, len(parts))
    return [
        {
            "word": " " + w,
            "start_s": start + i * step,
            "end_s": start + (i + 1) * step,
            "probability": 0.9,
            "speaker": speaker,
        }
        for i, w in enumerate(parts)
    ]


def segments(said=SAID, words: bool = True) -> list[dict]:
    return [
        {
            "segment": i,
            "start_s": start,
            "end_s": end,
            "text": line,
            "speaker": speaker,
            "flags": flags,
            "words": words_of(start, end, line, speaker) if words else None,
        }
        for i, (start, end, line, speaker, flags) in enumerate(said)
    ]


def episode(file_id: str, path: str, said=SAID, **row) -> dict:
    return {
        "file_id": file_id,
        "path": path,
        "status": "done",
        "duration_s": said[-1][1] + 1 if said else 10.0,
        "language": "en",
        "segments": segments(said),
        **row,
    }


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Search's cache of each job's text (pipeline/browse/cache.py) in the test's own folder."""
    monkeypatch.setenv("PODSCRIBE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


@pytest.fixture
def archive(tmp_path) -> Path:
    """Two shows in one job: a diarized episode with names, a second one, a failed input and a pending one."""
    other = [
        (0.0, 5.0, " Nothing about the weather here, only gardens.", None, []),
        (5.0, 8.0, " Climate change.", None, []),
    ]
    return write_job(
        tmp_path / "job",
        [
            episode("a" * 32, "/shows/garden/ep1.mp3", title="Garden <Hour> & Friends", date="2024-05-01"),
            episode("b" * 32, "/shows/news/ep2.mp3", other, title=None, date="2023-01-02"),
            {"file_id": "c" * 32, "path": "/shows/news/broken.mp3", "status": "failed", "error": "not audio"},
        ],
        pending=["/shows/news/later.mp3"],
        outputs={
            "subtitles": ["txt"],
            "output_dir": None,
            "cue_rules": {"speaker_names": ["Lena", "Walter"], "show_speaker_names": []},
        },
    )


# -- what a search matches -----------------------------------------------------------------------------------


def test_folding_and_words_are_case_and_accent_blind_and_cut_at_anything_but_letters_and_digits():
    assert text.fold("Crème BRÛLÉE Café") == "creme brulee cafe"
    assert text.words("I don't know: 42°C, naïve!") == ["i", "don", "t", "know", "42", "c", "naive"]
    assert text.parse('climate "café on Main"  ,, ').terms == (("climate",), ("cafe", "on", "main"))
    assert text.parse('"unclosed phrase here').terms == (("unclosed", "phrase", "here"),)
    assert text.parse(' "" ;; ').empty
    folded, where = text.fold_with_offsets("\ufb01ne café")  # a ligature folds to two letters
    assert folded == "fine cafe" and where[:3] == [0, 0, 1] and where[-1] == len("\ufb01ne café")


def test_hits_are_marked_in_the_original_text():
    said = " I don't know, said the CAFÉ owner."
    query = text.parse('"don\'t know" café')
    assert [said[a:b] for a, b in text.spans(said, query)] == ["don't know", "CAFÉ"]


def test_the_archive_wide_filter_matches_exactly_what_the_word_rule_says():
    """The RE2 pattern over the folded column (query.matching) and text.matches (the rule the site's index is built
    by) agree on every pair of these texts and queries: accents, case, punctuation, phrases, prefixes, digits."""
    import pyarrow as pa

    texts = [line for _, _, line, _, _ in SAID] + [
        "climatechange",
        "climate-change",
        "CLIMATE\tCHANGE",
        "the climates change",
        "Ünïcödé façade 3.5 ¾",
        "a.b c_d e'f",
        "",
    ]
    queries = ['"climate change"', "climate", "change climate", "cafe", '"creme brulee"', "don", '"don t"',
               "facade", "3", "5", "c_d", "c", "e f", '"e f"', "a b", "climat", "script", "pwned 1"]  # fmt: skip
    table = pa.table({"text": texts, "folded": folded(pa.array(texts))})
    assert table.column("folded").to_pylist() == [text.fold(t) for t in texts]
    for q in queries:
        query = text.parse(q)
        got = matching(table, query).column("text").to_pylist()
        assert got == [t for t in texts if text.matches(t, query)], q


def test_search_finds_words_and_phrases_any_case_and_accent_in_order_with_names(archive):
    result = search([archive], SearchOptions('"climate change"'))
    assert [(h.episode.path, h.segment) for h in result.hits] == [
        ("/shows/garden/ep1.mp3", 1),
        ("/shows/news/ep2.mp3", 1),
    ]  # not segment 2 (the words, not the phrase), nor 4-5 (the phrase split across two segments)
    assert result.total == 2 and result.episodes == 2 and result.searched == 2
    first = result.hits[0]
    assert (
        first.speaker == "Lena"
        and first.marked("[", "]") == "Today we talk about [climate change] and the café on Main Street."
    )
    assert first.episode.title == "Garden <Hour> & Friends" and result.hits[1].episode.title == "ep2"

    words = search([archive], SearchOptions("change CLIMATE"))  # both words, any order, anywhere in the segment
    assert [h.segment for h in words.hits if h.episode.file_id == "a" * 32] == [1, 2]
    assert [h.segment for h in search([archive], SearchOptions("CAFE")).hits] == [1, 3]  # café, CAFE
    assert [h.segment for h in search([archive], SearchOptions("creme brûlée")).hits] == [3]
    assert search([archive], SearchOptions("climat")).total == 0  # whole words only


def test_the_names_a_job_was_run_with_name_its_speakers_without_any_subtitles(tmp_path):
    """`--diarize --speaker-names` (or a job file's table per show) with no `-f`: job.json keeps the names, and
    search and the site use them as `export` does."""
    from pipeline.storage.manifest import JobDir

    said = [(0.0, 3.0, " Climate talk from the garden.", "Speaker 1", [])]
    job = write_job(tmp_path / "job", [episode("a" * 32, "/shows/garden/ep1.mp3", said)])
    by_show = {"names": ["Nobody"], "by_show": [["garden", ["Lena", "Walter"]]]}
    JobDir(job).write_job({"models": {"main": "synthetic"}}, ["/shows/garden/ep1.mp3"], None, by_show)
    assert [h.speaker for h in search([job], SearchOptions("climate")).hits] == ["Lena"]
    build_site([job], SiteOptions(tmp_path / "site"))
    assert "Lena" in (tmp_path / "site" / "e" / "ep1.html").read_text()


def test_search_filters_by_speaker_name_or_label_and_by_file_and_limits(archive):
    by_name = search([archive], SearchOptions("climate", speaker="walter"))
    assert [(h.segment, h.speaker) for h in by_name.hits] == [(2, "Walter")]
    assert [h.segment for h in search([archive], SearchOptions("climate", speaker="Speaker 1")).hits] == [1, 4]
    assert search([archive], SearchOptions("climate", speaker="Nobody")).total == 0
    only = search([archive], SearchOptions("climate", file_glob="*/news/*"))
    assert {h.episode.path for h in only.hits} == {"/shows/news/ep2.mp3"}
    assert search([archive], SearchOptions("climate", file_glob="ep1.mp3")).total == 3
    limited = search([archive], SearchOptions("climate", limit=1))
    assert len(limited.hits) == 1 and limited.total == 4


def test_search_reads_each_job_once_into_its_cache_and_again_only_what_changed(archive, cache):
    assert search([archive], SearchOptions("gardens")).total == 1
    (stored,) = cache.glob("search/*.arrow")
    first = stored.stat().st_mtime_ns
    assert search([archive], SearchOptions("gardens")).total == 1 and stored.stat().st_mtime_ns == first
    said = [(0.0, 5.0, " Only about tomatoes now.", None, [])]
    write_job(archive, [episode("b" * 32, "/shows/news/ep2.mp3", said)])  # the episode decoded again
    assert search([archive], SearchOptions("gardens")).total == 0
    assert [h.text for h in search([archive], SearchOptions("TOMATOES")).hits] == [" Only about tomatoes now."]
    stored.write_bytes(b"not parquet")  # a damaged cache is read again from the job
    assert search([archive], SearchOptions("tomatoes")).total == 1
    (archive / "files" / f"{'b' * 32}.parquet").unlink()  # gone from the job, gone from the search
    assert search([archive], SearchOptions("tomatoes")).total == 0


def test_search_of_a_job_still_at_work_reads_the_files_done_and_lists_a_damaged_table(archive):
    table = archive / "segments" / f"{'b' * 32}.parquet"
    table.write_bytes(table.read_bytes()[:-40])  # a cut copy
    result = search([archive], SearchOptions("climate"))
    assert {h.episode.path for h in result.hits} == {"/shows/garden/ep1.mp3"}
    assert len(result.problems) == 1 and "ep2.mp3" in result.problems[0]
    (archive / "segments" / f"{'a' * 32}.parquet").unlink()  # gone: that episode is unreadable too
    result = search([archive], SearchOptions("climate"))
    assert result.total == 0 and len(result.problems) == 2


def test_an_empty_query_and_a_folder_that_is_no_job_are_refused_saying_what_they_are(archive, tmp_path):
    with pytest.raises(UsageProblem, match="no words"):
        search([archive], SearchOptions(' "" !? '))
    audio = tmp_path / "audio"
    audio.mkdir()
    (audio / "one.mp3").write_bytes(b"x")
    (audio / "two.m4a").write_bytes(b"x")
    cases = {
        audio: "a folder of 2 audio files",
        audio / "one.mp3": "is an audio file",
        tmp_path / "nothing": "does not exist",
        tmp_path: f"the jobs in it: {archive}",
    }
    for path, said in cases.items():
        with pytest.raises(NotAJob, match=re.escape(said)):
            open_archive([path])
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site))
    with pytest.raises(NotAJob, match="is a site built by `podscribe site`"):
        search([site], SearchOptions("climate"))
    assert NotAJob("").exit_code == 2


# -- the site --------------------------------------------------------------------------------------------------


def read_script(path: Path):
    """The data a site's script hands to podscribe.put(name, data)."""
    body = path.read_text()
    match = re.fullmatch(r'podscribe\.put\(("[^"]*"),(.*)\);\n', body, re.S)
    assert match, body[:80]
    return json.loads(match.group(1)), json.loads(match.group(2))


def index_words(site: Path, group: int) -> dict[str, list[int]]:
    """Word -> positions in one search group, decoded from its shards."""
    _, meta = read_script(site / "search" / f"g{group}" / "meta.js")
    found = {}
    for key in meta["keys"]:
        _, words = read_script(site / "search" / f"g{group}" / f"{key}.js")
        for word, deltas in words.items():
            assert key_of(word) == key
            positions, at = [], 0
            for d in deltas:
                at += d
                positions.append(at)
            found[word] = positions
    return found


def test_the_site_lists_every_episode_and_its_index_gives_back_every_word_of_every_segment(archive, tmp_path):
    site = tmp_path / "site"
    result = build_site([archive], SiteOptions(site))
    assert result.episodes == 4 and result.pages == 2 and not result.unreadable
    index = (site / "index.html").read_text()
    for status in ("done", "failed", "pending"):
        assert f'data-status="{status}"' in index
    assert index.count('href="e/') == 2 and "Lena, Walter" in index and "not audio" in index
    _, meta = read_script(site / "search" / "g0" / "meta.js")
    assert meta["episodes"] == ["ep2", "ep1"] and meta["segments"] == [2, len(SAID)]  # oldest first
    by_position = {p: w for w, positions in index_words(site, 0).items() for p in positions}
    firsts, at = [], 0
    for d in meta["firsts"]:
        at += d
        firsts.append(at)
    texts = ["Nothing about the weather here, only gardens.", "Climate change."] + [line for _, _, line, _, _ in SAID]
    for first, line in zip(firsts, texts):
        said = text.words(line)
        assert [by_position.get(first + i) for i in range(len(said) + 1)] == [*said, None]  # a gap after each
    directory = {}
    for path in (site / "search" / "words").glob("*.js"):
        directory.update(read_script(path)[1])
    assert directory == {w: [0] for w in by_position.values()}  # every word, and the one group it is in
    _, rows = read_script(site / "search" / "t" / "ep1.js")
    assert rows[2] == [950, 1, SAID[2][2].strip()]  # hundredths, speaker's index, text
    page = (site / "e" / "ep1.html").read_text()
    assert page.count('class="seg') == len(SAID) and page.count('class="seg flagged"') == 2
    assert '<h2 class="who">Walter</h2>' in page and 'data-t="9.50"' in page and "Only the 2 segments to check" in page
    assert '<a href="ep1.txt" download>TXT</a>' in page and (site / "e" / "ep1.srt").read_text().startswith("1\n")


def test_transcript_text_titles_and_paths_are_escaped_everywhere_they_reach_html_or_script(archive, tmp_path):
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site, title='</title><script>alert("t")</script>'))
    for path in site.rglob("*"):
        if path.suffix in (".html", ".js") and "assets" not in path.parts:
            body = path.read_text()
            assert "<script>window" not in body and "<Hour>" not in body and "</title><script>" not in body, path
            assert "alert(" not in body or "&lt;/title&gt;&lt;script&gt;alert(" in body or "\\u003c/title>" in body
    page = (site / "e" / "ep1.html").read_text()
    assert "&lt;script&gt;window.pwned" in page and "Garden &lt;Hour&gt; &amp; Friends" in page
    assert "\\u003cscript>window.pwned = 1\\u003c/script>" in (site / "search" / "t" / "ep1.js").read_text()
    catalog = re.search(
        r'<script type="application/json" id="catalog">(.*?)</script>', (site / "index.html").read_text(), re.S
    )
    assert json.loads(catalog.group(1))["episodes"]["ep1"]["title"] == "Garden <Hour> & Friends"


def mtimes(site: Path) -> dict[str, int]:
    return {str(p.relative_to(site)): p.stat().st_mtime_ns for p in site.rglob("*") if p.is_file()}


def test_a_rebuild_rewrites_only_what_changed_and_never_a_file_a_person_edited(archive, tmp_path):
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site))
    before = mtimes(site)
    again = build_site([archive], SiteOptions(site))
    assert again.pages == 0 and again.groups == 0
    assert {k: v for k, v in mtimes(site).items() if not k.startswith(".podscribe")} == {
        k: v for k, v in before.items() if not k.startswith(".podscribe")
    }

    # a person corrects the episode's page in the site, then a new episode arrives in the job
    page = site / "e" / "ep1.html"
    page.write_text(page.read_text().replace("Welcome", "Welcome (corrected)"))
    write_job(
        archive,
        [
            episode("a" * 32, "/shows/garden/ep1.mp3", title="Garden <Hour> & Friends", date="2024-05-01"),
            episode("b" * 32, "/shows/news/ep2.mp3", title=None, date="2023-01-02", said=SAID[:2]),
            episode("d" * 32, "/shows/news/ep3.mp3", said=SAID[:1]),
        ],
    )
    edited = page.read_text()
    result = build_site([archive], SiteOptions(site, speaker_names="Ann,Bob"))  # new names: every page changes
    assert result.pages == 3
    assert page.read_text() == edited and (site / "e" / "ep1.new.html").is_file()
    assert (page, site / "e" / "ep1.new.html") in result.kept
    assert "Ann" in (site / "e" / "ep1.new.html").read_text() and (site / "e" / "ep3.html").is_file()

    # a rebuild with the same names touches nothing; an episode that leaves the job takes its files along
    before = mtimes(site)
    assert build_site([archive], SiteOptions(site, speaker_names="Ann,Bob")).pages == 0
    assert mtimes(site)["e/ep2.html"] == before["e/ep2.html"]
    (archive / "files" / f"{'d' * 32}.parquet").unlink()
    result = build_site([archive], SiteOptions(site, speaker_names="Ann,Bob"))
    assert (
        result.removed > 0
        and not (site / "e" / "ep3.html").exists()
        and not (site / "search" / "t" / "ep3.js").exists()
    )
    assert mtimes(site)["e/ep2.html"] == before["e/ep2.html"]


def test_a_txt_a_person_corrected_beside_the_job_is_the_one_the_site_offers_and_is_left_as_it_is(archive, tmp_path):
    from pipeline.outputs.export import export_job

    export_job(archive, ["txt"])  # the job's own files, as --subtitles txt writes them
    txt = archive / "subtitles" / "ep1.txt"
    txt.write_text("Corrected by hand.\n")
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site))
    assert txt.read_text() == "Corrected by hand.\n"
    assert (site / "e" / "ep1.txt").read_text() == "Corrected by hand.\n"
    assert 'TXT</a> <span class="edited">(edited by a person)</span>' in (site / "e" / "ep1.html").read_text()
    assert (site / "e" / "ep2.txt").read_text() == (archive / "subtitles" / "ep2.txt").read_text()
    assert "edited" not in (site / "e" / "ep2.html").read_text()


def test_two_jobs_sharing_an_output_folder_each_offer_their_own_episodes_files(tmp_path):
    """Two inputs of one stem in two jobs writing into one folder: the second's files are named apart, and the
    site of each job offers its own (the folder's record says whose each file is), never the other's."""
    from pipeline.outputs.export import export_job

    shared = tmp_path / "subs"
    jobs = {}
    for show, said in (("a", "Job A says apples."), ("b", "Job B says bananas.")):
        jobs[show] = write_job(
            tmp_path / f"job-{show}",
            [episode(show * 32, f"/{show}/ep.mp3", [(0.0, 3.0, f" {said}", None, [])])],
            outputs={"subtitles": ["txt"], "output_dir": str(shared), "cue_rules": {}},
        )
        export_job(jobs[show], ["txt"], shared)
    assert len(list(shared.glob("ep*.txt"))) == 2
    for show, word in (("a", "apples"), ("b", "bananas")):
        site = tmp_path / f"site-{show}"
        build_site([jobs[show]], SiteOptions(site))
        (offered,) = (site / "e").glob("ep*.txt")
        assert word in offered.read_text()
        assert "edited" not in (site / "e" / offered.name.replace(".txt", ".html")).read_text()


def test_a_job_given_through_dot_dot_is_the_same_job(archive, tmp_path):
    """`podscribe site x/../job`, then the job's own updates with its plain path: one job, each episode once."""
    (tmp_path / "x").mkdir()
    site = tmp_path / "site"
    build_site([tmp_path / "x" / ".." / archive.name], SiteOptions(site))
    build_site([archive], SiteOptions(site, add_jobs=True))
    assert sorted(p.name for p in (site / "e").glob("*.html")) == ["ep1.html", "ep2.html"]
    hits = search([archive, tmp_path / "x" / ".." / archive.name], SearchOptions('"climate change"'))
    assert hits.total == 2


def test_a_damaged_table_lists_its_episode_as_unreadable_and_the_rest_is_built(archive, tmp_path):
    table = archive / "segments" / f"{'b' * 32}.parquet"
    data = bytearray(table.read_bytes())
    data[len(data) // 3] ^= 0xFF  # a page damaged in the middle: its CRC fails
    table.write_bytes(bytes(data))
    with pytest.raises(OSError):
        pq.read_table(table, page_checksum_verification=True)
    site = tmp_path / "site"
    result = build_site([archive], SiteOptions(site))
    assert [e.path for e in result.unreadable] == ["/shows/news/ep2.mp3"] and result.problems
    assert (site / "e" / "ep1.html").is_file() and not (site / "e" / "ep2.html").exists()
    assert 'data-status="unreadable"' in (site / "index.html").read_text()


def test_bad_output_folders_are_refused_before_anything_is_written_and_a_failed_build_leaves_nothing(
    archive, tmp_path, monkeypatch
):
    a_file = tmp_path / "a-file"
    a_file.write_text("x")
    with pytest.raises(UsageProblem, match="a file is there"):
        build_site([archive], SiteOptions(a_file))
    with pytest.raises(UsageProblem, match="is not a folder"):
        build_site([archive], SiteOptions(a_file / "site"))
    other = tmp_path / "other"
    other.mkdir()
    (other / "notes.txt").write_text("mine")
    with pytest.raises(UsageProblem, match="holds other files"):
        build_site([archive], SiteOptions(other))
    assert sorted(p.name for p in other.iterdir()) == ["notes.txt"]
    if os.geteuid() != 0:  # root may write anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o555)
        with pytest.raises(UsageProblem, match="cannot be written"):
            build_site([archive], SiteOptions(locked / "site"))

    from pipeline.browse.site import pages

    def failing(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(pages, "episode_page", failing)
    with pytest.raises(StorageError, match="No space left on device"):
        build_site([archive], SiteOptions(tmp_path / "site"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file", "job", "other"]  # no site, no temporary folder


def test_the_site_records_itself_in_the_job_so_search_links_each_hit_to_its_moment(archive, tmp_path):
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site))
    hit = search([archive], SearchOptions('"climate change"')).hits[0]
    assert hit.page == (site / "e" / "ep1.html").as_uri() + "#t=4.00"
    other = tmp_path / "other-site"
    assert search([archive], SearchOptions("climate", site=other)).hits[0].page is None  # no site there
    assert json.loads((archive / "site.json").read_text()) == {"sites": [str(site)]}


def test_site_files_are_podscribe_outputs_a_person_can_edit(archive, tmp_path):
    """The site's record is outputs/ownership.py's: a file changed by a person after the build is kept by the next one,
    even when the episode leaves the site."""
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site))
    assert "e/ep1.html" in own_digests(site)
    note = site / "e" / "ep2.txt"
    note.write_text("my own notes\n")
    (archive / "files" / f"{'b' * 32}.parquet").unlink()
    result = build_site([archive], SiteOptions(site))
    assert note.read_text() == "my own notes\n" and (note, None) in result.kept
    assert "e/ep2.txt" not in own_digests(site) and "e/ep1.html" in own_digests(site)


def test_copy_audio_puts_an_opus_copy_beside_the_page_and_a_rebuild_keeps_it(archive, tmp_path):
    import subprocess

    import numpy as np

    from bench.common import encode

    audio = encode(
        tmp_path / "ep9.wav", (0.1 * np.sin(np.arange(16000 * 3) / 16000 * 2 * np.pi * 440)).astype(np.float32)
    )
    write_job(archive, [episode("e" * 32, str(audio), said=SAID[:2])])
    site = tmp_path / "site"
    build_site([archive], SiteOptions(site, copy_audio=True))
    opus = site / "e" / "ep9.opus"
    probe = subprocess.run(["ffprobe", "-v", "error", "-show_entries", "stream=codec_name,channels", "-of", "csv=p=0", str(opus)],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert probe.stdout.strip() == "opus,1"
    page = (site / "e" / "ep9.html").read_text()
    assert 'src="ep9.opus"' in page
    assert "No player" in (site / "e" / "ep1.html").read_text()  # /shows/... is not there: no player, a note
    made = opus.stat().st_mtime_ns
    assert build_site([archive], SiteOptions(site, copy_audio=True)).pages == 0 and opus.stat().st_mtime_ns == made
    build_site([archive], SiteOptions(site))  # without the copies: the player links to the audio where it is
    assert not opus.exists() and f'src="{os.path.relpath(audio, site / "e")}"' in (site / "e" / "ep9.html").read_text()


def test_many_episodes_are_rendered_in_worker_processes_into_the_same_site_as_one_process_makes(tmp_path, monkeypatch):
    from pipeline.browse.site import builder

    said = SAID[:3]
    many = [episode(f"{n:032x}", f"/shows/many/ep{n:02d}.mp3", said, date=f"2024-01-{n + 1:02d}") for n in range(14)]
    job = write_job(tmp_path / "job", many)
    build_site([job], SiteOptions(tmp_path / "pooled", title="Many"))  # 14 episodes: two worker processes
    monkeypatch.setattr(builder, "PER_PROCESS", 100)
    build_site([job], SiteOptions(tmp_path / "here", title="Many"))
    files = lambda root: {
        str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file() and ".podscribe" not in p.parts
    }
    pooled, here = files(tmp_path / "pooled"), files(tmp_path / "here")
    assert len(pooled) == 14 * 6 + 4 + 1 + len([k for k in pooled if k.startswith(("search/g", "search/words"))])
    assert pooled == here
