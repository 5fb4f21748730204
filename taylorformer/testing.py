"""Plugin author kit: reusable checks a plugin runs in its own tests.

    from taylorformer import testing

    def test_my_attention():
        testing.check_attention("my-attn")            # every attention check below

    def test_my_encoder():
        testing.check_encoder("my-encoder", width=16)

    def test_my_likelihood():
        testing.check_likelihood("my-likelihood")

    def test_my_wrapper():
        testing.check_wrapper("my-wrapper")

    def test_my_task():
        testing.check_task("my-task", num_target=20)

    def test_my_model_spec(tmp_path):
        testing.check_model({"preset": "tnp-d", "encoder": {"attention": "my-attn"}}, tmp_path)

Each check raises ``AssertionError`` with a message naming what failed. They compare
the component against independent properties (masked keys change nothing, outputs
do not depend on context order, causal encoders do not look ahead, densities integrate
to one, eager == tf.function == XLA, tiled == dense, saved == loaded), never against
stored numbers. The repository runs them over every registered component
(``tests/core/test_components.py``).
"""
import os
import tempfile

import keras
import numpy as np
import tensorflow as tf

from taylorformer import registry
from taylorformer.batch import pad_tasks, validate_batch, with_masks

ATOL = 2e-5


def _attention_output(layer, queries, keys, q_pos, k_pos, key_mask, with_positions=False):
    """The layer's output ``[B, Nq, D]`` (and its new positions when it moves them and
    ``with_positions``: then a list of both)."""
    out = layer(queries, keys, q_pos=q_pos, k_pos=k_pos, key_mask=key_mask)
    if not layer.updates_positions:
        return [out] if with_positions else out
    return list(out) if with_positions else out[0]


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
    """The tiled executor gives the dense values and gradients (ragged tiles, masks), for
    the output and, for attentions that move positions, the new positions."""
    q, k, qp, kp, mask = _attention_inputs(nq=9, nk=13)
    dense = make_attention(name, **options)
    tiled = make_attention(name, tile_size=tile_size, **options)
    _attention_output(dense, q, k, qp, kp, mask)
    _attention_output(tiled, q, k, qp, kp, mask)
    tiled.set_weights(dense.get_weights())
    results = []
    for layer in (dense, tiled):
        with tf.GradientTape() as tape:
            tape.watch([q, k, qp, kp])
            outs = _attention_output(layer, q, k, qp, kp, mask, with_positions=True)
            loss = sum(tf.reduce_sum(o * tf.sin(o)) for o in outs)
        grads = tape.gradient(loss, [q, k] + layer.trainable_variables)
        results.append((outs, grads))
    for dense_out, tiled_out in zip(results[0][0], results[1][0]):
        np.testing.assert_allclose(tiled_out, dense_out, atol=1e-4,
                                   err_msg=f"{name}: tiled output differs from dense")
    for gd, gt in zip(results[0][1], results[1][1]):
        np.testing.assert_allclose(tf.convert_to_tensor(gt), tf.convert_to_tensor(gd), atol=1e-4,
                                   err_msg=f"{name}: tiled gradient differs from dense")


def _tasks(rng, dim_x, dim_y, sizes=(3, 6), num_target=4):
    """Tasks (dicts of NumPy arrays) with the given context sizes."""
    return [{"xc": rng.uniform(-2, 2, (n, dim_x)), "yc": rng.normal(size=(n, dim_y)),
             "xt": rng.uniform(-2, 2, (num_target, dim_x)), "yt": rng.normal(size=(num_target, dim_y))}
            for n in sizes]


def _tensors(batch):
    return {k: tf.constant(v, tf.float32) for k, v in with_masks(batch).items()}


def make_encoder(name, dim_x=1, dim_y=1, **options):
    """Instantiate a registered encoder."""
    return registry.get("encoder", name)(dim_x=dim_x, dim_y=dim_y, **options)


def check_encoder(name, dim_x=1, dim_y=1, **options):
    """Shape, padding, context order, no look-ahead (causal encoders) or no dependence on
    target values (the others), and a ``get_config`` round trip."""
    rng = np.random.default_rng(0)
    enc = make_encoder(name, dim_x, dim_y, **options)
    tasks = _tasks(rng, dim_x, dim_y)
    batch = pad_tasks(tasks)
    out = enc(_tensors(batch)).numpy()
    assert out.shape == (2, 4, enc.output_dim), f"{name}: output shape {out.shape} != (2, 4, {enc.output_dim})"
    assert np.isfinite(out).all(), f"{name}: non-finite output"
    alone = enc(_tensors(pad_tasks(tasks[:1])))
    np.testing.assert_allclose(out[0], alone.numpy()[0], atol=ATOL,
                               err_msg=f"{name}: padded context points change the output")
    perm = rng.permutation(batch["xc"].shape[1])
    shuffled = {**batch, **{k: batch[k][:, perm] for k in ("xc", "yc", "mask_c")}}
    np.testing.assert_allclose(enc(_tensors(shuffled)).numpy(), out, atol=ATOL,
                               err_msg=f"{name}: the order of the context changes the output")
    changed = {**batch, "yt": batch["yt"].copy()}
    changed["yt"][:, 2:] += 5.0
    moved = enc(_tensors(changed)).numpy()
    seen = 3 if getattr(enc, "causal", False) else 4  # causal: targets 0..2 see only yt[:, :2]
    np.testing.assert_allclose(moved[:, :seen], out[:, :seen], atol=ATOL,
                               err_msg=f"{name}: a target's output depends on target values it must not see")
    clone = type(enc).from_config(enc.get_config())
    clone(_tensors(batch))
    clone.set_weights(enc.get_weights())
    np.testing.assert_allclose(clone(_tensors(batch)).numpy(), out, atol=ATOL,
                               err_msg=f"{name}: from_config(get_config()) changes the output")


