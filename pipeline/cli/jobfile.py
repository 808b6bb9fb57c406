"""Job definitions: TOML files in jobs/ (see jobs/example.toml for every key).

Settings come from three layers, later ones winning: built-in defaults, the
job file, command-line flags. Relative paths are taken from the directory
podscribe is run in, as on the command line.
"""

from __future__ import annotations

from pathlib import Path

from ..facts.errors import UsageProblem
from ..job.options import JOB_FILE_KEYS
from ..outputs.speaker_names import EXAMPLE, ShapeError
from ..outputs.speaker_names import parse as parse_speaker_names

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, packaged
    import tomli as tomllib

KEYS = JOB_FILE_KEYS  # each key and its TOML type, from the option table (options.py)


RENAMED = {"dtype": "compute_type"}  # older key -> its name now (job files written for older versions still load)


class JobFileError(UsageProblem):
    """A job file that cannot be read or names unknown keys."""


def load(path: Path) -> dict:
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError as exc:
        raise JobFileError(
            f"cannot read job file {path}: it is not UTF-8 (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
            "TOML files are UTF-8: save it as UTF-8"
        ) from exc
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise JobFileError(f"cannot read job file {path}: {exc}") from exc
    for old, new in RENAMED.items():
        if old in data:
            if new in data:
                raise JobFileError(f"{path}: {old} is the older name of {new}: give one of them")
            data[new] = data.pop(old)
    unknown = sorted(set(data) - set(KEYS))
    if unknown:
        raise JobFileError(f"{path}: unknown keys {', '.join(unknown)} (known: {', '.join(sorted(KEYS))})")
    for key, value in data.items():
        expected = KEYS[key]
        if key == "speaker_names":
            # A job key written after a [speaker_names] header is a show of that table to TOML: `subtitles =
            # ["srt"]` there named a show "subtitles" and the job ran without subtitles. No show is named so.
            swallowed = sorted(set(value) & set(KEYS)) if isinstance(value, dict) else []
            hint = (
                f"{', '.join(swallowed)} went into it: a [speaker_names] table takes every key after it; "
                "put it at the end of the file"
            )
            try:
                if not isinstance(value, (list, dict)):  # a string is the command line's form
                    raise ShapeError(f"speaker_names must be a list of names or a table of lists per show; {EXAMPLE}")
                parse_speaker_names(value)
            except ShapeError as exc:
                raise JobFileError(f"{path}: {exc}{f' ({hint})' if swallowed else ''}") from exc
            if swallowed:
                raise JobFileError(f"{path}: [speaker_names] has a show named {swallowed[0]}: {hint}")
            continue
        if expected is float and isinstance(value, int):
            value = data[key] = float(value)
        if not isinstance(value, expected) or (expected is int and isinstance(value, bool)):
            raise JobFileError(f"{path}: {key} must be a {expected.__name__}, not {type(value).__name__}")
        if expected is list and not all(isinstance(item, str) for item in value):
            raise JobFileError(
                f'{path}: {key} must be a list of strings, e.g. {key} = ["srt", "vtt"]'
                if key == "subtitles"
                else f"{path}: {key} must be a list of strings"
            )
    data.setdefault("name", path.stem)
    return data


def inputs_of(job: dict) -> list[str]:
    inputs = [str(x) for x in job.get("inputs", [])]
    if "input_list" in job:
        listing = Path(job["input_list"])
        try:  # a line is a path's bytes, whatever their encoding: a Latin-1 name names its file (as os.fsdecode)
            lines = listing.read_bytes().decode("utf-8", "surrogateescape").splitlines()
        except OSError as exc:
            raise JobFileError(f"cannot read input_list {listing}: {exc}") from exc
        inputs += [line.strip() for line in lines if line.strip() and not line.lstrip().startswith("#")]
    if not inputs:
        raise JobFileError("the job names no inputs (inputs = [...] or input_list = 'paths.txt')")
    return inputs


def out_dir_of(job: dict) -> Path:
    return Path(job.get("out") or Path("manifests") / job["name"])
