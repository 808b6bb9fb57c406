"""A 1,000-episode, 1,000-hour archive: `podscribe search`, `podscribe site`, and the site in Chromium.

    .venv/bin/python -m bench.bench_archive [--from JOB_DIR ...] [--episodes 1000] [--hours 1.0]
        [--out bench/out/archive] [--skip-browser] [--duckdb] [--screenshots DIR] [--json results.json]

The archive's manifests are generated, not decoded: real segment tables (``--from``; by default the long-form
set transcribed once with tiny.en, word timings and speaker labels, kept in .cache/bench/longform-tiny) are laid
end to end in a seeded order, times shifted, until each episode is ``--hours`` long, and written as a job dir
with the real schemas (files rows with titles and dates; segments with their words, speakers and flags). A rare
word is planted in three episodes. Then, each as a user runs it (a fresh process, wall clock):

  search   `podscribe search` for the rare word and for the commonest two-word phrase of the source, its import
           time (python -X importtime: no torch) and, with --duckdb, the same filter in DuckDB beside pyarrow's
           (in one process, the tables read by each; decision 0038)
  site     `podscribe site`: the first build (in a new folder), its size and file count; a rebuild with nothing
           changed; a rebuild after one more episode
  browser  Chromium (bench/browser.py) on the index page from disk and over http: load time (navigation to the
           load event) and the time from a query typed to its first hit on the page (the first query of a fresh
           page, its index shards not loaded yet, and the same query again), for both queries

Targets (issue 45): search < 1 s, build < 60 s, first hit < 300 ms. ``--screenshots DIR`` saves an episode page
and a search, as docs/ shows them.
"""

from __future__ import annotations

import argparse
import contextlib
import http.server
import json
import os
import platform
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from datetime import date, timedelta
from functools import partial
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from bench import browser
from bench.common import LONGFORM, REPO, write_job
from pipeline.browse import text as textmod
from pipeline.storage.manifest import JobDir, write_table
from pipeline.storage.tables import FILES_SCHEMA, SEGMENTS_SCHEMA

PODSCRIBE = [sys.executable, "-m", "pipeline.cli"]
SOURCE = REPO / ".cache" / "bench" / "longform-tiny"
RARE = "quetzalcoatl"
NAMES = "Lena,Walter,Caller"


def source_job(given: list[Path]) -> list[Path]:
    """The real job dirs the archive is made from: those given, else the long-form set with tiny.en (made once)."""
    if given:
        return given
    if not (SOURCE / "files").is_dir() or len(list((SOURCE / "files").glob("*.parquet"))) < 3:
        episodes = sorted(p for p in LONGFORM.iterdir() if p.suffix in (".mp3", ".m4a", ".ogg"))
        print(f"transcribing the long-form set once with tiny.en into {SOURCE} ...", flush=True)
        subprocess.run(
            [*PODSCRIBE, "transcribe", *map(str, episodes), "--model", "tiny.en", "--language", "en", "--diarize"]
            + ["--speaker-names", "Lena,Walter,Caller", "--subtitles", "srt,vtt,txt,json", "--out", str(SOURCE), "-q"],
            check=True,
        )
    return [SOURCE]


def source_tables(jobs: list[Path]) -> list[tuple[pa.Table, float]]:
    """Each done episode's segments table (sorted) and its duration."""
    out = []
    for root in jobs:
        job = JobDir(root)
        for row in job.file_rows():
            if row["status"] == "done" and row["n_segments"]:
                table = job.read("segments", {row["file_id"]}).sort_by("segment")
                out.append((table, row["duration_s"]))
    if not out:
        sys.exit(f"no done episodes with segments in {jobs}")
    return out


