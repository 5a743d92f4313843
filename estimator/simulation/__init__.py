"""The CNN path's features, from real PyTorch on the CPU (offline: torch): the paper's
torchinfo recipe and a simulated peak (`features`), the step's allocations recorded
(`allocator_trace`), PyTorch's caching allocator replayed on them (`allocator`), and
cuDNN workspaces (`workspace`). The service reads only their cached results
(`estimator.feature_table`)."""
