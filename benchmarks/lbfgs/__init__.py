"""Issue #68, NTK weighting under Adam then L-BFGS: the study and its
page."""
