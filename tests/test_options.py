"""The option table (pipeline/options.py) is the one place an option is declared: every owner field is in it or
named internal with a reason, every job-file key is documented, every flag reaches --help, and what it generates
for resumed jobs (SPEED_ONLY, ADDED, whisper-mode job names) stays what job dirs made earlier were keyed by."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from pipeline.options import ADDED, INTERNAL, OPTIONS, OWNERS, SPEED_ONLY, owner_class, reference

REPO = Path(__file__).resolve().parents[1]


def test_every_field_of_an_option_dataclass_is_an_option_or_internal_with_a_reason():
    owned = {o.owner for o in OPTIONS if o.owner}
    fields = {f"{section}.{f.name}" for section in OWNERS for f in dataclasses.fields(owner_class(section))}
    assert sorted(fields - owned - set(INTERNAL)) == [], "fields in neither the table nor INTERNAL"
    assert sorted((owned | set(INTERNAL)) - fields) == [], "rows or INTERNAL entries naming no field"
    assert sorted(owned & set(INTERNAL)) == [], "a field both an option's and internal"
    assert all(len(i.why) > 10 for i in INTERNAL.values())
    assert len({o.key for o in OPTIONS}) == len(OPTIONS)


def test_every_job_file_key_is_in_the_example_job_file_and_the_options_page():
    example = (REPO / "jobs" / "example.toml").read_text()
    page = (REPO / "docs" / "options.md").read_text()
    keys = [o.key for o in OPTIONS if o.job_file]
    assert [k for k in keys if f"{k} =" not in example] == [], "missing from jobs/example.toml"
    assert [line for line in reference().splitlines() if line not in page] == [], (
        "docs/options.md's table is not the table's: python -m pipeline.options"
    )
    assert "docs/options.md" in (REPO / "README.md").read_text()


def test_help_lists_every_flag_and_run_takes_every_job_flag():
    from pipeline.cli import main

    for command, rows in (
        ("transcribe", [o for o in OPTIONS if o.flags]),
        ("run", [o for o in OPTIONS if o.flags]),
        ("export", [o for o in OPTIONS if (o.owner or "").startswith("cues.")]),
    ):
        text = CliRunner().invoke(main, [command, "--help"], terminal_width=200).output
        listed = {flag for o in rows for name in o.flags for flag in name.split("/")}
        assert len(listed) > 8 and [f for f in listed if f not in text] == [], command


def test_transcribe_shows_the_owner_dataclasses_defaults_and_run_leaves_them_to_the_job_file():
    from pipeline.cli import main

    transcribe = {p.name: p for p in main.commands["transcribe"].params}
    run = {p.name: p for p in main.commands["run"].params}
    assert transcribe["batch_size"].default == 4 and transcribe["min_piece"].default == 15.0
    assert transcribe["min_speakers"].default == 1 and transcribe["max_attempts"].default == 3
    assert [o.key for o in OPTIONS if o.flags and o.kind != "flag" and run[o.key].default is not None] == []


def test_what_resumed_job_dirs_depend_on_is_unchanged():
    """Job dirs made earlier are checked against these: a change here breaks their resume."""
    from pipeline import jobfile
    from pipeline.cli.settings import merge_settings, whisper_job_name
    from pipeline.job.config import LABELS

    assert SPEED_ONLY == ("models.assistant", "decode.batch_size", "threads")
    assert ADDED == {
        "decode.coverage": False,
        "decode.coverage_gap_s": 1.0,
        "decode.fallback_beams": 0,
        "cut.at_pauses": False,
    }
    assert LABELS == "diarize" and all(o.owner.startswith(LABELS + ".") for o in OPTIONS if o.changes_labels)
    assert jobfile.KEYS["speaker_names"] == (list, dict) and jobfile.KEYS["languages"] is list
    assert jobfile.KEYS["cache_dir"] is str and "quiet" not in jobfile.KEYS and len(jobfile.KEYS) == 46
    # whisper mode (transcribe without --out) keys its job dir by what decides the transcript
    assert whisper_job_name(merge_settings({})) == "default-auto-36b0c099"
    german = {"model": "base", "language": "German", "diarize": True, "num_speakers": 2, "batch_size": 8}
    assert whisper_job_name(merge_settings(german)) == "base-de-e945c8fc"
    flags = {"model": "tiny.en", "hotwords": "x", "coverage": False, "min_piece": 20.0, "word_timestamps": True}
    assert whisper_job_name(merge_settings(flags)) == "tiny.en-auto-2b6a0e3a"
    speed = {"subtitles": "srt", "languages": "en,nl", "compute_type": "int8", "threads": 2, "assistant": "none"}
    assert whisper_job_name(merge_settings(speed)) == "default-auto-19592656"


def test_the_option_table_job_files_and_checks_load_neither_torch_nor_transformers():
    probe = (
        "import sys, pipeline.options, pipeline.jobfile, pipeline.validate; "
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert result.stdout.strip() == "[]", result.stderr
