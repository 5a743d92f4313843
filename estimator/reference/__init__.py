"""The reference data the estimator trains and is judged on: the authors' tables read from a
data directory and joined with our features (`tables`), fetched from their public
artefact (`fetch`), their random forests read without scikit-learn (`forests`)."""
