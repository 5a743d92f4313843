"""The replay simulator: a workload played on a simulated GPU cluster under placement
policies, ours deciding through the extender over HTTP as kube-scheduler would call it.

Modules: `world` (what jobs really use and take), `engine` (the discrete-event
simulator and its figures), `policies` (the baselines and the extender-driven policy),
`workloads` (traces and cluster specs), `runner` (one replay of every policy, into a
report), `report` (text and figures). `schedtune replay` (scripts/replay.py) is the CLI.
"""
