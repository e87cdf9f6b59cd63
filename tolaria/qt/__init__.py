"""The Qt backend layer: the only place that knows qasync (loop, tasks, bridge, controllers)."""
