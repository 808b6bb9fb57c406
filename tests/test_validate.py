"""One validation for every source of a value (command line, job file), before anything is written; a prompt
longer than Whisper's limit is trimmed with a warning, never a failed file."""

from __future__ import annotations

import pyarrow.dataset as ds

from helpers import podscribe
from pipeline.cli.validate import problems
from pipeline.facts.errors import EXIT_USAGE


def test_values_out_of_range_are_named_whatever_their_source():
    assert problems({"vad_threshold": 0.5, "min_piece": 15.0, "max_piece": 30.0, "max_cps": 17.0}) == []
    for key, value in (
        ("vad_threshold", float("nan")),
        ("vad_threshold", 2.0),
        ("min_piece", 0.01),
        ("max_attempts", 0),
        ("max_cps", 0.0),
        ("max_cps", float("inf")),
        ("batch_size", 0),
        ("max_duration", 1e308),  # overflowed the cue layout at the end of the night
        ("max_cps", 1e-300),
        ("min_duration", -1.0),
    ):
        found = problems({key: value})
        assert len(found) == 1 and key in found[0] and "--" + key.replace("_", "-") in found[0], (key, found)
    assert problems({"min_piece": 20.0, "max_piece": 10.0}), "min above max"
    assert problems({"min_duration": 8.0, "max_duration": 7.0}) == [
        "--min-duration 8.0 is longer than --max-duration 7.0"
    ]


def test_export_checks_its_cue_values_before_reading_the_job(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main

    (tmp_path / "job").mkdir()
    for args, said in (
        (["--max-duration", "1e308"], "--max-duration (job file: max_duration) 1e+308: must be"),
        (["--min-duration", "9", "--max-duration", "3"], "--min-duration 9.0 is longer than --max-duration 3.0"),
    ):
        result = CliRunner().invoke(main, ["export", str(tmp_path / "job"), *args])
        assert result.exit_code == EXIT_USAGE and said in result.output, result.output


def test_refused_values_from_the_command_line_or_a_job_file_exit_2_and_create_no_job(clips, cache_dir, tmp_path):
    jfk = next(c.path for c in clips if c.path.name == "jfk.flac")
    out = tmp_path / "job"

    def job_file(line: str):
        path = tmp_path / "job.toml"
        path.write_text(f'inputs = ["{jfk}"]\nout = "{out}"\nmodel = "tiny.en"\n{line}\n')
        return ["run", str(path), "-q"]

    flags = ["transcribe", "--model", "tiny.en", "-q", "--out", str(out)]
    cases = {
        "--vad-threshold nan": [*flags, "--vad-threshold", "nan", str(jfk)],
        "--min-piece 0.01": [*flags, "--min-piece", "0.01", str(jfk)],
        "--max-cps 0": [*flags, "--max-cps", "0", "--subtitles", "srt", str(jfk)],
        "job file vad_threshold = 2.0": job_file("vad_threshold = 2.0"),
        "job file max_attempts = 0": job_file("max_attempts = 0"),
        "job file max_cps = 0": job_file('max_cps = 0\nsubtitles = ["srt"]'),
        "an English-only model with --language nl": [*flags, "--language", "nl", str(jfk)],
    }
    for name, args in cases.items():
        result = podscribe(*args, cache_dir=cache_dir)
        assert result.returncode == EXIT_USAGE, (name, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr, (name, result.stderr)
        assert not (out / "job.json").exists() and not out.exists(), f"{name}: a job was created"


def test_a_prompt_longer_than_whisper_keeps_is_trimmed_with_a_warning_and_the_fallback_decodes(
    clips, cache_dir, tmp_path
):
    """~1,400 characters of hotwords and prompt: more than the 223 text tokens Whisper keeps before a piece. A
    log-prob threshold of 0 sends every piece to the fallback (transformers' generate), which refused the prompt
    plus its 224 new tokens past 448 positions: every such file failed."""
    jfk = next(c.path for c in clips if c.path.name == "jfk.flac")
    out = tmp_path / "job"
    words = " ".join(f"Apollo{i} mission control" for i in range(90))
    result = podscribe(
        "transcribe",
        "--model",
        "tiny.en",
        "-q",
        "--out",
        str(out),
        "--initial-prompt",
        words,
        "--hotwords",
        "Kennedy, Houston",
        "--logprob-threshold",
        "0",
        "--fallback-beams",
        "2",
        str(jfk),
        cache_dir=cache_dir,
    )
    assert result.returncode == 0 and "done: 1, failed: 0" in result.stdout, result.stdout + result.stderr
    assert "only 223 fit before a piece" in result.stderr, result.stderr
    row = ds.dataset(out / "files").to_table().to_pylist()[0]
    assert row["status"] == "done" and row["n_segments"] > 0, row


def test_speaker_names_of_a_wrong_shape_in_a_job_file_exit_2_and_create_no_job(tmp_path):
    """Names per show are a table of lists; anything else is named before a job exists (a job file is read
    before any model or input is looked at)."""
    out = tmp_path / "job"
    for bad, said in (
        ('speaker_names = "Lena, Walter"', "speaker_names must be a list of names or a table"),
        ('speaker_names = {garden = "Lena"}', 'speaker_names."garden" must be a list of names'),
        ("speaker_names = {garden = [1, 2]}", 'speaker_names."garden" must be a list of names (strings)'),
        ('speaker_names = {garden = {a = ["Lena"]}}', 'speaker_names."garden" must be a list of names'),
        ('speaker_names = {"" = ["Lena"]}', "empty show key"),
        ('speaker_names = {"." = ["Lena"]}', 'speaker_names."." is not a folder name, path tail or pattern'),
        ('[speaker_names]\ngarden = ["Lena"]\nmax_attempts = 3', "max_attempts went into it"),
        ('[speaker_names]\ngarden = ["Lena"]\nsubtitles = ["srt"]', "subtitles went into it"),  # a valid show
    ):
        job = tmp_path / "job.toml"
        job.write_text(f'inputs = ["ep.mp3"]\nout = "{out}"\n{bad}\n')
        result = podscribe("run", str(job), "-q", cache_dir=tmp_path / "cache", cwd=tmp_path)
        assert result.returncode == EXIT_USAGE and said in result.stderr, (bad, result.stderr)
        assert "Traceback" not in result.stderr and not out.exists(), bad
