"""Compatibility module: the attention executor's public names, now in :mod:`taylorformer.attention`.

Kept because docs/plugins.md documented ``taylorformer.attention_executor`` (``options``,
``attend``, ``mha_score``, ``BUDGETS``, ``lane_tiles``, ...) and plugins written against
it may import from here; no code in this repository does any more. New code imports from
:mod:`taylorformer.attention` (or its modules: ``reference``, ``executor``, ``tiled``,
``policy``, ``speedups``, ``overrides``). A re-export, not a copy: the tables
(``BUDGETS``, ...) are the same objects, but replacing a function here (monkeypatching)
does not change what the package calls.
"""
from taylorformer.attention import (BUDGETS, CHUNKS_PER_CORE, LANE_TILES, MAX_TILE, MIN_TILE, attend,
                                    attend_blocks, balanced_tile, choose_tile, dense_attend,
                                    device_kind, key_validity, lane_tiles, mha_score, options,
                                    pair_validity, query_chunks, tiled_attend)
from taylorformer.attention.tiling import (at_least, dims, loop, num_tiles, tensor_array, tile_axis,
                                           tile_len, untile_axis, untile_rows)

__all__ = ["attend", "attend_blocks", "dense_attend", "tiled_attend", "mha_score", "options",
           "choose_tile", "device_kind", "query_chunks", "lane_tiles", "balanced_tile",
           "key_validity", "pair_validity", "BUDGETS", "LANE_TILES", "CHUNKS_PER_CORE", "MIN_TILE",
           "MAX_TILE", "dims", "tile_len", "num_tiles", "tile_axis", "untile_axis", "untile_rows",
           "at_least", "tensor_array", "loop"]