def shifted(table: pa.Table, offset_s: float, first: int, file_id: str, path: str) -> pa.Table:
    """A segments table moved ``offset_s`` later (words too), renumbered from ``first``, for another input."""
    n = table.num_rows
    words = table.column("words").combine_chunks()
    fields = words.values
    moved = pa.StructArray.from_arrays(
        [
            fields.field("word"),
            pc.add(fields.field("start_s"), offset_s),
            pc.add(fields.field("end_s"), offset_s),
            fields.field("probability"),
            fields.field("speaker"),
        ],
        fields=list(fields.type),
    )
    words = pa.ListArray.from_arrays(words.offsets, moved, mask=words.is_null())
    columns = {
        "file_id": pa.array([file_id] * n, pa.string()),
        "path": pa.array([path] * n, pa.string()),
        "segment": pa.array(np.arange(first, first + n, dtype=np.int32)),
        "start_s": pc.add(table.column("start_s"), offset_s),
        "end_s": pc.add(table.column("end_s"), offset_s),
        "words": words,
    }
    return pa.table([columns.get(f.name, table.column(f.name)) for f in SEGMENTS_SCHEMA], schema=SEGMENTS_SCHEMA)


def plant(table: pa.Table, row: int, word: str) -> pa.Table:
    """``word`` in place of the first word of segment ``row`` (its text and its words)."""
    rows = table.to_pylist()
    seg = rows[row]
    if seg["words"]:
        old = seg["words"][0]["word"]
        seg["words"][0]["word"] = " " + word
        seg["text"] = seg["text"].replace(old.strip(), word, 1)
    else:
        seg["text"] = f" {word}{seg['text']}"
    return pa.Table.from_pylist(rows, schema=SEGMENTS_SCHEMA)


