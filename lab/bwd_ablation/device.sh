#!/usr/bin/env bash
# varlen_bwd.smx's ablation on this machine's GPU: lab/ablation/device.sh with this folder's variants.
ABL=lab.bwd_ablation.variants exec bash "$(dirname "$0")/../ablation/device.sh" "$@"
