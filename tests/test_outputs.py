"""Outputs: a worker joining a job must ask for the subtitles its workers write (or none), since the last one to
finish writes what they agreed on; the output folder is checked before any decoding; an output that cannot be
written for its own name fails alone, named."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time

import pytest

from helpers import lines, podscribe, run_here, start
from pipeline.facts.errors import EXIT_CONFIG_CHANGED, EXIT_USAGE, ConfigChanged
from pipeline.outputs import agreed, ownership, record
from pipeline.outputs import names as output_naming
from pipeline.outputs.cues import CueRules
from pipeline.storage import workers


def test_outputs_of_workers_join_when_one_side_asks_for_none_and_refuse_when_they_differ(tmp_path):
    srt = agreed.spec(["srt"], tmp_path / "a", CueRules())
    assert agreed.join(srt, None, tmp_path) == srt and agreed.join(None, srt, tmp_path) == srt
    assert agreed.join(srt, agreed.spec(["srt"], tmp_path / "a", CueRules()), tmp_path) == srt
    for other in (
        agreed.spec(["vtt"], tmp_path / "a", CueRules()),
        agreed.spec(["srt"], tmp_path / "b", CueRules()),
    ):
        try:
            agreed.join(srt, other, tmp_path)
        except ConfigChanged as exc:
            assert "same options" in str(exc)
        else:
            raise AssertionError(f"{other} joined {srt}")


def test_a_joining_worker_with_other_subtitles_is_refused_and_the_first_ones_stay(small_archive, cache_dir, tmp_path):
    out, trace = tmp_path / "job", tmp_path / "trace.txt"
    first = start(out, small_archive, cache_dir, trace, "--subtitles", "srt", "-o", str(tmp_path / "srt"))
    while not any(x.startswith("decoded") for x in lines(trace)):
        assert first.poll() is None, first.communicate()
        time.sleep(0.05)
    assert workers.live_workers(out)
    code, stdout, stderr = run_here(
        out, small_archive, cache_dir, None, "--subtitles", "vtt", "-o", str(tmp_path / "vtt")
    )
    assert code == EXIT_CONFIG_CHANGED and "--subtitles" in stderr and "-o/--output-dir" in stderr, stdout + stderr
    recorded = json.loads((out / "job.json").read_text())["outputs"]
    assert recorded["subtitles"] == ["srt"] and recorded["output_dir"] == str(tmp_path / "srt")
    first.send_signal(signal.SIGTERM)
    first.wait()


def test_a_read_only_output_folder_is_found_before_any_decoding(clips, cache_dir, tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)], capture_output=True).returncode:
        pytest.skip("cannot mount a tmpfs here (needs root)")
    try:
        jfk = next(c.path for c in clips if c.path.name == "jfk.flac")
        trace = tmp_path / "trace.txt"
        out = tmp_path / "job"
        args = ["--model", "tiny.en", "-q", "--subtitles", "srt", "-o", str(ro), str(jfk)]
        result = podscribe(
            "transcribe", "--out", str(out), *args, cache_dir=cache_dir, env={"PODSCRIBE_TRACE": str(trace)}
        )
        assert result.returncode == EXIT_USAGE and "subtitles cannot be written into" in result.stderr, result.stderr
        assert not lines(trace), "it decoded before finding out"
    finally:
        subprocess.run(["umount", "-l", str(ro)], capture_output=True)


def test_an_input_name_too_long_for_its_outputs_gets_a_shorter_one_and_a_folder_in_the_way_is_kept(
    clips, cache_dir, tmp_path
):
    """An input name of 252 bytes: its outputs' names (and their temporary names) passed the file system's 255, so
    they were never written (json: a traceback on every later run, and `export` exited 5, "damaged state"). They
    are written under a shorter name, said out loud. A folder that holds the other output's name is not
    podscribe's file: kept, the new version beside it (outputs/ownership.py). The job goes on and exits 0, export too."""
    inputs = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:2]
    long = tmp_path / "in" / ("x" * 248 + inputs[0].suffix)
    long.parent.mkdir()
    long.write_bytes(inputs[0].read_bytes())
    subs = tmp_path / "subs"
    (subs / f"{inputs[1].stem}.srt").mkdir(parents=True)  # a folder with the output's name
    job = tmp_path / "job"
    args = ("--model", "tiny.en", "-q", "--subtitles", "srt,json", "-o", str(subs), str(long), str(inputs[1]))
    result = podscribe("transcribe", "--out", str(job), *args, cache_dir=cache_dir)
    assert result.returncode == 0 and "done: 2, failed: 0" in result.stdout, result.stdout + result.stderr
    short = output_naming.output_names([str(long), str(inputs[1])])[str(long)]
    assert short != long.stem and len(short.encode()) <= output_naming.MAX_STEM_BYTES
    assert f"is too long a name for files: its files are named {short}.*" in result.stderr, result.stderr
    assert json.loads((subs / f"{short}.json").read_text())["path"] == str(long)
    assert (subs / f"{short}.srt").read_text().strip()
    assert (subs / f"{inputs[1].stem}.new.srt").is_file() and f"{inputs[1].stem}.new.srt" in result.stderr
    again = podscribe("export", str(job), "-f", "srt,json", "-o", str(subs), cache_dir=cache_dir)
    assert again.returncode == 0 and "0 files written, 4 already up to date" in again.stdout, (
        again.stdout + again.stderr
    )


