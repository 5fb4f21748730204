"""TNP-A's doubled-sequence mask against a NumPy construction from the paper's rules."""
import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from taylorformer.plugins.tnp.tnp_a import tnpa_pair_mask  # noqa: E402


def reference_mask(nc, nt):
    """Queries: [context; real targets; zero-y targets]; keys: [context; real targets].
    Context rows see the context; real target j sees the context and real targets <= j;
    the zero-y copy of target i sees the context and real targets < i."""
    allowed = np.zeros((nc + 2 * nt, nc + nt), bool)
    allowed[:, :nc] = True
    for j in range(nt):
        allowed[nc + j, nc:nc + j + 1] = True
        allowed[nc + nt + j, nc:nc + j] = True
    return allowed


@pytest.mark.parametrize("nc, nt", [(0, 3), (4, 1), (3, 5)])
def test_pair_mask_matches_reference(nc, nt):
    got = tnpa_pair_mask(nc, nt)(tf.range(nc + 2 * nt), tf.range(nc + nt)).numpy()
    np.testing.assert_array_equal(got, reference_mask(nc, nt))
