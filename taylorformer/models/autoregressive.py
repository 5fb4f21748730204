"""AutoregressiveNP: the chain rule over targets (Taylorformer, TNP-A).

    p(yt | xt, context) = prod_i p(yt_i | xt_i, context, (xt_j, yt_j) for j < i)

``call(batch)`` runs ONE teacher-forced pass of a causal encoder (``encoder.causal``: the
representation of target i depends on the context and targets before i only) and returns
the parameters of every conditional, ``[B, Nt, ...]``; so
``taylorformer.loglik(model, batch)`` is the teacher-forced chain-rule log-likelihood.

:meth:`AutoregressiveNP.sample` draws joint samples step by step from exactly those
conditionals. By default (``cache=None``: wherever the encoder and wrapper implement the
cached-decoding methods, as every built-in does) it decodes incrementally
(:mod:`taylorformer.models.decoding`): the context runs once through every layer, then step t
runs only target t's token, attending to the cached keys/values of the context and of
the targets before t, so a step costs O(Nc + Nt) instead of a full O((Nc + Nt)^2) pass.
``cache=False`` keeps the reference: step t runs the whole teacher-forced pass with the
targets before t filled with the values already drawn (the causal mask makes the values
at t and after irrelevant). Both give the same samples for the same seed (tested).
Target orders (``order="random"``) come from :mod:`taylorformer.models.target_order`. The
(window, sample) rows are decoded in chunks that fit a memory budget, each row drawing from
its own random stream, so the samples for a seed do not depend on the chunks
(:mod:`taylorformer.models.bounded_sampling`).
"""
import sys

import keras
import numpy as np
import tensorflow as tf

from taylorformer import plugin_api
from taylorformer.models import bounded_sampling, decoding, window_standardisation
from taylorformer.batch import fully_observed, with_targets
from taylorformer.errors import SpecError
from taylorformer.models.base import NeuralProcess, check_finite_outputs
from taylorformer.models.target_order import gather_targets, seed_pair, tile_batch

ORDERS = ("given", "random")


