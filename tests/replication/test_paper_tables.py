"""Every number the papers' tables print is a row, and docs/replication.md quotes no number
that ``taylorformer replicate --list --json`` does not hold.

Each paper module's ``TABLES`` counts the numbers each table prints, as counted from the
paper's text; the values checked here are read from the papers' text (not from the row
definitions). A row that cannot run here is ``not implemented`` and says why; a row whose
model preset is missing from the registry reads so until a plugin registers it.
"""
import collections
import dataclasses
import json
import re
from pathlib import Path

import pytest

from taylorformer.cli import main
from taylorformer.errors import SpecError, UnknownComponentError
from taylorformer_replication import Row, replication
from taylorformer_replication.papers import bsa_tnp, taylorformer, te_tnp, te_tnp_thesis

ROOT = Path(__file__).resolve().parents[2]
#: paper (short name) -> its module and the numbers its tables print in all, as counted from
#: the text: Taylorformer 24 + 48 + 48 + 2 (Sec. 4.4); TE-TNP 14 + 7 + 15 + 66 + 7 + 4; the
#: thesis 16 + 2; BSA-TNP 20 + 10 + 20 + 15 + 15 + 15 + 9 + 23 + 16 + 1 (the abstract)
PAPERS = {"Taylorformer": (taylorformer, 122), "TE-TNP": (te_tnp, 113),
          "Unifying Transformers and ConvNPs": (te_tnp_thesis, 18), "BSA-TNP": (bsa_tnp, 144)}
#: a sample of numbers as the papers print them (signs restored where the text lost them):
#: row id -> (table, metric, value, +-)
PRINTED = {
    "anp-gp-periodic": ("Table 1", "loglik", -0.85, 0.05), "np-celeba": ("Table 1", "loglik", 2.30, 0.01),
    "informer-exchange-rate-336-mse": ("Table 2", "mse", 3.28, 1.4),
    "autoformer-electricity-720-nll": ("Table 4", "nll", 0.64, 0.09),
    "taylorformer-gp-eq-permutation-std-5": ("Sec. 4.4", "permutation-std", 0.038, None),
    "pt-tnp-m8-gp-shift-0.6": ("Table 5", "loglik", -0.73, 0.01),
    "convcnp-gp-shift-1": ("Table 5", "loglik", -0.46, 0.01), "rcnp-t-cifar10": ("Table 1", "loglik", 1.19, 0.02),
    "cnp-t-mnist": ("Table 1", "loglik", 0.64, 0.00), "pt-tnp-m64-kolmogorov": ("Table 2", "loglik", 0.63, 0.003),
    "te-pt-tnp-era5-n-europe": ("Table 3", "loglik", 1.44, 0.01),
    "te-tnp-train-hours": ("Table 6", "train-hours", 7.767, None),
    "te-pt-tnp-m32-no-input-adjustment-bimodal": ("Table 7", "loglik", -0.76, 0.01),
    "thesis-te-tnp-memory-nc5000-nt1000": ("Table 5.4.1", "memory-mb", 13480, None),
    "thesis-convcnp-gp2d-validation-loss": ("Table 6.3.1", "validation-loss", 1.168, None),
    "tnp-d-gp2d-shifted": ("Table 1", "nll", 21.32, 9.23), "convcnp-gp2d-scaled": ("Table 1", "nll", -0.24, 0.01),
    "te-pt-tnp-sir-scaled": ("Table 3", "nll", 0.38, 0.00), "bsa-tnp-era5-w-europe-nll": ("Table 4", "nll", -0.02, 0.06),
    "tnp-d-era5-n-europe-coverage-95": ("Table 5", "coverage-95", 0.66, 0.03),
    "te-pt-tnp-beijing-air-train-minutes": ("Table 6", "train-minutes", 22.70, 0.09),
    "tabpfn-generic-spatial-rmse": ("Table 8", "rmse", 1.50, 0.13),
    "nuts-mcmc-generic-spatial": ("Table 8", "nll", 1.53, 0.18),
    "te-pt-tnp-gp2d-cost-train-gflops": ("Table 10", "train-gflops", 310, None),
}
#: presets other plugins provide (Taylorformer Table 1's NP and ANP, the ConvCNP columns)
PLUGIN_PRESETS = ("np", "anp", "convcnp")