def test_a_name_at_the_file_system_s_limit_is_written(tmp_path):
    """255 bytes: the temporary name beside it (``.NAME.`` + 12) was 14 bytes too long for the file system."""
    name = "y" * 250 + ".json"
    written = ownership.OutputDir(tmp_path).write({name: b"{}"})
    assert written.paths == [tmp_path / name] and (tmp_path / name).read_bytes() == b"{}" and not written.skipped


def test_outputs_renamed_when_a_name_collision_first_appears_leave_no_stale_file_but_keep_an_edited_one(
    clips, cache_dir, tmp_path
):
    """Run 1 transcribes a/show.wav: show.srt and show.txt. Run 2 adds b/show.wav (the same stem) to the job:
    both inputs now get collision names, so run 1's show.srt would belong to neither; it is gone. show.txt, which
    a person edited in between, is kept, and the run says so."""
    sources = sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:2]
    a, b = tmp_path / "a" / "show.wav", tmp_path / "b" / "show.wav"
    for src, dst in ((sources[0], a), (sources[1], b)):
        dst.parent.mkdir()
        dst.write_bytes(src.read_bytes())
    out, subs = tmp_path / "job", tmp_path / "job" / "subtitles"
    args = ("transcribe", "--out", str(out), "--model", "tiny.en", "-q", "--subtitles", "srt,txt")
    first = podscribe(*args, str(a), cache_dir=cache_dir)
    assert first.returncode == 0 and sorted(p.name for p in subs.iterdir()) == [".podscribe", "show.srt", "show.txt"]
    edited = (subs / "show.txt").read_text() + "\nchecked by a person\n"
    (subs / "show.txt").write_text(edited)
    second = podscribe(*args, str(a), str(b), cache_dir=cache_dir)
    assert second.returncode == 0 and "done: 1, failed: 0, already done: 1" in second.stdout, second.stderr
    names = output_naming.output_names([str(a), str(b)])
    assert names[str(a)] != "show" != names[str(b)]
    expected = {f"{names[str(p)]}.{ext}" for p in (a, b) for ext in ("srt", "txt")}
    assert {p.name for p in subs.iterdir()} == {".podscribe", "show.txt", *expected}, "a stale output stayed"
    assert (subs / "show.txt").read_text() == edited and f"kept: {subs / 'show.txt'}" in second.stderr


def test_an_input_renamed_in_its_outputs_leaves_its_old_files_only_where_a_person_changed_them(tmp_path):
    """The rule alone: files written for an input under the name it had are removed when its outputs are written
    under a new one; an edited one is kept (and listed); another input's file, or another format's, is not touched."""
    folder = ownership.OutputDir(tmp_path)
    folder.write(
        {"show.srt": b"1", "show.txt": b"t", "show.vtt": b"v"},
        sources={
            "show.srt": ("/a/show.wav", "srt"),
            "show.txt": ("/a/show.wav", "txt"),
            "show.vtt": ("/a/show.wav", "vtt"),
        },
    )
    folder.write({"other.srt": b"o"}, sources={"other.srt": ("/b/other.wav", "srt")})
    (tmp_path / "show.txt").write_bytes(b"edited")
    written = folder.write(
        {"show-1.srt": b"1", "show-1.txt": b"t"},
        sources={"show-1.srt": ("/a/show.wav", "srt"), "show-1.txt": ("/a/show.wav", "txt")},
    )
    names = sorted(p.name for p in tmp_path.iterdir() if p.is_file())
    assert names == ["other.srt", "show-1.srt", "show-1.txt", "show.txt", "show.vtt"], names
    assert written.kept == [(tmp_path / "show.txt", tmp_path / "show-1.txt")]
    assert (tmp_path / "show.txt").read_bytes() == b"edited"


