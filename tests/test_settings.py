"""What a command line or job file asks for, as the job gets it: whisper's spellings, format lists, job-file shapes
(the CLI's real parsing and checks; the job itself is not run: ``asked`` catches the options it would start with)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.cli.group import whisper_booleans
from pipeline.job import engines


class _Started(Exception):
    pass


def asked(monkeypatch, *args: str, cwd: Path | None = None):
    """(exit code, output, the JobOptions a job would start with, or None when the CLI refused first)."""
    seen = []

    def caught(inputs, options, *_rest):
        seen.append((inputs, options))
        raise _Started

    monkeypatch.setattr(engines, "run_processes", caught)
    if cwd is not None:
        monkeypatch.chdir(cwd)
    result = CliRunner().invoke(main, list(args))
    if seen:
        assert isinstance(result.exception, _Started), result.output
        return 0, result.output, seen[0]
    return result.exit_code, result.output, None


def test_all_among_other_formats_keeps_them_and_an_unknown_one_is_refused(monkeypatch, tmp_path):
    code, _, (_, options) = asked(monkeypatch, "transcribe", "x.wav", "-f", "all,podcast", "-o", str(tmp_path))
    assert options.subtitles == ["txt", "vtt", "srt", "tsv", "json", "podcast"]
    code, output, started = asked(monkeypatch, "transcribe", "x.wav", "-f", "all,docx", "-o", str(tmp_path))
    assert code == 2 and started is None and "docx" in output, output


def test_whisper_true_false_values_of_switches(monkeypatch, tmp_path):
    """``--word_timestamps False`` (whisper's syntax) turned word timestamps on and took False as an input."""
    assert whisper_booleans(["--word_timestamps", "False", "a.mp3"]) == ["--no-word-timestamps", "a.mp3"]
    assert whisper_booleans(["--vad=true", "--", "--vad", "False"]) == ["--vad", "--", "--vad", "False"]
    for value, on in (("False", False), ("True", True), ("false", False)):
        _, _, (inputs, options) = asked(
            monkeypatch, "transcribe", "--out", str(tmp_path / "j"), "--word_timestamps", value, "x.wav"
        )
        assert inputs == ["x.wav"] and options.decode.word_timestamps is on, (value, inputs)
    code, output, _ = asked(monkeypatch, "transcribe", "--word_timestamps=maybe", "x.wav")
    assert code == 2 and "takes True or False" in output


@pytest.fixture
def job_file(tmp_path):
    def write(text: str) -> Path:
        path = tmp_path / "job.toml"
        path.write_bytes(text.encode("latin-1") if "\xe9" in text else text.encode())
        return path

    return write


def test_a_job_file_not_in_utf8_is_named_and_an_input_list_in_latin1_names_its_files(monkeypatch, job_file, tmp_path):
    """A Latin-1 job file or input list was a UnicodeDecodeError traceback. TOML is UTF-8: the file is refused by
    name (exit 2); an input list's lines are paths, whose bytes name files in any encoding."""
    code, output, started = asked(monkeypatch, "run", str(job_file('inputs = ["caf\xe9.mp3"]\n')))
    assert code == 2 and started is None and "not UTF-8" in output and "Traceback" not in output, output
    name = b"caf\xe9.wav"  # a Latin-1 file name, as an old archive has them
    (tmp_path / "lists").mkdir()
    (tmp_path / "lists" / "in.txt").write_bytes(b"# episodes\n" + name + b"\n")
    job = job_file(f'input_list = "{tmp_path / "lists" / "in.txt"}"\nout = "{tmp_path / "j"}"\n')
    _, _, (inputs, _) = asked(monkeypatch, "run", str(job))
    assert [os.fsencode(x) for x in inputs] == [name]
    # The tables keep paths as UTF-8: such a file fails by name (a clear error in its row), never a traceback after
    # decoding it; from a list and from a folder alike.
    from pipeline.job.inputs import expand_inputs

    (tmp_path / "lists" / os.fsdecode(name)).write_bytes(b"RIFF")
    for given in (inputs, [str(tmp_path / "lists")]):
        (ref,) = expand_inputs(given)
        assert "not UTF-8" in ref.error and str(ref.path).encode("utf-8").endswith(b"caf\\xe9.wav"), ref
