"""Measuring jobs on a real NVIDIA GPU, offline: peak memory and run time (`jobs`), and how
jobs slow each other when they share one (`collocation`). Rows go to the feature tables.
"""
