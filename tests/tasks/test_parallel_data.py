"""``Task.dataset`` samples batches in parallel: the stream equals a plain NumPy loop over
the batch index (``default_rng([SPLIT_SEEDS[split], seed or 0, i])``), in order, with the
element spec ``Task.signature(batch_size)`` (the keys of
:func:`taylorformer.batch.batch_signature`, static sizes for padded tasks)."""
import numpy as np
import pytest
import tensorflow as tf

from taylorformer.batch import batch_signature
from taylorformer.task import DEFAULT_EVAL_BATCHES, SPLIT_SEEDS, Task, make_task

#: registered simulated tasks, small where the defaults are large
TASKS = [
    ("gp", {}),
    ("gp-te-tnp", {"shift": 1.5}),
    ("gp-2d-bsa", {"num_context": [6, 10], "num_target": 8}),
    ("sawtooth-2d-rotated", {}),
    ("sir", {"grid": 8, "steps": 3, "num_context": [2, 4], "num_target": [2, 4]}),
    ("generic-spatial", {}),
    ("sphere-gp", {"num_context": [4, 8], "num_target": 8}),
]


def reference(task, split, batch_size, indices, seed=0):
    """Batches ``indices`` of ``split`` straight from ``task.sample`` (NumPy)."""
    stream = seed if split == "train" else 0
    return [task.sample(np.random.default_rng([SPLIT_SEEDS[split], stream, i]), batch_size, split)
            for i in indices]


def collect(ds, n=None):
    return [{k: v.numpy() for k, v in b.items()} for b in (ds if n is None else ds.take(n))]


def assert_same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert sorted(g) == sorted(w)
        for key in w:
            assert g[key].dtype == np.float32, key
            np.testing.assert_array_equal(g[key], w[key], err_msg=key)


@pytest.mark.parametrize("name,config", TASKS, ids=[n for n, _ in TASKS])
def test_streams_equal_the_numpy_reference(name, config):
    task = make_task(name, config)
    train = task.dataset("train", batch_size=3, seed=7, start=4)
    assert_same(collect(train, 3), reference(task, "train", 3, range(4, 7), seed=7))
    test = task.dataset("test", batch_size=2, num_batches=2, start=1)
    assert_same(collect(test), reference(task, "test", 2, [1, 2]))


def test_eval_splits_are_finite_and_fixed():
    task = make_task("gp")
    val = collect(task.dataset("val", batch_size=2, seed=5))  # seed ignored off train
    assert_same(val, reference(task, "val", 2, range(DEFAULT_EVAL_BATCHES["val"])))
    assert_same(collect(task.dataset("val", batch_size=2)), val)
    assert collect(task.dataset("val", batch_size=2, num_batches=0)) == []


def test_iterations_repeat_and_resume_continues_the_stream():
    task = make_task("sawtooth")
    ds = task.dataset("train", batch_size=4, seed=2)
    first = collect(ds, 6)
    assert_same(collect(ds, 6), first)
    assert_same(collect(task.dataset("train", batch_size=4, seed=2, start=2), 4), first[2:])
    assert_same(collect(task.dataset("train", batch_size=4, seed=2, num_batches=3)), first[:3])
    other = collect(task.dataset("train", batch_size=4, seed=3), 1)[0]
    assert not np.array_equal(other["yt"], first[0]["yt"])


@pytest.mark.parametrize("name,config", TASKS, ids=[n for n, _ in TASKS])
def test_element_spec_and_batches_follow_the_signature(name, config):
    task = make_task(name, config)
    signature = task.signature(5)
    assert sorted(signature) == sorted(batch_signature(task.dim_x, task.dim_y, task.extra_signature()))
    ds = task.dataset("val", batch_size=5, num_batches=1)
    assert ds.element_spec == signature
    batch = next(iter(ds))
    assert sorted(batch) == sorted(signature)
    for key, spec in signature.items():
        assert batch[key].dtype == spec.dtype and batch[key].shape == spec.shape, key


class Float64Task(Task):
    """Emits float64 arrays; ``extra`` adds a key missing from the signature."""

    def __init__(self, extra=False):
        self.extra = extra

    def sample(self, rng, batch_size, split):
        out = {k: rng.standard_normal((batch_size, 3, 1)) for k in ("xc", "yc", "xt", "yt")}
        out.update(mask_c=np.ones((batch_size, 3)), mask_t=np.ones((batch_size, 3)))
        if self.extra:
            out["gt_loglik"] = np.zeros(batch_size)
        return out


def test_outputs_are_cast_to_the_signature_and_unknown_keys_rejected():
    batch = next(iter(Float64Task().dataset("val", batch_size=2)))
    want = Float64Task().sample(np.random.default_rng([SPLIT_SEEDS["val"], 0, 0]), 2, "val")
    assert all(v.dtype == tf.float32 for v in batch.values())
    np.testing.assert_array_equal(batch["yt"].numpy(), want["yt"].astype(np.float32))
    with pytest.raises(tf.errors.InvalidArgumentError, match="gt_loglik"):
        next(iter(Float64Task(extra=True).dataset("val", batch_size=2)))
