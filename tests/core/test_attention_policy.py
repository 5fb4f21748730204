"""The tiling policy (taylorformer.attention.policy) and options(): which path runs, with
which tiles, chunks and lanes. These rules change speed and memory only; that the paths
agree is tests/core/test_attention_paths.py."""
import pytest

tf = pytest.importorskip("tensorflow")

import taylorformer.attention as attention
from taylorformer.attention import attend, executor, mha_score, options, overrides, policy


def qk(b, h, nq, nk):
    return tf.zeros([b, h, nq, 1]), tf.zeros([b, h, nk, 1])


def test_attend_dispatch(monkeypatch):
    q, k = qk(1, 3, 9, 11)
    calls = []
    real = executor.tiled_attend
    monkeypatch.setattr(executor, "tiled_attend", lambda *a, **kw: calls.append(kw) or real(*a, **kw))
    attend(mha_score, q, k, k)
    assert calls == []  # small: dense
    attend(mha_score, q, k, k, tile=4)
    # 2^30 floats per pair: the dense block would be far over the dense budget
    attend(mha_score, q, k, k, pair_floats=1 << 30)
    assert [(c["tile_q"], c["tile_k"]) for c in calls] == [(4, 4), (16, 16)]


def test_tiling_rule_from_block_memory():
    # on a CPU: dense while B * Nq * Nk * pair_floats * 4 bytes <= 2^27 (BUDGETS["CPU"])
    assert policy.choose_tile(*qk(1, 8, 2048, 2048)) is None  # 2^22 pairs x 8 floats = 2^27 bytes
    assert policy.choose_tile(*qk(2, 8, 2048, 2048)) == (256, 256)  # 2^23 / (32 * 2) = 2^17 pairs per block
    assert policy.choose_tile(*qk(16, 8, 2000, 1000)) == (128, 128)  # TNP-D at Nc = Nt = 1000, batch 16
    assert policy.choose_tile(*qk(1, 8, 2000, 5000), pair_floats=136) == (128, 128)  # TE attention
    assert policy.choose_tile(*qk(1, 4, 5000, 5000), pair_floats=24) == (256, 256)  # BSA-TNP, batch 1
    assert policy.choose_tile(*qk(8, 4, 1536, 512), pair_floats=24) == (128, 128)  # BSA-TNP, batch 8
    assert policy.choose_tile(*qk(1, 8, 10, 10), tile_size=3) == (3, 3)  # explicit tile
    assert policy.choose_tile(*qk(1, 8, 10, 10), dense_pairs=99) == (512, 512)  # explicit dense limit
    # inference compiled with XLA on a CPU: tiles up to 128 get key tiles half as long
    assert policy.choose_tile(*qk(16, 8, 2000, 1000), compiled_inference=True) == (128, 64)
    assert policy.choose_tile(*qk(1, 4, 5000, 5000), pair_floats=24, compiled_inference=True) == (256, 256)
    assert policy.choose_tile(*qk(8, 8, 4000, 4000), compiled_inference=True, device="GPU") == (512, 512)
    seen = []
    tf.function(lambda: seen.append(policy.choose_tile(*qk(16, 8, 2000, 1000))) or tf.constant(0))()
    assert seen == [(128, 64)]  # a tf.function with no tape: the tiled loop runs under XLA
    tf.function(lambda: seen.append(policy.choose_tile(*qk(16, 8, 2000, 1000))) or tf.constant(0),
                jit_compile=True)()
    assert seen[1] == (128, 128)  # inside the caller's XLA function: square tiles
    unknown = tf.TensorSpec([None, 8, None, 1]), tf.TensorSpec([None, 8, None, 1])
    assert policy.choose_tile(*unknown) == (256, 256)  # unknown sizes: tiled, B counted as 8


def test_tiling_rule_per_device():
    """A GPU runs one large block rather than a loop of small ones: dense up to its budget."""
    q, k = qk(16, 8, 2000, 1000)  # 2^30 bytes of logits less 5%
    assert policy.choose_tile(q, k, device="CPU") == (128, 128)
    assert policy.choose_tile(q, k, device="GPU") is None
    big = tf.zeros([8, 8, 4000, 1])  # 4 GiB of logits
    assert policy.choose_tile(big, big, device="GPU") == (512, 512)  # 2^26 / (32 * 8) = 2^18 pairs per block
    with tf.device("/CPU:0"):
        assert policy.device_kind(tf.zeros([1])) == "CPU"


def test_every_table_entry_says_whether_it_was_measured():
    """Each device entry of each table is either listed in MEASURED (pointing at the section
    of a benchmarks README that tuned it, which exists) or unmeasured; no GPU entry is measured."""
    import pathlib
    import re

    root = pathlib.Path(__file__).resolve().parents[2]
    for name in ("BUDGETS", "LANE_TILES", "CHUNKS_PER_CORE"):
        table = getattr(policy, name)
        assert set(table) == {"CPU", "GPU"}
        assert policy.is_measured(name, "CPU") and not policy.is_measured(name, "GPU")
    for pointer in policy.MEASURED.values():
        path, anchor = pointer.split("#")
        assert path.startswith("benchmarks/") and path.endswith("README.md"), pointer
        headings = re.findall(r"^#+\s+(.*)$", (root / path).read_text(encoding="utf-8"), re.M)
        slugs = {re.sub(r"[^\w\- ]", "", h.strip().lower()).replace(" ", "-") for h in headings}
        assert anchor in slugs, pointer