def _two_clips(clips) -> list:
    return sorted((c.path for c in clips if c.language == "en" and c.duration_s < 4), key=lambda p: p.name)[:2]


def test_restart_keeps_an_edited_output_and_removes_only_podscribe_s_own(clips, cache_dir, tmp_path):
    """`--restart` deleted the job's subtitles folder, a person's edit with it (and every exit-4 message
    recommends --restart)."""
    clip = _two_clips(clips)[0]
    out, subs = tmp_path / "job", tmp_path / "job" / "subtitles"
    args = ("transcribe", "--out", str(out), "--model", "tiny.en", "-q", "-f", "txt,srt", str(clip))
    assert podscribe(*args, cache_dir=cache_dir).returncode == 0
    txt, srt = subs / f"{clip.stem}.txt", subs / f"{clip.stem}.srt"
    edited = txt.read_text() + "checked by a person\n"
    txt.write_text(edited)
    written = srt.read_bytes()
    restarted = podscribe(*args, "--restart", cache_dir=cache_dir)
    assert restarted.returncode == 0 and "done: 1, failed: 0, already done: 0" in restarted.stdout, restarted.stderr
    assert (
        txt.read_text() == edited and f"{txt}: changed since podscribe wrote it: --restart kept it" in restarted.stderr
    )
    assert srt.read_bytes() == written  # podscribe's own: removed, and written again
    assert not (subs / f"{clip.stem}.new.txt").exists()  # the transcript is the same: nothing new beside the edit


def test_two_jobs_writing_into_one_folder_never_replace_each_other_s_files(clips, cache_dir, tmp_path):
    """b/ep.wav's ep.txt silently replaced a/ep.wav's when two jobs wrote into one -o folder. The first one keeps
    its name; the second input's files get its collision name, said; export of either job leaves both as they
    are. The job records the speaker names it was given, for export."""
    first, second = _two_clips(clips)
    a, b = tmp_path / "a" / "ep.wav", tmp_path / "b" / "ep.wav"
    for src, dst in ((first, a), (second, b)):
        dst.parent.mkdir()
        dst.write_bytes(src.read_bytes())
    subs = tmp_path / "subs"
    common = ("--model", "tiny.en", "-q", "-f", "txt", "-o", str(subs))
    one = podscribe("transcribe", "--out", str(tmp_path / "A"), *common, str(a), cache_dir=cache_dir)
    assert one.returncode == 0, one.stderr
    mine = (subs / "ep.txt").read_text()
    two = podscribe(
        "transcribe", "--out", str(tmp_path / "B"), *common, "--speaker-names", "Lena,,Walter", str(b),
        cache_dir=cache_dir,
    )  # fmt: skip
    other = output_naming.output_names([str(a), str(b)])[str(b)]  # its name beside a/ep.wav: ep-<hash of its path>
    assert two.returncode == 0 and f"the files of {b} are named {other}.*" in two.stderr, two.stderr
    assert (subs / "ep.txt").read_text() == mine and (subs / f"{other}.txt").read_text() != mine
    assert json.loads((tmp_path / "B" / "job.json").read_text())["speaker_names"] == {
        "names": ["Lena", "", "Walter"],
        "by_show": [],
    }
    for job in ("A", "B"):
        again = podscribe("export", str(tmp_path / job), "-f", "txt", "-o", str(subs), cache_dir=cache_dir)
        assert again.returncode == 0 and "0 files written, 1 already up to date" in again.stdout, again.stdout
    assert {p.name for p in subs.iterdir()} == {".podscribe", "ep.txt", f"{other}.txt"}


