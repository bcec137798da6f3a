"""Thin rclpy layer: the policy node, message conversions and the demo observation stream."""
