# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Reading a checkpoint folder (weights, LoRA, configs, tokenizer) and writing test checkpoints."""
