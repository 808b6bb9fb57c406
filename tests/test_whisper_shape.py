"""The JSON and TSV exports in openai-whisper's shape: what its own writers (whisper/utils.py: WriteTXT,
WriteVTT/WriteSRT through SubtitlesWriter.iterate_result, WriteTSV, WriteJSON) read from a result, written
here from its documented format (nothing of it vendored), run over podscribe's files."""

from __future__ import annotations

import json

from pipeline.outputs.cues import CueRules, build_cues
from pipeline.outputs.export import to_json, to_tsv

ROW = {"path": "/x/ep.mp3", "file_id": "f", "duration_s": 9.0, "language": "en"}


def rows(timed: bool = True, speakers: bool = False) -> list[dict]:
    def seg(i, start, end, text, words):
        return {
            "segment": i,
            "start_s": start,
            "end_s": end,
            "text": text,
            "piece": 0,
            "avg_logprob": -0.25,
            "no_speech_prob": 0.01,
            "language": "en",
            "flags": [],
            "words": [{"word": w, "start_s": a, "end_s": b, "probability": 0.9, "speaker": None} for w, a, b in words]
            if timed
            else None,
            "speaker": (f"Speaker {i % 2 + 1}" if speakers else None),
        }

    return [
        seg(0, 0.5, 2.5, "Welcome back.", [(" Welcome", 0.5, 1.2), (" back.", 1.2, 2.5)]),
        seg(
            1,
            3.0,
            5.25,
            "Thanks for having me.",
            [(" Thanks", 3.0, 3.5), (" for", 3.5, 3.8), (" having me.", 3.8, 5.25)],
        ),
    ]


def whisper_txt(result: dict) -> str:
    return "".join(segment["text"].strip() + "\n" for segment in result["segments"])


def whisper_tsv(result: dict) -> list[str]:
    return ["start\tend\ttext"] + [
        f"{round(1000 * segment['start'])}\t{round(1000 * segment['end'])}\t{segment['text'].strip()}"
        for segment in result["segments"]
    ]


def whisper_subtitles(result: dict) -> list[tuple[float, float, str]]:
    """SubtitlesWriter.iterate_result: words when the first segment has them, else segments."""
    if "words" in result["segments"][0]:
        return [(t["start"], t["end"], t["word"]) for segment in result["segments"] for t in segment["words"]]
    return [(segment["start"], segment["end"], segment["text"].strip()) for segment in result["segments"]]


def test_json_is_what_openai_whispers_writers_read():
    for timed in (True, False):
        segments = rows(timed)
        cues, got_timed = build_cues(segments, CueRules(), ROW["duration_s"])
        result = json.loads(to_json(ROW, segments, cues, got_timed))
        assert result["language"] == "en" and result["text"] == "Welcome back. Thanks for having me."
        assert whisper_txt(result) == "Welcome back.\nThanks for having me.\n"
        assert whisper_tsv(result)[1:] == ["500\t2500\tWelcome back.", "3000\t5250\tThanks for having me."]
        for segment in result["segments"]:
            assert {"id", "start", "end", "text", "tokens", "avg_logprob", "no_speech_prob"} <= set(segment)
            assert isinstance(segment["id"], int) and isinstance(segment["tokens"], list)
            assert isinstance(segment["avg_logprob"], float) and isinstance(segment["no_speech_prob"], float)
            assert "start_s" not in segment and segment["flags"] == [] and segment["language"] == "en"
        subtitles = whisper_subtitles(result)
        if timed:
            assert subtitles[0] == (0.5, 1.2, " Welcome") and len(subtitles) == 5
            assert set(result["segments"][0]["words"][0]) == {"word", "start", "end", "probability"}
        else:  # no word timings: no `words`, as openai-whisper without --word_timestamps
            assert subtitles == [(0.5, 2.5, "Welcome back."), (3.0, 5.25, "Thanks for having me.")]
        assert result["path"] == "/x/ep.mp3" and result["cues"]  # podscribe's own fields beside whisper's


