"""Networks (backbone + modules + head), each registered in ``NETWORKS``; every file here is imported on first use."""