def make_archive(root: Path, sources: list[tuple[pa.Table, float]], episodes: int, hours: float, seed: int = 45):
    """The synthetic job dir: ``episodes`` episodes of ``hours`` each, from the real tables (see the docstring)."""
    rng = np.random.default_rng(seed)
    target_s = hours * 3600
    planted = set(rng.choice(episodes, size=min(3, episodes), replace=False).tolist())
    job = JobDir(root)
    root.mkdir(parents=True, exist_ok=True)
    inputs = []
    start = date(2006, 1, 2)
    for i in range(episodes):
        file_id = f"{i:032x}"
        path = f"/archive/show/episode-{i + 1:04d}.mp3"
        parts, at, first = [], 0.0, 0
        while at < target_s:
            table, duration = sources[int(rng.integers(len(sources)))]
            table = table.filter(pc.less(pc.add(table.column("start_s"), at), target_s))
            parts.append(shifted(table, at, first, file_id, path))
            first += table.num_rows
            at += duration + float(rng.uniform(1, 5))
        segments = pa.concat_tables(parts)
        if i in planted:
            segments = plant(segments, int(rng.integers(segments.num_rows)), RARE)
        flagged = pc.sum(pc.greater(pc.list_value_length(segments.column("flags")), 0)).as_py() or 0
        speakers = pc.count_distinct(segments.column("speaker")).as_py()
        first_words = " ".join(segments.column("text")[0].as_py().split()[:4]).strip(",.")
        row = {
            "file_id": file_id,
            "path": path,
            "paths": [path],
            "status": "done",
            "duration_s": target_s,
            "language": "en",
            "n_pieces": int(target_s // 25),
            "n_segments": segments.num_rows,
            "n_words": pc.sum(pc.list_value_length(segments.column("words"))).as_py(),
            "n_flagged": flagged,
            "n_speakers": speakers or None,
            "finished_at": "2026-12-01T00:00:00+00:00",
            "title": f"Episode {i + 1}: {first_words}",
            "date": (start + timedelta(days=7 * i)).isoformat(),
            "artist": "The Archive Show",
        }
        write_table(job.table_path("segments", file_id), segments.to_pylist(), SEGMENTS_SCHEMA)
        write_table(job.table_path("files", file_id), [row], FILES_SCHEMA)
        inputs.append(path)
    job.write_job({"models": {"main": "synthetic"}}, inputs)
    return planted


def common_phrase(sources) -> tuple[str, int]:
    """The commonest two-word phrase of the source transcripts, quoted."""
    pairs = Counter()
    for table, _ in sources:
        for line in table.column("text").to_pylist():
            said = textmod.words(line)
            pairs.update(zip(said, said[1:]))
    (a, b), n = pairs.most_common(1)[0]
    return f'"{a} {b}"', n


CPU_S: dict[str, float] = {}  # the last command's CPU seconds (its processes and their children), by its first words


def timed(cmd: list[str], **kwargs) -> tuple[float, subprocess.CompletedProcess]:
    """Wall seconds of a command, as a user waits for it; its CPU seconds go to CPU_S (a machine shared with
    others stretches the wall clock, not the CPU time)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    CPU_S[" ".join(cmd[3:5])] = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    return wall, done


def import_time(module: str) -> tuple[float, list[str]]:
    """Seconds to import ``module`` in a fresh interpreter (python -X importtime's total) and which of torch,
    transformers it pulled in."""
    probe = f"import sys, {module}; print(sorted({{'torch', 'transformers'}} & set(sys.modules)))"
    done = subprocess.run([sys.executable, "-X", "importtime", "-c", probe], capture_output=True, text=True, cwd=REPO)
    total = max(
        int(line.split("|")[1])
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.split("|")[1].strip().isdigit()
    )
    return total / 1e6, json.loads(done.stdout.strip().replace("'", '"'))


def search_runs(job: Path, queries: dict[str, str], repeats: int = 3) -> dict:
    out = {}
    for name, query in queries.items():
        walls, cpus = [], []
        for _ in range(repeats):
            wall, done = timed([*PODSCRIBE, "search", query, str(job), "--json", "--limit", "20"], cwd=REPO)
            assert done.returncode == 0, done.stderr
            walls.append(wall)
            cpus.append(CPU_S[f"search {query}"])
        doc = json.loads(done.stdout)
        out[name] = {
            "query": query,
            "wall_s": min(walls),
            "walls_s": walls,
            "cpu_s": cpus,
            "total": doc["total"],
            "episodes": doc["episodes"],
        }
    return out


def engines(job: Path, queries: dict[str, str]) -> dict:
    """The same filter four ways, in this process (CPU seconds; the manifests in the page cache): pyarrow and DuckDB
    each reading the job's 1,000 segments tables, and each over the one cached table (cache.py) that search reads."""
    import duckdb

    from pipeline.browse.archive import open_archive, searchable
    from pipeline.browse.cache import folded
    from pipeline.browse.query import matching, pattern

    archive = open_archive([job])
    episodes = [e for e in archive.episodes if e.status == "done"]
    paths = [str(JobDir(e.job).table_path("segments", e.file_id)) for e in episodes]
    cached = searchable(archive, episodes)
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    con.register("cached", cached)
    out = {}

    def cpu(run) -> tuple[float, int]:
        start = time.process_time()
        n = run()
        return time.process_time() - start, n

    for name, query in queries.items():
        parsed = textmod.parse(query)
        where = " AND ".join(f"regexp_matches(t, '{pattern(term)}')" for term in parsed.terms)
        longest = max((w for term in parsed.terms for w in term), key=len)

        def arrow_tables(parsed=parsed):
            import pyarrow.dataset as ds

            table = ds.dataset(paths, format="parquet").to_table(columns=["file_id", "segment", "start_s", "text"])
            return matching(table.append_column("folded", folded(table.column("text"))), parsed).num_rows

        def duck_tables(longest=longest, where=where):
            sql = f"SELECT file_id, segment, start_s FROM (SELECT *, lower(strip_accents(text)) AS t FROM read_parquet({paths!r})) WHERE contains(t, '{longest}') AND {where}"
            return len(con.execute(sql).fetchall())

        def duck_cached(longest=longest, where=where):
            sql = f"SELECT file_id, segment, start_s FROM (SELECT *, folded AS t FROM cached) WHERE contains(t, '{longest}') AND {where}"
            return len(con.execute(sql).fetchall())

        out[name] = {
            "pyarrow, 1,000 tables": cpu(arrow_tables),
            "duckdb, 1,000 tables": cpu(duck_tables),
            "pyarrow, cached table": cpu(lambda parsed=parsed: matching(cached, parsed).num_rows),
            "duckdb, cached table": cpu(duck_cached),
        }
    out["import_s"] = {"pyarrow.compute": import_time("pyarrow.compute")[0], "duckdb": import_time("duckdb")[0]}
    return out


def folder_size(root: Path) -> tuple[int, int]:
    files = [p for p in root.rglob("*") if p.is_file()]
    return sum(p.stat().st_size for p in files), len(files)


def site_runs(job: Path, site: Path) -> dict:
    shutil.rmtree(site, ignore_errors=True)
    cmd = [*PODSCRIBE, "site", str(job), "-o", str(site), "--speaker-names", NAMES, "--title", "The Archive Show"]
    first, done = timed(cmd, cwd=REPO)
    assert done.returncode == 0, done.stderr
    first_cpu = CPU_S[f"site {job}"]
    size, count = folder_size(site)
    parts = {"search index": folder_size(site / "search")[0], "index page": (site / "index.html").stat().st_size}
    parts["episode pages"] = sum(p.stat().st_size for p in (site / "e").glob("*.html"))
    again, done = timed(cmd, cwd=REPO)
    assert done.returncode == 0, done.stderr
    return {"first_s": first, "first_cpu_s": first_cpu, "bytes": size, "files": count, "parts": parts, "unchanged_s": again,
            "unchanged_cpu_s": CPU_S[f"site {job}"], "output": done.stdout.strip()}  # fmt: skip


def add_episode(job: Path, sources) -> None:
    """One more done episode in the job (its tables only: job.json stays as it is)."""
    table, duration = sources[0]
    file_id, path = "f" * 32, "/archive/show/episode-extra.mp3"
    rows = shifted(table, 0.0, 0, file_id, path).to_pylist()
    record = (job / "job.json").read_bytes()
    ep = {
        "file_id": file_id,
        "path": path,
        "status": "done",
        "duration_s": duration,
        "title": "Extra",
        "date": "2030-01-01",
    }
    write_job(job, [{**ep, "segments": rows}])
    (job / "job.json").write_bytes(record)


class StaticFiles(http.server.SimpleHTTPRequestHandler):
    """Python's static file server, answering byte ranges as every common web server does (a browser seeks in
    audio with them; without them it cannot play from a given moment)."""

    def log_message(self, *args) -> None:
        pass

    def send_head(self):
        match = re.fullmatch(r"bytes=(\d+)-(\d*)", self.headers.get("Range", ""))
        path = Path(self.translate_path(self.path))
        if not match or not path.is_file():
            return super().send_head()
        size = path.stat().st_size
        start = int(match.group(1))
        end = min(int(match.group(2)) if match.group(2) else size - 1, size - 1)
        if start >= size:
            self.send_error(416)
            return None
        f = open(path, "rb")  # noqa: SIM115 (closed by the server after copyfile)
        f.seek(start)
        self.send_response(206)
        self.send_header("Content-Type", self.guess_type(str(path)))
        self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
        self.send_header("Content-Length", str(end - start + 1))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()
        return _Slice(f, end - start + 1)


class _Slice:
    """The part of an open file a range asks for, as copyfile reads it."""

    def __init__(self, f, left: int):
        self.f, self.left = f, left

    def read(self, n: int = -1) -> bytes:
        n = self.left if n < 0 else min(n, self.left)
        data = self.f.read(n)
        self.left -= len(data)
        return data

    def close(self) -> None:
        self.f.close()


@contextlib.contextmanager
def served(root: Path):
    """``root`` over http from 127.0.0.1 (a plain static server, byte ranges answered, as any would be)."""
    handler = partial(StaticFiles, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()


FIRST_HIT = """
const [query, done] = [arguments[0], arguments[arguments.length - 1]];
const input = document.getElementById('q');
podscribe.firstHitAt = 0;
input.value = query;
const start = performance.now();
input.dispatchEvent(new Event('input'));
const poll = () => {
  if (podscribe.firstHitAt) done(podscribe.firstHitAt - start);
  else if (performance.now() - start > 20000) done(-1);
  else setTimeout(poll, 2);
};
poll();
"""


def browser_runs(site: Path, queries: dict[str, str]) -> dict:
    out = {}
    with browser.chromium() as driver, served(site) as base:
        driver.set_script_timeout(30)
        for where, url in (("file", site.as_uri() + "/index.html"), ("http", base + "index.html")):
            loads, hits = [], {}
            for name, query in queries.items():
                driver.get("about:blank")
                driver.get(url)
                loads.append(
                    driver.execute_script(
                        "const n = performance.getEntriesByType('navigation')[0]; return n.loadEventEnd - n.startTime;"
                    )
                )
                cold = driver.execute_async_script(FIRST_HIT, query)
                driver.execute_script("document.getElementById('q').value = ''")
                warm = driver.execute_async_script(FIRST_HIT, query)
                status = driver.find_element("id", "search-status").text
                hits[name] = {"cold_ms": cold, "warm_ms": warm, "status": status}
            out[where] = {"load_ms": min(loads), "first_hit": hits}
            errors = browser.console_errors(driver)
            out[where]["console_errors"] = errors
            out[where]["elsewhere"] = browser.elsewhere(browser.requests(driver), base)
    return out


def screenshots(site: Path, folder: Path, query: str) -> list[Path]:
    """An episode page while it plays and a search, small PNGs for docs/."""
    folder.mkdir(parents=True, exist_ok=True)
    shots = []
    with browser.chromium(width=900, height=640) as driver:
        page = next(iter(sorted((site / "e").glob("*.html"))))
        driver.get(page.as_uri() + "#t=30")
        time.sleep(1.0)
        shots.append(folder / "site-episode.png")
        driver.save_screenshot(str(shots[-1]))
        driver.get(site.as_uri() + "/index.html#q=" + query)
        time.sleep(1.5)
        shots.append(folder / "site-search.png")
        driver.save_screenshot(str(shots[-1]))
    return shots


def cpu_name() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="sources", type=Path, nargs="*", default=[])
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--hours", type=float, default=1.0)
    parser.add_argument("--out", type=Path, default=REPO / "bench" / "out" / "archive")
    parser.add_argument("--skip-browser", action="store_true")
    parser.add_argument(
        "--duckdb", action="store_true", help="also time DuckDB on the same filter (pip install duckdb)"
    )
    parser.add_argument("--screenshots", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()

    os.environ.setdefault("PODSCRIBE_CACHE", str(args.out / "cache"))  # search's cache, for the commands run here too
    sources = source_tables(source_job(args.sources))
    job = args.out / f"job-{args.episodes}x{args.hours:g}h"
    start = time.perf_counter()
    if not (job / "job.json").is_file():
        shutil.rmtree(job, ignore_errors=True)
        make_archive(job, sources, args.episodes, args.hours)
    made_s = time.perf_counter() - start
    size, count = folder_size(job)
    phrase, in_source = common_phrase(sources)
    queries = {"rare word": RARE, "common phrase": phrase}
    result = {
        "date": time.strftime("%Y-%m-%d"),
        "machine": f"{cpu_name()}, {os.cpu_count()} cores, {platform.platform()}, load {os.getloadavg()[0]:.1f}",
        "archive": {
            "episodes": args.episodes,
            "hours": args.episodes * args.hours,
            "bytes": size,
            "files": count,
            "made_s": made_s,
            "sources": len(sources),
        },  # fmt: skip
        "import": dict(zip(("s", "heavy"), import_time("pipeline.cli"))),
        "search": search_runs(job, queries),
    }
    if args.duckdb:
        result["engines"] = engines(job, queries)
    site = args.out / "site"
    if not (job / "subtitles").is_dir():  # the files a job run with --subtitles srt,vtt,txt,json has
        wall, done = timed(
            [*PODSCRIBE, "export", str(job), "-f", "srt,vtt,txt,json", "--speaker-names", NAMES], cwd=REPO
        )
        assert done.returncode == 0, done.stderr
        result["archive"]["export_s"] = wall
    result["site"] = site_runs(job, site)
    add_episode(job, sources)
    one_more, done = timed([*PODSCRIBE, "site", str(job), "-o", str(site), "--speaker-names", NAMES], cwd=REPO)
    result["site"]["one_more_s"] = one_more
    result["site"]["one_more_cpu_s"] = CPU_S[f"site {job}"]
    result["site"]["one_more_output"] = done.stdout.strip()
    (job / "files" / f"{'f' * 32}.parquet").unlink()
    (job / "segments" / f"{'f' * 32}.parquet").unlink()
    if not args.skip_browser and browser.missing() is None:
        result["browser"] = browser_runs(site, queries)
    if args.screenshots:
        result["screenshots"] = [str(p) for p in screenshots(site, args.screenshots, phrase.strip('"'))]
    print(json.dumps(result, indent=1))
    if args.json:
        args.json.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
