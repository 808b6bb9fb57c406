"""A job file's value for an option with choices (engine, compute_type, language_mode, task, diarizer) skips
click's Choice: the one check of the merged settings (validate.py) refuses one outside the option row's choices,
naming the flag, the job-file key, the value given and the allowed ones, before anything is loaded or created.
In process (no model, no CLI launch): the fast tier."""

from __future__ import annotations

import click
import pytest

from pipeline.cli.settings import check, merge_settings
from pipeline.cli.validate import problems
from pipeline.facts.runtime import COMPUTE_TYPES
from pipeline.job.options import OPTIONS


def test_every_option_with_choices_refuses_a_value_outside_them():
    rows = [o for o in OPTIONS if o.choices]
    assert {"engine", "compute_type"} <= {o.key for o in rows}
    for option in rows:
        assert all(problems({option.key: value}) == [] for value in option.choices), option.key
        found = problems({option.key: "bogus"})
        flag = "--" + option.key.replace("_", "-")
        assert len(found) == 1, (option.key, found)
        assert flag in found[0] and f"job file: {option.key}" in found[0] and "'bogus'" in found[0], found
        assert ", ".join(option.choices) in found[0], found


def test_a_job_files_engine_or_compute_type_is_a_usage_error_naming_the_value_and_the_choices(tmp_path):
    check(tmp_path / "out", merge_settings({}, {"engine": "ray", "compute_type": "int8"}))
    with pytest.raises(click.UsageError) as error:
        check(tmp_path / "out", merge_settings({}, {"engine": "slurm"}))
    assert "'slurm'" in str(error.value) and "local, ray" in str(error.value)
    with pytest.raises(click.UsageError) as error:
        check(tmp_path / "out", merge_settings({}, {"compute_type": "int4"}))
    assert "'int4'" in str(error.value) and ", ".join(COMPUTE_TYPES) in str(error.value)
    assert not (tmp_path / "out").exists()