def test_options_override_the_tiling_rule_and_layer_tiles():
    q, k = qk(16, 8, 2000, 1000)
    small = tf.zeros([1, 8, 10, 1])
    with options(tile=None):
        assert policy.choose_tile(q, k) is None and policy.choose_tile(q, k, tile_size=64) is None
    with options(tile=(32, 16)):
        assert policy.choose_tile(small, small) == (32, 16)
    with options(tile=32):
        assert policy.choose_tile(small, small) == (32, 32)
        with options():  # the innermost block wins; leaving it restores the outer one
            assert policy.choose_tile(small, small) is None
        assert policy.choose_tile(small, small) == (32, 32)
    assert policy.choose_tile(q, k) == (128, 128)
    for bad in (dict(tile=0), dict(tile="dense"), dict(tile=True), dict(tile=(32,)), dict(tile=(8, 0)),
                dict(xla="yes")):
        with pytest.raises(ValueError, match="options: (tile|xla) must be"):
            with options(**bad):
                pass


def test_xla_for_the_tiled_loop_only_in_graph_inference():
    """options(xla="auto"): compiled inside a non-XLA tf.function with no tape recording;
    not eagerly, not under a tape (training), not inside an XLA function (already compiled)."""
    seen = {}

    def record(name):
        seen[name] = overrides.compile_tiles()
        return tf.constant(0.0)

    def taped(name):
        with tf.GradientTape():
            return record(name)

    record("eager")
    tf.function(lambda: record("graph"))()
    tf.function(lambda: taped("graph+tape"))()
    tf.function(lambda: record("xla"), jit_compile=True)()
    with options(xla=False):
        tf.function(lambda: record("graph, xla=False"))()
    with options(xla=True):
        record("eager, xla=True")
        tf.function(lambda: taped("graph+tape, xla=True"))()
    assert seen == {"eager": False, "graph": True, "graph+tape": False, "xla": False,
                    "graph, xla=False": False, "eager, xla=True": True,
                    "graph+tape, xla=True": True}


def test_query_chunks_rule(monkeypatch):
    """One query chunk per core on a CPU, one call on a GPU; never more chunks than query
    tiles; an options() count wins; a length unknown at trace time runs as one call."""
    monkeypatch.setattr(policy, "usable_cores", lambda: 4)
    assert policy.query_chunks(2000, 128, "CPU") == 4
    assert policy.query_chunks(2000, 128, "CPU", shared=False) == 1  # a score with weights: asked for only
    assert policy.query_chunks(300, 128, "CPU") == 2  # two whole tiles
    assert policy.query_chunks(100, 128, "CPU") == 1
    assert policy.query_chunks(2000, 128, "GPU") == 1
    assert policy.query_chunks(None, 128, "CPU") == 1
    with options(query_chunks=3):
        assert policy.query_chunks(2000, 128, "GPU") == 3 and policy.query_chunks(300, 128, "CPU") == 2
        assert policy.query_chunks(2000, 128, "CPU", shared=False) == 3
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="options: query_chunks must be"):
            with options(query_chunks=bad):
                pass


def test_lane_tiles_rule():
    """Lane tiles cut a query chunk and the keys into equal whole tiles within the CPU's
    bounds (2048 x 256); a GPU runs no lanes; a size unknown at trace time gets the bound."""
    assert policy.lane_tiles(2000, 1000, 2) == (1000, 250)  # TNP-D at Nc = Nt = 1000 on 2 cores
    assert policy.lane_tiles(5000, 5000, 2) == (1250, 250)  # 2 tiles per chunk of 2500 rows
    assert policy.lane_tiles(10, 3, 4) == (3, 3)
    assert policy.lane_tiles(None, tf.constant(7), 2) == (2048, 256)
    assert policy.lane_tiles(2000, 1000, 2, "GPU") is None
    for n, parts, bound in [(2000, 2, 1024), (5000, 2, 1024), (1000, 1, 256), (999, 4, 64), (1, 3, 8)]:
        t = policy.balanced_tile(n, parts, bound)
        rows = -(-n // parts)
        tiles = -(-rows // t)
        assert t <= bound and tiles == -(-rows // bound) and tiles * t - rows < tiles


def test_public_names_are_re_exported():
    """Plugins and users import from taylorformer.attention; code written against the
    executor module keeps working through taylorformer.attention_executor."""
    import taylorformer.attention_executor as legacy

    for name in attention.__all__:
        assert getattr(attention, name) is not None
    for name in legacy.__all__:
        if name in attention.__all__:
            assert getattr(legacy, name) is getattr(attention, name), name
    assert legacy.BUDGETS is policy.BUDGETS and legacy.options is options
