"""Test helpers: the OpInfo harness that compares tpu against PyTorch on CPU."""
