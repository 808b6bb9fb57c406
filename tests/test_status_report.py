"""`podscribe status` on what is not a job, while the first file is half done, per episode and as JSON."""

from __future__ import annotations

import json
import os
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from click.testing import CliRunner

from helpers import write_wav
from pipeline.audio.media import probe
from pipeline.cli import main
from pipeline.storage.identity import identify
from pipeline.storage.probes import ProbeCache
from pipeline.storage.tables import PARTIAL_SCHEMA


def test_a_folder_that_is_not_a_job_is_an_error_that_names_the_jobs_in_it(tmp_path):
    empty = CliRunner().invoke(main, ["status", str(tmp_path)])
    assert empty.exit_code == 2 and "is not a podscribe job" in empty.output
    assert "`transcribe --out DIR` makes one" in empty.output and "-o DIR` makes" not in empty.output  # -o: below it
    job = tmp_path / "podscribe-manifests" / "tiny.en-en-12345678"  # what `-o DIR` makes
    job.mkdir(parents=True)
    (job / "job.json").write_text(json.dumps({"config": {}, "inputs": []}))
    result = CliRunner().invoke(main, ["status", str(tmp_path)])
    assert result.exit_code == 2 and str(job) in result.output, result.output
    assert CliRunner().invoke(main, ["status", str(job)]).exit_code == 0


def test_a_long_file_half_done_has_an_eta_and_a_line_of_its_own(tmp_path):
    episode = write_wav(tmp_path / "episode.wav", np.zeros(120 * 16000, np.float32))
    root = tmp_path / "job"
    root.mkdir()
    (root / "job.json").write_text(json.dumps({"config": {}, "inputs": [str(episode)]}))
    file_id = identify(episode)[0].file_id
    probes = ProbeCache(root)  # what the run that claimed it learnt (status itself never probes)
    probes.put(file_id, probe(episode))
    probes.save()
    claims = root / "claims" / f"{file_id}.json"
    claims.parent.mkdir()
    claims.write_text('{"attempts": 1}')
    claimed = time.time() - 30
    os.utime(claims, (claimed, claimed))  # claimed 30 s ago, 60 s of audio saved since
    batch = root / "partial" / file_id / "batch-000000.parquet"
    batch.parent.mkdir(parents=True)
    rows = [{"file_id": file_id, "piece": i, "n_samples": 30 * 16000} for i in range(2)]
    pq.write_table(pa.Table.from_pylist(rows, schema=PARTIAL_SCHEMA), batch)
    os.utime(batch, (claimed + 30, claimed + 30))

    text = CliRunner().invoke(main, ["status", str(root), "--files"])
    assert text.exit_code == 0, text.output
    assert "ETA unknown" not in text.output and "ETA 0:01:00 with 1 worker" in text.output, text.output
    assert "half done" in text.output and str(episode) in text.output
    doc = json.loads(CliRunner().invoke(main, ["status", str(root), "--json", "--files"]).output)
    assert doc["pending"] == 1 and abs(doc["eta_s"] - 60) < 1 and abs(doc["partial_rate"] - 2.0) < 0.05
    assert [(f["path"], f["status"]) for f in doc["files"]] == [(str(episode), "half done")]


def test_datasets_loads_a_job_dir_with_its_lock_files(tmp_path, monkeypatch):
    import datasets

    from pipeline.storage.manifest import JobDir, write_table
    from pipeline.storage.tables import FILES_SCHEMA, SEGMENTS_SCHEMA

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf"))
    job = JobDir(tmp_path / "job")
    job.write_job({}, [])
    write_table(job.table_path("files", "f1"), [{"file_id": "f1", "path": "/a.mp3", "status": "done"}], FILES_SCHEMA)
    rows = [{"file_id": "f1", "path": "/a.mp3", "segment": i, "text": f"t{i}"} for i in range(3)]
    write_table(job.table_path("segments", "f1"), rows, SEGMENTS_SCHEMA)
    for held in ("claims/f1.lock", "workers/host-1.lock", ".lock"):  # what workers leave while they run
        (job.root / held).parent.mkdir(parents=True, exist_ok=True)
        (job.root / held).touch()
    (job.root / "claims" / "f1.json").write_text('{"attempts": 1}')
    segments = datasets.load_dataset(str(job.root), split="train")
    assert segments.num_rows == 3 and segments[0]["text"] == "t0"
    assert datasets.load_dataset(str(job.root), "files", split="train")[0]["status"] == "done"
