"""ROS-free core of the policy node: observation pairing, image codec, safety, scheduling."""
