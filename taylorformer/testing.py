"""Plugin author kit: reusable checks a plugin runs in its own tests.

    from taylorformer import testing

    def test_my_attention():
        testing.check_attention("my-attn")            # every attention check below

    def test_my_task():
        testing.check_task("my-task", num_target=20)

    def test_my_model_spec(tmp_path):
        testing.check_model({"preset": "tnp-d", "encoder": {"attention": "my-attn"}}, tmp_path)

Each check raises ``AssertionError`` with a message naming what failed. They compare
the component against independent properties (masked keys change nothing, outputs
do not depend on context order, eager == tf.function == XLA, tiled == dense, saved ==
loaded), never against stored numbers.
"""
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

from taylorformer import registry
from taylorformer.batch import validate_batch

ATOL = 2e-5


def _attention_output(layer, queries, keys, q_pos, k_pos, key_mask):
    out = layer(queries, keys, q_pos=q_pos, k_pos=k_pos, key_mask=key_mask)
    return out[0] if layer.updates_positions else out


def _attention_inputs(seed=0, b=2, nq=7, nk=11, width=16, dim_pos=2):
    rng = np.random.default_rng(seed)
    f = lambda *s: tf.constant(rng.normal(size=s).astype(np.float32))  # noqa: E731
    key_mask = np.ones((b, nk), np.float32)
    key_mask[:, -3:] = 0.0
    return f(b, nq, width), f(b, nk, width), f(b, nq, dim_pos), f(b, nk, dim_pos), tf.constant(key_mask)


def make_attention(name, output_dim=16, **options):
    """Instantiate a registered attention plugin with small defaults."""
    cls = registry.get("attention", name)
    options = {"num_heads": 2, "head_dim": 8, **options}
    return cls(output_dim=output_dim, **options)


def check_attention(name, **options):
    """Run every attention check on the registered attention ``name``."""
    check_attention_builds_and_serializes(name, **options)
    check_attention_masks(name, **options)
    check_attention_key_permutation(name, **options)
    check_attention_compiled(name, **options)
    check_attention_tiled(name, **options)


def check_attention_builds_and_serializes(name, **options):
    """Builds, returns ``[B, Nq, output_dim]``, and survives a ``get_config`` round trip."""
    q, k, qp, kp, mask = _attention_inputs()
    layer = make_attention(name, **options)
    out = _attention_output(layer, q, k, qp, kp, mask)
    assert tuple(out.shape) == (2, 7, 16), f"{name}: output shape {tuple(out.shape)} != (2, 7, 16)"
    clone = type(layer).from_config(layer.get_config())
    _attention_output(clone, q, k, qp, kp, mask)
    clone.set_weights(layer.get_weights())
    np.testing.assert_allclose(_attention_output(clone, q, k, qp, kp, mask), out, atol=ATOL,
                               err_msg=f"{name}: from_config(get_config()) changes the output")
    restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
    assert type(restored) is type(layer), f"{name}: Keras deserialisation gives {type(restored)}"


def check_attention_masks(name, **options):
    """Masked keys change nothing, whatever their values and positions."""
    q, k, qp, kp, mask = _attention_inputs()
    layer = make_attention(name, **options)
    base = _attention_output(layer, q, k, qp, kp, mask)
    garbage = tf.where(mask[..., None] > 0, k, 100.0 * tf.ones_like(k))
    garbage_pos = tf.where(mask[..., None] > 0, kp, -50.0 * tf.ones_like(kp))
    np.testing.assert_allclose(_attention_output(layer, q, garbage, qp, garbage_pos, mask), base,
                               atol=ATOL, err_msg=f"{name}: masked keys change the output")
    nk = int(tf.reduce_sum(mask[0]))
    trimmed = _attention_output(layer, q, k[:, :nk], qp, kp[:, :nk], mask[:, :nk])
    np.testing.assert_allclose(trimmed, base, atol=ATOL,
                               err_msg=f"{name}: padding keys (mask 0) differs from removing them")


def check_attention_key_permutation(name, **options):
    """The output does not depend on the order of the keys (a set of context points)."""
    q, k, qp, kp, mask = _attention_inputs()
    layer = make_attention(name, **options)
    perm = np.random.default_rng(1).permutation(k.shape[1])
    permuted = _attention_output(layer, q, tf.gather(k, perm, axis=1), qp, tf.gather(kp, perm, axis=1),
                                 tf.gather(mask, perm, axis=1))
    np.testing.assert_allclose(permuted, _attention_output(layer, q, k, qp, kp, mask), atol=ATOL,
                               err_msg=f"{name}: permuting the keys changes the output")


