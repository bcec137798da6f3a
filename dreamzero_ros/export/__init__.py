# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rosbags to a DreamZero fine-tuning dataset (LeRobot v2.1 with GEAR metadata), without ROS.

``dreamzero-export`` (:mod:`.cli`) over :func:`.exporter.export`: episodes found in each bag
(:mod:`.episodes`), sampled on the dataset's frame clock through the node's observation cache
and checked (:mod:`.sampling`), written as parquet rows (:mod:`.rows`, DROID's through
:mod:`.droid_columns`) and H.264 videos (:mod:`.video_encoder`) into a dataset folder
(:mod:`.dataset_folder`) whose columns the layout gives (:mod:`.layout`) and whose statistics are
upstream's (:mod:`.stats`).
"""
