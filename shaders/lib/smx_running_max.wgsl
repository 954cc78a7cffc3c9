// Statements, #included in the key-tile loop of flash_fwd.smx and flash_fwd.smx_wide once a row's
// scores of the tile are masked: the row's tile max over its TPR neighbouring lanes, then the
// lazy rescale's decision. A row keeps its running max m until the tile's exceeds it by more than
// TAU; then alpha = exp(m - tile_max) scales its sum and (through the workgroup's flag) its O.
// Uses tile_max, m (the kernel's), TPR, TAU, LOWEST, LOG2E and the flag `rescale`; declares alpha.
    if (TPR > 1u) {
      tile_max = max(tile_max, subgroupShuffleXor(tile_max, 1u));
    }
    if (TPR > 2u) {
      tile_max = max(tile_max, subgroupShuffleXor(tile_max, 2u));
    }
    var alpha = 1.0;
    if (tile_max > LOWEST) {
      if (m == LOWEST) {
        m = tile_max;  // the row's first visible keys: its O is still zero
      } else if (tile_max > m + TAU) {
        alpha = exp2((m - tile_max) * LOG2E);
        m = tile_max;
        atomicOr(&rescale[0], 1u);
      }
    }
