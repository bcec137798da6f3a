# Copyright 2026 The dreamzero_ros Authors
# SPDX-License-Identifier: Apache-2.0

"""Rosbag replay evaluation of DreamZero policies, offline and live, without a ROS install.

Console scripts (:mod:`.cli`):

- ``dreamzero-make-bag -o OUT``: a demo rosbag2 from the DROID clips (synthetic frames where
  absent);
- ``dreamzero-replay BAG --checkpoint DIR | --preset tiny | --server ws://...``: run the policy
  on the recorded observations and write ``metrics.json``, PNG plots, ``report.html`` and, with
  ``--video``, ``prediction.mp4``;
- ``dreamzero-live-replay BAG -o OUT``: play the bag onto ROS topics with ``/clock`` for a
  policy node started with ``use_sim_time:=true``, and record its trajectories and chunks.

Modules, one job each: :mod:`.bag_io` (read/write bags), :mod:`.typestore` (rosbags types with
the package's messages), :mod:`.messages` (message builders), :mod:`.topics` and
:mod:`.settings` (topics and pairing from the node's parameters), :mod:`.bag_maker`,
:mod:`.observations` (frames and joints paired by the node's observation cache),
:mod:`.reference` (what the robot did), :mod:`.evaluation` (the replay loop), :mod:`.metrics`,
:mod:`.plots`, :mod:`.report`, :mod:`.video`, :mod:`.progress`, :mod:`.live_replay`.
"""
