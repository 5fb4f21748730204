"""The plugin author kit passes on built-ins and catches a broken attention."""
import pytest

from taylorformer import testing
from taylorformer.attention import Attention
from taylorformer.registry import default


def test_kit_passes_on_builtin_attention_task_and_model(tmp_path):
    testing.check_attention("mha-xy")
    testing.check_task("gp", num_target=8)
    testing.check_model({"preset": "cnp", "encoder": {"width": 16}, "head": {"width": 16}}, tmp_path)


class LeakyAttention(Attention):
    """Ignores the key mask: the kit must notice."""

    def call(self, queries, keys, q_pos=None, k_pos=None, key_mask=None, pair_mask_fn=None,
             values=None, query_mask=None):
        return super().call(queries, keys, q_pos, k_pos, None, pair_mask_fn, values, query_mask)


def test_kit_catches_an_attention_that_ignores_masks(monkeypatch):
    reg = default()
    monkeypatch.setitem(reg._tables["attention"], "leaky",
                        reg._tables["attention"]["mha-xy"].__class__(
                            "attention", "leaky", LeakyAttention, "test", "test", "0", "leaky"))
    with pytest.raises(AssertionError, match="masked keys change the output"):
        testing.check_attention_masks("leaky")