def _killed_while_writing(folder, files: dict[str, bytes], at: str) -> None:
    """A process that writes ``files`` into ``folder`` and is killed (SIGKILL) at ``at``: ``_sync_file_system``
    (the temporary files written, none renamed yet) or ``_fsync_dir`` (renamed, the write not yet over)."""
    pid = os.fork()
    if pid == 0:  # pragma: no cover (the child dies)
        try:
            from pipeline.storage import atomic

            setattr(atomic, at, lambda *_: os.kill(os.getpid(), signal.SIGKILL))
            ownership.OutputDir(folder).write(files, sources={name: ("/a/ep.wav", name[3:]) for name in files})
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, f"not killed at {at}"


def test_writes_killed_at_any_moment_leave_outputs_that_stay_podscribe_s_and_no_temporary_file(tmp_path):
    """A SIGKILL during output writing left `.NAME.*.tmp` files in the output folder forever; and a write is
    recorded before its file is replaced, so whatever a kill leaves is still podscribe's to replace (not taken
    for a person's edit)."""
    folder = ownership.OutputDir(tmp_path)
    sources = {name: ("/a/ep.wav", name[3:]) for name in ("ep.txt", "ep.srt")}
    folder.write({"ep.txt": b"one\n", "ep.srt": b"1\n"}, sources=sources)
    _killed_while_writing(tmp_path, {"ep.txt": b"two\n", "ep.srt": b"2\n"}, "_sync_file_system")
    assert (tmp_path / "ep.txt").read_bytes() == b"one\n" and len(list(tmp_path.glob(".ep.*.tmp"))) == 2
    _killed_while_writing(tmp_path, {"ep.txt": b"three\n", "ep.srt": b"3\n"}, "_fsync_dir")
    assert (tmp_path / "ep.txt").read_bytes() == b"three\n" and not list(tmp_path.glob(".*.tmp"))
    written = folder.write({"ep.txt": b"four\n", "ep.srt": b"4\n"}, sources=sources)
    assert written.kept == [] and written.fresh == 2, written
    assert sorted(p.name for p in tmp_path.iterdir()) == [".podscribe", "ep.srt", "ep.txt"]
    assert (tmp_path / "ep.txt").read_bytes() == b"four\n"


def test_the_record_is_a_journal_folded_into_its_snapshots_and_reads_the_same_either_way(tmp_path, monkeypatch):
    """Thousands of outputs cost a journal line each, not the whole record each (an export of 2,000 files spent
    a minute encoding and fsyncing it); folded in every COMPACT_LINES lines, with the same meaning."""
    monkeypatch.setattr(record, "COMPACT_LINES", 7)
    folder = ownership.OutputDir(tmp_path)
    for i in range(5):
        folder.write({f"ep{i}.txt": f"{i}\n".encode()}, sources={f"ep{i}.txt": (f"/a/ep{i}.wav", "txt")})
    journal = tmp_path / ".podscribe" / record.JOURNAL
    assert len(journal.read_text().splitlines()) == 5 and not (tmp_path / ".podscribe" / record.RECORD).exists()
    (tmp_path / "ep1.txt").write_text("mine\n")
    folder.write({f"ep{i}.txt": f"{i}{i}\n".encode() for i in range(5)})  # the 7th line folds the journal in
    assert journal.read_text() == "" and json.loads((tmp_path / ".podscribe" / record.RECORD).read_text())
    assert (tmp_path / "ep1.txt").read_text() == "mine\n" and (tmp_path / "ep1.new.txt").read_text() == "11\n"
    assert [(tmp_path / f"ep{i}.txt").read_text() for i in (0, 2, 3, 4)] == ["00\n", "22\n", "33\n", "44\n"]
    (tmp_path / "ep1.new.txt").write_text("mine too\n")
    folder.write({"ep1.txt": b"111\n"})
    assert (tmp_path / "ep1.new-2.txt").read_text() == "111\n" and (
        tmp_path / "ep1.new.txt"
    ).read_text() == "mine too\n"