@keras.saving.register_keras_serializable(package="taylorformer", name="AutoregressiveNP")
class AutoregressiveNP(NeuralProcess):
    """Chain-rule NP: teacher-forced conditionals in one pass, step-wise joint sampling."""

    causal = True

    def __init__(self, spec, **kwargs):
        super().__init__(spec, **kwargs)
        if not getattr(self.encoder, "causal", False):
            name = self.spec["encoder"]["name"] if isinstance(self.spec["encoder"], dict) else self.spec["encoder"]
            raise SpecError(
                f"encoder {name!r} is not causal (it has no `causal = True`): an autoregressive "
                "model needs an encoder where target i sees only the context and targets before i, "
                "e.g. 'taylorformer' or 'tnp-a'; use kind 'conditional' for this encoder")
        self._step_fn = None
        self._cached_fns = {}  # (jit_compile, row signature) -> the tf.function of _decode_cached
        self._row_bytes = {}  # (cache, shapes) -> estimated bytes per (window, sample)

    def teacher_forced_distribution(self, batch, training=False):
        """The conditionals p(yt_i | xt_i, context, yt_<i) given the TRUE earlier targets
        ``batch["yt"]``, batch shape ``[B, Nt, Dy]``: what the log-likelihood scores. Not a
        prediction: it changes with the ``yt`` passed in. Predictions come from
        :meth:`sample` (or :func:`taylorformer.predict`)."""
        return self.distribution(batch, training=training)

    def predict_distribution(self, batch, training=False):
        raise TypeError(
            "an autoregressive NP has no closed-form predictive: draw joint samples with "
            "model.sample(batch, num_samples) or taylorformer.predict(model, batch); the "
            "teacher-forced conditionals (given the true earlier targets) are "
            "model.teacher_forced_distribution(batch)")

    # ------------------------------------------------------------------ sampling
    def _draw(self, params, keys, step):
        """Draw the targets of one step from ``params`` ``[R, ...]`` with the rows' random
        streams ``keys [R]`` (:mod:`taylorformer.models.bounded_sampling`) -> float32 ``[R, Dy]``."""
        return bounded_sampling.draw(self.likelihood.distribution(params), keys, step)

    def _decode_full(self, rows, keys):
        """Reference decoding (``cache=False``): one teacher-forced pass of the network per
        step with the values drawn so far (all in the network's units). ``rows`` in
        generation order, ``keys [R]`` their random streams; returns ``yt [R, Nt, Dy]``
        and the parameters each draw used (``[R, Nt, ...]``)."""
        if self._step_fn is None:
            # traced per concrete batch shape: static sizes keep attention on its dense path
            self._step_fn = tf.function(self._full_step)
        yt = tf.zeros_like(tf.cast(rows["yt"], tf.float32))
        steps = []
        for t in range(int(rows["xt"].shape[1])):
            yt, at_t = self._step_fn(rows, yt, tf.constant(t, tf.int32), keys)
            steps.append(at_t)
        return yt, {key: tf.stack([s[key] for s in steps], 1) for key in steps[0]}

    def _full_step(self, batch, yt, t, keys):
        """Draw target ``t`` of every row given ``yt[:, :t]``; returns (new yt, params at t)."""
        params = self.network({**batch, "yt": yt})
        at_t = {key: value[:, t] for key, value in params.items()}
        draw = self._draw(at_t, keys, t)  # [R, Dy]
        return decoding.write_at(yt, t, draw[:, None]), at_t

    def _missing_cache_methods(self):
        """``[(part, missing method names)]`` of the encoder/wrapper without cached decoding."""
        parts = ((self.encoder, plugin_api.ENCODER_METHODS), (self.wrapper, plugin_api.WRAPPER_METHODS))
        return [(type(part).__name__, [m for m in methods if not hasattr(part, m)])
                for part, methods in parts if part is not None and not all(hasattr(part, m) for m in methods)]

    def _decode_cached(self, rows, keys):
        """Incremental decoding (``cache=True``, :mod:`taylorformer.models.decoding`): the context
        once through every layer, then per step target t's token only, against the cached
        keys/values of the context and the targets before t. Same contract as
        :meth:`_decode_full`. Two nested ``tf.while_loop``s: blocks of C steps (the caches'
        recent blocks, :func:`~taylorformer.models.decoding.recent_slots`), settled after each."""
        nc, nt = int(rows["xc"].shape[1]), int(rows["xt"].shape[1])
        wrapper_state = features = None
        if self.wrapper is not None:
            wrapper_state, features = self.wrapper.start_cache(fully_observed(rows))
        batch, kwargs = self._encoder_inputs(decoding.context_only(rows), features)
        cache = self.encoder.start_cache({**batch, "mask_t": rows["mask_t"]}, **kwargs)
        names = sorted(self.likelihood.parameters(tf.zeros([1, 1, self.likelihood.num_params(self.dim_y)])))

        def step(t, yt, cache, wrapper_state, arrays):
            """Draw target t and store it in the caches."""
            index = nc + t
            point = decoding.one_target(rows, t)
            features = pending_wrapper = None
            if self.wrapper is not None:
                features, pending_wrapper = self.wrapper.query_features(wrapper_state, index)
            batch, kwargs = self._encoder_inputs(point, features)
            rep, pending = self.encoder.cached_query(cache, batch, index, **kwargs)
            params = self.likelihood.parameters(self.head(rep))
            if self.wrapper is not None:
                params = self.wrapper.adjust(params, features)
            at_t = {key: value[:, 0] for key, value in params.items()}
            drawn = self._draw(at_t, keys, t)[:, None]  # [R, 1, Dy]
            point = {**point, "yt": drawn}
            if self.wrapper is not None:
                wrapper_state, features = self.wrapper.append(wrapper_state, index, drawn, features,
                                                              pending_wrapper)
            batch, kwargs = self._encoder_inputs(point, features)
            cache = self.encoder.cached_append(cache, batch, index, pending, **kwargs)
            arrays = {key: arrays[key].write(t, at_t[key]) for key in names}
            return t + 1, decoding.write_at(yt, t, drawn), cache, wrapper_state, arrays

        block = decoding.recent_slots(nt)

        def steps_of_block(i, yt, cache, wrapper_state, arrays):
            stop = tf.minimum((i + 1) * block, nt)
            _, yt, cache, wrapper_state, arrays = tf.while_loop(
                lambda t, *_: t < stop, step, (i * block, yt, cache, wrapper_state, arrays))
            return i + 1, yt, decoding.settle_all(cache), wrapper_state, arrays

        state = (tf.constant(0), tf.zeros_like(tf.cast(rows["yt"], tf.float32)), cache,
                 {} if wrapper_state is None else wrapper_state,  # no None in a loop state
                 {key: tf.TensorArray(tf.float32, size=nt) for key in names})
        _, yt, _, _, arrays = tf.while_loop(lambda i, *_: i < -(-nt // block), steps_of_block, state)
        perm = lambda x: tf.transpose(x, [1, 0] + list(range(2, x.shape.rank)))  # noqa: E731
        return yt, {key: perm(arrays[key].stack()) for key in names}

    def sample(self, batch, num_samples=1, order="given", seed=None, return_info=False, cache=None,
               jit_compile=False, memory_budget=None, window_ids=None, progress=None):
        """Joint samples ``[S, B, Nt, Dy]`` drawn target by target, in chunks that fit a memory budget.

        ``order="given"`` conditions in the order of ``xt``; ``order="random"`` draws a
        fresh order per sample and task, generates in that order and puts the values back,
        so ``samples[s, b, j]`` always belongs to ``xt[b, j]``. Padded targets are 0. The values
        of ``yt`` are not read (NaN is fine); context points with a NaN output are unobserved.
        ``seed`` (int) makes the draws reproducible. With ``return_info=True`` returns
        ``(samples, info)``: ``info["params"]`` the conditional parameters each draw used
        (``[S, B, Nt, ...]``, aligned with ``xt``) and ``info["order"] [S, B, Nt]``: the
        generation order (``order[s, b, t]`` = index of the target drawn at step t).

        Memory: the ``S x B`` (window, sample) rows are decoded in chunks of as many rows as
        fit ``memory_budget`` (bytes, or a size such as ``"2GB"``: a bound on this process's
        memory, at most the machine's, :mod:`taylorformer.models.bounded_sampling`; ``None``: the
        resident memory plus 2 GB, :func:`~taylorformer.models.bounded_sampling.default_budget`).
        The estimate per row comes from the model's caches; a budget with no room for one row
        is a SpecError. Every row draws from its own random
        stream, keyed by ``seed``, its window's id and its sample index, so the samples do
        not depend on the chunks (nor on the budget, nor on which other windows are in the
        batch): ``window_ids`` (``[B]`` ints; default ``0 .. B-1``) names the windows'
        streams, e.g. a forecast's window starts. ``progress`` (default: when stdout is a
        terminal and there is more than one chunk) shows a progress bar over the rows.

        ``cache=True`` decodes incrementally (:mod:`taylorformer.models.decoding`: each step runs
        one token per layer against cached keys/values, one compiled loop, traced once per
        context and target length whatever the number of windows and samples); an error names
        the missing methods of an encoder or wrapper without them; ``cache=False`` runs
        one full teacher-forced pass per step (the reference); ``cache=None`` (default)
        decodes incrementally where the encoder and wrapper can (a third-party causal
        encoder without the methods still samples, on the reference path). Both give the same
        samples for the same seed, to float tolerance. ``jit_compile=True`` compiles the
        cached loop with XLA (faster on some machines: benchmarks/README.md, "ar_sampling.py"); its draws are
        the same to float tolerance (the random streams are integer hashes; tested).
        """
        if order not in ORDERS:
            raise SpecError(f"sample: order must be one of {ORDERS}, got {order!r}")
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples < 1:
            raise SpecError(f"sample: num_samples must be an int >= 1, got {num_samples!r}")
        for name, flag in (("cache", cache), ("jit_compile", jit_compile), ("progress", progress)):
            if not (isinstance(flag, bool) or (name != "jit_compile" and flag is None)):
                raise SpecError(f"sample: {name} must be a bool{' or None' if name != 'jit_compile' else ''}, "
                                f"got {flag!r}")
        missing = self._missing_cache_methods()
        if cache and missing:
            raise SpecError("sample: " + "; ".join(f"{part} has no cached decoding (missing {', '.join(m)})"
                                                   for part, m in missing)
                            + " (see taylorformer.models.decoding): sample with cache=False")
        cache = not missing if cache is None else cache
        budget = bounded_sampling.resolve_budget(memory_budget)
        # the target values are never read: a NaN (unknown) target is still drawn
        batch = self.prepare(with_targets(batch, yt=tf.zeros_like(tf.cast(batch["yt"], tf.float32))))
        batch = {k: tf.convert_to_tensor(v) for k, v in batch.items()}
        self.check_training_range(batch)
        b, nt, dy = (int(n) for n in batch["yt"].shape)
        window_ids = self._window_ids(window_ids, b)
        seed = seed_pair(seed)
        num_params = self.likelihood.num_params(self.dim_y) if return_info else 0
        output_bytes = num_samples * b * nt * (4 * dy + (4 * num_params + 4 if return_info else 0))
        per_row = self._estimated_row_bytes(batch, cache)
        fit = bounded_sampling.rows_per_chunk(budget, per_row, output_bytes)
        windows_per_chunk, samples_per_chunk = bounded_sampling.plan_chunks(b, num_samples, fit)
        chunks = [(w, s) for w in range(0, b, windows_per_chunk) for s in range(0, num_samples, samples_per_chunk)]
        if progress is None:
            progress = len(chunks) > 1 and sys.stdout.isatty()
        bar = keras.utils.Progbar(num_samples * b, unit_name="path") if progress else None
        samples = np.zeros([num_samples, b, nt, dy], np.float32)
        params_out, order_out = {}, np.zeros([num_samples, b, nt], np.int32)
        for w0, s0 in chunks:
            w1, s1 = min(w0 + windows_per_chunk, b), min(s0 + samples_per_chunk, num_samples)
            part = self._sample_rows({k: v[w0:w1] for k, v in batch.items()}, s1 - s0,
                                     bounded_sampling.row_keys(seed, window_ids[w0:w1], tf.range(s0, s1)),
                                     order, cache, jit_compile, return_info)
            samples[s0:s1, w0:w1] = part[0]
            if return_info:
                order_out[s0:s1, w0:w1] = part[2]
                for key, value in part[1].items():
                    if key not in params_out:
                        params_out[key] = np.zeros((num_samples, b) + value.shape[2:], np.float32)
                    params_out[key][s0:s1, w0:w1] = value
            if bar is not None:
                bar.add((s1 - s0) * (w1 - w0))
        samples = tf.constant(samples)
        if not return_info:
            return samples
        return samples, {"params": {k: tf.constant(v) for k, v in params_out.items()},
                         "order": tf.constant(order_out)}

    def _window_ids(self, window_ids, b):
        """int64 ``[B]`` window ids (default ``0 .. B-1``); SpecError unless B non-negative ints."""
        if window_ids is None:
            return tf.range(b, dtype=tf.int64)
        ids = np.asarray(window_ids)
        if ids.shape != (b,) or not np.issubdtype(ids.dtype, np.integer) or (ids < 0).any():
            raise SpecError(f"sample: window_ids must be {b} non-negative ints (one per window), "
                            f"got {window_ids!r:.80}")
        return tf.constant(ids, tf.int64)

    def _estimated_row_bytes(self, batch, cache):
        """:func:`taylorformer.models.bounded_sampling.row_bytes`, remembered per shape."""
        key = (cache,) + tuple((k, tuple(v.shape[1:])) for k, v in sorted(batch.items()))
        if key not in self._row_bytes:
            self._row_bytes[key] = bounded_sampling.row_bytes(self, batch, cache)
        return self._row_bytes[key]

    def _decode_compiled(self, rows, keys, jit_compile):
        """:meth:`_decode_cached` as a ``tf.function`` whose signature leaves the number of
        rows open: one trace per model, lengths and dims, whatever the rows."""
        spec = {k: tf.TensorSpec([None] + v.shape.as_list()[1:], v.dtype) for k, v in rows.items()}
        key = (jit_compile,) + tuple((k, tuple(s.shape[1:]), s.dtype.name) for k, s in sorted(spec.items()))
        if key not in self._cached_fns:
            self._cached_fns[key] = tf.function(
                self._decode_cached, jit_compile=jit_compile,
                input_signature=[spec, tf.TensorSpec([None], tf.uint64)])
        return self._cached_fns[key](rows, keys)

    def tracing_count(self):
        """How many times the cached decoding loop has been traced (compiled) so far."""
        return sum(fn.experimental_get_tracing_count() for fn in self._cached_fns.values())

    def _sample_rows(self, batch, num_samples, keys, order, cache, jit_compile, return_info):
        """One chunk: ``num_samples`` paths of each window of ``batch`` (prepared), with the
        rows' random streams ``keys [S*B]`` (sample-major). Returns NumPy ``samples [S, B,
        Nt, Dy]``, and with ``return_info`` the parameters ``[S, B, Nt, ...]`` and the orders
        ``[S, B, Nt]``."""
        b, nt = int(batch["xt"].shape[0]), int(batch["xt"].shape[1])
        rows = tile_batch(batch, num_samples)  # [S*B, ...], sample-major
        if order == "random":
            gen_order = bounded_sampling.random_orders(keys, nt)
        else:
            gen_order = tf.tile(tf.range(nt)[None], [num_samples * b, 1])
        rows = gather_targets(rows, gen_order)
        windowed = self.standardise in window_standardisation.WINDOW_MODES
        if windowed:  # decoded in window units, the draws mapped back below
            shift, scale = self.window_statistics(rows)
            rows = window_standardisation.to_window_units(rows, shift, scale)
        if cache:
            yt, params = self._decode_compiled(rows, keys, jit_compile)
        else:
            yt, params = self._decode_full(rows, keys)
        if windowed:
            yt = window_standardisation.samples_to_original_units(yt, shift, scale)
            params = window_standardisation.to_original_units(params, shift, scale, self.likelihood)
        inverse = tf.argsort(gen_order, axis=1)
        yt = tf.gather(yt, inverse, batch_dims=1)
        mask = tf.tile(tf.cast(batch["mask_t"], yt.dtype), [num_samples, 1])[..., None]
        samples = np.reshape(np.asarray(yt * mask), [num_samples, b, nt, -1])
        check_finite_outputs([samples], batch, f"model {self.name!r} (sample)", sample_dims=1)
        if not return_info:
            return samples, None, None
        params = {key: np.asarray(tf.gather(value, inverse, batch_dims=1)) for key, value in params.items()}
        params = {key: value.reshape((num_samples, b) + value.shape[1:]) for key, value in params.items()}
        return samples, params, np.reshape(np.asarray(gen_order), [num_samples, b, nt])
