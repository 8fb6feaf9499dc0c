"""`tapefit.runner.run`: one run's phases, each check done once."""

import collections

import tapefit
import tapefit.config.targets
import tapefit.runner.data_from_config
import tapefit.runner.preparation
import tapefit.training.export.serving


def counted(monkeypatch, calls, module, name, label=lambda args: ""):
    """Replace `module.name` by a wrapper that counts its calls in `calls[(name, label)]`."""
    original = getattr(module, name)

    def wrapper(*args, **kwargs):
        calls[(name, label(args))] += 1
        return original(*args, **kwargs)

    monkeypatch.setattr(module, name, wrapper)


def test_a_run_checks_its_data_node_and_its_export_formats_once(tmp_path, monkeypatch):
    """`check_config` checks the data node against the loader's signature and the model is
    checked against the export formats before training: loading the data and writing the
    export reuse those checks instead of running them again."""
    calls = collections.Counter()
    key = lambda args: args[1]  # noqa: E731 - checked_target(node, key, ...)
    counted(monkeypatch, calls, tapefit.runner.data_from_config, "checked_target", key)
    counted(monkeypatch, calls, tapefit.config.targets, "checked_target", key)
    counted(monkeypatch, calls, tapefit.runner.preparation, "check_exportable")
    counted(monkeypatch, calls, tapefit.training.export.serving, "check_exportable")
    cfg = tapefit.compose(
        [
            "model.architecture=mlp",
            "data.train_limit=64",
            "trainer.epochs=1",
            "trainer.verbose=0",
            "trainer.export=true",
        ]
    )
    metrics = tapefit.run(cfg, tmp_path / "run")
    assert metrics["export"] == "export"
    assert (tmp_path / "run" / "export" / "saved_model.pb").is_file()
    assert calls[("checked_target", "data")] == 1
    assert calls[("check_exportable", "")] == 1
