"""dreamzero_ros: DreamZero on a robot through ROS 2."""