def check_attention_compiled(name, **options):
    """Eager, ``tf.function`` and ``tf.function(jit_compile=True)`` agree."""
    q, k, qp, kp, mask = _attention_inputs()
    layer = make_attention(name, **options)
    eager = _attention_output(layer, q, k, qp, kp, mask)
    for jit in (False, True):
        fn = tf.function(lambda *a: _attention_output(layer, *a), jit_compile=jit)
        np.testing.assert_allclose(fn(q, k, qp, kp, mask), eager, atol=1e-4,
                                   err_msg=f"{name}: tf.function(jit_compile={jit}) differs from eager")


def check_attention_tiled(name, tile_size=4, **options):
    """The tiled executor gives the dense values and gradients (ragged tiles, masks)."""
    q, k, qp, kp, mask = _attention_inputs(nq=9, nk=13)
    dense = make_attention(name, **options)
    tiled = make_attention(name, tile_size=tile_size, **options)
    _attention_output(dense, q, k, qp, kp, mask)
    _attention_output(tiled, q, k, qp, kp, mask)
    tiled.set_weights(dense.get_weights())
    results = []
    for layer in (dense, tiled):
        with tf.GradientTape() as tape:
            tape.watch([q, k])
            out = _attention_output(layer, q, k, qp, kp, mask)
            loss = tf.reduce_sum(out * tf.sin(out))
        grads = tape.gradient(loss, [q, k] + layer.trainable_variables)
        results.append((out, grads))
    np.testing.assert_allclose(results[1][0], results[0][0], atol=1e-4,
                               err_msg=f"{name}: tiled output differs from dense")
    for gd, gt in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(tf.convert_to_tensor(gt), tf.convert_to_tensor(gd), atol=1e-4,
                                   err_msg=f"{name}: tiled gradient differs from dense")


def check_task(name, batch_size=4, **config):
    """Batches are valid; val/test are identical across calls; train depends on the seed."""
    task = registry.get("task", name)(**config)
    val_a = [{k: v.numpy() for k, v in b.items()} for b in task.dataset("val", batch_size, num_batches=2)]
    val_b = [{k: v.numpy() for k, v in b.items()} for b in task.dataset("val", batch_size, num_batches=2)]
    assert val_a, f"task {name!r}: the val split is empty"
    for a, b in zip(val_a, val_b):
        validate_batch(a, task.dim_x, task.dim_y, where=f"task {name!r} val batch")
        for key in a:
            np.testing.assert_array_equal(a[key], b[key], err_msg=f"task {name!r}: val batches differ between calls")
    t0 = next(iter(task.dataset("train", batch_size, seed=0)))
    t1 = next(iter(task.dataset("train", batch_size, seed=1)))
    validate_batch({k: v.numpy() for k, v in t0.items()}, task.dim_x, task.dim_y, where=f"task {name!r} train batch")
    assert not np.array_equal(t0["yt"].numpy(), t1["yt"].numpy()), f"task {name!r}: train ignores the seed"


def check_model(spec, directory=None, batch=None):
    """A spec builds, ignores padding and context order, and round-trips through ``.keras``."""
    from taylorformer import build_model, load_model
    from taylorformer.batch import pad_tasks

    model = build_model(spec)
    rng = np.random.default_rng(0)
    dx, dy = model.dim_x, model.dim_y
    tasks = [{"xc": rng.normal(size=(n, dx)), "yc": rng.normal(size=(n, dy)),
              "xt": rng.normal(size=(4, dx)), "yt": rng.normal(size=(4, dy))} for n in (3, 6)]
    batch = batch or pad_tasks(tasks)
    alone = pad_tasks(tasks[:1])
    np.testing.assert_allclose(model(batch)["loc"].numpy()[0], model(alone)["loc"].numpy()[0], atol=ATOL,
                               err_msg="padded context points change the predictions")
    perm = rng.permutation(batch["xc"].shape[1])
    shuffled = {**batch, "xc": batch["xc"][:, perm], "yc": batch["yc"][:, perm], "mask_c": batch["mask_c"][:, perm]}
    np.testing.assert_allclose(model(shuffled)["loc"], model(batch)["loc"], atol=ATOL,
                               err_msg="context order changes the predictions")
    with tempfile.TemporaryDirectory(dir=directory) as tmp:
        path = os.path.join(tmp, "model.keras")
        model.save(path)
        loaded = load_model(path)
        for key, value in model(batch).items():
            np.testing.assert_array_equal(loaded(batch)[key], value, err_msg=f"saved/loaded {key} differs")
    return model
