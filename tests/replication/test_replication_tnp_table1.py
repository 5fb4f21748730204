"""The TNP column of the Taylorformer paper's Table 1 (rows ``tnp-a-*``): the paper's values as
read from its text, the TNP code's sizes (tung-nd/TNP-pytorch regression/configs/*/tnpa.yaml:
d_model 64, 4 heads, FFN 128, 6 layers, a predictor with one hidden layer of 128), and the
same task, protocol and baseline as the matching Taylorformer row."""
import pytest

from taylorformer.spec import resolve_spec
from taylorformer_replication import replication

#: Taylorformer Table 1, TNP column (log-likelihood, +- std over 5 runs)
TNP_TABLE1 = {"gp-eq": (3.50, 0.05), "gp-matern52": (3.22, 0.05), "gp-periodic": (0.13, 0.04),
              "emnist-seen": (1.59, 0.00), "emnist-unseen": (1.47, 0.01), "celeba": (4.13, 0.02)}
#: the fields a TNP row shares with its Taylorformer row
SHARED = ("paper", "table", "dataset", "protocol", "task", "task_config", "metric", "training", "evaluation",
          "small", "paper_error_kind", "baselines", "no_baseline")


@pytest.mark.parametrize("key", sorted(TNP_TABLE1))
def test_tnp_rows_have_the_papers_values_and_the_taylorformer_rows_protocol(key):
    tnp, ours = replication.get_row(f"tnp-a-{key}"), replication.get_row(f"taylorformer-{key}")
    assert (tnp.model, tnp.paper_value, tnp.paper_error) == ("tnp-a", *TNP_TABLE1[key])
    assert {f: getattr(tnp, f) for f in SHARED} == {f: getattr(ours, f) for f in SHARED}
    spec = resolve_spec(tnp.model_spec())
    encoder, head = spec["encoder"], spec["head"]
    assert (encoder["layers"], encoder["width"], encoder["num_heads"], encoder["ffn_width"]) == (6, 64, 4, 128)
    assert encoder.get("dropout", 0.0) == 0.0 and (head["width"], head["hidden_layers"]) == (128, 1)
    assert spec["likelihood"]["min_scale"] == (0.05 if key.startswith("emnist") else 1e-3)  # bound_std on EMNIST
    assert any("TNP" in note and "tnpa.yaml" in note for note in tnp.notes)
    if key.startswith("emnist"):
        assert tnp.run_name == "tnp-a-emnist"  # seen and unseen: one training run, as the Taylorformer's