def test_temporaries_a_kill_left_in_subfolders_are_swept_too(tmp_path):
    """A site's files are paths inside its folder (``e/ep.html``): a killed write's temporary there is swept by
    the next write, like one at the top; a temporary of a name podscribe never wrote is not its to remove."""
    ownership.OutputDir(tmp_path).write({"e/ep.html": b"<p>one</p>", "index.html": b"i"})
    stale = [tmp_path / "e" / ".ep.html.Ab3dEf9h.tmp", tmp_path / ".index.html.Zz0zZz0z.tmp"]
    other = tmp_path / "e" / ".notes.txt.Ab3dEf9h.tmp"
    for path in [*stale, other]:
        path.write_bytes(b"half")
    ownership.OutputDir(tmp_path).write({"e/ep.html": b"<p>two</p>"})
    assert not any(p.exists() for p in stale) and other.exists()
    assert (tmp_path / "e" / "ep.html").read_bytes() == b"<p>two</p>"


def test_a_journal_line_a_kill_cut_short_costs_no_later_entry(tmp_path):
    """A torn last line (a kill or a power loss mid-append) is ended before the next process appends: the next
    entry stays readable, so the file it names stays podscribe's (glued to the torn line, it read as a person's)."""
    ownership.OutputDir(tmp_path).write({"ep0.txt": b"0\n"})
    journal = tmp_path / ".podscribe" / record.JOURNAL
    with journal.open("ab") as f:
        f.write(b'{"n":"ep9.txt","d":"ab')  # cut short
    ownership.OutputDir(tmp_path).write({"ep1.txt": b"1\n"})
    assert record.own_digests(tmp_path).keys() == {"ep0.txt", "ep1.txt"}
    (tmp_path / "ep1.txt").unlink()
    ownership.OutputDir(tmp_path).write({"ep1.txt": b"one\n"})  # its own file, gone: written again, no .new file
    assert (tmp_path / "ep1.txt").read_text() == "one\n" and not list(tmp_path.glob("*.new*"))
    ownership.OutputDir(tmp_path).write({"ep1.txt": b"uno\n"})  # and replaced, as podscribe's own
    assert (tmp_path / "ep1.txt").read_text() == "uno\n" and not list(tmp_path.glob("*.new*"))


def test_export_names_speakers_as_the_job_did_and_says_what_it_could_not_export(tmp_path):
    """`export` without --speaker-names dropped the job file's names per show; on an unfinished job it said nothing
    of the inputs it left out. (A job's tables built as a run writes them: bench.bench_export.)"""
    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from bench.bench_export import build_job
    from pipeline.cli import main
    from pipeline.storage.tables import FILES_SCHEMA, SEGMENTS_SCHEMA

    job = build_job(tmp_path / "job", 3, 2)
    ids = sorted(p.stem for p in (job / "files").glob("*.parquet"))
    segments = job / "segments" / f"{ids[0]}.parquet"
    rows = pq.read_table(segments).to_pylist()
    for row, speaker in zip(rows, ("Speaker 1", "Speaker 2")):
        row["speaker"] = speaker
    pq.write_table(pa.Table.from_pylist(rows, schema=SEGMENTS_SCHEMA), segments)
    failed = job / "files" / f"{ids[2]}.parquet"
    pq.write_table(
        pa.Table.from_pylist([{**pq.read_table(failed).to_pylist()[0], "status": "failed"}], schema=FILES_SCHEMA),
        failed,
    )
    inputs = [f"/archive/show-{i:02d}/episode-{i:05d}.mp3" for i in range(4)]  # the 4th has no row yet
    names = {"names": ["Host"], "by_show": [["show-00", ["Lena", "Walter"]]]}
    (job / "job.json").write_text(json.dumps({"config": {}, "inputs": inputs, "speaker_names": names}))
    result = CliRunner().invoke(main, ["export", str(job), "-f", "txt", "-o", str(tmp_path / "subs")])
    assert result.exit_code == 0 and "2 files written" in result.output, result.output
    assert "not exported: 1 not done yet and 1 failed of the job's inputs" in result.output
    assert (tmp_path / "subs" / "episode-00000.txt").read_text().startswith("Lena: ")
    told = CliRunner().invoke(
        main, ["export", str(job), "-f", "txt", "-o", str(tmp_path / "told"), "--speaker-names", "Ann"]
    )
    assert (tmp_path / "told" / "episode-00000.txt").read_text().startswith("Ann: "), told.output