def test_tsv_keeps_whispers_columns_first_and_speaker_after_text():
    plain = to_tsv(rows()).splitlines()
    assert plain == whisper_tsv({"segments": [{"start": 0.5, "end": 2.5, "text": "Welcome back."},
                                              {"start": 3.0, "end": 5.25, "text": "Thanks for having me."}]})  # fmt: skip
    labelled = [line.split("\t") for line in to_tsv(rows(speakers=True)).splitlines()]
    assert labelled[0] == ["start", "end", "text", "speaker"]
    assert labelled[1] == ["500", "2500", "Welcome back.", "Speaker 1"]
    segments = rows(speakers=True)
    cues, timed = build_cues(segments, CueRules(), 9.0)
    result = json.loads(to_json(ROW, segments, cues, timed))
    assert [s["speaker"] for s in result["segments"]] == ["Speaker 1", "Speaker 2"]
    assert whisper_txt(result) == "Welcome back.\nThanks for having me.\n"


def test_srt_speaker_labels_keep_the_line_rule_and_a_single_speaker_file_has_none():
    from pipeline.outputs.export import to_srt

    def seg(i, start, text, speaker):
        words, t = [], start
        for w in text.split():
            words.append({"word": " " + w, "start_s": round(t, 3), "end_s": round(t + 0.3, 3), "probability": 0.9})
            t += 0.35
        return {"segment": i, "start_s": start, "end_s": round(t, 3), "text": text, "words": words, "speaker": speaker}

    # each line fits 42 characters without the label, and not with it
    two = [
        seg(0, 0.0, "Absolutely wonderful conversations here", "Speaker 1"),  # one line of 39 characters
        seg(1, 6.0, "Thank you so much for having me today", "Speaker 2"),
        seg(2, 12.0, "Let us start with the obvious question", "Speaker 1"),
    ]
    rules = CueRules()
    cues, _ = build_cues(two, rules, 20.0)
    text = to_srt(cues)
    lines = [ln for ln in text.splitlines() if ln and not ln[0].isdigit()]
    assert max(map(len, lines)) <= rules.max_line_chars, text
    assert text.count("[Speaker 1]") == 2 and text.count("[Speaker 2]") == 1
    assert all("[Speaker" not in line for c in cues for line in c.lines)  # VTT and JSON cues: the words only
    one = [{**s, "speaker": "Speaker 1"} for s in two]
    cues, _ = build_cues(one, rules, 20.0)
    assert "[Speaker" not in to_srt(cues)
    # every block ends with a blank line, the last one too (what openai-whisper and the srt library write)
    import srt

    assert text.endswith("\n\n") and text == srt.compose(srt.parse(text), reindex=False, strict=False)


def test_help_lists_model_and_decoding_first_and_cue_layout_late():
    from click.testing import CliRunner

    from pipeline.cli import main

    for command in ("transcribe", "run"):
        text = CliRunner().invoke(main, [command, "--help"]).output
        sections = [line for line in text.splitlines() if line.endswith(":") and not line.startswith(" ")]
        assert sections[0] == "Model and decoding:" and "Cue layout (subtitles):" in sections, sections
        assert text.index("--model") < text.index("--output-format") < text.index("--max-line-chars")


def test_podcasting_transcript_json_and_paragraphs_per_speaker():
    from pipeline.outputs.export import to_podcast, to_txt

    doc = json.loads(to_podcast(rows(speakers=True)))
    assert doc["version"] == "1.0.0"
    assert doc["segments"][0] == {"speaker": "Speaker 1", "startTime": 0.5, "endTime": 2.5, "body": "Welcome back."}
    assert "speaker" not in json.loads(to_podcast(rows()))["segments"][0]
    turns = [*rows(speakers=True), {**rows(speakers=True)[1], "segment": 2, "text": "Really."}]
    assert to_txt(turns) == "Speaker 1: Welcome back.\n\nSpeaker 2: Thanks for having me. Really.\n"
    assert to_txt(rows()) == "Welcome back.\nThanks for having me.\n"  # whisper's: one segment a line