@pytest.fixture(scope="module")
def listed():
    return replication.list_rows(results=replication.RECORDED_RESULTS, baselines=replication.RECORDED_BASELINES)


def test_each_table_lists_as_many_rows_as_numbers_it_prints(listed):
    for paper, (module, total) in PAPERS.items():
        mine = [item for item in listed if item["paper"].split(" (")[0] == paper]
        assert sum(module.TABLES.values()) == total, paper
        assert collections.Counter(item["table"] for item in mine) == {
            table: n for table, n in module.TABLES.items() if n}, paper
        assert sorted(item["id"] for item in mine) == sorted(row.id for row in module.ROWS)
    assert len(listed) == sum(total for _, total in PAPERS.values())
    by_id = {item["id"]: item for item in listed}
    for row_id, (table, metric, value, error) in PRINTED.items():
        item = by_id[row_id]
        assert (item["table"], item["metric"], item["paper_value"], item["paper_error"]) == (
            table, metric, value, error), row_id


def test_every_row_that_cannot_run_says_why_and_every_other_has_a_protocol(listed):
    kinds = collections.Counter()
    for item in listed:
        row = replication.get_row(item["id"])
        if item["status_kind"] != "not implemented":
            assert None not in (row.training, row.evaluation, row.small) and not row.not_implemented
            assert "not_implemented" not in item  # the rows that run list exactly the fields they always had
            continue
        reason = item["status_reason"]
        assert len(reason) > 20 and reason.strip() == reason and "not implemented" not in reason, item["id"]
        if row.not_implemented:
            assert reason == row.not_implemented == item["not_implemented"]
        else:  # decided by the registry: the reason names what it lacks
            assert re.fullmatch(r"no (model preset|task) '[\w-]+' in the registry", reason), reason
        kinds[reason.split(":")[0].split(" (")[0]] += 1
    assert kinds["Autoformer is not in the library"] == kinds["Informer is not in the library"] == 24


def test_a_missing_preset_reads_not_implemented_until_a_plugin_registers_it(monkeypatch, tmp_path, capsys):
    """The NP, ANP and ConvCNP rows name presets other plugins register: without them the
    rows say so, list so and refuse to run; with them they run, with no change to a row."""
    entry = replication.registry.entry

    def without_plugins(kind, name):
        if kind == "model" and name in PLUGIN_PRESETS:
            raise UnknownComponentError(kind, name, ["cnp", "tnp-d"])
        return entry(kind, name)

    def with_plugins(kind, name):
        return None if kind == "model" and name in PLUGIN_PRESETS else entry(kind, name)

    rows = [replication.get_row(row_id) for row_id in ("anp-gp-eq", "np-celeba", "convcnp-gp-shift-0.4",
                                                       "convcnp-t-cifar10", "convcnp-sir-train")]
    static = replication.get_row("autoformer-ett-96-mse")
    monkeypatch.setattr(replication.registry, "entry", without_plugins)
    for row in rows:
        assert replication.status(row, None, None) == (
            "not implemented", f"no model preset {row.model!r} in the registry")
    with pytest.raises(SpecError, match=r"row 'anp-gp-eq' is not implemented: no model preset 'anp' in the registry"):
        replication.replicate("anp-gp-eq", budget=1, results=None, verbose=0)
    with pytest.raises(SpecError, match="no model preset 'convcnp'"):
        replication.score_baselines("convcnp-gp-shift-0.4", results=None, verbose=0)
    empty, forged = str(tmp_path / "none.csv"), str(tmp_path / "forged.csv")
    line = {**dict.fromkeys(replication.RESULT_COLUMNS, ""), "row": static.id, "value": "0.5", "steps": "10",
            "num_tasks": "4"}
    replication.append_result(forged, line)  # a line for a row with no protocol is never read as its result
    forged_item = next(i for i in replication.list_rows(forged, baselines=empty) if i["id"] == static.id)
    assert forged_item["ours"] is None and forged_item["status_kind"] == "not implemented"
    assert main(["replicate", "--list", "--results", empty, "--baselines", empty]) == 0
    shown = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:] if line.strip()}
    assert shown["anp-gp-eq"].rstrip().endswith("not implemented: no model preset 'anp' in the registry")
    assert shown["autoformer-ett-96-mse"].rstrip().endswith("not implemented: Autoformer is not in the library")
    monkeypatch.setattr(replication.registry, "entry", with_plugins)
    for row in rows:
        assert replication.status(row, None, None)[0] == ("not comparable" if row.not_comparable else "not run")
    assert replication.status(static, None, None) == ("not implemented", "Autoformer is not in the library")
    with pytest.raises(SpecError, match="row 'autoformer-ett-96-mse' is not implemented: Autoformer is not in"):
        replication.replicate("autoformer-ett-96-mse", budget=1, results=None, verbose=0)


