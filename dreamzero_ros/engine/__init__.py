"""ROS-free DreamZero inference engine (PyTorch)."""
