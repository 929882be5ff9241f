"""scripts/train_pretrained.py, the way the bundled models are made: a GPU recipe run on the
CPU with a tiny network, its steps fitted to a time budget, bundled with other sampling steps
and float16 parameters, then the README's table and the time-to-accuracy plot."""

from __future__ import annotations

import json

import pytest
import torch

import torchik
from tests.paths import REPO

SCRIPTS = REPO / "scripts"
TINY_FM = {
    "width": 16, "blocks": 1, "embedding": 8, "activation": "silu", "space": "features",
    "steps": 2, "solver": "midpoint", "time_power": 3.0,
}  # fmt: skip


@pytest.fixture
def script(monkeypatch):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import train_pretrained

    return train_pretrained


def test_fit_bundle_table_and_curves(script, tmp_path):
    threads = torch.get_num_threads()
    run, bundled = tmp_path / "run", tmp_path / "bundled"
    flags = ["--device", "cpu", "--batch-size", "64", "--config", json.dumps(TINY_FM)]
    train = ["--fit-minutes", "0.08", "--train", '{"val_every": 20, "warmup_steps": 5}']
    try:
        script.main(["ur5", "--gpu", *flags, *train, "--threads", "1", "--iknet-table",
                     "--out", str(run)])  # fmt: skip
        entry = json.loads((run / "accuracy.json").read_text())["ur5"]
        row = entry["iknet_table"]  # the Neural IK protocol's row: 1000 targets x 100
        assert 0 < row["mean_cm"] < 200 and 0 <= row["acc_2cm"] <= row["acc_10cm"] <= 1
        assert entry["recipe"]["steps"] >= 100 and entry["recipe"]["device"] == "cpu"
        assert entry["train_seconds"] < 20 and len(entry["curve"]) >= 2
        script.main(["ur5", "--gpu", "--bundle-run", str(run), "--sample-steps", "4", "--half",
                     "--out", str(bundled)])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    model = torchik.models.load(bundled / "ur5.pt")
    assert model.config.steps == 4 and next(model.parameters()).dtype == torch.float32
    stored = torch.load(bundled / "ur5.pt", weights_only=True)["state_dict"]
    assert stored["net.head.1.weight"].dtype == torch.float16
    again = json.loads((bundled / "accuracy.json").read_text())["ur5"]
    assert again["sample_steps"] == 4 and again["accuracy_as_trained"] == entry["accuracy"]
    assert again["recipe"] == entry["recipe"] and again["stored"] == "float16 parameters"

    import pretrained_report

    table = pretrained_report.markdown_table(bundled)
    assert "| `ur5` | position | fm | fresh FK pairs" in table and "on 1 torch thread(s)" in table
    pytest.importorskip("matplotlib")
    png = pretrained_report.plot_curves(bundled, tmp_path / "curves.png")
    assert png.stat().st_size > 10_000


def test_gpu_recipes_only_for_the_arms(script, capsys):
    with pytest.raises(SystemExit):
        script.main(["snake2", "--gpu"])
    assert "--gpu has recipes for panda, panda_position, ur5, digit_arm only" in (
        capsys.readouterr().err
    )


