"""The replication harness is a plugin of its own: the taylorformer-replication distribution
(plugins/replication) registers the rows and the ``replicate`` command through the public
entry points, as a third party's plugin does, and the core installs none of it."""
import configparser
import importlib.util
from pathlib import Path

from taylorformer import cli, registry
from taylorformer.workflow import baselines
from taylorformer_replication import experiment, replication
from taylorformer_replication.papers import ROWS

ROOT = Path(__file__).resolve().parents[2]


def test_the_rows_and_the_command_come_from_the_replication_distribution():
    entries = registry.entries("experiment")
    assert {e.name for e in entries} == {row.id for row in ROWS} and len(ROWS) == len(entries)
    assert {(e.plugin, e.distribution) for e in entries} == {("replication", "taylorformer-replication")}
    parser = cli.build_parser()
    assert parser.plugin_failures == []
    assert parser.commands["replicate"].get_default("func").__module__ == "taylorformer_replication.command"
    assert parser.commands["replicate"].get_default("command_plugin") == (
        "plugin 'replication' (taylorformer-replication 0.1.0)")


def test_the_core_distribution_holds_no_replication_code_or_data():
    for name in ("taylorformer.replication", "taylorformer.experiment", "taylorformer.plugins.taylorformer.experiments",
                 "taylorformer.plugins.te_tnp.experiments", "taylorformer.plugins.bsa_tnp.experiments"):
        assert importlib.util.find_spec(name) is None, name
    core = configparser.ConfigParser()
    core.read(ROOT / "setup.cfg")
    assert "replication" not in core.get("options", "packages") and not core.has_section("options.package_data")
    plugin = configparser.ConfigParser()
    plugin.read(ROOT / "plugins" / "replication" / "setup.cfg")
    assert plugin.get("options.entry_points", "taylorformer").split() == ["replication", "=",
                                                                          "taylorformer_replication.papers"]
    assert plugin.get("options.entry_points", registry.COMMANDS_GROUP).split() == [
        "replication", "=", "taylorformer_replication.command"]
    for path in (replication.RECORDED_RESULTS, replication.RECORDED_BASELINES):
        assert Path(path).parent == Path(replication.__file__).parent and Path(path).is_file()


def test_the_baselines_a_row_names_are_the_cores():
    """The records keep the baseline names without importing the core's NumPy baselines."""
    assert set(experiment.BASELINE_NAMES) == set(baselines.BASELINES)
    assert set(experiment.CEILINGS) <= set(baselines.BASELINES)
