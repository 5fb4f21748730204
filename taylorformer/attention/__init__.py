"""Attention: one layer contract, one specification, and the paths that run it fast.

A map of the package, from what attention is to how it is made fast:

============================  ==========================================================
``layer``                     :class:`Attention`: the Keras layer and the plugin contract
                              (``score``, ``position_features``, ...): what a plugin writes
``reference``                 :func:`dense_attend`: the semantics (masks, empty rows,
                              position updates) on full logits; every path is tested
                              against it. Also the default score :func:`mha_score`
``executor``                  :func:`attend` (dense or tiled, by the policy) and
                              :func:`attend_blocks` (incremental decoding from a cache)
``tiled``                     :func:`tiled_attend`: online softmax over tiles with a
                              recomputing backward pass (constant memory)
``blocks``, ``tiling``        the tiled path's block steps and its array helpers
``policy``                    :func:`choose_tile` and the tables it reads (``BUDGETS``,
                              ``LANE_TILES``, ``CHUNKS_PER_CORE``); GPU entries unmeasured
``speedups``                  optional forward-pass speed-ups (shared compiled loop, query
                              chunks, CPU lanes); ``options(speedups=False)`` turns them off
``overrides``                 :func:`options`: per-``with``-block overrides of the above
============================  ==========================================================

The benchmark behind each tuned setting: benchmarks/README.md ("Attention policy: where
the settings come from"). The names re-exported here are the public API;
``taylorformer.attention_executor`` re-exports the executor's for code written before
this package existed.
"""
from taylorformer.attention.executor import attend, attend_blocks
from taylorformer.attention.layer import Attention
from taylorformer.attention.overrides import options
from taylorformer.attention.policy import (BUDGETS, CHUNKS_PER_CORE, LANE_TILES, MAX_TILE, MIN_TILE,
                                           balanced_tile, choose_tile, device_kind, lane_tiles,
                                           query_chunks)
from taylorformer.attention.reference import dense_attend, key_validity, mha_score, pair_validity
from taylorformer.attention.tiled import tiled_attend

__all__ = ["Attention", "attend", "attend_blocks", "dense_attend", "tiled_attend", "mha_score",
           "options", "choose_tile", "device_kind", "query_chunks", "lane_tiles", "balanced_tile",
           "key_validity", "pair_validity", "BUDGETS", "LANE_TILES", "CHUNKS_PER_CORE",
           "MIN_TILE", "MAX_TILE"]