def test_iknet_report_of_a_bundled_model(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import pretrained_report

    threads = torch.get_num_threads()
    try:
        md = pretrained_report.iknet_report(["snake2"], tmp_path, threads=1, samples=2)
    finally:
        torch.set_num_threads(threads)
    assert "| `snake2` | snake2 | mdn |" in md.read_text()
    assert "snake2" in (tmp_path / "pretrained_iknet.json").read_text()


def test_init_continues_a_model_and_records_it(script, tmp_path):
    threads = torch.get_num_threads()
    first, more = tmp_path / "first", tmp_path / "more"
    flags = ["--gpu", "--device", "cpu", "--batch-size", "32", "--config", json.dumps(TINY_FM)]
    train = ["--train", '{"val_every": 0, "warmup_steps": 1}', "--threads", "1"]
    try:
        script.main(["ur5", *flags, *train, "--steps", "30", "--out", str(first)])
        init = first / "ur5.pt"  # a learning rate of ~0 keeps the weights it starts from
        script.main(["ur5", *flags, *train, "--steps", "3", "--lr", "1e-12", "--init",
                     str(init), "--out", str(more)])  # fmt: skip
    finally:
        torch.set_num_threads(threads)
    before = torchik.models.load(init).state_dict()
    after = torchik.models.load(more / "ur5.pt").state_dict()
    assert before.keys() == after.keys()
    for key in before:
        torch.testing.assert_close(after[key], before[key], rtol=1e-5, atol=1e-6)
    entry = json.loads((more / "accuracy.json").read_text())["ur5"]
    assert entry["recipe"]["init"] == str(init)
    assert entry["continued_from"]["file"] == "ur5.pt"
    assert entry["continued_from"]["steps"] == 30 and "accuracy" in entry["continued_from"]
    import pretrained_report  # the table sums the chunks: 30 + 3 steps

    assert "33 steps x 32" in pretrained_report.markdown_table(more)
    assert "in 2 chunks on 1 torch thread(s)" in pretrained_report.markdown_table(more)


def test_ablation_report_of_a_gpu_run(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import pretrained_report

    run = tmp_path / "run"
    (run / "b").mkdir(parents=True)
    (run / "a").mkdir()
    (run / "machine.txt").write_text("Thu Nov 26\nname, memory\nNVIDIA H100, 80 GB\ntorch 2.11\n")
    (run / "command.txt").write_text("FIT=7 OUT=$OUT bash scripts/gpu_pretrained.sh x.runs\n")
    recipe = {"config": {}, "stream": True, "train_pairs": 0, "batch_size": 1024, "steps": 10}
    for label, mean in (("a", 9.0), ("b", 7.0)):
        row = {"mean_cm": mean, "median_cm": 5.0, "acc_10cm": 0.7, "acc_2cm": 0.05,
               "best10_cm": 2.0, "best100_cm": 1.0, "diversity": 4.8}  # fmt: skip
        entry = {"recipe": recipe, "train_seconds": 380.0, "parameters": 123,
                 "curve": [[100.0, 5, 130.0], [380.0, 10, 80.0]], "iknet_table": row}  # fmt: skip
        (run / label / "accuracy.json").write_text(json.dumps({"panda_position": entry}))
    text = pretrained_report.ablation_report(run, tmp_path / "out").read_text()
    assert "| gpu | NVIDIA H100, 80 GB |" in text and "| torch | 2.11 |" in text
    assert "| command | `FIT=7 OUT=$OUT bash scripts/gpu_pretrained.sh x.runs` |" in text
    assert "load_average" not in text  # measured on the GPU machine, written here
    assert text.index("| b |") < text.index("| a |")  # best mean first
    assert "| b | {} | stream | 1024 | 10 | 380 | 123 | 7.00 | 5.00 | 70.0% | 5.0% |" in text
    assert "| 130 @ 5, 80 @ 10 | ok |" in text


def test_prefix_report_of_a_checkpoint(monkeypatch, tmp_path):
    monkeypatch.syspath_prepend(str(SCRIPTS))
    import pretrained_report

    from torchik.models import IKNet

    spec = torchik.learn.ProblemSpec.from_robot(torchik.load_robot("snake4"))
    torch.manual_seed(0)
    IKNet(spec, IKNet.tiny_config()).save(tmp_path / "tiny.pt")
    md = pretrained_report.prefix_report(tmp_path, checkpoint=tmp_path / "tiny.pt", targets=3,
                                         samples=2)  # fmt: skip
    text = md.read_text()
    assert "Model: `tiny.pt` (IKNet), loaded." in text and "snake4, 3 test targets x 2" in text
    assert "| first 0 joints kept | 100.0% |" in text and "| first 4 joints kept |" in text
