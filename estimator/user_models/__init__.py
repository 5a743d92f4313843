"""Models users register at run time: the entry kept and checked (`entry`, no torch: the
request path reads it) and building one from a user's model (`build`, offline, torch)."""
