"""Multi-scale feature extractors, each registered in ``BACKBONES``; every file here is imported on first use."""