def test_the_podcast_format_is_written_as_name_podcast_json(tmp_path):
    from pipeline.outputs.export import write_outputs

    row = {**ROW, "paths": ["/x/ep.mp3"]}
    written = write_outputs(row, rows(), ["podcast", "txt"], tmp_path, CueRules(), {})
    assert sorted(p.name for p in written.paths) == ["ep.podcast.json", "ep.txt"]
    assert json.loads((tmp_path / "ep.podcast.json").read_text())["segments"][1]["body"] == "Thanks for having me."


def test_speaker_names_by_order_of_appearance(tmp_path):
    from pipeline.cli.settings import DEFAULTS, cue_rules
    from pipeline.outputs.export import write_outputs

    rules = cue_rules({**DEFAULTS, "speaker_names": "Lena, Walter"})
    assert rules.speaker_names == ("Lena", "Walter")
    row = {**ROW, "paths": ["/x/ep.mp3"]}
    write_outputs(row, rows(speakers=True), ["txt", "podcast", "vtt"], tmp_path, rules, {})
    assert (tmp_path / "ep.txt").read_text() == "Lena: Welcome back.\n\nWalter: Thanks for having me.\n"
    assert [s["speaker"] for s in json.loads((tmp_path / "ep.podcast.json").read_text())["segments"]] == [
        "Lena",
        "Walter",
    ]
    assert "<v Walter>" in (tmp_path / "ep.vtt").read_text()


def test_an_empty_speaker_name_keeps_that_speaker_s_number_and_the_names_after_it_in_place(tmp_path):
    """``--speaker-names ",Walter"``: the first speaker has no name given; dropping the empty one named Speaker 1
    Walter."""
    from pipeline.cli.settings import DEFAULTS, cue_rules
    from pipeline.outputs.export import write_outputs

    for given in (",Walter", " , Walter,", ["", "Walter"]):
        rules = cue_rules({**DEFAULTS, "speaker_names": given})
        assert rules.speaker_names == ("", "Walter"), given
        write_outputs({**ROW, "paths": ["/x/ep.mp3"]}, rows(speakers=True), ["txt"], tmp_path, rules, {})
        assert (tmp_path / "ep.txt").read_text() == "Speaker 1: Welcome back.\n\nWalter: Thanks for having me.\n"


def test_speaker_names_per_show_from_a_job_file_reach_each_show_s_files(tmp_path):
    """A job file's table of names per show (folder name or glob, first match wins, "*" for the rest): each
    input's files get its show's names, also through the outputs recorded in job.json (lists, not tuples)."""
    from pipeline.cli import jobfile
    from pipeline.cli.settings import cue_rules, merge_settings
    from pipeline.outputs import agreed
    from pipeline.outputs.export import write_outputs

    job_file = tmp_path / "archive.toml"
    job_file.write_text(
        'inputs = ["shows"]\nsubtitles = ["txt"]\n[speaker_names]\n'
        '"garden-hour" = ["Lena", "Walter"]\n"*/tech-*/*.mp3" = ["Ann", "Bo"]\n"*" = ["Host"]\n'
    )
    rules = cue_rules(merge_settings({}, jobfile.load(job_file)))
    recorded = CueRules(**agreed.spec(["txt"], tmp_path, rules)["cue_rules"])  # as a joining worker reads it
    paths = ["/a/garden-hour/2024/ep.mp3", "/a/tech-talk/ep.mp3", "/a/news/ep.mp3"]
    names = {paths[0]: "garden", paths[1]: "tech", paths[2]: "news"}
    for rule_set in (rules, recorded):
        write_outputs({**ROW, "paths": paths}, rows(speakers=True), ["txt"], tmp_path, rule_set, names)
        assert (tmp_path / "garden.txt").read_text() == "Lena: Welcome back.\n\nWalter: Thanks for having me.\n"
        assert (tmp_path / "tech.txt").read_text() == "Ann: Welcome back.\n\nBo: Thanks for having me.\n"
        assert (tmp_path / "news.txt").read_text() == "Host: Welcome back.\n\nSpeaker 2: Thanks for having me.\n"