def check_likelihood(name, dim_y=2, continuous=True, **options):
    """Parameter and distribution shapes, densities that integrate to one (per output dim,
    on a grid over [-60, 60]; for a likelihood with a discrete ``support``, probabilities
    that sum to one over it; ``continuous=False`` skips this), and a ``get_config`` round
    trip."""
    cls = registry.get("likelihood", name)
    lik = cls(**options)
    p = lik.num_params(dim_y)
    raw = tf.constant(0.5 * np.random.default_rng(0).normal(size=(2, 3, p)), tf.float32)
    params = lik.parameters(raw)
    dist = lik.distribution(params)
    assert tuple(dist.batch_shape) == (2, 3, dim_y), f"{name}: batch shape {dist.batch_shape} != (2, 3, {dim_y})"
    assert all(v.dtype == tf.float32 for v in params.values()), f"{name}: parameters must be float32"
    support = getattr(lik, "support", None)
    if support is not None:
        values = np.asarray(support, np.float32)[:, None, None, None]
        mass = np.exp(np.asarray(dist.log_prob(values), np.float64)).sum(0)  # [2, 3, Dy]
        np.testing.assert_allclose(mass, 1.0, atol=1e-5, err_msg=f"{name}: probabilities do not sum to 1")
    elif continuous:
        grid = np.linspace(-60.0, 60.0, 120001, dtype=np.float32)
        dens = np.exp(np.asarray(dist.log_prob(grid[:, None, None, None]), np.float64))  # [G, 2, 3, Dy]
        mass = np.trapezoid(dens, grid, axis=0) if hasattr(np, "trapezoid") else np.trapz(dens, grid, axis=0)
        np.testing.assert_allclose(mass, 1.0, atol=2e-3, err_msg=f"{name}: densities do not integrate to 1")
    clone = cls(**lik.get_config())
    for key, value in clone.parameters(raw).items():
        np.testing.assert_array_equal(value, params[key], err_msg=f"{name}: cls(**get_config()) differs")


def check_wrapper(name, dim_x=1, dim_y=1, **options):
    """Folded dims match ``folded_dims``; padded context points change nothing; without
    ``causal`` the features ignore target values; ``adjust`` keeps parameter shapes; and
    a ``get_config`` round trip."""
    cls = registry.get("wrapper", name)
    wrapper = cls(dim_x=dim_x, dim_y=dim_y, **options)
    tasks = _tasks(np.random.default_rng(0), dim_x, dim_y)
    batch = _tensors(pad_tasks(tasks))
    features = wrapper.features(batch, causal=False)
    folded = wrapper.fold(batch, features)
    got = (folded["xt"].shape[-1], folded["yt"].shape[-1])
    assert got == tuple(wrapper.folded_dims()), f"{name}: folded dims {got} != folded_dims() {wrapper.folded_dims()}"
    alone = _tensors(pad_tasks(tasks[:1]))
    single = wrapper.fold(alone, wrapper.features(alone, causal=False))
    for key in ("xt", "yt"):
        np.testing.assert_allclose(folded[key][0], single[key][0], atol=ATOL,
                                   err_msg=f"{name}: padded context points change the {key} features")
    changed = {**batch, "yt": batch["yt"] + 5.0}
    refolded = wrapper.fold(changed, wrapper.features(changed, causal=False))
    np.testing.assert_allclose(refolded["xt"], folded["xt"], atol=ATOL,
                               err_msg=f"{name}: non-causal target features depend on target values")
    params = {"loc": tf.zeros([2, 4, dim_y]), "scale": tf.ones([2, 4, dim_y])}
    adjusted = wrapper.adjust(params, features)
    assert {k: tuple(v.shape) for k, v in adjusted.items()} == {k: tuple(v.shape) for k, v in params.items()}, \
        f"{name}: adjust changes parameter shapes"
    clone = cls(dim_x=dim_x, dim_y=dim_y, **wrapper.get_config())
    np.testing.assert_allclose(clone.fold(batch, clone.features(batch, causal=False))["xt"], folded["xt"],
                               err_msg=f"{name}: cls(**get_config()) changes the features")


def check_task(name, batch_size=4, **config):
    """Batches are valid; val/test are identical across calls; train depends on the seed;
    ``get_config`` rebuilds a task that gives the same batches."""
    from taylorformer.task import make_task

    task = make_task(name, config)
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
    rebuilt = registry.get("task", name)(**task.get_config())
    again = next(iter(rebuilt.dataset("val", batch_size, num_batches=1)))
    for key, value in val_a[0].items():
        np.testing.assert_array_equal(again[key].numpy(), value,
                                      err_msg=f"task {name!r}: get_config() does not rebuild the same task")


def check_model(spec, directory=None, batch=None):
    """A spec builds, ignores padding and context order, and round-trips through ``.keras``."""
    from taylorformer import build_model, load_model

    model = build_model(spec)
    rng = np.random.default_rng(0)
    tasks = _tasks(rng, model.dim_x, model.dim_y)
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
