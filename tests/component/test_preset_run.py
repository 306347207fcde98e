"""A run started with ``preset=NAME``: the preset fills what was not given, and ``config.json`` and
``summary.json`` name the preset and its source."""

import json

import gorila
from gorila.agents.presets import PRESETS


def test_a_preset_run_names_its_preset_and_source_and_keeps_the_flags_given(tmp_path):
    summary = gorila.train(preset="lunarlander-a2c", runtime="local", workers=1, total_steps=64,
                           stop_at_target=False, eval_episodes=1, eval_every_s=600, run_dir=tmp_path)
    assert summary["algo"] == "a3c"  # the preset's algorithm, none being given
    assert summary["preset"] == "lunarlander-a2c" and summary["preset_source"] == PRESETS["lunarlander-a2c"].source
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["run"]["preset"] == "lunarlander-a2c" and config["run"]["mode"] == "sync"
    assert config["a3c"]["unroll_length"] == 16 and config["a3c"]["workers"] == 1  # preset's, and the one given
    assert config["a3c"]["env"] == "LunarLander-v3"
