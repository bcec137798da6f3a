"""Rosbag replay evaluation of DreamZero policies, offline and live, without a ROS install."""