def test_only_a_row_that_cannot_run_may_lack_a_protocol_or_name_an_unscored_metric():
    row = replication.get_row("tnp-d-beijing-air-mae")
    assert row.metric == "mae" and not row.higher_is_better and "MAE" not in row.not_implemented
    assert "mean absolute error" in row.not_implemented
    with pytest.raises(SpecError, match="'metric' must be one of"):
        dataclasses.replace(row, not_implemented="")
    runnable = replication.get_row("tnp-d-beijing-air")
    with pytest.raises(SpecError, match="'training' must be a Training, got None"):
        dataclasses.replace(runnable, training=None)
    with pytest.raises(SpecError, match="'not_implemented' must be a string"):
        Row(**{**{f.name: getattr(runnable, f.name) for f in dataclasses.fields(Row)}, "not_implemented": None})
    assert dataclasses.replace(runnable, training=None, not_implemented="no data here").training is None


# ----------------------------------------------------------------------------- the docs
def _generated_and_prose():
    """docs/replication.md's generated block, and its prose: the rest, without fenced code
    blocks and inline code (commands and paths)."""
    text = (ROOT / "docs" / "replication.md").read_text(encoding="utf-8")
    block = text.split(replication.TABLE_BEGIN + "\n", 1)[1].split(replication.TABLE_END, 1)[0]
    prose = re.sub(re.escape(replication.TABLE_BEGIN) + ".*?" + re.escape(replication.TABLE_END), "", text,
                   flags=re.S)
    prose = re.sub(r"^[ \t]*(```|~~~).*?^[ \t]*\1", "", prose, flags=re.S | re.M)
    return block, re.sub(r"`[^`\n]*`", "", prose)


#: a number as prose writes it: 1,024 / 0.5 / 1e-4 / 100K (commas dropped, sign ignored)
NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(?:\.\d+)?(?:e-?\d+)?")


def _numbers(text):
    return {m.group(0).rstrip(",").replace(",", "") for m in NUMBER.finditer(text)}


def test_the_docs_counts_are_the_jsons_and_the_prose_quotes_only_its_numbers(listed):
    block, prose = _generated_and_prose()
    counts = collections.Counter((item["paper"].split(" (")[0], item["table"], item["status_kind"])
                                 for item in listed)
    lines = [line.split("|")[1:-1] for line in block.splitlines() if line.startswith("| ")]
    header = next(cells for cells in lines if cells[0].strip() == "paper")
    kinds = [cell.strip() for cell in header[3:]]
    assert set(kinds) == {item["status_kind"] for item in listed}
    checked = 0
    for cells in lines[lines.index(header) + 1:]:
        paper, table = cells[0].strip(), cells[1].strip()
        if paper.startswith("**") or "|" in paper or not table.startswith(("Table", "Sec.", "Abstract")):
            continue
        tallies = [int(cell) for cell in cells[3:3 + len(kinds)]]
        assert tallies == [counts[paper, table, kind] for kind in kinds], (paper, table)
        assert int(cells[2]) == sum(tallies)
        checked += 1
    assert checked == len({(p, t) for p, t, _ in counts})
    total = next(cells for cells in lines if cells[0].strip() == "**all papers**")
    assert [int(c) for c in total[2:3 + len(kinds)]] == [len(listed)] + [
        sum(1 for item in listed if item["status_kind"] == kind) for kind in kinds]
    # the prose quotes no number (a count, a value, a size) that the rows' JSON does not hold
    held = _numbers(json.dumps(listed))
    assert not sorted(_numbers(prose) - held), "numbers in docs/replication.md's prose that no row holds"


def test_the_number_scan_catches_a_drifted_count(listed):
    held = _numbers(json.dumps(listed))
    assert _numbers("Of the 9,999 rows, 12345 ran.") - held == {"9999", "12345"}
    assert not _numbers("Table 5 at 1e-4, 100K steps, 1,024 tasks.") - held
