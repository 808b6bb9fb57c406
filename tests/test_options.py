"""The option table (pipeline/job/options.py) is the one place an option is declared: every owner field is in it or
named internal with a reason, every job-file key is documented, every flag reaches --help, and what it generates
for resumed jobs (SPEED_ONLY, ADDED, whisper-mode job names) stays what job dirs made earlier were keyed by."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.job.options import ADDED, INTERNAL, OPTIONS, OWNERS, SPEED_ONLY, owner_class, reference

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
        "docs/options.md's table is not the table's: python -m pipeline.job.options"
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
    assert transcribe["batch_size"].default is None and transcribe["min_piece"].default == 15.0  # None: by the model
    assert transcribe["min_speakers"].default == 1 and transcribe["max_attempts"].default == 3
    assert [o.key for o in OPTIONS if o.flags and o.kind != "flag" and run[o.key].default is not None] == []


def test_what_resumed_job_dirs_depend_on_is_unchanged():
    """Job dirs made earlier are checked against these: a change here breaks their resume."""
    from pipeline.cli import jobfile
    from pipeline.cli.settings import merge_settings, whisper_job_name
    from pipeline.job.config import LABELS

    assert SPEED_ONLY == ("models.assistant", "decode.batch_size", "threads")
    assert ADDED == {
        "decode.coverage": False,
        "decode.coverage_gap_s": 1.0,
        "decode.fallback_beams": 0,
        "cut.at_pauses": False,
        "cut.prefer_s": 15.0,
    }
    assert LABELS == "diarize" and all(o.owner.startswith(LABELS + ".") for o in OPTIONS if o.changes_labels)
    assert jobfile.KEYS["speaker_names"] == (list, dict) and jobfile.KEYS["languages"] is list
    assert jobfile.KEYS["cache_dir"] is str and "quiet" not in jobfile.KEYS and len(jobfile.KEYS) == 48

    # whisper mode (transcribe without --out) keyed its job dir by what decides the transcript as it was spelled;
    # a folder of that name is still found (cli.jobs.whisper_job_dir)
    def spelled(flags: dict) -> str:
        return whisper_job_name(merge_settings(flags), resolved=False)

    # (those versions cut as --prefer-piece 15 does: a folder they made is found with it, not with the new default)
    before = {"prefer_piece": 15.0}
    assert spelled(before) == "default-auto-36b0c099" and spelled({}) != spelled(before)
    german = {"model": "base", "language": "German", "diarize": True, "num_speakers": 2, "batch_size": 8, **before}
    assert spelled(german) == "base-de-e945c8fc"
    flags = {"model": "tiny.en", "hotwords": "x", "coverage": False, "min_piece": 20.0, "word_timestamps": True}
    assert spelled({**flags, **before}) == "tiny.en-auto-2b6a0e3a"
    speed = {"subtitles": "srt", "languages": "en,nl", "compute_type": "int8", "threads": 2, "assistant": "none"}
    assert spelled({**speed, **before}) == "default-auto-19592656"


def test_whisper_mode_keys_its_job_by_the_configuration_as_resolved_not_as_spelled():
    """`-f all -o subs/` and the same with `--model base` made two jobs of one configuration (the default model,
    `auto`, whisper's short names are resolved first)."""
    from pipeline.cli.settings import merge_settings, whisper_job_name
    from pipeline.facts.runtime import auto_compute_type

    def name(**flags) -> str:
        return whisper_job_name(merge_settings({"device": "cpu", **flags}))

    assert (
        name()
        == name(model="base")
        == name(compute_type=auto_compute_type("cpu"))
        == name(model="base", language="auto")
    )
    assert name(model="large") == name(model="large-v3") != name()
    assert name().startswith("base-auto-") and name(language="nl") != name() != name(compute_type="float32")


def test_the_option_table_job_files_and_checks_load_neither_torch_nor_transformers():
    probe = (
        "import sys, pipeline.job.options, pipeline.cli.jobfile, pipeline.cli.validate; "
        "print(sorted({'torch', 'transformers'} & set(sys.modules)))"
    )
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert result.stdout.strip() == "[]", result.stderr


@pytest.mark.parametrize(
    ("given", "torch_reads"),
    [
        ({}, {"GOMP_SPINCOUNT": "1000"}),  # podscribe's: runtime.OPENMP_WAIT
        ({"GOMP_SPINCOUNT": "50"}, {"GOMP_SPINCOUNT": "50"}),  # the user's stands
        ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": None}),  # a policy chosen: no count put beside it
    ],
)
def test_openmps_spin_count_is_in_the_environment_before_torch_loads_and_a_users_stands(given, torch_reads):
    """libgomp reads GOMP_SPINCOUNT once, when torch loads: importing the package (as the console script, the
    worker processes and ``-m pipeline.cli`` do) sets it before anything imports torch (decision 0041)."""
    probe = (
        "import os, sys, pipeline.cli; "
        "assert 'torch' not in sys.modules, 'torch loaded before the spin count was set'; "
        "import torch; print(os.environ.get('GOMP_SPINCOUNT'))"
    )
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    result = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO, env={**env, **given}
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(torch_reads["GOMP_SPINCOUNT"])


@pytest.mark.parametrize(
    ("code", "given", "warned"),
    [
        ("import torch, pipeline", {}, True),  # a library user's order: libgomp already read its spin
        ("import pipeline, torch", {}, False),
        ("import torch, pipeline", {"GOMP_SPINCOUNT": "1000"}, False),  # set before Python started: it took
    ],
)
def test_torch_imported_before_the_package_is_said_not_silent(code, given, warned):
    """Imported after torch, the package's OpenMP and MKL settings come too late (dev01 beside two busy loops: 72-101
    s instead of 38 s): a warning that says what to do, not a silently slower library."""
    env = {k: v for k, v in os.environ.items() if k not in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")}
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, env={**env, **given}
    )
    assert result.returncode == 0, result.stderr
    assert ("torch was imported before pipeline" in result.stderr) == warned, result.stderr
    if warned:
        assert "Import pipeline before torch" in result.stderr and "GOMP_SPINCOUNT=1000" in result.stderr


def test_a_log_file_gets_info_lines_and_the_terminal_keeps_showing_warnings_only(tmp_path):
    """`--log-file` raised podscribe's logger to INFO, and every INFO line reached the terminal too."""
    code = (
        "import logging, sys\n"
        "from pathlib import Path\n"
        "logging.basicConfig(level=logging.WARNING, format='%(levelname)s %(message)s')  # as the CLI's group does\n"
        "from pipeline.cli.jobs import _log_to\n"
        "_log_to(Path(sys.argv[1]))\n"
        "logging.getLogger('podscribe').info('an info line')\n"
        "logging.getLogger('podscribe').warning('a warning')\n"
    )
    log = tmp_path / "run.log"
    result = subprocess.run([sys.executable, "-c", code, str(log)], capture_output=True, text=True, check=True)
    assert "a warning" in result.stderr and "an info line" not in result.stderr, result.stderr
    assert "an info line" in log.read_text() and "a warning" in log.read_text()
