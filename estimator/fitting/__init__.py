"""Fitting the CNN path's regressors, offline: the designs (`regressors`), their held-out
evaluation and pads (`evaluation`), fitting a target (`training`), observed runs as rows
(`observations`), and the artefacts written (`artefacts`, and `compiling` to the numpy
form the service loads). scikit-learn and pandas stay here: the service never imports it.
"""
